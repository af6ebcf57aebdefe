"""Loader fuzz benchmark: N hostile raw rows per loader through ``prepare`` (goal: 0 escapes).

For each loader (xLAM, ToolACE, BFCL, parquet-format rows as JSON lines) ``--rows`` rows are
drawn from ``tests.fixtures.hostile`` (every spoiling kind, equally often, random payloads
and cut points; the first row of each chunk is good), written in chunks of ``--chunk`` rows
(one JSON-lines file and one ``prepare`` call each; dedup and the contamination check off:
the loaders are what is measured) and checked with ``check_prepared``: an escape is an
exception out of ``prepare``, a problem is a broken per-row invariant (see that module).
Timed: ``prepare`` only (writing the files and checking are not).

    nice -n 19 .venv/bin/python -m benchmarks.loader_fuzz --rows 100000

writes benchmarks/results/loader_fuzz.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.fixtures.hostile import KINDS, LOADERS, check_prepared, good_rows, make_row, write_rows
from toolrl_lib.data.pipeline import prepare

RESULTS = Path(__file__).resolve().parent / "results"
ALPHABET = "[]{}()\"'\\,:;= \t\x00\x01\x1b\x7f\x85\u2028\u2029\ufeffaZ09_.<>/é漢\U0001F600"
TOKENS = ["NaN", "Infinity", "<tool_call>", "</tool_call>", "[f(a=1", '{"name": ', "\\u", "1e999"]


def payload(rng: random.Random) -> str:
    """Short random text from a hostile alphabet, sometimes with hostile tokens."""
    parts = [rng.choice(ALPHABET) for _ in range(rng.randint(0, 24))]
    if rng.random() < 0.3:
        parts.insert(rng.randint(0, len(parts)), rng.choice(TOKENS))
    return "".join(parts)


def run_loader(loader: str, rows: int, chunk: int, seed: int, work: Path) -> dict:
    rng = random.Random(f"{seed}:{loader}")
    bases = good_rows(loader, 200, seed=seed)
    name = "BFCL_v4_exec_simple.json" if loader == "bfcl" else "rows.jsonl"
    stats = {"loader": loader, "rows": 0, "escapes": 0, "problems": 0, "kept_rows": 0,
             "seconds": 0.0, "kinds": Counter(), "reasons": Counter(), "examples": []}
    done = 0
    while done < rows:
        size = min(chunk, rows - done)
        batch = [make_row(loader, "good", bases[0])]
        for _ in range(size - 1):
            kind = rng.choice(KINDS)
            batch.append(make_row(loader, kind, rng.choice(bases), payload(rng),
                                  rng.randrange(10**6)))
        stats["kinds"].update(row.kind for row in batch)
        folder = work / f"{loader}-{done}"
        folder.mkdir()
        path = write_rows(batch, folder / name)
        started = time.perf_counter()
        try:
            report = prepare(loader, path, folder / "out", contamination=False, dedup=False,
                             val_fraction=0.0)
        except Exception as error:  # noqa: BLE001 - counting escapes is the point
            stats["escapes"] += 1
            stats["examples"].append(f"escape in chunk {done}: {type(error).__name__}: "
                                     f"{str(error)[:200]}")
            done += size
            continue
        stats["seconds"] += time.perf_counter() - started
        stats["reasons"].update(report.dropped)
        problems = check_prepared(batch, name, folder / "out")
        stats["problems"] += len(problems)
        stats["examples"] += problems[: max(0, 5 - len(stats["examples"]))]
        stats["kept_rows"] += len({line for line in _kept_rows(folder / "out")})
        stats["rows"] += size
        done += size
        for file in sorted(folder.rglob("*"), reverse=True):
            file.unlink() if file.is_file() else file.rmdir()
        folder.rmdir()
    stats["rows_per_second"] = round(stats["rows"] / stats["seconds"]) if stats["seconds"] else 0
    stats["seconds"] = round(stats["seconds"], 2)
    stats["kinds"] = dict(sorted(stats["kinds"].items()))
    stats["reasons"] = dict(sorted(stats["reasons"].items()))
    return stats


def _kept_rows(out: Path) -> set[str]:
    rows = set()
    with (out / "train.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            rows.add(json.loads(line)["meta"]["row"])
    return rows


def write_results(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "loader_fuzz.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# Loader fuzz benchmark",
        "",
        f"Command: `{result['command']}` ({result['date']}, {result['cpus']} usable CPU cores, "
        f"Python {result['python']}; the box was shared with other jobs, so rows/s is a floor).",
        "",
        f"{result['rows_per_loader']:,} hostile rows per loader in chunks of {result['chunk']:,} "
        "(one JSON-lines file and one `prepare` call per chunk; every kind of "
        "`tests.fixtures.hostile.KINDS` equally often; dedup and contamination off).",
        "",
        "| loader | rows | escapes | invariant problems | rows kept | prepare (s) | rows/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result["loaders"]:
        lines.append(f"| {s['loader']} | {s['rows']:,} | {s['escapes']} | {s['problems']} | "
                     f"{s['kept_rows']:,} | {s['seconds']} | {s['rows_per_second']:,} |")
    lines += ["", "Drop reasons seen:", "", "| loader | reasons (drop records) |", "|---|---|"]
    for s in result["loaders"]:
        lines.append(f"| {s['loader']} | {', '.join(f'{k} {v:,}' for k, v in s['reasons'].items())} |")
    problems = [e for s in result["loaders"] for e in s["examples"]]
    if problems:
        lines += ["", "First problems:", "", *[f"- {p}" for p in problems[:10]]]
    (out / "loader_fuzz.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="hostile rows per loader")
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    loaders = []
    with tempfile.TemporaryDirectory() as tmp:
        for loader in args.loaders.split(","):
            stats = run_loader(loader, args.rows, args.chunk, args.seed, Path(tmp))
            print(json.dumps({k: v for k, v in stats.items() if k != "kinds"}), flush=True)
            loaders.append(stats)
    result = {
        "rows_per_loader": args.rows, "chunk": args.chunk, "seed": args.seed,
        "loaders": loaders,
        "escapes": sum(s["escapes"] for s in loaders),
        "problems": sum(s["problems"] for s in loaders),
        "cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
        "command": "nice -n 19 .venv/bin/python -m benchmarks.loader_fuzz "
                   + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_results(result, args.out)
    return 0 if result["escapes"] == 0 and result["problems"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
