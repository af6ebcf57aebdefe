"""benchmarks/gpu/rl_multi_turn_gpu.py end to end on CPU with the tiny random model: the GPU
call (train, own-task evaluation, BFCL multi-turn generation through bfcl_multi_turn's resumable
phase_generate, the pack), a second call that resumes and trains nothing, and the report (BFCL's
checker) in the JSON shape of rl_single_turn.json. Harness test: ``pytest -m gpu_harness``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu_harness


def _script(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.rl_multi_turn_gpu", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert (done.returncode == 0) == ok, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _carried_parts(tmp_path: Path, out: Path) -> Path:
    """What the next session carries to its host: every carry stage's files and the last archive."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for path in [*(tmp_path / "carry").glob("stage*/*"), *out.glob("rl_multi_turn.tar.gz*")]:
        (parts / path.name).write_bytes(path.read_bytes())
    return parts


def test_gpu_chain_on_cpu_resumes_and_reports(tmp_path, tiny_model_dir):
    work, out, results = tmp_path / "work", tmp_path / "out", tmp_path / "results"
    run = ["run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
           "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4", "--bfcl-max-live", "4",
           "--stop-margin-s", "60", "--stagger-s", "1", "--priming-mix", "default,dependent"]
    first = _script(*run)
    assert "primed in" in first.stdout and "trained:" in first.stdout
    assert "selected on validation success" in first.stdout
    with tarfile.open(out / "rl_multi_turn.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"gpu_run.json", "own/primed.jsonl", "own/grpo.jsonl", "selection.json", "runs/shaped-g8/validation.csv",
            "runs/success-g8/worker.json"} <= names
    assert not any("primed_model" in n or n.endswith(".safetensors") for n in names)  # no weights travel
    for label in ("primed", "grpo"):
        assert f"bfcl/{label}/generations/multi_turn_base.jsonl" in names
    second = _script(*run)  # resumes: nothing left to train or generate
    assert "primed in" not in second.stdout and "trained:" not in second.stdout
    assert "already generated, skipped" in second.stdout
    state = json.loads((work / "keep" / "gpu_run.json").read_text())
    assert [c["done"] for c in state["calls"]] == [True, True]
    _script("report", "--archive", str(out / "rl_multi_turn.tar.gz"), "--work", str(tmp_path / "rep"),
            "--out", str(results))
    result = json.loads((results / "rl_multi_turn.json").read_text())
    metrics = [c["metric"] for c in result["comparisons"]]
    assert metrics == ["bfcl_multi_turn_base", "bfcl_multi_turn_miss_func", "bfcl_multi_turn_miss_param",
                       "bfcl_multi_turn_long_context", "own_task_success"]
    for c in result["comparisons"]:
        assert (c["a"], c["b"]) == ("primed", "grpo") and c["ci_low"] <= c["diff"] <= c["ci_high"]
    assert [c["n"] for c in result["comparisons"]] == [1, 1, 1, 1, 2]
    assert result["models"]["grpo"]["own_tasks"] == 2 and not result["incomplete"]
    markdown = (results / "rl_multi_turn.md").read_text()
    assert "| bfcl_multi_turn_base | 1 |" in markdown and "Primed on the mix `default,dependent`" in markdown
    assert 'multi_turn.priming_kinds=["dependent","facts","missing_param","missing_function","multi_request",' \
           '"dependent"]' in markdown


def test_report_command_leaves_the_note_texts_out():
    from benchmarks.gpu import rl_multi_turn_gpu as script

    argv = ["x.py", "report", "--note", "a b", "--work", "w", "--note", "--partial"]
    module = "python -m benchmarks.gpu.rl_multi_turn_gpu"
    assert script.report_command(argv) == f"{module} report --work w --note ... (the notes below)"
    assert script.report_command(["x.py", "report"]) == f"{module} report"
    assert script.module_command(["/host/path/rl_multi_turn_gpu.py", "run", "--work", "w"]) == f"{module} run --work w"


