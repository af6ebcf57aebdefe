"""BFCL v4 multi-turn: accuracy per category (bootstrap CI), turns passed, share over the
window, force-terminations and seconds per category, for one or more models.

    # GPU, all 800 entries, base and primed embedded model:
    python benchmarks/bfcl_multi_turn.py --model base=embedded --model primed=runs/<run>/priming/final \\
        --max-new-tokens 512 --batch-size 200
    # CPU check of the script itself (writes to a scratch folder unless --out is given):
    python benchmarks/bfcl_multi_turn.py --limit 1 --max-new-tokens 16 --out /tmp/bfcl_mt

Each model's categories run one after the other (generation is batched across the entries
of a category), so the seconds are per category; the evaluation folders stay under
``--work`` (resumable). Writes ``<out>/bfcl_multi_turn.json`` and ``.md`` with the command.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from toolrl_lib.data.bfcl import MULTI_TURN
from toolrl_lib.evaluate.multi_turn_runner import MultiTurnSettings
from toolrl_lib.evaluate.runner import evaluate_bfcl
from toolrl_lib.paths import project_root


def run_model(label: str, model: str, work: Path, args: argparse.Namespace) -> list[dict]:
    """Evaluate one model category by category; one row per category."""
    settings = MultiTurnSettings(max_new_tokens=args.max_new_tokens, window=args.window,
                                 compact=args.compact_docs)
    folder = work / label
    seconds = {}
    for category in args.categories:
        start = time.perf_counter()
        evaluate_bfcl(model, folder, family=args.family, label=label, categories=[category],
                      limit=args.limit, batch_size=args.batch_size, backend=args.backend,
                      multi_turn=settings, run_scorer=False, progress=True)  # fmt: skip
        seconds[category] = time.perf_counter() - start
    run = evaluate_bfcl(model, folder, family=args.family, label=label, categories=args.categories,
                        limit=args.limit, batch_size=args.batch_size, backend=args.backend,
                        multi_turn=settings, generate=False)  # fmt: skip
    turns = {row["category"]: row for row in run.aggregates.get("multi_turn", [])}
    rows = []
    for row in run.summary:
        extra = turns.get(row["category"], {})
        rows.append({
            "model": label, "category": row["category"], "n": row["n"], "accuracy": row["accuracy"],
            "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
            "turns_passed_share": extra.get("turns_passed_share"),
            "over_window_share": extra.get("inference_errors", 0) / max(1, row["n"]),
            "force_terminated": extra.get("force_terminated"),
            "calls_per_entry": extra.get("calls_per_entry"),
            "seconds": round(seconds[row["category"]], 1),
        })  # fmt: skip
    return rows


def to_markdown(rows: list[dict], command: str, meta: dict) -> str:
    lines = [
        "# BFCL v4 multi-turn (official checker, our executor and loop)", "",
        f"Command: `{command}`", "",
        f"Machine: {meta['machine']}; step budget {meta['max_new_tokens']} new tokens; "
        f"window {meta['window'] or 'the model config'}; compact docs: {meta['compact_docs']}; "
        f"entries per category: {meta['limit'] or 'all'}.", "",
        "| model | category | n | accuracy [95% CI] | turns passed | over window | force-terminated | calls/entry | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else ""
        turns = "n/a" if r["turns_passed_share"] is None or r["turns_passed_share"] != r["turns_passed_share"] \
            else f"{r['turns_passed_share']:.3f}"
        lines.append(f"| {r['model']} | {r['category']} | {r['n']} | {r['accuracy']:.3f} {ci} | {turns} | "
                     f"{r['over_window_share']:.3f} | {r['force_terminated']} | {r['calls_per_entry']:.2f} | "
                     f"{r['seconds']} |")
    lines += ["", "Turns passed: the share of an entry's turns before the turn BFCL's checker failed it "
              "(mean over entries the checker reached). Over window: entries recorded as BFCL inference "
              "errors because prompt + step budget exceeded the window.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=None,
                        help="LABEL=PATH (repeatable; default base=embedded)")
    parser.add_argument("--family", default="hermes")
    parser.add_argument("--categories", default=",".join(MULTI_TURN))
    parser.add_argument("--limit", type=int, default=None, help="first N entries per category")
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument("--compact-docs", action="store_true")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--work", default=str(project_root() / "runs" / "bfcl_multi_turn"))
    parser.add_argument("--out", default=str(project_root() / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    args.categories = [c for c in args.categories.split(",") if c]
    unknown = [c for c in args.categories if c not in MULTI_TURN]
    if unknown:
        parser.error(f"not multi-turn categories: {unknown}")
    models = []
    for spec in args.model or ["base=embedded"]:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            parser.error(f"--model wants LABEL=PATH, got {spec!r}")
        models.append((label, path))
    rows = []
    for label, path in models:
        rows += run_model(label, path, Path(args.work), args)
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.processor() or 'cpu'})"
    meta = {"machine": device, "max_new_tokens": args.max_new_tokens, "window": args.window,
            "compact_docs": args.compact_docs, "limit": args.limit}  # fmt: skip
    command = "python benchmarks/bfcl_multi_turn.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bfcl_multi_turn.json").write_text(json.dumps({"command": command, **meta, "rows": rows}, indent=2))
    (out / "bfcl_multi_turn.md").write_text(to_markdown(rows, command, meta))
    print(to_markdown(rows, command, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
