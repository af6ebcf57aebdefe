"""benchmarks/grpo_throughput.py on CPU with tiny shapes (full_profile_fit.py: test_full_profile_fit.py).

The GPU numbers come from the GPU host; here we check the parts that must be right the
first time there: the job plan, the exact prompt length, the Qwen3-8B shapes, the saved
model folder, row collection when a worker fails or is killed, and one real tiny run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import grpo_throughput as gt


def test_parse_jobs_and_errors():
    jobs = gt.parse_jobs("peft_default, peft_gen_batch64@1024,best@1024")
    assert [j.name for j in jobs] == ["peft_default", "peft_gen_batch64@1024", "best@1024"]
    assert jobs[1].completion_tokens == 1024 and jobs[0].completion_tokens is None
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        gt.parse_jobs("peft_default,nope")
    with pytest.raises(ValueError, match="positive integer"):
        gt.parse_jobs("peft_default@abc")


def test_plan_covers_whole_generation_rounds():
    w = gt.WORKLOADS["qwen3-8b"]
    assert gt.plan_steps(gt.VARIANTS["peft_default"], w, 1, 2) == (1, 2)
    assert gt.plan_steps(gt.VARIANTS["peft_gen_batch64"], w, 1, 2) == (2, 2)
    assert gt.plan_steps(gt.VARIANTS["peft_gen_batch128"], w, 1, 2) == (4, 4)
    assert gt.plan_steps(gt.VARIANTS["unsloth_gen_batch128"], w, 1, 2) == (4, 4)
    v = gt.VARIANTS["unsloth_gen_batch64_micro32"]
    assert gt.plan_steps(v, w, 1, 2) == (2, 2)
    assert gt.workload_for("qwen3-8b", gt.Job("unsloth_gen_batch64_micro32", 256), v).micro_batch == 32
    job = gt.Job("peft_micro32", 1024)
    w32 = gt.workload_for("qwen3-8b", job, gt.VARIANTS["peft_micro32"])
    assert (w32.micro_batch, w32.completion_tokens, w32.completions_per_step) == (32, 1024, 32)


def test_vllm_variants_take_the_librarys_colocate_plumbing_without_importing_vllm():
    """What TRL gets for the 8B vLLM rows: the library's grpo.vllm fields (colocate, a window of prompt +
    completion, detokenizer off), vLLM's own way to fixed-length completions, a fixed KV cache; and
    on a machine without CUDA the variant refuses before any model is built."""
    import sys

    w = gt.WORKLOADS["qwen3-8b"]
    fields, sampling, engine = gt.vllm_settings(gt.VARIANTS["peft_vllm_gen_batch64"], w)
    assert fields["use_vllm"] is True and fields["vllm_mode"] == "colocate"
    assert fields["vllm_max_model_length"] == w.prompt_tokens + w.completion_tokens == 1280
    assert sampling == {"detokenize": False, "ignore_eos": True}
    assert gt.plan_steps(gt.VARIANTS["peft_vllm_gen_batch128"], w, 1, 2) == (4, 4)
    assert "vllm" not in sys.modules
    from toolrl_lib.fast.vllm_engine import VLLMMissing

    with pytest.raises(VLLMMissing, match="vLLM"), engine:  # the fixed KV cache needs TRL's vLLM engine
        pass
    a = argparse.Namespace(model_dir=None, shapes="qwen3-8b")
    with pytest.raises(RuntimeError, match="vLLM generates on CUDA GPUs only"):
        gt.load_policy(gt.VARIANTS["peft_vllm_gen_batch64"], a, w, cuda=False)


def test_unsloth_vllm_variant_asks_unsloths_loader_for_its_engine_and_leaves_trl_alone():
    """Unsloth's own vLLM at 8B shapes: FastLanguageModel gets fast_inference (the library's
    unsloth_vllm_kwargs), TRL gets no use_vllm fields and no engine wrapper (Unsloth's patched
    trainer uses the model's engine), sampling still runs to fixed length."""
    from toolrl_lib.train.backend import unsloth_vllm_kwargs

    w = gt.WORKLOADS["qwen3-8b"]
    variant = gt.VARIANTS["unsloth_vllm_gen_batch64"]
    assert unsloth_vllm_kwargs(gt.policy_config(variant, w)) == {
        "fast_inference": True, "gpu_memory_utilization": 0.45, "max_lora_rank": 16}
    assert unsloth_vllm_kwargs(gt.policy_config(gt.VARIANTS["unsloth_merged_gen_batch64"], w)) == {}
    fields, sampling, engine = gt.vllm_settings(variant, w)
    assert fields == {} and sampling == {"ignore_eos": True}
    with engine:  # no TRL engine to wrap: a no-op here, where vLLM is not installed
        pass
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        gt.load_policy(variant, argparse.Namespace(model_dir=None, shapes="qwen3-8b"), w, cuda=False)


def test_qwen3_8b_shapes_on_meta_device():
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = gt.embedded_tokenizer()
    config = gt.qwen3_config("qwen3-8b", tokenizer)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert model.config.model_type == "qwen3" and not model.config.tie_word_embeddings
    attn = model.model.layers[0].self_attn
    assert attn.q_proj.weight.shape == (32 * 128, 4096) and attn.k_proj.weight.shape == (8 * 128, 4096)
    assert model.model.layers[0].mlp.gate_proj.weight.shape == (12288, 4096)
    assert len(model.model.layers) == 36 and model.lm_head.weight.shape == (151936, 4096)
    params = sum(p.numel() for p in model.parameters())
    assert 8.1e9 < params < 8.3e9  # Qwen3-8B: 8.19B with the untied head


def test_prompt_tokenizes_to_exactly_1024_tokens():
    tokenizer = gt.embedded_tokenizer()
    text = gt.fixed_length_prompt(tokenizer, 1024)
    assert len(tokenizer(text=[text])["input_ids"][0]) == 1024
    from toolrl_lib.models import make_tiny_tokenizer

    with pytest.raises(ValueError, match="tokenizes to"):  # byte-level: " a" is two tokens
        gt.fixed_length_prompt(make_tiny_tokenizer(), 10)


def test_reward_is_not_constant():
    rewards = gt.token_sum_reward(completion_ids=[[1, 2], [3, 4], [5, 5], [0]])
    assert rewards == [3.0, 0.0, 3.0, 0.0]


def test_saved_model_folder_is_qwen3_family_and_reused(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolrl_lib.prompts import detect_family

    folder = gt.ensure_saved_model(tmp_path / "m", "tiny", "cpu")
    marker = (folder / gt.MARKER).stat().st_mtime_ns
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert detect_family(tokenizer) == "qwen3"
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.model_type == "qwen3" and model.config.eos_token_id == tokenizer.eos_token_id
    assert gt.ensure_saved_model(folder, "tiny", "cpu") == folder
    assert (folder / gt.MARKER).stat().st_mtime_ns == marker  # not rebuilt
    assert not (tmp_path / "m.tmp").exists()


def test_collect_row_records_kills_and_crashes(tmp_path):
    row_file = tmp_path / "a.json"
    row_file.write_text(json.dumps({"job": "a", "status": "running", "timed_steps": 1, "s_per_step": 2.0}))
    killed = gt.collect_row(gt.Job("a"), row_file, -9, True, 300)
    assert killed["status"] == "partial" and "time budget" in killed["error"]
    (tmp_path / "b.log").write_text("Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory\n")
    crashed = gt.collect_row(gt.Job("b"), tmp_path / "b.json", 1, False, 10)
    assert crashed["status"] == "failed" and "OutOfMemoryError" in crashed["error"]
    assert gt.collect_row(gt.Job("c"), tmp_path / "c.json", -9, True, 5)["status"] == "timeout"


def test_best_resolves_to_fastest_finished_variant():
    rows = [{"variant": "peft_default", "status": "ok", "completions_per_s": 1.3},
            {"variant": "peft_gen_batch64", "status": "ok", "completions_per_s": 2.5},
            {"variant": "unsloth", "status": "failed"}]
    assert gt.resolve_best(gt.Job("best", 1024), rows) == gt.Job("peft_gen_batch64", 1024)
    assert gt.resolve_best(gt.Job("best"), rows[2:]) is None


def test_jobs_without_time_left_are_skipped_rows(tmp_path):
    assert gt.main(["--out", str(tmp_path), "--shapes", "tiny", "--cpu", "--variants",
                    "peft_default,best@16", "--time-budget-s", "5", "--min-start-s", "60"]) == 0
    rows = json.loads((tmp_path / "grpo_throughput.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert "time budget" in rows[0]["error"] and "no earlier variant" in rows[1]["error"]


def test_resume_keeps_measured_rows_and_reruns_the_rest(tmp_path):
    meta = {"shapes": "tiny", "workload": gt.asdict(gt.WORKLOADS["tiny"]), "command": "first", "memory_cap_gb": 80,
            "started": "t0"}
    rows = [{"job": "peft_default", "variant": "peft_default", "status": "ok", "completions_per_s": 3.0},
            {"job": "peft_paged", "variant": "peft_paged", "status": "skipped"}]
    gt.write_outputs(tmp_path, meta, rows)
    pending = gt.parse_jobs("peft_default,peft_paged,unsloth")
    kept, left, merged = gt.resume_rows(tmp_path, pending, {**meta, "command": "second", "started": "t1"})
    assert kept == rows[:1] and [j.name for j in left] == ["peft_paged", "unsloth"]
    assert merged["commands"] == ["first", "second"] and merged["started"] == "t0"
    other = {**meta, "workload": {**meta["workload"], "prompt_tokens": 7}}
    with pytest.raises(SystemExit, match="other shapes"):
        gt.resume_rows(tmp_path, pending, other)


def test_bad_arguments_name_the_flag(capsys):
    with pytest.raises(SystemExit):
        gt.parse_args(["--variants", "peft_defualt"])
    assert "unknown variant 'peft_defualt'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gt.parse_args(["--memory-cap-gb", "0"])
    assert "--memory-cap-gb must be > 0" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_run_end_to_end(tmp_path):
    """Two real GRPO variants in subprocesses + the unsloth variant failing as a row."""
    assert gt.main(["--out", str(tmp_path), "--shapes", "tiny", "--cpu", "--variants",
                    "peft_default,unsloth,peft_merged_gen_batch64",
                    "--warmup-rounds", "0", "--timed-steps", "1", "--min-start-s", "1",
                    "--scratch", str(tmp_path / "scratch")]) == 0
    rows = {r["job"]: r for r in json.loads((tmp_path / "grpo_throughput.json").read_text())["rows"]}
    ok = rows["peft_default"]
    assert ok["status"] == "ok" and ok["timed_steps"] == 1 and ok["fixed_length_ok"] is True
    assert ok["mean_completion_tokens"] == gt.WORKLOADS["tiny"].completion_tokens
    assert 0 < ok["gen_s_per_step"] < ok["s_per_step"] and ok["gen_timer"] == "_generate_single_turn"
    assert ok["completions_per_s"] == pytest.approx(32 / ok["s_per_step"], rel=1e-2)
    assert ok["grad_norm_mean"] > 0  # advantages were not all zero
    assert rows["unsloth"]["status"] == "failed" and "unsloth" in rows["unsloth"]["error"]
    merged = rows["peft_merged_gen_batch64"]  # rollouts through merged weights; LoRA still trains
    assert merged["status"] == "ok" and merged["fixed_length_ok"] is True and merged["grad_norm_mean"] > 0
    assert merged["merged_check"]["ok"]  # checked against the LoRA path before it was timed
    text = (tmp_path / "grpo_throughput.md").read_text()
    assert "| peft_default | ok |" in text and "| unsloth | failed |" in text
    assert (tmp_path / "grpo_throughput.csv").read_text().count("\n") == 4


def test_plot_draws_the_committed_table_and_refuses_a_missing_one(tmp_path):
    # committed as grpo_throughput_qwen3_8b.json (the plain name holds the embedded model's run)
    committed = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "grpo_throughput_qwen3_8b.json"
    results = tmp_path / "results"
    results.mkdir()
    (results / "grpo_throughput.json").write_bytes(committed.read_bytes())
    png = tmp_path / "throughput.png"
    assert gt.main(["--out", str(results), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    with pytest.raises(SystemExit, match="grpo_throughput.json not found"):
        gt.main(["--out", str(tmp_path / "empty"), "--plot", str(png)])
    with pytest.raises(ValueError, match="no measured row"):
        gt.plot_throughput({"workload": {}}, [{"job": "x", "status": "failed"}], png)