def test_final_reserve_ends_grpo_and_evaluates_in_the_same_call(tmp_path, tiny_model_dir):
    """--final-reserve-s: GRPO far from max_steps stops in time, and the same call selects, evaluates our
    test tasks, merges the selected best/ and generates its BFCL; the next call trains nothing. With
    --primed-bfcl after, the primed model's BFCL waits for training to end (the default, beside, is the
    next test's)."""
    work, out = tmp_path / "work", tmp_path / "out"
    run = ["run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
           "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4", "--bfcl-max-live", "4",
           "--stagger-s", "1", "--variants", "shaped-g8", "--set", "grpo.max_steps=100000",
           "--budget-s", "330", "--final-reserve-s", "150", "--stop-margin-s", "90", "--primed-bfcl", "after"]
    first = _script(*run)
    timings = json.loads((work / "keep" / "gpu_run.json").read_text())["timings"]
    assert timings["primed_bfcl_start_s"] >= timings["train_end_s"] > 60, timings
    assert "GRPO stopped by --final-reserve-s at steps" in first.stdout, first.stdout[-2000:]
    assert "selected on validation success: shaped-g8" in first.stdout
    # the tiny model's flat reward leaves its adapter a no-op: the merge refuses it, BFCL takes the adapter
    assert "merge of shaped-g8/best refused" in first.stdout and "no-op" in (work / "keep" / "merge.log").read_text()
    state = json.loads((work / "keep" / "gpu_run.json").read_text())
    steps = state["grpo_stopped_by_time"]["shaped-g8"]
    assert 1 <= steps < 100000 and set(state["own"]) == {"primed", "grpo"}
    assert (work / "keep" / "bfcl" / "grpo" / "generations" / "multi_turn_base.jsonl").is_file()
    validation = (work / "runs" / "shaped-g8" / "validation.csv").read_text()
    assert "\n0,base," in validation  # the curve's step 0: the variant's start (the primed model) before GRPO
    second = _script(*run)
    assert "trained:" not in second.stdout and "already generated, skipped" in second.stdout
    assert json.loads((work / "keep" / "gpu_run.json").read_text())["calls"][-1]["done"] is True


def test_continue_later_pauses_grpo_for_the_primed_bfcl_and_a_later_call_finishes_it(tmp_path, tiny_model_dir):
    """--continue-later: GRPO short of max_steps at the final reserve is paused, not ended (nothing
    selected, the GRPO model untouched); the reserve goes to the primed model's test tasks and BFCL
    (after training). A later call without the flag resumes GRPO from its checkpoint, then selects and
    evaluates the GRPO model; the primed model's results are kept, not redone."""
    work, out = tmp_path / "work", tmp_path / "out"
    run = ["run", "--work", str(work), "--out", str(out), "--device", "cpu", "--tiny", str(tiny_model_dir),
           "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4", "--bfcl-max-live", "4",
           "--stagger-s", "1", "--variants", "shaped-g8", "--set", "grpo.max_steps=100000",
           "--budget-s", "330", "--final-reserve-s", "150", "--stop-margin-s", "90", "--primed-bfcl", "after"]
    first = _script(*run, "--continue-later")
    assert "GRPO paused at steps" in first.stdout and "selected on validation" not in first.stdout, first.stdout[-2000:]
    state = json.loads((work / "keep" / "gpu_run.json").read_text())
    paused_at = state["grpo_paused_at"][0]["shaped-g8"]
    assert paused_at >= 1 and "grpo_stopped_by_time" not in state and set(state["own"]) == {"primed"}
    assert state["timings"]["primed_bfcl_start_s"] >= state["timings"]["train_end_s"]
    assert (work / "keep" / "bfcl" / "primed" / "timing.json").is_file()
    assert not (work / "keep" / "bfcl" / "grpo").exists() and not (work / "keep" / "selection.json").exists()
    assert state["calls"][-1]["done"] is False
    second = _script(*run)
    assert "own test tasks, primed" not in second.stdout and "selected on validation success: shaped-g8" in second.stdout
    state = json.loads((work / "keep" / "gpu_run.json").read_text())
    assert state["grpo_stopped_by_time"]["shaped-g8"] > paused_at
    assert set(state["own"]) == {"primed", "grpo"} and state["calls"][-1]["done"] is True


def test_a_primed_bfcl_that_failed_beside_grpo_runs_in_the_final_phase(tmp_path, tiny_model_dir, monkeypatch):
    """The primed model's BFCL engine could not start beside the trainer (an H100, 2026-12-05: 8 of 79 GiB
    free): the same call generates it after GRPO, beside the GRPO model's, and ends done."""
    from benchmarks.gpu import bfcl_multi_turn, rl_multi_turn_gpu

    real, calls = bfcl_multi_turn.phase_generate, []

    def first_primed_attempt_fails(models, work, args):
        calls.append([label for label, _ in models])
        if len(calls) == 1:  # the side thread's attempt: the engine died at start, nothing generated
            return None
        return real(models, work, args)

    monkeypatch.setattr(bfcl_multi_turn, "phase_generate", first_primed_attempt_fails)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    work = tmp_path / "work"
    assert rl_multi_turn_gpu.main([
        "run", "--work", str(work), "--out", str(tmp_path / "out"), "--device", "cpu", "--tiny", str(tiny_model_dir),
        "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4", "--bfcl-max-live", "4",
        "--stagger-s", "1", "--variants", "shaped-g8", "--set", "grpo.max_steps=100000",
        "--budget-s", "330", "--final-reserve-s", "150", "--stop-margin-s", "90"]) == 0
    assert calls[0] == ["primed"] and sorted(map(tuple, calls[1:])) == [("grpo",), ("primed",)]
    timings = json.loads((work / "keep" / "gpu_run.json").read_text())["timings"]
    assert timings["primed_bfcl_start_s"] < timings["train_end_s"]  # beside GRPO: it began while training ran
    assert (work / "keep" / "bfcl" / "primed" / "timing.json").is_file()
    assert json.loads((work / "keep" / "gpu_run.json").read_text())["calls"][-1]["done"] is True


