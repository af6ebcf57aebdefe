"""``toolrl eval mean-at-k --backend``: the sampling backends of ``evaluate/backends.py`` on a CPU box
without vLLM. The vLLM sampler runs against a fake ``vllm`` module that records what it is given
(one engine, one ``generate`` call with ``n=k``); every "is it importable / is there a GPU" is
monkeypatched; the transformers path runs the tiny model."""

from __future__ import annotations

import json
import sys
import types

import pytest

from toolrl_lib.data.example import Example, write_jsonl
from toolrl_lib.evaluate import backends
from toolrl_lib.fast import vllm_engine
from toolrl_lib.fast.vllm_engine import INSTALL_HINT, VLLMMissing

TOOLS = [{"name": "get_weather", "description": "Weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_real_vllm(monkeypatch):
    """Whatever this machine has: vLLM absent unless a test says otherwise."""
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: False)


def fake_vllm(calls: dict) -> types.ModuleType:
    """A ``vllm`` stand-in: ``LLM`` records its arguments and each ``generate`` call, and answers
    ``<prompt>#<i>`` for sample i of each prompt."""

    class LLM:
        def __init__(self, **kwargs):
            calls["llm"].append(kwargs)

        def generate(self, prompts, params, use_tqdm=True):
            calls["generate"].append((list(prompts), params.kwargs))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"{p}#{i}")
                                                   for i in range(params.kwargs.get("n", 1))])
                    for p in prompts]

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    return module


@pytest.fixture
def vllm_here(monkeypatch):
    """vLLM importable (the fake) and a CUDA device; returns what the fake records."""
    calls: dict = {"llm": [], "generate": []}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(calls))
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: True)
    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    monkeypatch.setattr(backends, "_ENGINES", {})  # this process's engines: none yet
    return calls


def test_vllm_sampler_one_engine_one_call_with_n_k(vllm_here, tiny_model_dir):
    loaded = backends.load_sampler(str(tiny_model_dir), backend="vllm", dtype="bf16")
    assert loaded.backend == "vllm"
    out = loaded.sample(["a", "b", "c"], 3, 7, 0.7, 0.9, 5)
    assert out == [["a#0", "a#1", "a#2"], ["b#0", "b#1", "b#2"], ["c#0", "c#1", "c#2"]]
    assert vllm_here["llm"] == [{"model": str(tiny_model_dir), "dtype": "bfloat16",
                                 "enable_prefix_caching": True, "gpu_memory_utilization": 0.9,
                                 "kv_cache_memory_bytes": None}]
    assert vllm_here["generate"] == [(["a", "b", "c"], {
        "n": 3, "temperature": 0.7, "top_p": 0.9, "top_k": backends.model_top_k(str(tiny_model_dir)),
        "max_tokens": 7, "seed": 5,
        "stop_token_ids": [loaded.tokenizer.eos_token_id], "skip_special_tokens": True})]
    loaded.sample(["d"], 1, 4, 0.0, 1.0, 0)  # greedy with k = 1; the same engine again
    assert len(vllm_here["llm"]) == 1 and vllm_here["generate"][-1][1]["temperature"] == 0.0
    # greedy BFCL in the same process shares the engine (one start-up per model and process)
    backends.load_for_eval(str(tiny_model_dir), backend="vllm", dtype="bf16").complete(["e"])
    assert len(vllm_here["llm"]) == 1 and vllm_here["generate"][-1][0] == ["e"]


def test_vllm_engine_beside_training_takes_its_share_and_a_fixed_kv_cache(vllm_here, tiny_model_dir, monkeypatch):
    monkeypatch.setenv(backends.VLLM_MEMORY_ENV, "0.1")
    monkeypatch.setenv(backends.VLLM_KV_CACHE_ENV, "8")
    backends.load_sampler(str(tiny_model_dir), backend="vllm", dtype="bf16").sample(["a"], 1, 4, 0.0, 1.0, 0)
    assert vllm_here["llm"][0]["gpu_memory_utilization"] == 0.1
    assert vllm_here["llm"][0]["kv_cache_memory_bytes"] == 8 * 2**30


def test_vllm_sampler_refuses_greedy_k_above_one(vllm_here, tiny_model_dir):
    sample = backends.load_sampler(str(tiny_model_dir), backend="vllm").sample
    with pytest.raises(ValueError, match="temperature"):
        sample(["a"], 2, 4, 0.0, 1.0, 0)
    with pytest.raises(ValueError, match="k must be"):
        sample(["a"], 0, 4, 1.0, 1.0, 0)
    assert vllm_here["generate"] == []


