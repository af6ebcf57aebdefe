"""``grpo.vllm`` on a CPU box without vLLM (as in CI): validation, the one missing-vLLM error raised
before any model loads, the plumbing into TRL's ``GRPOConfig`` and Unsloth's ``from_pretrained``
(through a fake ``unsloth`` module), ``fast.install`` stepping aside, and the eval backend switch.
Nothing here imports vLLM or Unsloth; every "is it importable / is there a GPU" is monkeypatched."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
import yaml

from toolrl_lib.config import ConfigError
from toolrl_lib.fast import vllm_engine
from toolrl_lib.fast.vllm_engine import INSTALL_HINT, VLLMMissing
from toolrl_lib.train.config import (
    RunConfig,
    check_vllm_backend,
    load_run_config,
    run_config_from_dict,
    save_run_config,
)

GPU = ["device=cuda", "backend=peft"]


def config(*overrides: str, check: bool = True) -> RunConfig:
    return load_run_config(None, list(overrides), check=check)


def problems(*overrides: str) -> str:
    with pytest.raises(ConfigError) as error:
        config(*overrides)
    return str(error.value)


@pytest.fixture(autouse=True)
def _no_real_vllm(monkeypatch):
    """Whatever this machine has: vLLM absent and no GPU unless a test says otherwise."""
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: False)


# --- the section --------------------------------------------------------------------------------

def test_off_by_default_and_a_bare_yaml_off_means_off(tmp_path):
    assert RunConfig().grpo.vllm.mode == "off" and not RunConfig().grpo.vllm.on
    data = yaml.safe_load("grpo:\n  vllm:\n    mode: off\n")  # YAML 1.1 reads it as false
    assert data["grpo"]["vllm"]["mode"] is False
    assert run_config_from_dict(data).grpo.vllm.mode == "off"
    assert config("grpo.vllm.mode=off").grpo.vllm.mode == "off"  # --set parses YAML too
    saved = save_run_config(config(*GPU, "grpo.vllm.mode=colocate"), tmp_path / "c.yaml")
    assert load_run_config(saved).grpo.vllm.mode == "colocate"
    saved = save_run_config(config(), tmp_path / "off.yaml")
    assert load_run_config(saved).grpo.vllm.mode == "off"


def test_every_field_has_help():
    from toolrl_lib.train.config import settings_help

    rows = {key: text for key, _, text in settings_help()}
    fields = [f.name for f in dataclasses.fields(type(RunConfig().grpo.vllm))]
    assert fields == ["mode", "gpu_memory_utilization", "max_model_len", "kv_cache_gib", "max_num_batched_tokens",
                      "dtype", "enable_sleep_mode", "tensor_parallel_size", "server_host", "server_port", "server_timeout", "detokenize",
                      "importance_sampling_correction"]
    assert all(rows[f"grpo.vllm.{name}"] for name in fields)


# --- validation ---------------------------------------------------------------------------------

def test_valid_gpu_configs():
    assert config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.gpu_memory_utilization=0.4",
                  "grpo.vllm.enable_sleep_mode=true").grpo.vllm.on
    assert config(*GPU, "grpo.vllm.mode=server", "grpo.vllm.server_host=127.0.0.1",
                  "grpo.vllm.server_port=8001").grpo.vllm.mode == "server"
    assert config("device=auto", "grpo.vllm.mode=colocate").grpo.vllm.on  # auto: checked at run time
    # off with leftover engine settings is fine (toggling the mode must not need more edits)
    assert config("device=cpu", "grpo.vllm.gpu_memory_utilization=0.5").grpo.vllm.mode == "off"


def test_vllm_on_cpu_is_an_error():
    text = problems("device=cpu", "grpo.vllm.mode=colocate")
    assert "grpo.vllm.mode" in text and "CUDA GPUs only" in text and "mode: off" in text


def test_library_rollouts_step_aside():
    text = problems(*GPU, "grpo.vllm.mode=colocate", "fast.rollouts=library")
    assert "fast.rollouts = 'library'" in text and "step aside" in text and "fast.rollouts: trl" in text


def test_multi_turn_takes_the_colocated_engine_only():
    from toolrl_lib.train.config import vllm_max_model_len

    accepted = config(*GPU, "grpo.vllm.mode=colocate", "multi_turn.enabled=true", "model.max_seq_length=3072")
    assert vllm_max_model_len(accepted) == 3072  # the whole transcript, not one prompt + one completion
    for extra in (["grpo.vllm.mode=server"], ["grpo.vllm.mode=colocate", "grpo.vllm.enable_sleep_mode=true"]):
        text = problems(*GPU, *extra, "multi_turn.enabled=true")
        assert "multi-turn rollout_func" in text and "colocate, sleep mode off" in text


@pytest.mark.parametrize("overrides, key", [
    (["grpo.vllm.mode=colocate", "grpo.vllm.server_port=8001"], "grpo.vllm.server_port"),
    (["grpo.vllm.mode=colocate", "grpo.vllm.server_host=h"], "grpo.vllm.server_host"),
    (["grpo.vllm.mode=server", "grpo.vllm.gpu_memory_utilization=0.5"], "grpo.vllm.gpu_memory_utilization"),
    (["grpo.vllm.mode=server", "grpo.vllm.tensor_parallel_size=2"], "grpo.vllm.tensor_parallel_size"),
    (["grpo.vllm.mode=server", "grpo.vllm.enable_sleep_mode=true"], "grpo.vllm.enable_sleep_mode"),
    (["grpo.vllm.mode=colocate", "grpo.vllm.gpu_memory_utilization=1.5"], "grpo.vllm.gpu_memory_utilization"),
    (["grpo.vllm.mode=colocate", "grpo.vllm.max_model_len=512"], "grpo.vllm.max_model_len"),
    (["grpo.vllm.mode=server", "grpo.vllm.server_port=70000"], "grpo.vllm.server_port"),
    (["grpo.vllm.mode=true"], "grpo.vllm.mode"),
])
def test_inconsistent_fields_are_named(overrides, key):
    assert f"{key} = " in problems(*GPU, *overrides)


def test_server_fields_in_server_mode_name_the_server_flags():
    assert "trl vllm-serve" in problems(*GPU, "grpo.vllm.mode=server", "grpo.vllm.max_model_len=4096")


def test_unsloth_backend_limits():
    base = ["device=cuda", "backend=unsloth"]
    assert config(*base, "grpo.vllm.mode=colocate", "grpo.vllm.gpu_memory_utilization=0.5").grpo.vllm.on
    assert "fast_inference" in problems(*base, "grpo.vllm.mode=server")
    assert "grpo.vllm.tensor_parallel_size" in problems(*base, "grpo.vllm.mode=colocate",
                                                        "grpo.vllm.tensor_parallel_size=2")
    assert "grpo.vllm.enable_sleep_mode" in problems(*base, "grpo.vllm.mode=colocate",
                                                     "grpo.vllm.enable_sleep_mode=true")
    # backend auto resolves at run time: the same rules, against the resolved backend
    auto = config("device=cuda", "grpo.vllm.mode=server")
    check_vllm_backend(auto, "peft")
    with pytest.raises(ConfigError, match="backend 'unsloth'"):
        check_vllm_backend(auto, "unsloth")


# --- the missing-vLLM error, before any model loads ---------------------------------------------

@pytest.fixture
def nothing_loads(monkeypatch):
    """Loading a model, a tokenizer or preparing the run directory fails loudly if reached."""
    from toolrl_lib import models
    from toolrl_lib.train import backend, multi_turn, run

    def loaded(*args, **kwargs):
        raise AssertionError("reached model loading / the run directory before the vLLM check")

    for module, name in [(models, "load_model"), (models, "load_tokenizer"), (backend, "load_policy"),
                         (run, "prepare_run_dir"), (multi_turn, "prepare_run_dir")]:
        monkeypatch.setattr(module, name, loaded)
    return monkeypatch


def test_missing_vllm_stops_train_before_anything_loads(nothing_loads, tmp_path):
    from toolrl_lib.train import backend, train

    nothing_loads.setattr(backend, "cuda_available", lambda: True)
    with pytest.raises(VLLMMissing) as error:
        train(config(*GPU, "grpo.vllm.mode=colocate"), tmp_path / "run")
    text = str(error.value)
    assert INSTALL_HINT in text and "\n" not in text and "grpo.vllm.mode: colocate" in text
    assert not (tmp_path / "run").exists()


def test_vllm_with_device_auto_on_a_cpu_machine(nothing_loads, tmp_path):
    from toolrl_lib.train import backend, train

    nothing_loads.setattr(backend, "cuda_available", lambda: False)
    nothing_loads.setattr(vllm_engine, "vllm_importable", lambda: True)
    with pytest.raises(VLLMMissing, match="CUDA GPUs only"):
        train(config("device=auto", "grpo.vllm.mode=server"), tmp_path / "run")


def test_multi_turn_run_refuses_before_anything_loads(nothing_loads, tmp_path):
    from toolrl_lib.train import train

    cfg = config(*GPU, "grpo.vllm.mode=server", "multi_turn.enabled=true", check=False)
    with pytest.raises(ConfigError, match="multi-turn rollout_func"):
        train(cfg, tmp_path / "run")


def test_cli_train_prints_the_install_line(nothing_loads, tmp_path, capsys):
    from toolrl_lib.cli import main
    from toolrl_lib.train import backend

    nothing_loads.setattr(backend, "cuda_available", lambda: True)
    cfg = save_run_config(config(), tmp_path / "c.yaml")
    code = main(["train", "--config", str(cfg), "--out", str(tmp_path / "run"),
                 "--set", "device=cuda", "--set", "grpo.vllm.mode=colocate"])
    assert code == 2 and INSTALL_HINT in capsys.readouterr().err


def test_require_for_run_is_a_noop_when_off():
    vllm_engine.require_for_run(config(), "cpu")


# --- plumbing: TRL's GRPOConfig --------------------------------------------------------------------

def test_grpo_config_kwargs_per_mode():
    from trl import GRPOConfig

    from toolrl_lib.train.trainer import grpo_vllm_kwargs

    trl_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert grpo_vllm_kwargs(config()) == {}
    colocate = config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.gpu_memory_utilization=0.4")
    assert grpo_vllm_kwargs(colocate) == {
        "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.4,
        "vllm_max_model_length": 1024 + 256,  # data.max_prompt_tokens + grpo.max_completion_length
        "vllm_enable_sleep_mode": False, "vllm_tensor_parallel_size": 1}
    explicit = config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.max_model_len=4096",
                      "grpo.vllm.enable_sleep_mode=true", "grpo.vllm.tensor_parallel_size=2")
    kw = grpo_vllm_kwargs(explicit)
    assert kw["vllm_max_model_length"] == 4096 and kw["vllm_enable_sleep_mode"] is True
    assert kw["vllm_tensor_parallel_size"] == 2 and kw["vllm_gpu_memory_utilization"] == 0.3
    server = config(*GPU, "grpo.vllm.mode=server", "grpo.vllm.server_host=10.0.0.2",
                    "grpo.vllm.server_port=8001", "grpo.vllm.server_timeout=60")
    assert grpo_vllm_kwargs(server) == {"use_vllm": True, "vllm_mode": "server",
                                        "vllm_server_host": "10.0.0.2", "vllm_server_port": 8001,
                                        "vllm_server_timeout": 60.0}
    assert grpo_vllm_kwargs(config(*GPU, "grpo.vllm.mode=server")) == {"use_vllm": True,
                                                                        "vllm_mode": "server"}
    # unsloth: its own engine (fast_inference); its patched trainer turns use_vllm on itself
    assert grpo_vllm_kwargs(colocate, backend="unsloth") == {}
    # detokenize: false reaches vLLM's SamplingParams through generation_kwargs, in both modes
    quiet = config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.detokenize=false")
    assert grpo_vllm_kwargs(quiet)["generation_kwargs"] == {"detokenize": False}
    quiet_server = config(*GPU, "grpo.vllm.mode=server", "grpo.vllm.detokenize=false")
    assert grpo_vllm_kwargs(quiet_server)["generation_kwargs"] == {"detokenize": False}
    assert "generation_kwargs" not in grpo_vllm_kwargs(config(*GPU, "grpo.vllm.detokenize=false"))  # off
    # the importance-sampling forward is TRL's default; false reaches GRPOConfig, and only when vLLM is on
    assert "vllm_importance_sampling_correction" not in grpo_vllm_kwargs(config(*GPU, "grpo.vllm.mode=colocate"))
    lean = config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.importance_sampling_correction=false")
    assert grpo_vllm_kwargs(lean)["vllm_importance_sampling_correction"] is False
    assert grpo_vllm_kwargs(config(*GPU, "grpo.vllm.importance_sampling_correction=false")) == {}
    for cfg in (colocate, explicit, server, quiet, quiet_server, lean):
        assert set(grpo_vllm_kwargs(cfg)) <= trl_fields  # TRL 1.15's real field names


def test_grpo_args_carries_them(tmp_path):
    from toolrl_lib.run_dir import RunDir
    from toolrl_lib.train.trainer import grpo_args

    # built on CPU for the test only (validation would refuse vLLM on a CPU run)
    cfg = config("grpo.vllm.mode=colocate", "grpo.vllm.gpu_memory_utilization=0.25", check=False)
    args = grpo_args(cfg, RunDir(tmp_path), "cpu")
    assert args.use_vllm and args.vllm_mode == "colocate"
    assert args.vllm_gpu_memory_utilization == 0.25 and args.vllm_max_model_length == 1280
    assert not grpo_args(config(), RunDir(tmp_path), "cpu").use_vllm
    assert not grpo_args(cfg, RunDir(tmp_path), "cpu", backend="unsloth").use_vllm
    assert "vllm" not in sys.modules


# --- plumbing: Unsloth's from_pretrained, through a fake module -----------------------------------

def fake_unsloth(calls: dict):
    class Tokenizer:
        pad_token = None
        eos_token = "</s>"
        padding_side = "right"

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(**kwargs):
            calls["from_pretrained"] = kwargs
            return object(), Tokenizer()

        @staticmethod
        def get_peft_model(model, **kwargs):
            calls["get_peft_model"] = kwargs
            return model

    return types.SimpleNamespace(FastLanguageModel=FastLanguageModel)


@pytest.mark.parametrize("mode", ["off", "colocate"])
def test_unsloth_load_gets_fast_inference(monkeypatch, mode):
    from toolrl_lib.train.backend import load_policy, unsloth_vllm_kwargs

    calls: dict = {}
    monkeypatch.setitem(sys.modules, "unsloth", fake_unsloth(calls))
    cfg = config("device=cuda", "backend=unsloth", "model.dtype=bf16", "lora.r=32",
                 f"grpo.vllm.mode={mode}", "grpo.vllm.gpu_memory_utilization=0.45")
    model, tokenizer = load_policy(cfg, "some/model", "unsloth", "cuda")
    kwargs = calls["from_pretrained"]
    assert kwargs["model_name"] == "some/model" and kwargs["max_seq_length"] == cfg.model.max_seq_length
    if mode == "off":
        assert "fast_inference" not in kwargs and unsloth_vllm_kwargs(cfg) == {}
    else:
        assert kwargs["fast_inference"] is True
        assert kwargs["gpu_memory_utilization"] == 0.45 and kwargs["max_lora_rank"] == 32
    assert calls["get_peft_model"]["r"] == 32 and tokenizer.padding_side == "left"
    assert "vllm" not in sys.modules


# --- fast.install: merged generation steps aside --------------------------------------------------

def test_merged_generation_steps_aside_under_vllm(monkeypatch):
    from toolrl_lib import fast
    from toolrl_lib.fast import merged_generation

    hooked = []
    monkeypatch.setattr(merged_generation, "generate_with_merged_lora",
                        lambda trainer: hooked.append(trainer) or "_generate_single_turn")
    on = config(*GPU, "grpo.vllm.mode=colocate", "fast.merged_generation=true",
                "fast.skip_zero_advantage=false")
    changes = fast.install(object(), on, device="cuda", backend="peft")
    assert not hooked and len(changes) == 1
    assert "fast.merged_generation skipped" in changes[0] and "vLLM" in changes[0]
    off = config(*GPU, "fast.merged_generation=true", "fast.skip_zero_advantage=false")
    changes = fast.install(object(), off, device="cuda", backend="peft")
    assert len(hooked) == 1 and "merged LoRA" in changes[0]


# --- evaluation: the backend switch --------------------------------------------------------------

@pytest.mark.parametrize("importable, cuda, picked", [
    (True, True, "vllm"), (True, False, "hf"), (False, True, "hf"), (False, False, "hf")])
def test_auto_picks_vllm_only_when_importable_and_cuda(monkeypatch, importable, cuda, picked):
    from toolrl_lib.evaluate import backends

    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: importable)
    monkeypatch.setattr(backends, "cuda_available", lambda: cuda)
    assert backends.pick_backend("auto") == picked
    assert backends.pick_backend("hf") == "hf"


def test_explicit_vllm_backend_errors(monkeypatch):
    from toolrl_lib.evaluate import backends

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    with pytest.raises(VLLMMissing) as error:
        backends.pick_backend("vllm")
    assert INSTALL_HINT in str(error.value) and "\n" not in str(error.value)
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: True)
    assert backends.pick_backend("vllm") == "vllm"
    monkeypatch.setattr(backends, "cuda_available", lambda: False)
    with pytest.raises(VLLMMissing, match="CUDA"):
        backends.pick_backend("vllm")


def test_eval_bfcl_with_missing_vllm_fails_before_loading(monkeypatch, tmp_path, capsys):
    from toolrl_lib.cli import main
    from toolrl_lib.evaluate import backends, runner

    def loaded(*args, **kwargs):
        raise AssertionError("a tokenizer or model was loaded before the backend check")

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    monkeypatch.setattr(backends, "eval_tokenizer", loaded)
    monkeypatch.setattr(backends, "load_for_eval", loaded)
    with pytest.raises(VLLMMissing, match=r'pip install -e "\.\[vllm\]"'):
        runner.evaluate_bfcl("/no/such/model", tmp_path, backend="vllm", family=None)
    code = main(["eval", "bfcl", "--model", "/no/such/model", "--out", str(tmp_path / "e"),
                 "--backend", "vllm"])
    assert code == 2 and INSTALL_HINT in capsys.readouterr().err


def test_evaluation_engine_memory_share_comes_from_the_environment(monkeypatch):
    from toolrl_lib.evaluate.backends import VLLM_MEMORY_ENV, vllm_memory_share

    monkeypatch.delenv(VLLM_MEMORY_ENV, raising=False)
    assert vllm_memory_share() == 0.9  # vLLM's own default
    monkeypatch.setenv(VLLM_MEMORY_ENV, "0.15")
    assert vllm_memory_share() == 0.15
    for bad in ("1.5", "0", "half"):
        monkeypatch.setenv(VLLM_MEMORY_ENV, bad)
        with pytest.raises(ValueError, match=VLLM_MEMORY_ENV):
            vllm_memory_share()


def test_evaluation_engine_kv_cache_size_comes_from_the_environment(monkeypatch):
    from toolrl_lib.evaluate.backends import VLLM_KV_CACHE_ENV, vllm_kv_cache_bytes

    monkeypatch.delenv(VLLM_KV_CACHE_ENV, raising=False)
    assert vllm_kv_cache_bytes() is None  # vLLM profiles
    monkeypatch.setenv(VLLM_KV_CACHE_ENV, "12")
    assert vllm_kv_cache_bytes() == 12 * 2**30
    for bad in ("-1", "0", "lots"):
        monkeypatch.setenv(VLLM_KV_CACHE_ENV, bad)
        with pytest.raises(ValueError, match=VLLM_KV_CACHE_ENV):
            vllm_kv_cache_bytes()


class _FakeParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class _FakeLLM:
    """vllm.LLM's generate: records the params, answers each prompt with n numbered texts."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, params, use_tqdm=False):
        self.calls.append(params.kwargs)
        n = params.kwargs["n"]
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"{p}#{i}") for i in range(n)])
                for p in prompts]