def test_carry_and_restore_on_a_fresh_host_extends_the_run(tmp_path, tiny_model_dir):
    """The end of one session: ``carry`` packs the primed model's LoRA and the variant's checkpoint
    into folders one device call each brings back; on a fresh host ``restore --extend`` rebuilds the
    primed model (bit-identical here: same device), puts the checkpoint back and drops the GRPO model's
    evaluation, so the next ``run`` trains on from the checkpoint (no second priming, the primed
    model's results kept) and evaluates the longer run."""
    work, out = tmp_path / "work", tmp_path / "out"
    common = ["--device", "cpu", "--tiny", str(tiny_model_dir), "--variants", "shaped-g8"]
    run = ["run", "--out", str(out), *common, "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4",
           "--bfcl-max-live", "4", "--stop-margin-s", "60", "--stagger-s", "1", "--priming-mix", "default*2"]
    _script(*run, "--work", str(work))
    _script("carry", "--work", str(work), "--to", str(tmp_path / "carry"), "--variants", "shaped-g8")
    stages = sorted((tmp_path / "carry").glob("stage*"))
    assert stages and all(len(list(s.iterdir())) <= 8 and sum(f.stat().st_size for f in s.iterdir()) < 64 << 20
                          for s in stages)
    parts = _carried_parts(tmp_path, out)
    assert {"primed.json", "primed.manifest.json", "shaped-g8.manifest.json"} <= {p.name for p in parts.iterdir()}
    fresh = tmp_path / "fresh"
    restored = _script("restore", "--work", str(fresh), "--parts", str(parts), *common, "--extend",
                       "--set", "grpo.max_steps=2")
    assert "bit-identical to the original" in restored.stdout, restored.stdout
    assert (fresh / "runs" / "shaped-g8" / "checkpoints" / "checkpoint-1" / "trainer_state.json").is_file()
    assert not (fresh / "keep" / "selection.json").exists() and not (fresh / "keep" / "own" / "grpo.jsonl").exists()
    # a later call must prime on the same kinds as the first (here: another mix than its first call's)
    forgot = _script(*run, "--work", str(fresh), "--priming-mix", "default", ok=False)
    assert "this run was primed on" in forgot.stderr, forgot.stderr[-2000:]
    again = _script(*run, "--work", str(fresh), "--set", "grpo.max_steps=2")
    assert "primed in" not in again.stdout and "own test tasks, primed" not in again.stdout
    assert "trained:" in again.stdout and "selected on validation success: shaped-g8" in again.stdout
    assert json.loads((fresh / "runs" / "shaped-g8" / "worker.json").read_text())["step"] == 2
    state = json.loads((fresh / "keep" / "gpu_run.json").read_text())
    assert state["restored"][0]["primed_identical"] is True and set(state["own"]) == {"primed", "grpo"}
    assert state["calls"][-1]["done"] is True


