"""What logging one step to ``metrics.csv`` costs the trainer's host, as a run grows (CPU).

``MetricsCSVCallback`` logs every optimizer step (``logging.logging_steps: 1``). It used to
rewrite the whole file each time, so a step's cost grew with the run: fine for the 40 steps of a
throughput call, not for the long GRPO runs that fast rollouts make possible, where a GPU step of
the embedded model takes ~0.2-0.3 s (``benchmarks/results/grpo_throughput.md``). The callback now
appends the step's line and rewrites only when a column first appears. This times both at a
given length of run, side by side: the rewrite of ``rows`` rows against one appended line, with a
header of ``columns`` (the GPU runs log ~48).

    python -m benchmarks.metrics_csv --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.result_files import write_result
from toolrl_lib.train.callbacks import append_csv_row, write_csv_rows


def fake_rows(count: int, columns: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` logged steps with ``columns`` float metrics each, as the trainer logs them."""
    rng = random.Random(seed)
    return [{"step": step, "epoch": step / 100, **{f"metric/{i}": rng.random() for i in range(columns)}}
            for step in range(1, count + 1)]


def time_one(rows: list[dict[str, Any]], folder: Path, repeats: int) -> dict[str, float]:
    """Median milliseconds of the rewrite of ``rows`` and of appending their last row."""
    path = folder / "metrics.csv"
    rewrite, append = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        columns = write_csv_rows(path, rows)
        rewrite.append(time.perf_counter() - start)
        start = time.perf_counter()
        append_csv_row(path, columns, rows[-1])
        append.append(time.perf_counter() - start)
    return {"rewrite_ms": round(1000 * statistics.median(rewrite), 3),
            "append_ms": round(1000 * statistics.median(append), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", default="100,500,1000,2000", help="run lengths (logged steps)")
    parser.add_argument("--columns", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for count in (int(n) for n in args.rows.split(",")):
            figures = time_one(fake_rows(count, args.columns), Path(folder), args.repeats)
            results.append({"rows": count, "columns": args.columns + 2, **figures,
                            "ratio": round(figures["rewrite_ms"] / max(figures["append_ms"], 1e-6), 1)})
            print(json.dumps(results[-1]), flush=True)
    command = f"python -m benchmarks.metrics_csv --out {args.out} --rows {args.rows} --columns {args.columns}"
    table = ["| logged steps so far | columns | rewrite the file (ms) | append one line (ms) | rewrite / append |",
             "| --- | --- | --- | --- | --- |"]
    table += [f"| {r['rows']} | {r['columns']} | {r['rewrite_ms']} | {r['append_ms']} | {r['ratio']} |" for r in results]
    write_result(args.out, "metrics_csv", {"rows": results, "command": command}, table,
                 "Median of the repeats, one process on this machine's CPU. What one logged step costs the "
                 "trainer's host in `MetricsCSVCallback.on_log`: before, the whole file rewritten; now one line "
                 "appended (the whole file only when a column first appears or a step is logged again).", command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
