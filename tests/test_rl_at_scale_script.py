"""benchmarks/gpu/rl_at_scale.py (issue 38) on CPU with the tiny random model: data, SFT (LoRA and
full side by side), selection on validation, two GRPO variants with the start models evaluated
beside them, the final selection, merge and evaluation, the pack; a second call that finds
nothing left; the report (BFCL's scorer) in the shape of rl_single_turn.json plus pass@k.
The chain is a harness test (``pytest -m gpu_harness``); the report's pure parts run always."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.rl_at_scale_report import goals, zero_variance

ROOT = Path(__file__).resolve().parents[1]


def _script(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.rl_at_scale", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.gpu_harness
def test_chain_on_cpu_resumes_and_reports(tmp_path, tiny_model_dir):
    work, out, results = tmp_path / "work", tmp_path / "out", tmp_path / "results"
    run = ["run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
           "--budget-s", "900", "--stop-margin-s", "20", "--stagger-s", "2"]
    first = _script(*run)
    assert "SFT selected on validation" in first.stdout and "GRPO variant selected on validation" in first.stdout
    assert "done: every model trained and evaluated" in first.stdout
    with tarfile.open(out / "rl_at_scale.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"state.json", "sft_selection.json", "grpo_selection.json", "sft/lora/sft.json", "sft/full/sft.json",
            "runs/g16-weighted/validation.csv", "runs/g16-binary/metrics.csv"} <= names
    for label in ("base", "sft", "grpo"):
        assert f"pass_at_k/{label}-validation.json" in names
        assert f"bfcl_pass_at_k/{label}/samples/multiple.jsonl" in names
        assert f"bfcl/{label}/generations/simple_python.jsonl" in names
    assert not any(n.endswith(".safetensors") for n in names)  # no weights travel
    second = _script(*run)
    assert "started" not in second.stdout and "done: every model trained" in second.stdout
    _resume_in_a_new_session(tmp_path, work, out, tiny_model_dir)
    _script("report", "--archive", str(out / "rl_at_scale.tar.gz"), "--work", str(tmp_path / "rep"),
            "--out", str(results), "--figures", str(tmp_path / "figures"), "--n-boot", "100")
    result = json.loads((results / "rl_at_scale.json").read_text())
    assert result["selected_on"] == "validation" and set(result["models"]) == {"base", "sft", "grpo"}
    assert {(c["a"], c["b"]) for c in result["comparisons"]} == {("sft", "grpo"), ("base", "grpo"), ("base", "sft")}
    assert set(result["pass_at_k"]["sft"]) == {"validation", "bfcl_non_live_ast"}
    assert result["pass_at_k"]["grpo"]["bfcl_non_live_ast"]["n"] == 2
    assert result["selection"]["sft"]["chosen"] in ("lora", "full")
    assert "summary_grpo_minus_sft_ge_0.03_ci_above_0" in result["goals"]
    assert (tmp_path / "figures" / "07_rl_at_scale_pass_at_k.png").is_file()


@pytest.mark.gpu_harness
def test_final_reserve_ends_grpo_by_time_and_evaluates_a_full_ft_variant(tmp_path, tiny_model_dir):
    """One session, one call: GRPO (a full fine-tuning variant, far from its max_steps) stops
    --final-reserve-s before the deadline, the selection and the evaluation of base, SFT and GRPO
    still run in the same call; the full variant's best/ is evaluated as it is (no merge)."""
    work, out = tmp_path / "work", tmp_path / "out"
    done = _script("run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
                   "--variants", "g16-full", "--sft-methods", "full", "--budget-s", "420", "--final-reserve-s", "260",
                   "--stop-margin-s", "20", "--stagger-s", "2", "--set=grpo.max_steps=100000")
    assert "SFT start: full, the only method of this run" in done.stdout, done.stdout[-3000:]
    # the base model's evaluation needs nothing trained: it starts beside SFT, not after it
    assert done.stdout.index("started eval-base") < done.stdout.index("SFT start: full"), done.stdout[-3000:]
    assert "started validate-" not in done.stdout  # one method: nothing to validate before GRPO
    assert "GRPO stopped by --final-reserve-s at steps" in done.stdout, done.stdout[-3000:]
    assert "done: every model trained and evaluated" in done.stdout, done.stdout[-3000:]
    state = json.loads((work / "keep" / "state.json").read_text())
    steps = state["grpo_stopped_by_time"]["g16-full"]
    assert 0 < steps < 100000
    assert not (work / "grpo_model").exists()  # evaluated from runs/g16-full/best
    assert json.loads((work / "keep" / "eval" / "grpo.done").read_text())["model"].endswith("g16-full/best")
    again = _script("run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
                    "--variants", "g16-full", "--sft-methods", "full", "--budget-s", "300", "--stagger-s", "2")
    assert "started" not in again.stdout  # nothing left: GRPO is not resumed after the final phase