def test_a_run_carried_before_any_evaluation_is_evaluated_in_the_next_session(tmp_path, tiny_model_dir):
    """The next session's chain for an H100 (benchmarks/gpu/SESSIONS.md): the mix chosen by ``priming_mix`` is
    adopted (no second priming); GRPO trains to the call's end with no final reserve (nothing selected or
    evaluated, the primed model's test tasks and BFCL beside it); ``carry``, then on a fresh host
    ``restore`` without --extend and a run with a final reserve: GRPO goes on from the checkpoint, then
    the selection, the GRPO model's test tasks and BFCL, and the primed model's results are kept."""
    from benchmarks.priming_mix import main as priming_mix

    pmix = tmp_path / "pmix"
    assert priming_mix(["--mix", "d=default", "--episodes", "4", "--val-tasks", "2", "--work", str(pmix),
                        "--set", f"model.name={tiny_model_dir}", "--set", "priming.max_steps=1",
                        "--set", "priming.batch_size=2", "--set", "priming.max_length=4096"]) == 0
    work, out = tmp_path / "work", tmp_path / "out"
    common = ["--device", "cpu", "--tiny", str(tiny_model_dir), "--variants", "shaped-g8-fp32-charge"]
    run = ["run", "--out", str(out), *common, "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4",
           "--bfcl-max-live", "4", "--stagger-s", "1", "--priming-mix", "default", "--set", "grpo.max_steps=100000"]
    first = _script(*run, "--work", str(work), "--primed-from", str(pmix / "d"), "--final-reserve-s", "0",
                    "--budget-s", "240", "--stop-margin-s", "90")
    assert "primed model from" in first.stdout and "primed in" not in first.stdout, first.stdout[-2000:]
    assert "trained:" in first.stdout and "selected on validation" not in first.stdout
    state = json.loads((work / "keep" / "gpu_run.json").read_text())
    assert state["primed_from"]["mix"] == "d" and "grpo_stopped_by_time" not in state and "primed" in state["own"]
    worker = json.loads((work / "runs" / "shaped-g8-fp32-charge" / "worker.json").read_text())
    assert worker["step"] >= 1 and not worker.get("finished")
    _script("carry", "--work", str(work), "--to", str(tmp_path / "carry"), "--variants", "shaped-g8-fp32-charge")
    parts = _carried_parts(tmp_path, out)
    fresh = tmp_path / "fresh"
    restored = _script("restore", "--work", str(fresh), "--parts", str(parts), *common)
    assert "bit-identical to the original" in restored.stdout and "extending" not in restored.stdout
    again = _script(*run, "--work", str(fresh), "--final-reserve-s", "150", "--budget-s", "330", "--stop-margin-s", "90")
    assert "primed in" not in again.stdout and "own test tasks, primed" not in again.stdout
    assert "trained:" in again.stdout and "selected on validation success: shaped-g8-fp32-charge" in again.stdout
    assert json.loads((fresh / "runs" / "shaped-g8-fp32-charge" / "worker.json").read_text())["step"] > worker["step"]
    state = json.loads((fresh / "keep" / "gpu_run.json").read_text())
    assert set(state["own"]) == {"primed", "grpo"} and state["calls"][-1]["done"] is True
    assert state["priming_mix"] == "default" and state["primed_from"]["mix"] == "d"


def test_a_grpo_bfcl_cut_by_the_deadline_is_finished_in_the_next_session(tmp_path, tiny_model_dir):
    """Run 6 part B's fallback (a session too short for the GRPO model's whole BFCL): the run was
    selected and our test tasks evaluated, but the GRPO model's BFCL generation was killed at the
    call's deadline. ``carry``, ``restore`` without --extend and the same ``run`` on a fresh host
    train nothing, keep the selection and both models' test rows, merge the selected best/ again
    and generate the GRPO model's missing BFCL entries. The cut is made here by removing what a
    killed generation would not have written (its timing.json and its entries)."""
    from benchmarks.gpu import bfcl_multi_turn as bmt
    from benchmarks.gpu.rl_multi_turn_gpu import ARCHIVE_SUFFIXES

    work, out = tmp_path / "work", tmp_path / "out"
    common = ["--device", "cpu", "--tiny", str(tiny_model_dir), "--variants", "shaped-g8"]
    run = ["run", "--out", str(out), *common, "--own-tasks", "2", "--bfcl-limit", "1", "--bfcl-max-new-tokens", "4",
           "--bfcl-max-live", "4", "--stop-margin-s", "60", "--stagger-s", "1", "--priming-mix", "default*2"]
    _script(*run, "--work", str(work))
    keep = work / "keep"
    selection = (keep / "selection.json").read_text()
    own_grpo = (keep / "own" / "grpo.jsonl").read_text()
    (keep / "bfcl" / "grpo" / "timing.json").unlink()
    generations = sorted((keep / "bfcl" / "grpo" / "generations").glob("*.jsonl"))
    assert generations and all(path.read_text().strip() for path in generations)
    for path in generations:
        path.write_text("")
    state = json.loads((keep / "gpu_run.json").read_text())
    state["calls"][-1]["done"] = False
    (keep / "gpu_run.json").write_text(json.dumps(state, indent=2))
    bmt.pack(keep, out / "rl_multi_turn.tar.gz", ARCHIVE_SUFFIXES)  # as the run packs it
    _script("carry", "--work", str(work), "--to", str(tmp_path / "carry"), "--variants", "shaped-g8")
    parts = _carried_parts(tmp_path, out)
    fresh = tmp_path / "fresh"
    _script("restore", "--work", str(fresh), "--parts", str(parts), *common)
    again = _script(*run, "--work", str(fresh))
    assert "trained:" not in again.stdout and "selected on validation" not in again.stdout, again.stdout[-2000:]
    assert "own test tasks" not in again.stdout
    fresh_keep = fresh / "keep"
    assert (fresh_keep / "selection.json").read_text() == selection
    assert (fresh_keep / "own" / "grpo.jsonl").read_text() == own_grpo
    assert (fresh_keep / "bfcl" / "grpo" / "timing.json").is_file()
    for path in generations:
        assert (fresh_keep / "bfcl" / "grpo" / "generations" / path.name).read_text().strip(), path.name
    assert json.loads((fresh_keep / "gpu_run.json").read_text())["calls"][-1]["done"] is True
