"""benchmarks/gpu/grpo_throughput.py: the timing arithmetic, the tables, the variants' configs, and
(harness, ``pytest -m gpu_harness``) one variant end to end on CPU with the tiny model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.gpu import grpo_throughput as tp


def test_summarize_times_whole_rounds_after_the_warm_up():
    # 2 steps a round; warm-up round = steps 1-2; steps 3-6 are two timed rounds of 8 completions
    ends = [10.0, 11.0, 13.0, 15.0, 16.0, 19.0, 25.0]  # step 7 starts a third round, not finished
    generation = [{"seconds": 9.0}, {"seconds": 1.5}, {"seconds": 2.5}, {"seconds": 4.0}]
    row = tp.summarize(ends, [3.0, 7.5, 5.0], generation, spr=2, warmup_rounds=1, round_size=8)
    assert row["steps"] == 4 and row["completions"] == 16
    assert row["completions_per_s"] == round(16 / (19.0 - 11.0), 2)
    assert row["generation_share"] == round((1.5 + 2.5) / 8.0, 3)  # the warm-up round's 9 s left out
    assert row["generation_s_per_round"] == 2.0 and row["peak_gib"] == 7.5
    assert row["seconds_per_step"] == 2.0
    assert row["round_s"] == [4.0, 4.0]  # steps 3-4 (11 -> 15 s) and 5-6 (15 -> 19 s)


def test_summarize_refuses_a_run_shorter_than_one_timed_round():
    with pytest.raises(RuntimeError, match="at least 4"):
        tp.summarize([1.0, 2.0, 3.0], [], [], spr=2, warmup_rounds=1, round_size=8)


def test_ratios_are_against_the_baseline_of_the_same_run_only():
    rows = [{"path": "trl_generate", "completions_per_s": 40.0},
            {"path": "vllm", "completions_per_s": 100.0},
            {"path": "vllm_mb64", "error": "OOM"}]
    out = tp.with_ratios(rows)
    assert out[1]["ratio"] == 2.5 and out[1]["baseline_path"] == "trl_generate"
    assert "ratio" not in out[0] and "ratio" not in out[2]
    alone = tp.with_ratios([{"path": "vllm", "completions_per_s": 100.0}])
    assert "ratio" not in alone[0]  # no baseline measured in this run: no ratio made up
    two = tp.with_ratios([{"path": "trl_generate", "completions_per_s": 20.0, "run": "a"},
                          {"path": "vllm", "completions_per_s": 60.0, "run": "a"},
                          {"path": "vllm", "completions_per_s": 90.0, "run": "b"}])
    assert two[1]["ratio"] == 3.0 and "ratio" not in two[2]  # run b measured no baseline
    repeat = tp.with_ratios([{"path": "trl_generate", "completions_per_s": 20.0},
                             {"path": "trl_generate", "completions_per_s": 22.0},  # a later call's repeat
                             {"path": "vllm", "completions_per_s": 66.0}])
    assert "ratio" not in repeat[1] and repeat[2]["ratio"] == 3.3  # against the run's first baseline row


def test_report_merges_labelled_runs(tmp_path):
    row = {"what": "w", "generation_share": 0.5, "seconds_per_step": 1.0, "generation_s_per_round": 2.0,
           "peak_gib": 9.0, "steps": 24}
    for name, rows in (("a", [{"path": "trl_generate", "completions_per_s": 20.0, **row},
                              {"path": "vllm", "completions_per_s": 50.0, **row}]),
                       ("b", [{"path": "trl_generate", "completions_per_s": 25.0, **row},
                              {"path": "vllm", "completions_per_s": 75.0, **row},
                              {"path": "vllm_mb64", "what": "w", "error": "not started (5 s left)"}])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"rows": rows, "command": name}))
    tp.main(["report", "--rows", f"{tmp_path / 'a.json'}=first", "--rows", f"{tmp_path / 'b.json'}=second",
             "--out", str(tmp_path / "out"), "--command", "the commands"])
    data = json.loads((tmp_path / "out" / "grpo_throughput.json").read_text())
    assert [(r["run"], r["path"], r.get("ratio")) for r in data["rows"]] == [
        ("first", "trl_generate", None), ("first", "vllm", 2.5), ("second", "trl_generate", None),
        ("second", "vllm", 3.0)]  # the unstarted path of run b is left out
    md = (tmp_path / "out" / "grpo_throughput.md").read_text()
    assert "| second | vllm | 75.0 | 3.0 |" in md and "the commands" in md


def test_report_adds_model_shapes_rows_against_their_own_baseline(tmp_path):
    """Rows of the Qwen3-8B-shapes harness join the table under their run label, with a model column,
    and their ratio is against that model's default path, never the embedded model's."""
    row = {"what": "w", "generation_share": 0.5, "seconds_per_step": 1.0, "generation_s_per_round": 2.0,
           "peak_gib": 9.0, "steps": 24, "model": "embedded"}
    (tmp_path / "e.json").write_text(json.dumps({"rows": [
        {"path": "trl_generate", "completions_per_s": 20.0, **row},
        {"path": "vllm", "completions_per_s": 50.0, **row}]}))
    shaped = {"job": "", "status": "ok", "note": "n", "s_per_step": 4.0, "gen_s_per_step": 2.0,
              "peak_reserved_gib": 50.0, "timed_steps": 2, "mean_completion_tokens": 256.0}
    (tmp_path / "s.json").write_text(json.dumps({"meta": {"shapes": "qwen3-8b"}, "rows": [
        {**shaped, "job": "unsloth_merged_gen_batch64", "completions_per_s": 6.0},
        {**shaped, "job": "peft_vllm_gen_batch64", "completions_per_s": 3.0},
        {**shaped, "job": "peft_vllm_gen_batch128", "status": "error", "error": "OOM"}]}))
    tp.main(["report", "--rows", f"{tmp_path / 'e.json'}=4", "--shapes-rows", f"{tmp_path / 's.json'}=4",
             "--out", str(tmp_path / "out"), "--command", "c", "--note", "n"])
    data = json.loads((tmp_path / "out" / "grpo_throughput.json").read_text())
    assert [(r["model"], r["path"], r.get("baseline_path"), r.get("ratio")) for r in data["rows"]] == [
        ("embedded", "trl_generate", None, None), ("embedded", "vllm", "trl_generate", 2.5),
        ("qwen3-8b shapes", "unsloth_merged_gen_batch64", None, None),
        ("qwen3-8b shapes", "peft_vllm_gen_batch64", "unsloth_merged_gen_batch64", 0.5),
        ("qwen3-8b shapes", "peft_vllm_gen_batch128", None, None)]
    assert data["rows"][3]["generation_share"] == 0.5 and data["rows"][4]["error"] == "OOM"
    md = (tmp_path / "out" / "grpo_throughput.md").read_text()
    assert "| 4 | qwen3-8b shapes | peft_vllm_gen_batch64 | 3.0 | 0.5 | 50% | 4.0 |  | 50.0 | 2 |  | 256.0 |" in md


def test_tables_keep_failed_rows_and_the_command(tmp_path):
    rows = [{"path": "trl_generate", "what": "x", "completions_per_s": 40.0, "generation_share": 0.6,
             "seconds_per_step": 1.6, "generation_s_per_round": 8.0, "peak_gib": 16.0, "steps": 24},
            {"path": "vllm", "what": "y", "error": "ImportError: no vllm"}]
    tp.write_tables(rows, tmp_path, "python -m benchmarks.gpu.grpo_throughput run --out $OUT")
    md = (tmp_path / "grpo_throughput.md").read_text()
    assert "| trl_generate | 40.0 |" in md and "failed: ImportError: no vllm" in md
    assert "python -m benchmarks.gpu.grpo_throughput run" in md
    data = json.loads((tmp_path / "grpo_throughput.json").read_text())
    assert [r["path"] for r in data["rows"]] == ["trl_generate", "vllm"]
    header = (tmp_path / "grpo_throughput.csv").read_text().splitlines()[0].split(",")
    assert header[:8] == ["model", "path", "completions_per_s", "generation_share", "peak_gib", "steps",
                          "baseline_path", "ratio"]


@pytest.mark.parametrize("variant", sorted(tp.VARIANTS))
def test_every_variant_is_a_valid_run_with_whole_rounds(variant):
    from toolrl_lib.train.config import load_run_config

    what, overrides = tp.VARIANTS[variant]
    config = load_run_config(tp.CONFIG, [*tp.common_overrides(tp.ROUND, 32), *overrides])
    assert config.grpo.generation_batch_size == 512 and config.grpo.num_generations == 8
    assert config.grpo.max_completion_length == 128 and not config.priming.enabled
    assert tp.steps_per_round(config) * config.grpo.per_device_train_batch_size \
        * config.grpo.gradient_accumulation_steps == 512
    assert config.grpo.vllm.on == ("vllm" in variant)


def test_the_sampler_path_without_the_overlap_differs_from_its_twin_in_the_overlap_alone():
    """The diagnostic row that splits a round into the engine's time and the trainer's: the same config as the
    overlapped sampler path but for fast.overlap_generation."""
    from dataclasses import asdict

    from toolrl_lib.train.config import load_run_config

    def config(variant: str) -> dict:
        return asdict(load_run_config(tp.CONFIG, [*tp.common_overrides(tp.ROUND, 32), *tp.VARIANTS[variant][1]]))

    apart = config("vllm_fast_shared_fused_engine_graphs_sampler")
    overlapped = config("vllm_fast_shared_fused_engine_overlap_graphs_sampler")
    assert not apart["fast"]["overlap_generation"] and overlapped["fast"]["overlap_generation"]
    apart["fast"]["overlap_generation"] = True
    assert apart == overlapped
    assert apart["fast"]["generation_process"] and apart["fast"]["sampler_logps"] and apart["fast"]["cuda_graphs"]


def test_the_documented_fastest_recipe_is_the_measured_variant():
    """docs/SCALING.md's `toolrl train` recipe loads to the config of the variant it quotes (run 10's
    vllm_fast_shared_fused_engine_overlap_graphs_r64), the benchmark's own settings aside."""
    import re
    from dataclasses import asdict

    from toolrl_lib.train.config import load_run_config

    text = (Path(__file__).resolve().parents[1] / "docs" / "SCALING.md").read_text()
    recipe = re.search(r"```bash\n(toolrl train --config configs/embedded_gpu\.yaml .*?)```", text, re.S).group(1)
    documented = load_run_config(tp.CONFIG, re.findall(r"--set (\S+)", recipe))
    measured = load_run_config(tp.CONFIG, [*tp.VARIANTS["vllm_fast_shared_fused_engine_overlap_graphs_r64"][1],
                                           f"grpo.generation_batch_size={tp.ROUND}"])
    assert documented.fast.cuda_graphs and documented.fast.round_logprob_rows == 64
    assert asdict(documented) == asdict(measured)


