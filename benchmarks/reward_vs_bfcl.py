"""Differential check: our binary reward vs BFCL's own AST checker on the same completions (issue 18).

Two sources of completions:

    # CPU: BFCL's ground truth rendered as completions, plus deliberate perturbations of it
    python -m benchmarks.reward_vs_bfcl replay --limit 40 --out benchmarks/results
    # GPU generations: finished `toolrl eval bfcl` folders (entries.csv + generations/)
    python -m benchmarks.reward_vs_bfcl dirs runs/rl/bfcl/base runs/rl/bfcl/primed --out benchmarks/results

Writes reward_vs_bfcl[_<tag>].json (agreement, disagreement counts by reason, per category),
reward_vs_bfcl[_<tag>]_disagreements.csv (every disagreement with its reason) and a short .md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from benchmarks import reward_check as rc

RULES = """Rules of the reward (`scheme="binary"`) as checked here, after issue 18's fixes: the verdict reads the
calls the parser decodes, whatever text surrounds them (BFCL's rule; on a no-call entry, text from which no call
decodes is an abstention); an integer parameter wants a JSON integer (`5.0` is a float, as in BFCL's type check);
a ground truth with BFCL's accepted-value lists accepts any of them (`toolrl_lib.rewards.matching`). Deliberate
deviations, kept: strings with an `enum`/`pattern`/`format` compare case-sensitively (BFCL folds case everywhere;
an API refuses a wrong-case enum), and free-text strings compare after collapsing whitespace and case only (BFCL
also deletes ` ,./-_*^`, so `3.5` equals `35` there); java/javascript arguments are compared as the strings the
model wrote (BFCL parses them as source literals). `reward.strict_format: true` is the training-side deviation
that pays a broken format nothing (not used by this check)."""


def replay_table(work: Path, limit: int) -> pd.DataFrame:
    """Score every perturbation of the first ``limit`` entries per category with BFCL's scorer."""
    from toolrl_lib.evaluate import analysis
    from toolrl_lib.evaluate import bfcl_results as results
    from toolrl_lib.evaluate.replay import to_source_calls
    from toolrl_lib.evaluate.scorer import score
    from toolrl_lib.prompts import get_adapter

    categories = list(rc.CHECKED_CATEGORIES)
    examples = rc.bfcl_examples(categories, limit)
    adapter = get_adapter("hermes")
    variants: dict[str, dict[str, list[dict]]] = {}
    for example in examples.values():
        for name, calls in rc.perturbations(example).items():
            variants.setdefault(name, {})[example.id] = calls
    from toolrl_lib.data.bfcl import language_of, load_bfcl_entries

    functions = {str(e["id"]): e.get("function") or [] for c in categories for e in load_bfcl_entries(c)[:limit]}
    tables = []
    for name, by_id in variants.items():
        model = "perturb" + name.replace("_", "")
        texts, cats = {}, sorted({examples[i].meta["category"] for i in by_id})
        for category in cats:
            lines = []
            for entry_id, calls in by_id.items():
                if examples[entry_id].meta["category"] != category:
                    continue
                # the completion our reward sees; BFCL gets the same calls as its language's source
                texts[entry_id] = adapter.render_completion(calls)
                lines.append(results.calls_entry(entry_id, to_source_calls(calls, functions[entry_id],
                                                                           language_of(category))))
            results.write_results(results.result_file(work / name, model, category), lines)
        scores = score(work / name, model, cats)
        entries = analysis.entries_table(work / name, model, cats, scores, label=name)
        correct = dict(zip(entries["id"], entries["correct"], strict=True))
        tables.append(rc.differential_table(examples, texts, correct).assign(source=name))
    return pd.concat(tables, ignore_index=True)


def dirs_table(folders: list[Path]) -> pd.DataFrame:
    tables = []
    for folder in folders:
        texts, correct, categories = rc.load_eval_dir(folder)
        examples = rc.bfcl_examples(categories)
        tables.append(rc.differential_table(examples, texts, correct).assign(source=folder.name))
    return pd.concat(tables, ignore_index=True)


def write(table: pd.DataFrame, out: Path, tag: str, command: str) -> dict:
    name = f"reward_vs_bfcl_{tag}" if tag else "reward_vs_bfcl"
    out.mkdir(parents=True, exist_ok=True)
    summary = rc.agreement_summary(table)
    by_source = {s: rc.agreement_summary(t) for s, t in table.groupby("source")}
    summary["by_source"] = {s: {k: v for k, v in d.items() if k != "per_category"} for s, d in by_source.items()}
    summary["command"] = command
    (out / f"{name}.json").write_text(json.dumps(summary, indent=2, default=float))
    bad = table[~table["agree"]]
    bad.to_csv(out / f"{name}_disagreements.csv", index=False)
    lines = [f"# Our binary reward vs BFCL's AST checker ({tag or 'replay'})\n", f"`{command}`\n",
             f"Entries: {summary['n']}; agreement **{summary['agreement']:.4f}** "
             f"(against the first accepted value only: {summary['agreement_first_value']:.4f}); "
             f"disagreements: {summary['disagreements']}\n",
             "| source | n | agreement | agreement (first accepted value only) | disagreements |",
             "|---|---|---|---|---|"]
    for source, d in summary["by_source"].items():
        lines.append(f"| {source} | {d['n']} | {d['agreement']:.4f} | {d['agreement_first_value']:.4f} "
                     f"| {d['disagreements']} |")
    lines += ["", "| reason | count |", "|---|---|"]
    lines += [f"| {reason} | {count} |" for reason, count in summary["reasons"].items()]
    lines += ["", RULES]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("replay", "dirs"))
    parser.add_argument("folders", nargs="*", type=Path, help="dirs: finished `toolrl eval bfcl` folders")
    parser.add_argument("--limit", type=int, default=40, help="replay: entries per category")
    parser.add_argument("--work", type=Path, default=Path("runs/reward_vs_bfcl"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.reward_vs_bfcl " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.mode == "replay":
        table = replay_table(args.work, args.limit)
    else:
        if not args.folders:
            parser.error("dirs: give at least one evaluation folder")
        table = dirs_table(args.folders)
    write(table, args.out, args.tag or ("replay" if args.mode == "replay" else ""), command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