def _resume_in_a_new_session(tmp_path, work, out, tiny_model_dir):
    """What one session carries back (archive, start model, checkpoints) restores a bare work
    folder, and a variant that was not finished resumes from its checkpoint there."""
    carried = tmp_path / "carried"
    _script("carry", "--work", str(work), "--device", "cpu", "--tiny", str(tiny_model_dir), "--to", str(carried))
    parts = tmp_path / "parts"  # every call's folder, gathered in one place as `carry.py stage` then sends them
    parts.mkdir()
    (parts / "rl_at_scale.tar.gz").write_bytes((out / "rl_at_scale.tar.gz").read_bytes())
    for folder in sorted(carried.glob("stage*")):
        for file in folder.iterdir():
            (parts / file.name).write_bytes(file.read_bytes())
    assert {"start.manifest.json", "g16-weighted.manifest.json", "g16-binary.manifest.json"} <= {
        f.name for f in parts.iterdir()}
    selection = json.loads((work / "keep" / "sft_selection.json").read_text())
    new = tmp_path / "session2"
    common = ["--work", str(new), "--device", "cpu", "--tiny", str(tiny_model_dir)]
    _script("restore", *common, "--parts", str(parts))
    assert (new / selection["model"] / "config.json").is_file()
    state = new / "runs" / "g16-binary" / "worker.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "finished": False}))
    resumed = _script("run", *common, "--out", str(tmp_path / "out2"), "--budget-s", "600", "--stop-margin-s", "20",
                      "--stagger-s", "2", "--set=grpo.max_steps=3")
    assert "started sft" not in resumed.stdout and "started grpo-g16-weighted" not in resumed.stdout
    assert json.loads(state.read_text())["step"] == 3  # from the carried checkpoint-2, one more step
    steps = pd.read_csv(new / "runs" / "g16-binary" / "metrics.csv")["step"].tolist()
    assert steps == [1, 2, 3]


def test_goals_follow_the_comparisons():
    rows = [{"a": "sft", "b": "grpo", "metric": "bfcl_single_turn_summary", "diff": 0.04, "ci_low": 0.01, "ci_high": 0.07},
            {"a": "sft", "b": "grpo", "metric": "accuracy_when_called_non_live_ast", "diff": 0.02, "ci_low": -0.01,
             "ci_high": 0.05},
            {"a": "sft", "b": "grpo", "metric": "irrelevance", "diff": -0.05, "ci_low": -0.09, "ci_high": -0.01}]
    models = {"base": {"bfcl_single_turn_summary": 0.333}, "grpo": {"bfcl_single_turn_summary": 0.35}}
    got = goals(rows, models)
    assert got["summary_grpo_minus_sft_ge_0.03_ci_above_0"]["met"] is True
    assert got["accuracy_when_called_non_live_grpo_minus_sft_ci_above_0"]["met"] is False
    assert got["irrelevance_not_significantly_lower"]["met"] is False  # the whole CI is below 0
    assert got["stretch_grpo_summary_above_never_calling_base"]["met"] is True
    rows[0]["diff"] = 0.02  # CI above 0 but below the +0.03 the issue asks
    assert goals(rows, models)["summary_grpo_minus_sft_ge_0.03_ci_above_0"]["met"] is False


def test_zero_variance_by_kind_from_the_metrics(tmp_path):
    folder = tmp_path / "runs" / "g16"
    folder.mkdir(parents=True)
    pd.DataFrame({"step": range(1, 21), "frac_reward_zero_std": [1.0] * 10 + [0.5] * 10,
                  "frac_reward_zero_std/kind/parallel": [0.0] * 2 + [0.5] * 16 + [1.0] * 2}).to_csv(
        folder / "metrics.csv", index=False)
    got = zero_variance(tmp_path)["g16"]
    assert got["all"] == {"all_steps": 0.75, "first_tenth": 1.0, "last_tenth": 0.5}
    assert got["parallel"] == {"all_steps": 0.5, "first_tenth": 0.0, "last_tenth": 1.0}


