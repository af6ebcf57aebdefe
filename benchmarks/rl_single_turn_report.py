"""Issue 18 report: BFCL single-turn summary of base, primed and the variant selected on
validation, with paired category-stratified bootstrap CIs -> rl_single_turn.{md,json}.

    python -m benchmarks.gpu.rl_learning_gpu single-turn-report --archive rl_learning.tar.gz \
        --work runs/rl_single_turn --out benchmarks/results
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

PAIRS = (("primed", "grpo"), ("base", "grpo"), ("base", "primed"))
COMPARISON_KEYS = ("a", "b", "metric", "n", "diff", "ci_low", "ci_high")


def score_entries(work: Path, score: bool = True) -> dict[str, pd.DataFrame]:
    """label -> entry table of every BFCL folder under work/bfcl (scored here unless ``score``
    is False and each folder already holds entries.csv)."""
    from benchmarks.rl_learning_report import score_bfcl
    from toolrl_lib.evaluate.analysis import load_entries

    if score:
        score_bfcl(work)
    return {folder.name: load_entries(folder).assign(model=folder.name)
            for folder in sorted((work / "bfcl").iterdir()) if (folder / "entries.csv").is_file()}


def validation_rows(work: Path, key: str) -> dict[str, Any]:
    """Per variant: its best validation row on ``key`` (the selection metric) with per-kind columns."""
    out: dict[str, Any] = {}
    start = work / "start_validation.json"
    if start.is_file():
        out.update(json.loads(start.read_text())["validation"])
    for run in sorted((work / "runs").iterdir()) if (work / "runs").is_dir() else []:
        path = run / "validation.csv"
        if path.is_file():
            frame = pd.read_csv(path)
            frame = frame[frame["stage"].isin(["grpo", "final"])]
            if key in frame and not frame.empty:
                best = frame.loc[frame[key].idxmax()]
                out[run.name] = {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()}
    return out


def build(entries: dict[str, pd.DataFrame], selection: dict[str, Any], validation: dict[str, Any],
          n_boot: int = 10_000, pairs: tuple[tuple[str, str], ...] = PAIRS) -> dict[str, Any]:
    """The issue's JSON: selected_on, models (summary + parts + calls), comparisons."""
    from toolrl_lib.evaluate.bfcl_summary import HEADLINE_METRICS, compare_summary, summary_metrics

    models = {label: {**summary_metrics(frame), "entries": len(frame)} for label, frame in entries.items()}
    if "grpo" in models:
        models["grpo"]["variant"] = selection.get("chosen")
    comparisons = []
    for a, b in pairs:
        if a in entries and b in entries:
            for row in compare_summary(entries[a], entries[b], HEADLINE_METRICS, n_boot=n_boot):
                comparisons.append({"a": a, "b": b, **{k: row[k] for k in COMPARISON_KEYS[2:]}})
    return {"selected_on": "validation", "selection": selection, "models": models,
            "comparisons": comparisons, "validation": validation}


def tables(result: dict[str, Any]) -> list[str]:
    """The metric table (one column per model) and the paired-differences table, as markdown lines."""
    from toolrl_lib.evaluate.bfcl_summary import METRICS

    labels = list(result["models"])
    lines = ["| metric | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for metric in METRICS:
        lines.append(f"| {metric} | " + " | ".join(f"{result['models'][m][metric]:.3f}" for m in labels) + " |")
    lines += ["", "Paired differences (B - A), category-stratified paired bootstrap 95% CI:", "",
              "| A | B | metric | n | diff | 95% CI |", "|---|---|---|---|---|---|"]
    for row in result["comparisons"]:
        lines.append(f"| {row['a']} | {row['b']} | {row['metric']} | {row['n']} | {row['diff']:+.4f} | "
                     f"[{row['ci_low']:+.4f}, {row['ci_high']:+.4f}] |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    lines = ["# RL that calls better? BFCL v4 single-turn summary (issue 18)\n",
             f"Selected on validation ({result['selection'].get('key')}, never BFCL): "
             f"**{result['selection'].get('chosen')}**; candidates: {json.dumps(result['selection'].get('scores'))}\n",
             *tables(result)]
    if result.get("commands"):
        lines += ["", "Commands, in order:", ""] + [f"- `{command}`" for command in result["commands"]]
    return "\n".join(lines) + "\n"


def single_turn_report(archive: Path, out: Path, work: Path, score: bool = True, n_boot: int = 10_000,
                       commands: list[str] | None = None, tag: str = "") -> dict[str, Any]:
    """Extract the GPU archive, score it with BFCL's scorer, write rl_single_turn.{md,json}."""
    from benchmarks.rl_learning_report import extract

    if archive is not None and Path(archive).is_file():
        extract(archive, work)
    selection = json.loads((work / "selection.json").read_text())
    result = build(score_entries(work, score), selection, validation_rows(work, selection["key"]), n_boot)
    result["commands"] = commands or []
    out.mkdir(parents=True, exist_ok=True)
    name = f"rl_single_turn_{tag}" if tag else "rl_single_turn"  # a tag keeps an earlier session's files
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=float))
    text = markdown(result)
    (out / f"{name}.md").write_text(text)
    print(text)
    return result
