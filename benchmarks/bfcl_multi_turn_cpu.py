"""CPU cost of BFCL multi-turn generation: the per-episode prefix cache vs a full pre-fill per step.

    python -m benchmarks.bfcl_multi_turn_cpu --model embedded --limit 1 --compact-docs \\
        --max-new-tokens 32 --step-limit 3 --modes cached,full

For each mode, one fresh run of ``generate_multi_turn_pending`` (model already loaded):
wall seconds, process CPU seconds (all threads; the honest figure on a shared box), steps,
tokens pre-filled vs re-used, peak RSS. Writes ``<out>/bfcl_multi_turn_cpu.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.backends import load_for_eval
from toolrl_lib.evaluate.bfcl_multi_turn.runner import (
    MultiTurnSettings,
    generate_multi_turn_pending,
    model_window,
)
from toolrl_lib.paths import project_root


class Counting:
    """Wraps a TranscriptCache factory so the run's token counts can be read afterwards."""

    last = None


def run_mode(loaded, mode: str, args: argparse.Namespace, work: Path) -> dict:
    import toolrl_lib.fast.decode as decode

    real = decode.TranscriptCache

    def spy(*a, **k):
        Counting.last = real(*a, **k)
        return Counting.last

    decode.TranscriptCache = spy
    Counting.last = None
    settings = MultiTurnSettings(max_new_tokens=args.max_new_tokens, window=model_window(args.model),
                                 compact=args.compact_docs, step_limit=args.step_limit,
                                 prefix_cache=mode == "cached",
                                 entry_ids=tuple(args.ids.split(",")) if args.ids else None)  # fmt: skip
    out = work / mode
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        generate_multi_turn_pending(loaded, out, args.categories, args.family, args.limit, settings)
    finally:
        decode.TranscriptCache = real
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = [r for c in args.categories for r in results.read_results(results.generations_file(out, c))]
    cache = Counting.last
    return {
        "mode": mode, "entries": len(rows), "steps": sum(r["steps"] for r in rows),
        "calls": sum(r["n_calls"] for r in rows), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
        "cpu_s_per_step": round(cpu / max(1, sum(r["steps"] for r in rows)), 2),
        "max_prompt_tokens": max((r["max_prompt_tokens"] for r in rows), default=0),
        "prefilled_tokens": cache.prefilled_tokens if cache else None,
        "reused_tokens": cache.reused_tokens if cache else None,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "replies": [r["raw"] for r in rows],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--family", default="hermes")
    parser.add_argument("--categories", default="multi_turn_base")
    parser.add_argument("--limit", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--step-limit", type=int, default=20)
    parser.add_argument("--compact-docs", action="store_true")
    parser.add_argument("--modes", default="cached,full")
    parser.add_argument("--ids", default=None, help="only these entry ids (comma list)")
    parser.add_argument("--out", default=str(project_root() / "benchmarks" / "results"))
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    args.categories = args.categories.split(",")
    load_s = time.perf_counter()
    loaded = load_for_eval(args.model, backend="hf", max_new_tokens=args.max_new_tokens)
    load_s = time.perf_counter() - load_s
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for mode in args.modes.split(","):
            rows.append(run_mode(loaded, mode, args, Path(work)))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "replies"}), flush=True)
    same = len({json.dumps(r["replies"]) for r in rows}) == 1
    command = "python -m benchmarks.bfcl_multi_turn_cpu " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {"command": command, "load_s": round(load_s, 1), "same_replies": same, "rows": rows}
    name = f"bfcl_multi_turn_cpu{'_' + args.tag if args.tag else ''}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=2))
    lines = ["# BFCL multi-turn generation on CPU: prefix cache vs full pre-fill per step", "",
             f"Command: `{command}` (model load {report['load_s']} s; same replies in every mode: {same})", "",
             "| mode | entries | steps | calls | wall s | CPU s | CPU s/step | longest prompt | pre-filled | re-used | peak RSS GiB |",
             "|" + " --- |" * 11]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['entries']} | {r['steps']} | {r['calls']} | {r['wall_s']} | {r['cpu_s']} | "
                     f"{r['cpu_s_per_step']} | {r['max_prompt_tokens']} | {r['prefilled_tokens']} | "
                     f"{r['reused_tokens']} | {r['peak_rss_gib']} |")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