def _fake_sft(work: Path, method: str, finished: bool, bulk: int) -> None:
    """An SFT run folder as ``toolrl sft`` leaves it: a finished one has model/, an unfinished one
    a checkpoint (``bulk`` bytes of stand-in weights, so that the parts span several calls)."""
    folder = work / "sft" / method
    if finished:
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "config.json").write_text("{}")
        (folder / "model" / "weights.bin").write_bytes(os.urandom(bulk))
    else:
        checkpoint = folder / "checkpoints" / "checkpoint-400"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text('{"global_step": 400}')
        (checkpoint / "optimizer.pt").write_bytes(os.urandom(bulk))
    (folder / "sft.json").write_text(json.dumps({"finished": finished, "steps": 500 if finished else 475}))


def test_a_session_cut_during_sft_carries_both_runs_to_the_next(tmp_path, monkeypatch):
    """The first GPU session ended with full fine-tuning finished and LoRA at a checkpoint, before
    the selection: ``carry`` packs both in folders one call can bring back, ``restore`` puts them
    where ``run`` finds the finished model and resumes the LoRA run from its checkpoint."""
    from benchmarks.gpu import carry
    from benchmarks.gpu import rl_at_scale as ras
    from toolrl_lib.run_dir import latest_checkpoint

    monkeypatch.setattr(carry, "CALL_MIB", 2.0)  # small stand-ins, the same arithmetic
    monkeypatch.setattr(carry, "PART_MIB", 0.5)
    work, to = tmp_path / "work", tmp_path / "carry"
    _fake_sft(work, "full", True, 3 * 2**20)
    _fake_sft(work, "lora", False, 2**20)
    assert ras.main(["carry", "--work", str(work), "--device", "cpu", "--to", str(to)]) == 0
    calls = sorted(to.glob("stage*"))
    assert len(calls) >= 2
    for folder in calls:  # what one device call can bring back
        files = list(folder.iterdir())
        assert len(files) <= carry.CALL_FILES and sum(f.stat().st_size for f in files) <= carry.CALL_MIB * 2**20
    back = tmp_path / "back"  # the next session: every call's files in one place
    back.mkdir()
    for folder in calls:
        for file in folder.iterdir():
            (back / file.name).write_bytes(file.read_bytes())
    new = tmp_path / "session2"
    assert ras.main(["restore", "--work", str(new), "--device", "cpu", "--parts", str(back)]) == 0
    assert ras.sft_finished(new, "full") and (new / "sft" / "full" / "model" / "config.json").is_file()
    assert (new / "sft" / "full" / "model" / "weights.bin").read_bytes() == \
        (work / "sft" / "full" / "model" / "weights.bin").read_bytes()
    assert not ras.sft_finished(new, "lora")
    assert latest_checkpoint(new / "sft" / "lora" / "checkpoints").name == "checkpoint-400"  # --resume goes on
    again = tmp_path / "runs-only"  # what came back once need not come back again
    assert ras.main(["carry", "--work", str(work), "--device", "cpu", "--to", str(again), "--runs-only"]) == 0
    assert not list(again.glob("stage*/*"))



def _earlier_archive(path: Path, settings: dict) -> Path:
    """An earlier run's archive as ``run`` packs it: state.json, the base's and the SFT's files."""
    files = {"state.json": json.dumps({"calls": [], "eval": settings}),
             "bfcl/base/run.json": "{}", "bfcl/base/result/rasbase/non_live/BFCL_v4_simple_python_result.json": "{}",
             "bfcl_pass_at_k/base/sampling.json": "{}", "pass_at_k/base-validation.json": "{}",
             "eval-base.log": "log", "bfcl/sft/run.json": "{}", "pass_at_k/sft-validation.json": "{}"}
    source = path.parent / "earlier"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_text(text)
            tar.add(source / name, arcname=name)
    return path