def _fake_trainer(mode="colocate", sleep=False):
    syncs = []
    generation = types.SimpleNamespace(llm=_FakeLLM(), sync_weights=lambda: syncs.append(1))
    trainer = types.SimpleNamespace(
        vllm_generation=generation, args=types.SimpleNamespace(vllm_mode=mode, vllm_enable_sleep_mode=sleep),
        state=types.SimpleNamespace(global_step=7), _last_loaded_step=0,
        model=types.SimpleNamespace(generation_config=types.SimpleNamespace(top_k=20)))
    return trainer, syncs


def test_validation_samples_through_the_colocated_engine_with_synced_weights(monkeypatch, tiny_model_dir):
    from toolrl_lib.models import load_tokenizer
    from toolrl_lib.train.validation import colocated_sampler

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=_FakeParams))
    tokenizer = load_tokenizer(str(tiny_model_dir))
    trainer, syncs = _fake_trainer()
    sample = colocated_sampler(trainer, tokenizer)
    assert syncs == [1] and trainer._last_loaded_step == 7  # the round's weights -> the policy's now
    assert colocated_sampler(trainer, tokenizer) is not None and syncs == [1]  # same step: no second sync
    assert sample(["a", "b"], 3, 16, 1.0, 0.9, 5) == [["a#0", "a#1", "a#2"], ["b#0", "b#1", "b#2"]]
    params = trainer.vllm_generation.llm.calls[-1]
    assert (params["n"], params["top_k"], params["top_p"], params["max_tokens"], params["seed"]) == (3, 20, 0.9, 16, 5)
    for mode, sleep in (("server", False), ("colocate", True)):  # no engine in this process / maybe asleep
        assert colocated_sampler(_fake_trainer(mode, sleep)[0], tokenizer) is None
    assert colocated_sampler(types.SimpleNamespace(args=None), tokenizer) is None  # vLLM off