def _adapter(folder, base) -> str:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    return str(folder)


def _nothing_loads(monkeypatch):
    def loaded(*args, **kwargs):
        raise AssertionError("a tokenizer or model was loaded before the backend check")

    for name in ("eval_tokenizer", "_hf_model", "_vllm_sampler"):
        monkeypatch.setattr(backends, name, loaded)


def test_explicit_vllm_refuses_an_adapter_folder_before_loading(vllm_here, monkeypatch, tmp_path,
                                                                tiny_model_dir):
    adapter = _adapter(tmp_path / "adapter", tiny_model_dir)
    _nothing_loads(monkeypatch)
    with pytest.raises(ValueError, match="merged model folder") as error:
        backends.load_sampler(adapter, backend="vllm")
    assert "`toolrl merge`" in str(error.value) and "\n" not in str(error.value)
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "run_info.json").write_text("{}")
    assert f"`toolrl merge --run {run} --checkpoint best`" in backends.adapter_refusal(str(run / "best"))


def test_auto_sends_an_adapter_folder_to_transformers(vllm_here, monkeypatch, tmp_path, tiny_model_dir):
    adapter = _adapter(tmp_path / "adapter", tiny_model_dir)
    merged = []
    monkeypatch.setattr(backends, "eval_tokenizer", lambda model: "tokenizer")
    monkeypatch.setattr(backends, "_hf_model", lambda *args: merged.append(args) or "model")
    loaded = backends.load_sampler(adapter, backend="auto", dtype="fp32")
    assert loaded.backend == "hf" and merged == [(adapter, str(tiny_model_dir), "fp32")]
    assert vllm_here["llm"] == []


def test_auto_is_transformers_without_cuda(monkeypatch, tiny_model_dir):
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: True)
    monkeypatch.setattr(backends, "cuda_available", lambda: False)
    loaded = backends.load_sampler(str(tiny_model_dir), backend="auto")
    assert loaded.backend == "hf"
    assert [len(s) for s in loaded.sample(["a", "b"], 2, 3, 1.0, 1.0, 0)] == [2, 2]


def _data(tmp_path) -> str:
    examples = [Example("t-0", "test", [{"role": "user", "content": "Weather in Oslo?"}], TOOLS,
                        [{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
                Example("t-1", "test", [{"role": "user", "content": "Tell me a joke."}], TOOLS, [])]
    write_jsonl(examples, tmp_path / "val.jsonl")
    return str(tmp_path / "val.jsonl")


def test_cli_backend_vllm_without_vllm_fails_in_one_line_before_loading(monkeypatch, tmp_path, capsys):
    from toolrl_lib.cli import main

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    _nothing_loads(monkeypatch)
    with pytest.raises(VLLMMissing):
        backends.load_sampler("/no/such/model", backend="vllm")
    code = main(["eval", "mean-at-k", "--model", "/no/such/model", "--data", _data(tmp_path),
                 "--backend", "vllm"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and INSTALL_HINT in err and "\n" not in err


def test_cli_auto_on_this_box_gives_what_transformers_gave(tmp_path, capsys, tiny_model_dir):
    """``auto`` without vLLM is the transformers path, with the output mean-at-k printed before
    ``--backend`` existed (tokenizer + model loaded directly, no sampler)."""
    from toolrl_lib.cli import main
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.evaluate.mean_at_k import mean_at_k
    from toolrl_lib.models import load_model, load_tokenizer

    data = _data(tmp_path)
    args = ["--k", "2", "--max-new-tokens", "4", "--seed", "3", "--format", "hermes"]
    assert main(["eval", "mean-at-k", "--model", str(tiny_model_dir), "--data", data, *args]) == 0
    printed = json.loads(capsys.readouterr().out)
    direct = mean_at_k(load_model(str(tiny_model_dir)), load_tokenizer(str(tiny_model_dir)),
                       list(read_jsonl(data)), "hermes", k=2, max_new_tokens=4, seed=3)
    assert printed == {"family": "hermes", "n_examples": 2, **direct.scores}


def test_vllm_samples_with_the_top_k_our_generator_uses(tmp_path, tiny_model_dir):
    """vLLM's own default is no top-k; ours (transformers') is the model's, 50 when unset."""
    from transformers import GenerationConfig

    assert backends.model_top_k(str(tmp_path)) == 50  # no generation_config.json at all
    GenerationConfig(do_sample=True, top_k=7).save_pretrained(tmp_path)
    assert backends.model_top_k(str(tmp_path)) == 7
