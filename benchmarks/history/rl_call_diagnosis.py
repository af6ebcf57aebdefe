"""Why accuracy when called did not rise (issue 18): transitions primed -> GRPO on non-live AST,
BFCL error types among the calls, and the GRPO signal per prompt kind.

    python -m benchmarks.history.rl_call_diagnosis --work runs/rl_single_turn --out benchmarks/results

Reads the scored BFCL folders (work/bfcl/<label>/entries.csv, as the single-turn report leaves
them) and every run's metrics.csv; writes rl_single_turn_diagnosis.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.history import call_diagnosis as cd
from toolrl_lib.evaluate.analysis import load_entries


def markdown_table(frame, digits: int = 3) -> str:
    """A DataFrame as a markdown table (index first; floats rounded)."""
    def cell(value):
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    head = [str(frame.index.name or "")] + [str(c) for c in frame.columns]
    rows = [[str(i)] + [cell(v) for v in row] for i, row in zip(frame.index, frame.itertuples(index=False), strict=True)]
    return "\n".join("| " + " | ".join(r) + " |" for r in [head, ["---"] * len(head), *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/rl_single_turn"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--tag", default="", help="name the files rl_single_turn_<tag>_diagnosis")
    args = parser.parse_args(argv)
    entries = {d.name: load_entries(d).assign(model=d.name) for d in sorted((args.work / "bfcl").iterdir())
               if (d / "entries.csv").is_file()}
    metrics = {r.name: r / "metrics.csv" for r in sorted((args.work / "runs").iterdir())
               if (r / "metrics.csv").is_file()}
    result = cd.diagnosis(entries, metrics)
    command = "python -m benchmarks.history.rl_call_diagnosis " + " ".join(argv if argv is not None else sys.argv[1:])
    result["command"] = command
    name = f"rl_single_turn_{args.tag}_diagnosis" if args.tag else "rl_single_turn_diagnosis"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2, default=float))
    table = cd.transitions(entries["primed"], entries["grpo"])
    lines = ["# Why accuracy when called did not rise (issue 18)\n", f"`{command}`\n",
             "Non-live AST entries, outcome under primed (rows) and under GRPO (columns):\n",
             markdown_table(table), ""]
    lines += [f"- {k}: {v:.3f}" if isinstance(v, float) else f"- {k}: {v}" for k, v in result["when_called"].items()]
    lines += ["", "BFCL error types among the called non-live AST entries (share of calls):\n",
              markdown_table(cd.called_errors(entries)), ""]
    for run, path in metrics.items():
        signal = cd.signal_by_kind(path)
        if not signal.empty:
            lines += [f"GRPO signal per kind, `{run}` (frac_reward_zero_std: share of groups with no gradient):\n",
                      markdown_table(signal), ""]
    (args.out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