def test_the_base_evaluation_is_reused_only_with_the_same_settings(tmp_path):
    from benchmarks.gpu.rl_at_scale import eval_done, reuse_base_evaluation

    settings = {"backend": "auto", "n": 64, "val_limit": 256, "bfcl_limit": 50, "max_new_tokens": 256,
                "batch_size": 512, "dtype": "bf16"}
    archive = _earlier_archive(tmp_path / "run2.tar.gz", settings)
    keep = tmp_path / "work" / "keep"
    with pytest.raises(SystemExit, match="differ from this run's"):
        reuse_base_evaluation(archive, keep, {**settings, "n": 16})
    assert not eval_done(tmp_path / "work", "base")
    record = reuse_base_evaluation(archive, keep, settings)
    assert record["reused_from"] == "run2.tar.gz" and record["files"] == 5
    assert eval_done(tmp_path / "work", "base")
    assert (keep / "bfcl/base/result/rasbase/non_live/BFCL_v4_simple_python_result.json").is_file()
    assert (keep / "pass_at_k/base-validation.json").is_file()
    assert not (keep / "bfcl/sft").exists() and not (keep / "pass_at_k/sft-validation.json").exists()
    with pytest.raises(SystemExit, match="no state.json"):
        bare = tmp_path / "bare.tar.gz"
        with tarfile.open(bare, "w:gz") as tar:
            tar.add(tmp_path / "earlier" / "eval-base.log", arcname="eval-base.log")
        reuse_base_evaluation(bare, keep, settings)


def test_an_unfinished_bfcl_sampling_is_reported_as_not_measured(tmp_path, monkeypatch):
    from benchmarks import rl_at_scale_report as report
    from toolrl_lib.evaluate import bfcl_pass_at_k

    for label in ("base", "sft"):
        (tmp_path / "bfcl_pass_at_k" / label).mkdir(parents=True)
        (tmp_path / "bfcl_pass_at_k" / label / "sampling.json").write_text("{}")

    def fake_score(folder):
        if Path(folder).name == "base":
            raise RuntimeError("simple_python: 20 entries have no samples")
        return {"n": 4, "non_live_ast": {"1": 0.25, "4": 0.5}}

    monkeypatch.setattr(bfcl_pass_at_k, "score_samples", fake_score)
    panels = report.pass_at_k_panels(tmp_path)
    assert panels["base"]["bfcl_non_live_ast"] == {"incomplete": "simple_python: 20 entries have no samples"}
    assert panels["sft"]["bfcl_non_live_ast"]["non_live_ast"] == {"1": 0.25, "4": 0.5}
    text = report.markdown({"selection": {"sft": {}, "grpo": {}}, "goals": {}, "pass_at_k": panels,
                            "zero_variance": {}, "models": {}, "comparisons": []})
    assert "- base, bfcl_non_live_ast: not measured, its sampling did not finish" in text
    assert "- sft, bfcl_non_live_ast (n=4): @1 0.250, @4 0.500" in text


def test_validation_curves_keep_the_selection_key_and_its_kinds(tmp_path):
    from benchmarks.rl_at_scale_report import markdown, validation_curves

    folder = tmp_path / "runs" / "g16-full"
    folder.mkdir(parents=True)
    pd.DataFrame({"step": [250, 500], "stage": ["grpo", "final"], "binary_summary@8": [0.8, 0.83],
                  "kind/simple/binary@8": [0.9, 0.85], "kind/simple/weighted@8": [0.5, 0.5],
                  "weighted_summary@8": [0.5, 0.52], "seconds": [5.0, 6.0]}).to_csv(folder / "validation.csv", index=False)
    rows = validation_curves(tmp_path, "binary_summary@8")["g16-full"]
    assert rows == [{"step": 250, "stage": "grpo", "binary_summary@8": 0.8, "kind/simple/binary@8": 0.9},
                    {"step": 500, "stage": "final", "binary_summary@8": 0.83, "kind/simple/binary@8": 0.85}]
    text = markdown({"selection": {"sft": {}, "grpo": {}}, "goals": {}, "pass_at_k": {}, "zero_variance": {},
                     "models": {}, "comparisons": [], "validation_curves": {"g16-full": rows},
                     "diagnosis": "RL sharpened what SFT sampled."})
    assert "| 500 | final | 0.830 | 0.850 |" in text and "## Reading\n\nRL sharpened what SFT sampled." in text