def test_validation_vllm_is_a_config_field():
    from toolrl_lib.train.config import load_run_config

    assert load_run_config(None, ["device=cpu"]).validation.vllm is True
    assert load_run_config(None, ["device=cpu", "validation.vllm=false"]).validation.vllm is False


def test_compile_layers_needs_vllm_for_every_generation():
    """fast.compile_layers: the layers serve the loss forwards only; whatever would send
    transformers' generate through them (no vLLM, sleep mode, server-mode validation) is refused."""
    assert config(*GPU, "grpo.vllm.mode=colocate", "fast.compile_layers=true").fast.compile_layers
    assert config(*GPU, "grpo.vllm.mode=server", "validation.enabled=false", "fast.compile_layers=true")
    for refused in (["grpo.vllm.mode=off"], ["grpo.vllm.mode=colocate", "grpo.vllm.enable_sleep_mode=true"],
                    ["grpo.vllm.mode=server"], ["grpo.vllm.mode=colocate", "validation.vllm=false"],
                    ["grpo.vllm.mode=colocate", "backend=unsloth"]):
        text = problems(*GPU, *refused, "fast.compile_layers=true")
        assert "fast.compile_layers" in text and "recompile them per layer" in text, refused


# --- what TRL's LLM(...) call cannot pass: a fixed KV cache, a float32 engine ----------------------

