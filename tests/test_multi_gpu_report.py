"""benchmarks/gpu/multi_gpu.py's reading and reporting on hand-made run directories (no GPU):
steady-state means leave the warm-up step out, per-rank rounds become the straggler and
decode-step columns, and the ratio compares the two runs. Harness tests: ``pytest -m gpu_harness``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks.gpu import multi_gpu
from toolrl_lib.fast.gen_timing import timing_file

pytestmark = pytest.mark.gpu_harness


def fake_run(run_dir: Path, step_times: list[float], rounds: dict[int, list[tuple[int, float, int]]],
             global_batch: int) -> None:
    run_dir.mkdir(parents=True)
    with (run_dir / "metrics.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["step", "reward", "step_time"])
        writer.writeheader()
        for i, t in enumerate(step_times):
            writer.writerow({"step": i + 1, "reward": -0.5 + 0.1 * i, "step_time": t})
    for rank, rows in rounds.items():
        timing_file(run_dir, rank).write_text("".join(
            json.dumps({"rank": rank, "step": step, "seconds": seconds, "completions": 32,
                        "longest": longest}) + "\n" for step, seconds, longest in rows))
    (run_dir / "run_info.json").write_text(json.dumps({"global_batch": global_batch}))
    (run_dir / "last").mkdir()


def test_read_run_leaves_warmup_out_and_summarises_rounds(tmp_path):
    # rank 1 is slower in step 1: 3.0 s vs 1.0 s -> wait 1.0 s; step 0 (warm-up) is left out
    fake_run(tmp_path / "ddp2", [9.0, 4.0, 6.0],
             {0: [(0, 5.0, 64), (1, 1.0, 20), (2, 2.0, 64)], 1: [(0, 5.0, 64), (1, 3.0, 64), (2, 2.0, 64)]},
             global_batch=64)
    run = multi_gpu.read_run(tmp_path / "ddp2", warmup=1)
    assert run["steps"] == 3 and run["mean_step_s"] == 5.0 and run["last_saved"]
    assert run["gen_slowest_s"] == 2.5 and run["gen_wait_s"] == 0.5  # (3.0 + 2.0) / 2, (1.0 + 0) / 2
    # steady rounds: 4 rounds, longest 20 + 64 * 3 = 212 tokens, 8.0 s
    assert run["decode"] == {"rounds": 4, "mean_longest": 53.0, "ms_per_decode_step": round(8000 / 212, 2)}


def test_write_results_reports_ratio_and_decode_column(tmp_path):
    runs = []
    for name, gpus, times in (("1gpu", 1, [9.0, 8.0, 8.0]), ("ddp2", 2, [5.0, 4.0, 4.0])):
        fake_run(tmp_path / name, times, {r: [(s, 1.0, 64) for s in range(3)] for r in range(gpus)},
                 global_batch=64)
        row = {"run": name, "gpus": gpus, "exit_code": 0, "wall_s": 30.0, "peak_gpu_mib": {"0": 1}}
        row.update(multi_gpu.read_run(tmp_path / name, warmup=1))
        row["completions_per_s"] = round(64 / row["mean_step_s"], 2)
        runs.append(row)
    results = {"gpu": "test", "global_batch": 64, "seed": 0, "args": {"micro_batch": 32}, "runs": runs}
    (tmp_path / "out").mkdir()
    multi_gpu.write_results(tmp_path / "out", results)
    saved = json.loads((tmp_path / "out" / "multi_gpu.json").read_text())
    assert saved["throughput_ratio_2gpu_vs_1gpu"] == 2.0
    table = (tmp_path / "out" / "multi_gpu.md").read_text()
    assert "| ddp2 | 2 | 0 | 30.0 | 3 | 4.0 | 16.0 | 1.0 | 0.0 | 4 / 64.0 / 15.62 |" in table
    assert "ratio 2-GPU/1-GPU completions/s: 2.0" in table
    header = next(csv.reader((tmp_path / "out" / "multi_gpu.csv").open()))
    assert "decode" in header
