"""LoRA merge + verification on a tiny random Llama (seconds, CPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from toolrl_lib import merge as M  # noqa: E402
from toolrl_lib.merge import core as merge_core  # noqa: E402
from toolrl_lib.merge import make_demo_run  # noqa: E402
from toolrl_lib.models import make_tiny_model  # noqa: E402

FAST = {"n_generations": 2, "max_new_tokens": 6, "device": "cpu"}


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny") / "base"
    make_tiny_model(folder, seed=0)
    return folder


@pytest.fixture(scope="module")
def trained_run(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_demo_run(base_dir, tmp_path_factory.mktemp("runs") / "run", init_std=0.05)


@pytest.fixture
def run(trained_run: Path, tmp_path: Path) -> Path:
    """A private copy, so tests can write outputs without seeing each other's."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.glob(f".{folder.name}.*"))


def test_tiny_adapter_merges_and_verifies(run: Path, base_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = run.parent / "merged"
    report = M.merge_run(run, "best", out, options=M.MergeOptions(dtype="fp32", **FAST))
    assert report.passed and not report.failed_checks()
    assert {c["check"] for c in report.checks} >= {
        "adapter is not a no-op", "merge is exact (fp32)", "greedy generations match",
        "reloads with AutoModelForCausalLM (offline)", "logits match base+adapter (fp32)",
    }
    assert M.is_complete_merge(out) and not leftovers(out)
    for name in ("model.safetensors", "config.json", "generation_config.json",
                 "tokenizer_config.json", M.MERGE_INFO):
        assert (out / name).is_file(), name
    assert not (out / "adapter_config.json").exists()
    info = json.loads((out / M.MERGE_INFO).read_text())
    assert info["passed"] and info["dtype"] == "fp32"
    prov = info["provenance"]
    assert prov["run_config_sha256"] == M.sha256_of(run / "config.yaml")
    assert prov["adapter_sha256"] == M.sha256_of(run / "best" / "adapter_model.safetensors")
    assert {"torch", "transformers", "peft"} <= set(prov["libraries"])
    assert info["delta"]["nonzero_modules"] == info["delta"]["lora_modules"] > 0
    probes = info["delta"]["saved_probes"]
    assert probes["exact"] == probes["probed"] > 0 and probes["delta_matched"] == probes["delta_visible"] > 0
    # the merged weights really differ from the base (the training was not dropped)
    merged = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    q_merged = merged.model.layers[0].self_attn.q_proj.weight
    q_base = base.model.layers[0].self_attn.q_proj.weight
    assert not torch.allclose(q_merged, q_base)
    assert report.logits["saved_vs_base"]["max_abs"] > 10 * report.logits["saved_vs_reference"]["max_abs"]


def test_bf16_output_is_bf16_and_within_tolerance(run: Path) -> None:
    out = run.parent / "merged16"
    report = M.merge_run(run, "last", out, options=M.MergeOptions(dtype="bf16", **FAST))
    config = json.loads((out / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"
    limits = report.logits["limits"]
    assert report.logits["saved_vs_reference"]["max_abs"] <= limits["max_abs"]
    assert report.sizes["merged_bytes"] > 0 and report.sizes["adapter_bytes"] > 0


def test_zeroed_adapter_is_rejected(base_dir: Path, tmp_path: Path) -> None:
    run = make_demo_run(base_dir, tmp_path / "zero", init_std=0.0)
    out = tmp_path / "merged"
    with pytest.raises(M.MergeVerificationError, match="no-op"):
        M.merge_run(run, "best", out, options=M.MergeOptions(**FAST))
    assert not out.exists() and not leftovers(out)


@pytest.mark.parametrize("shape", [{"hidden_size": 64}, {"num_layers": 1}])
def test_mismatched_base_is_rejected(run: Path, tmp_path: Path, shape: dict) -> None:
    other = tmp_path / "other_base"
    make_tiny_model(other, seed=1, **shape)
    out = tmp_path / "merged"
    with pytest.raises(M.MergeError, match="does not fit the base") as info:
        M.merge_run(run, "best", out, base_model=str(other), options=M.MergeOptions(**FAST))
    assert str(other) in str(info.value)
    assert not out.exists() and not leftovers(out)


def test_interrupted_save_leaves_nothing_complete(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def half_save(model, tokenizer, folder):  # noqa: ANN001
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(merge_core, "save_merged", half_save)
    out = run.parent / "merged"
    with pytest.raises(KeyboardInterrupt):
        M.merge_run(run, "best", out, options=M.MergeOptions(**FAST))
    assert not out.exists() and not M.is_complete_merge(out) and not leftovers(out)


def test_save_that_drops_the_training_fails_verification(
    run: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The known failure: the saved folder holds base weights. Logit checks must catch it."""
    from transformers import AutoModelForCausalLM

    def save_base_instead(model, tokenizer, folder):  # noqa: ANN001
        AutoModelForCausalLM.from_pretrained(base_dir).save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    monkeypatch.setattr(merge_core, "save_merged", save_base_instead)
    for dtype in ("fp32", "bf16"):
        out = run.parent / f"merged_{dtype}"
        with pytest.raises(M.MergeVerificationError, match="saved weights carry the delta") as info:
            M.merge_run(run, "best", out, options=M.MergeOptions(dtype=dtype, **FAST))
        report = info.value.report
        assert report is not None and not report.passed
        failed = {c["check"] for c in report.failed_checks()}
        assert f"logits match base+adapter ({dtype})" in failed
        assert report.delta["saved_probes"]["delta_matched"] == 0
        assert not out.exists() and not leftovers(out)


def test_delta_below_bf16_resolution_is_rejected_but_fp32_keeps_it(
    base_dir: Path, tmp_path: Path
) -> None:
    run = make_demo_run(base_dir, tmp_path / "tiny_delta", init_std=1e-9)
    with pytest.raises(M.MergeVerificationError, match="lost in bf16"):
        M.merge_run(run, "best", tmp_path / "m16", options=M.MergeOptions(dtype="bf16", **FAST))
    report = M.merge_run(run, "best", tmp_path / "m32", options=M.MergeOptions(dtype="fp32", **FAST))
    assert report.passed and report.delta["survive_in_dtype"] > 0


def test_existing_output_needs_overwrite(run: Path) -> None:
    out = run.parent / "merged"
    out.mkdir()
    (out / "keep.txt").write_text("user data")
    with pytest.raises(M.MergeError, match="already exists"):
        M.merge_run(run, "best", out, options=M.MergeOptions(**FAST))
    assert (out / "keep.txt").read_text() == "user data"
    M.merge_run(run, "best", out, options=M.MergeOptions(overwrite=True, **FAST))
    assert M.is_complete_merge(out) and not (out / "keep.txt").exists() and not leftovers(out)


def test_generations_use_the_run_validation_file(run: Path, tmp_path: Path) -> None:
    from toolrl_lib.data.example import Example, write_jsonl

    val = tmp_path / "val.jsonl"
    tool = {"name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}
    write_jsonl([Example(id=f"v{i}", source="test", tools=[tool],
                         messages=[{"role": "user", "content": f"Weather in city {i}?"}],
                         ground_truth=[{"name": "get_weather", "arguments": {"city": f"c{i}"}}])
                 for i in range(3)], val)
    (run / "config.yaml").write_text(f"data:\n  val_files: [{val}]\n")
    report = M.merge_run(run, "best", tmp_path / "m", options=M.MergeOptions(**FAST))
    assert len(report.generations) == 2
    assert all("city" in g["prompt_tail"] for g in report.generations)
    assert not any("validation prompts" in note for note in report.notes)


def test_resolve_checkpoint(run: Path) -> None:
    assert M.resolve_checkpoint(run, "best") == run / "best"
    assert M.resolve_checkpoint(run, "last") == run / "last"
    assert M.resolve_checkpoint(run, "auto") == run / "best"
    shutil.rmtree(run / "best")
    assert M.resolve_checkpoint(run, "auto") == run / "last"
    step = run / "checkpoints" / "checkpoint-7"
    shutil.copytree(run / "last", step)
    assert M.resolve_checkpoint(run, "checkpoint-7") == step
    assert M.resolve_checkpoint(run, str(step)) == step
    with pytest.raises(FileNotFoundError, match="last, checkpoint-7"):
        M.resolve_checkpoint(run, "checkpoint-99")
    (step / "adapter_config.json").unlink()
    with pytest.raises(M.MergeError, match="not a PEFT adapter"):
        M.resolve_checkpoint(run, "checkpoint-7")


def test_missing_run_info_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="notebook 03"):
        M.merge_run(tmp_path, "best")


@pytest.mark.parametrize("bad", [{"dtype": "int8"}, {"backend": "vllm"}])
def test_bad_options_are_named(run: Path, bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        M.merge_run(run, "best", run.parent / "m", options=M.MergeOptions(**bad))
    assert not (run.parent / "m").exists()


def test_base_relative_to_run_dir(run: Path, base_dir: Path) -> None:
    shutil.copytree(base_dir, run / "primed_model")
    assert Path(M.resolve_base("primed_model", run)) == run / "primed_model"
    elsewhere = "/no/such/machine/runs/x/grpo/primed_model"  # run trained on another box
    assert Path(M.resolve_base(elsewhere, run)) == run / "primed_model"


def test_cli_merge(run: Path, capsys: pytest.CaptureFixture) -> None:
    from toolrl_lib.cli import main

    out = run.parent / "cli_out"
    code = main(["merge", "--run", str(run), "--out", str(out), "--dtype", "fp32",
                 "--n-generations", "1", "--max-new-tokens", "4", "--device", "cpu"])
    printed = capsys.readouterr().out
    assert code == 0 and M.is_complete_merge(out)
    assert "[ok  ] adapter is not a no-op" in printed and "FAIL" not in printed
    assert main(["merge", "--run", str(run), "--out", str(out)]) == 2  # exists, no --overwrite
    assert "already exists" in capsys.readouterr().err
    assert main(["merge", "--run", str(run / "nope")]) == 2


def test_logit_limits_and_generation_diffs() -> None:
    fp32 = M.logit_limits("fp32", scale=40.0)
    bf16 = M.logit_limits("bf16", scale=40.0)
    assert fp32["max_abs"] < bf16["max_abs"] and fp32["mean_abs"] < bf16["mean_abs"]
    assert M.logit_limits("bf16", 40.0, {"max_rel": 0.0})["max_abs"] == pytest.approx(1e-3)
    rows = M.compare_generations(["abc", "xyz"], ["abc", "xqz"], ["p1", "p2"])
    assert [r["identical"] for r in rows] == [True, False]
    assert rows[1]["first_difference_at"] == 1 and rows[0]["first_difference_at"] is None


def test_backend_choice_falls_back_to_peft(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "unsloth" else real(name, *a))
    assert M.choose_backend("auto", "peft", "bf16") == ("peft", None)
    backend, note = M.choose_backend("auto", "unsloth", "bf16")
    assert backend == "peft" and "not importable" in note
    assert M.choose_backend("unsloth", None, "fp32")[0] == "peft"


def test_hub_upload_needs_token_and_verified_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(M.MergeError, match="HF_TOKEN"):
        M.push_to_hub(tmp_path, "me/model")
    monkeypatch.setenv("HF_TOKEN", "hf_dummy")
    with pytest.raises(M.MergeError, match="not a verified merge"):
        M.push_to_hub(tmp_path, "me/model")


def test_hub_upload_sends_the_verified_folder(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    calls = []

    class FakeApi:
        def __init__(self, token: str) -> None:
            calls.append(("token", token))

        def create_repo(self, repo_id: str, private: bool, exist_ok: bool) -> None:
            calls.append(("create", repo_id, private))

        def upload_folder(self, folder_path: str, repo_id: str, commit_message: str) -> None:
            calls.append(("upload", folder_path, repo_id))

    out = run.parent / "merged"
    M.merge_run(run, "best", out, options=M.MergeOptions(**FAST))
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert M.push_to_hub(out, "me/model").endswith("me/model")
    assert calls == [("token", "hf_from_env"), ("create", "me/model", True),
                     ("upload", str(out), "me/model")]


# ------------------------------------------------ fp16 (the colab profile) and the Unsloth path

def unsloth_style_save(adapter_dir: Path, dtype: str, folder: Path) -> None:
    """What Unsloth's merged 16-bit save does (unsloth_zoo 2026.10.9, ``merge_and_overwrite_lora``):
    copy the base's shards, merge each LoRA target in fp32 and write it back in the shard's own
    dtype, whatever ``dtype`` was asked for."""
    from safetensors.torch import load_file, save_file

    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    base, scale = Path(config["base_model_name_or_path"]), config["lora_alpha"] / config["r"]
    shutil.copytree(base, folder, dirs_exist_ok=True)
    shard = load_file(str(folder / "model.safetensors"))
    lora = load_file(str(adapter_dir / "adapter_model.safetensors"))
    for key, weight in shard.items():
        a = "base_model.model." + key.removesuffix(".weight") + ".lora_A.weight"
        if a in lora:
            merged = weight.float().addmm_(lora[a.replace("lora_A", "lora_B")].float(), lora[a].float(),
                                           alpha=scale)
            shard[key] = merged.to(weight.dtype)
    save_file(shard, str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on a base stored in bf16 (as Qwen3 checkpoints and the GPU fit's random model are)."""
    folder = tmp_path_factory.mktemp("bf16") / "base"
    model, tokenizer = make_tiny_model(None, seed=0)
    model.to(torch.bfloat16).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return make_demo_run(folder, folder.parent / "run", init_std=0.05)


def test_merge_fp16_of_bf16_base_written_in_bf16_is_caught(
    bf16_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The colab fit's failure: the delta is there, but rounded to bf16, not the fp16 asked for."""
    assert M.checkpoint_dtype(json.loads((bf16_run / "best" / "adapter_config.json").read_text())
                              ["base_model_name_or_path"]) == "bf16"
    monkeypatch.setattr(merge_core, "choose_backend", lambda *a: ("unsloth", None))
    monkeypatch.setattr(merge_core, "save_merged_unsloth", unsloth_style_save)
    out = tmp_path / "merged"
    with pytest.raises(M.MergeVerificationError, match="saved weights carry the delta") as info:
        M.merge_run(bf16_run, "best", out, options=M.MergeOptions(dtype="fp16", **FAST))
    report = info.value.report
    failed = {c["check"]: c["detail"] for c in report.failed_checks()}
    assert "not fp16" in failed["reloads with AutoModelForCausalLM (offline)"]
    assert "stored as ['bf16']" in failed["saved weights carry the delta"]
    probes = report.delta["saved_probes"]
    assert 0 < probes["delta_matched"] < 0.5 * probes["delta_visible"]
    assert not out.exists() and not leftovers(out)


def test_merge_fp16_drops_nothing_and_a_dropped_delta_fails(
    bf16_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PEFT's fp16 merge of the same run passes (every visible delta exact); a save in the right
    dtype that loses the delta fails on the probes alone."""
    report = M.merge_run(bf16_run, "best", tmp_path / "ok", options=M.MergeOptions(dtype="fp16", **FAST))
    probes = report.delta["saved_probes"]
    assert report.passed and probes["delta_matched"] == probes["delta_visible"] > 0
    assert M.stored_dtypes(tmp_path / "ok") == {"fp16": M.stored_dtypes(tmp_path / "ok")["fp16"]}

    def save_base_in_fp16(model, tokenizer, folder):  # noqa: ANN001
        base = json.loads((bf16_run / "best" / "adapter_config.json").read_text())["base_model_name_or_path"]
        from transformers import AutoModelForCausalLM

        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float16).save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    monkeypatch.setattr(merge_core, "save_merged", save_base_in_fp16)
    with pytest.raises(M.MergeVerificationError) as info:
        M.merge_run(bf16_run, "best", tmp_path / "lost", options=M.MergeOptions(dtype="fp16", **FAST))
    failed = {c["check"] for c in info.value.report.failed_checks()}
    assert "saved weights carry the delta" in failed
    assert "reloads with AutoModelForCausalLM (offline)" not in failed  # the dtype was right
    assert info.value.report.delta["saved_probes"]["delta_matched"] == 0


def test_merge_fp16_accepts_delta_partly_below_its_resolution(base_dir: Path, tmp_path: Path) -> None:
    """Where fp16 rounds part of the delta away, the saved weights legitimately equal the base:
    only positions where round(W + delta) != round(W) are held to the merged value."""
    run = make_demo_run(base_dir, tmp_path / "small", init_std=2e-5)
    report = M.merge_run(run, "best", tmp_path / "m", options=M.MergeOptions(dtype="fp16", **FAST))
    probes = report.delta["saved_probes"]
    assert 0.1 < report.delta["survival_fraction"] < 0.9
    assert report.passed and 0 < probes["delta_visible"] < 0.9 * probes["probed"]
    assert probes["delta_matched"] == probes["delta_visible"]


def test_merge_uses_unsloth_only_when_the_base_is_stored_in_the_asked_dtype(
    monkeypatch: pytest.MonkeyPatch, base_dir: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "unsloth" else real(name, *a))
    assert M.choose_backend("auto", "unsloth", "bf16", "bf16") == ("unsloth", None)
    backend, note = M.choose_backend("auto", "unsloth", "fp16", "bf16")
    assert backend == "peft" and "keeps the base checkpoint's dtype (bf16)" in note
    assert M.choose_backend("unsloth", None, "fp16", None)[0] == "peft"
    assert M.checkpoint_dtype(str(base_dir)) == "fp32"