def test_a_round_that_is_not_whole_steps_is_refused():
    from toolrl_lib.train.config import load_run_config

    config = load_run_config(tp.CONFIG, [*tp.common_overrides(96, 1), "grpo.per_device_train_batch_size=64",
                                         "grpo.gradient_accumulation_steps=1"], check=False)
    with pytest.raises(ValueError, match="not a whole number"):
        tp.steps_per_round(config)


def test_an_unknown_variant_stops_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit, match="unknown variant"):
        tp.main(["run", "--out", str(tmp_path), "--variants", "trl_generate,warp_drive", "--budget-s", "0"])


@pytest.mark.gpu_harness
@pytest.mark.slow
def test_one_variant_end_to_end_on_cpu(tmp_path, tiny_model_dir):
    """The worker's whole path on CPU: train through toolrl_lib, clock the steps, one row (step 3
    profiled, step 4's Python stacks sampled); a vLLM variant on this box is a row with the one-line missing-vLLM error, and the run
    goes on."""
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples

    write_jsonl(generate_examples(32, seed=1), tmp_path / "train.jsonl")
    sets = [f"data.train_files=[{tmp_path / 'train.jsonl'}]", f"model.name={tiny_model_dir}",
            "model.family=hermes", "model.dtype=fp32", "grpo.per_device_train_batch_size=8",
            "grpo.gradient_accumulation_steps=1", "grpo.max_completion_length=8"]
    rc = tp.main(["run", "--out", str(tmp_path / "out"), "--device", "cpu", "--variants", "trl_generate,vllm",
                  "--round", "16", "--rounds", "1", "--warmup-rounds", "1", "--budget-s", "300",
                  "--min-start-s", "0", "--profile-steps", "3", "--sample-steps", "4",
                  *(f"--set={s}" for s in sets)])
    rows = json.loads((tmp_path / "out" / "grpo_throughput.json").read_text())["rows"]
    profiled = [json.loads(line) for line in (tmp_path / "out" / "profile" / "trl_generate.jsonl").open()]
    assert [(p.get("kind"), p["first"], p["last"]) for p in profiled] == [(None, 3, 3), ("stacks", 4, 4)]
    assert rows[0]["profiled_steps"] == "3;4" and profiled[1]["samples"] > 0
    assert (tmp_path / "out" / "profile" / "trl_generate_steps4-4_stacks.collapsed").stat().st_size > 0
    assert rc == 0 and [r["path"] for r in rows] == ["trl_generate", "vllm"]
    assert "error" not in rows[0], rows[0]
    assert rows[0]["steps"] == 2 and rows[0]["completions"] == 16 and rows[0]["completions_per_s"] > 0
    assert 0 < rows[0]["generation_share"] < 1
    assert "vLLM" in rows[1]["error"] and "ratio" not in rows[1]