def test_kv_cache_gib_is_checked_where_it_applies():
    assert config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.kv_cache_gib=6").grpo.vllm.kv_cache_gib == 6
    assert "grpo.vllm.kv_cache_gib" in problems(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.kv_cache_gib=0")
    text = problems(*GPU, "grpo.vllm.mode=server", "grpo.vllm.kv_cache_gib=6")
    assert "grpo.vllm.kv_cache_gib" in text and "trl vllm-serve" in text
    unsloth = config("device=cuda", "backend=unsloth", "grpo.vllm.mode=colocate", "grpo.vllm.kv_cache_gib=6",
                     check=False)
    with pytest.raises(ConfigError, match="grpo.vllm.kv_cache_gib"):
        check_vllm_backend(unsloth, "unsloth")


def test_float32_engine_needs_float32_weights_to_merge_into():
    assert config(*GPU, "grpo.vllm.mode=colocate", "model.dtype=fp32", "grpo.vllm.dtype=float32").grpo.vllm.dtype \
        == "float32"
    text = problems(*GPU, "grpo.vllm.mode=colocate", "model.dtype=bf16", "grpo.vllm.dtype=float32")
    assert "grpo.vllm.dtype" in text and "model.dtype fp32" in text and "is bf16" in text
    assert "--dtype float32" in problems(*GPU, "grpo.vllm.mode=server", "model.dtype=fp32", "grpo.vllm.dtype=float32")
    assert "grpo.vllm.dtype" in problems(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.dtype=fp16")
    unsloth = config("device=cuda", "backend=unsloth", "grpo.vllm.mode=colocate", "model.dtype=fp32",
                     "grpo.vllm.dtype=float32", check=False)
    with pytest.raises(ConfigError, match="grpo.vllm.dtype"):
        check_vllm_backend(unsloth, "unsloth")


def test_colocated_engine_extras_reach_trls_engine_only_while_the_trainer_is_built(monkeypatch):
    """TRL 1.15 builds ``LLM(...)`` in trl.generation.vllm_generation: the wrapper adds
    kv_cache_memory_bytes and dtype there (a caller's own value wins) and puts the real class back."""
    from trl.generation import vllm_generation

    made = []

    def fake_llm(*args, **kwargs):
        made.append(kwargs)
        return "engine"

    monkeypatch.setattr(vllm_generation, "LLM", fake_llm, raising=False)
    with vllm_engine.colocated_engine(6, "float32"):
        assert vllm_generation.LLM(model="m", gpu_memory_utilization=0.12) == "engine"
        vllm_generation.LLM(model="m", kv_cache_memory_bytes=5)
    with vllm_engine.colocated_engine(None, "float32"):
        vllm_generation.LLM(model="m")
    assert made == [{"model": "m", "gpu_memory_utilization": 0.12, "kv_cache_memory_bytes": 6 * 2**30,
                     "dtype": "float32"},
                    {"model": "m", "kv_cache_memory_bytes": 5, "dtype": "float32"},
                    {"model": "m", "dtype": "float32"}]
    assert vllm_generation.LLM is fake_llm  # put back
    with vllm_engine.colocated_engine(None, "auto"):  # nothing asked: TRL's own call, untouched
        assert vllm_generation.LLM is fake_llm
    with pytest.raises(RuntimeError), vllm_engine.colocated_engine(6):
        raise RuntimeError("the trainer failed to build")
    assert vllm_generation.LLM is fake_llm  # put back after a failure too


def test_colocated_engine_in_a_process_of_its_own_gets_trls_arguments(monkeypatch):
    """fast.generation_process: TRL's LLM(...) call becomes an engine client built from the same
    arguments (the extras too); the real class is put back after."""
    from trl.generation import vllm_generation

    from toolrl_lib.fast import engine_process

    made = []
    monkeypatch.setattr(vllm_generation, "LLM", lambda **kw: made.append(("in-process", kw)), raising=False)
    monkeypatch.setattr(engine_process, "engine_client",
                        lambda kw, options: made.append(("client", kw, options)) or "client")
    real = vllm_generation.LLM
    plain, tuned = engine_process.EngineOptions(), engine_process.EngineOptions(core_process=True, sm_percent=30)
    with vllm_engine.colocated_engine(4, "auto", process=plain):
        assert vllm_generation.LLM(model="m", distributed_executor_backend="external_launcher") == "client"
    with vllm_engine.colocated_engine(process=tuned):
        assert vllm_generation.LLM(model="m") == "client"
    assert made == [("client", {"model": "m", "distributed_executor_backend": "external_launcher",
                                "kv_cache_memory_bytes": 4 * 2**30}, plain),
                    ("client", {"model": "m"}, tuned)]
    assert vllm_generation.LLM is real


def test_the_token_budget_replaces_trls_4096(monkeypatch):
    """grpo.vllm.max_num_batched_tokens overrides the value TRL passes (the extras only fill gaps)."""
    from trl.generation import vllm_generation

    made = []
    monkeypatch.setattr(vllm_generation, "LLM", lambda **kw: made.append(kw) or "llm", raising=False)
    with vllm_engine.colocated_engine(2, max_num_batched_tokens=32768):
        vllm_generation.LLM(model="m", max_num_batched_tokens=4096, kv_cache_memory_bytes=1)
    with vllm_engine.colocated_engine(2):
        vllm_generation.LLM(model="m", max_num_batched_tokens=4096)
    assert made == [{"model": "m", "max_num_batched_tokens": 32768, "kv_cache_memory_bytes": 1},
                    {"model": "m", "max_num_batched_tokens": 4096, "kv_cache_memory_bytes": 2 * 2**30}]


def test_the_token_budget_is_checked(monkeypatch):
    from toolrl_lib.train.config import ConfigError

    config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.max_num_batched_tokens=16384")
    for bad in (["grpo.vllm.mode=colocate", "grpo.vllm.max_num_batched_tokens=0"],
                ["grpo.vllm.mode=server", "grpo.vllm.max_num_batched_tokens=16384"]):
        with pytest.raises(ConfigError, match="max_num_batched_tokens"):
            config(*GPU, *bad)


def test_colocated_engine_without_vllm_says_how_to_install(monkeypatch):
    from trl.generation import vllm_generation

    monkeypatch.delattr(vllm_generation, "LLM", raising=False)
    with pytest.raises(VLLMMissing, match="kv_cache_gib=6"), vllm_engine.colocated_engine(6):
        pass


def test_build_trainer_hands_the_config_to_the_engine(monkeypatch, tmp_path):
    """build_trainer wraps the trainer's construction with the run's grpo.vllm extras (colocate only)."""
    import contextlib

    from toolrl_lib.train import trainer as trainer_module

    seen = []

    @contextlib.contextmanager
    def spy(kv_cache_gib=None, dtype=None, process=None, max_num_batched_tokens=None):
        seen.append((kv_cache_gib, dtype, process) + ((max_num_batched_tokens,) if max_num_batched_tokens else ()))
        yield

    monkeypatch.setattr(vllm_engine, "colocated_engine", spy)
    monkeypatch.setattr(trainer_module, "grpo_args", lambda *a, **k: types.SimpleNamespace(world_size=1, n_gpu=0))
    built = []
    import trl

    monkeypatch.setattr(trl, "GRPOTrainer", lambda **kw: built.append(kw) or "t")
    run = config(*GPU, "grpo.vllm.mode=colocate", "model.dtype=fp32", "grpo.vllm.dtype=float32",
                 "grpo.vllm.kv_cache_gib=8")
    assert trainer_module.build_trainer(run, None, "cuda", "m", "tok", [], [], []) == "t"
    off = config(*GPU)
    trainer_module.build_trainer(off, None, "cuda", "m", "tok", [], [], [])
    process = config(*GPU, "grpo.vllm.mode=colocate", "fast.generation_process=true")
    trainer_module.build_trainer(process, None, "cuda", "m", "tok", [], [], [])
    core = config(*GPU, "grpo.vllm.mode=colocate", "fast.generation_process=true", "fast.engine_core_process=true")
    trainer_module.build_trainer(core, None, "cuda", "m", "tok", [], [], [])
    capped = config(*GPU, "grpo.vllm.mode=colocate", "fast.generation_process=true", "fast.engine_sm_percent=30")
    trainer_module.build_trainer(capped, None, "cuda", "m", "tok", [], [], [])
    grouped = config(*GPU, "grpo.vllm.mode=colocate", "fast.generation_process=true", "fast.engine_prompt_groups=true")
    trainer_module.build_trainer(grouped, None, "cuda", "m", "tok", [], [], [])
    budget = config(*GPU, "grpo.vllm.mode=colocate", "grpo.vllm.max_num_batched_tokens=32768")
    trainer_module.build_trainer(budget, None, "cuda", "m", "tok", [], [], [])
    from toolrl_lib.fast.engine_process import EngineOptions

    assert seen == [(8, "float32", None), (None, None, None), (None, "auto", EngineOptions()),
                    (None, "auto", EngineOptions(core_process=True)), (None, "auto", EngineOptions(sm_percent=30)),
                    (None, "auto", EngineOptions(prompt_groups=True)), (None, "auto", None, 32768)] and len(built) == 7