def _fake_mps_control(folder, tmp_path):
    """A stand-in ``nvidia-cuda-mps-control`` on PATH that logs its arguments and its stdin."""
    import os
    import stat

    folder.mkdir()
    script = folder / "nvidia-cuda-mps-control"
    script.write_text(f'#!/bin/sh\necho "args:$*" >> {tmp_path}/mps.log\n'
                      f'[ "$1" = -d ] || {{ read line; echo "stdin:$line" >> {tmp_path}/mps.log; }}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{folder}:/usr/bin:/bin"}


def test_an_mps_variant_runs_its_command_as_a_client_of_its_own_server_then_stops_it(tmp_path):
    import subprocess

    env = _fake_mps_control(tmp_path / "bin", tmp_path)
    deep = tmp_path / ("m" * 120)  # a log folder deeper than a socket path may be
    command = tp.under_mps(["sh", "-c", 'echo "pipe=$CUDA_MPS_PIPE_DIRECTORY"; exit 3'], deep)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 3  # the command's own exit status
    pipe = Path(done.stdout.strip().removeprefix("pipe="))
    # a private server (no other process is its client) whose sockets fit a Unix socket path
    assert pipe.parent == Path("/tmp") and pipe.name.startswith("mps.")
    assert len(str(pipe / "control_privileged")) < 108 and not pipe.exists()  # removed after
    assert (tmp_path / "mps.log").read_text().splitlines() == ["args:-d", "args:", "stdin:quit"]
    assert (deep / "log").is_dir()


def test_an_mps_job_ended_by_a_timeouts_term_still_stops_its_server(tmp_path):
    import os
    import signal
    import subprocess
    import time

    env = _fake_mps_control(tmp_path / "bin", tmp_path)
    job = subprocess.Popen(tp.under_mps(["sleep", "30"], tmp_path / "m"), env=env, start_new_session=True)
    deadline = time.time() + 10
    while not (tmp_path / "mps.log").is_file() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    os.killpg(job.pid, signal.SIGTERM)  # as GNU timeout signals the command's process group
    assert job.wait(timeout=10) == 143
    assert (tmp_path / "mps.log").read_text().splitlines() == ["args:-d", "args:", "stdin:quit"]


def test_a_split_mps_variant_caps_the_trainer_in_its_environment_and_the_engine_in_its_config(tmp_path):
    """``*_mps_e<E>t<T>``: the worker runs under its own MPS server with the trainer's cap in its
    environment (seen by the command, not by the daemon), and its config caps the engine process."""
    import subprocess

    from toolrl_lib.train.config import load_run_config

    variant = "vllm_fast_shared_fused_engine_overlap_graphs_sampler_mps_e30t70"
    env = _fake_mps_control(tmp_path / "bin", tmp_path)
    command = tp.variant_command(variant, [], tmp_path / "o")
    worker = command.index(sys.executable)
    assert command[worker - 2:worker] == ["env", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=70"]
    shown = [*command[:worker], "sh", "-c", 'echo "cap=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"']
    done = subprocess.run(shown, env={k: v for k, v in env.items() if not k.startswith("CUDA_MPS_ACTIVE")},
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "cap=70"
    overrides = tp.VARIANTS[variant][1]
    assert overrides[:-1] == tp.VARIANTS["vllm_fast_shared_fused_engine_overlap_graphs_sampler"][1]
    config = load_run_config("configs/embedded_gpu.yaml", ["device=cuda", *overrides])
    assert config.fast.engine_sm_percent == 30 and config.fast.generation_process
    assert tp.variant_command("vllm_fast_shared_fused_engine_overlap_graphs_sampler_mps", [], tmp_path)[4:6] == [
        str(tmp_path / "mps" / "vllm_fast_shared_fused_engine_overlap_graphs_sampler_mps"), sys.executable]


def test_an_mps_variant_on_a_host_without_mps_is_a_row_saying_so(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-cuda-mps-control there on a CI box
    if shutil.which("nvidia-cuda-mps-control"):
        pytest.skip("this host has MPS")
    tp.main(["run", "--out", str(tmp_path), "--variants", "vllm_fast_shared_fused_engine_overlap_mps",
             "--budget-s", "60", "--min-start-s", "1"])
    row = json.loads((tmp_path / "grpo_throughput.json").read_text())["rows"][0]
    assert row["path"] == "vllm_fast_shared_fused_engine_overlap_mps"
    assert "exit 97" in row["error"] and "nvidia-cuda-mps-control is not on this host's PATH" in row["error"]
