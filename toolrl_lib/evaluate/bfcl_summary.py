"""BFCL v4's own summary formulas: its Overall, the single-turn summary, paired bootstrap CIs.

How bfcl-eval 2026.3.23 builds its overall table (``eval_runner_helper.generate_leaderboard_csv``),
reproduced here for the single-turn categories:

* **Non-live** = unweighted mean of four parts: *simple* (itself the unweighted mean of
  ``simple_python``, ``simple_java``, ``simple_javascript``), ``multiple``, ``parallel``,
  ``parallel_multiple``. ``irrelevance`` is *not* part of it.
* **Live** = entry-weighted mean of ``live_simple``, ``live_multiple``, ``live_parallel``,
  ``live_parallel_multiple`` (weights = entries scored in each).
* **Irrelevance** ("Irrelevance Detection") = unweighted mean of ``irrelevance`` and
  ``live_irrelevance``. ``live_relevance`` is displayed ("Relevance Detection") but enters no
  summary.
* **Overall** = 10 Non-live + 10 Live + 10 Irrelevance + 30 Multi-turn + 40 Agentic, divided
  by the weight sum (100); a category that was not run counts as 0.

``bfcl_single_turn_summary`` keeps the single-turn weights 10/10/10 and renormalises them by
their own sum (30), i.e. the plain mean of Non-live, Live and Irrelevance. So BFCL's
"Overall Acc" of a run holding only single-turn categories is exactly 0.3 x this summary
(multi-turn and agentic count as 0 there), which the tests check against the scorer's
``data_overall.csv``.

``bfcl_overall`` computes the Overall with those weights over the parts that ran completely
(multi-turn included), renormalised by their weights, names the parts and categories that
did not run, and also gives the number BFCL's own CSV shows (missing parts counted as 0).

``compare_summary`` gives B - A on the summary and its parts with a paired bootstrap that
resamples the entries *within each category* (the same indices for both models), so every
replicate keeps BFCL's per-category weighting.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolrl_lib.data.bfcl import MEMORY, MULTI_TURN, WEB_SEARCH

NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_OTHER = ("multiple", "parallel", "parallel_multiple")
NON_LIVE_AST = NON_LIVE_SIMPLE + NON_LIVE_OTHER
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
SUMMARY_CATEGORIES = NON_LIVE_AST + LIVE_AST + IRRELEVANCE  # live_relevance enters no summary
OVERALL_WEIGHTS = {"non_live": 10, "live": 10, "irrelevance": 10, "multi_turn": 30, "agentic": 40}
SINGLE_TURN_PARTS = ("non_live", "live", "irrelevance")
METRICS = ("bfcl_single_turn_summary", "non_live_ast", "live_ast", "irrelevance",
           "accuracy_when_called_non_live_ast", "accuracy_when_called_live_ast",
           "call_rate_non_live_ast", "call_rate_irrelevance")
HEADLINE_METRICS = ("bfcl_single_turn_summary", "non_live_ast", "live_ast", "irrelevance",
                    "accuracy_when_called_non_live_ast")
METRIC_CATEGORIES = {  # the entries each metric is computed over (its ``n``)
    "bfcl_single_turn_summary": SUMMARY_CATEGORIES, "non_live_ast": NON_LIVE_AST,
    "live_ast": LIVE_AST, "irrelevance": IRRELEVANCE,
    "accuracy_when_called_non_live_ast": NON_LIVE_AST, "accuracy_when_called_live_ast": LIVE_AST,
    "call_rate_non_live_ast": NON_LIVE_AST, "call_rate_irrelevance": IRRELEVANCE,
}
# BFCL v4's Overall: its five parts and the categories each needs.
PART_CATEGORIES: dict[str, tuple[str, ...]] = {
    "non_live": NON_LIVE_SIMPLE + NON_LIVE_OTHER,
    "live": LIVE_AST,
    "irrelevance": IRRELEVANCE,
    "multi_turn": MULTI_TURN,
    "agentic": WEB_SEARCH + MEMORY,
}
# data_overall.csv columns -> our names
CSV_COLUMNS = {"Overall Acc": "overall", "Non-Live AST Acc": "non_live_ast", "Live Acc": "live_ast",
               "Irrelevance Detection": "irrelevance", "Relevance Detection": "live_relevance"}


def non_live_ast(acc: dict[str, Any]) -> Any:
    """BFCL's non-live AST accuracy: the three simple categories averaged into one, then
    averaged unweighted with multiple, parallel and parallel-multiple.

    >>> non_live_ast({"simple_python": 0.9, "simple_java": 0.6, "simple_javascript": 0.3,
    ...               "multiple": 0.8, "parallel": 0.4, "parallel_multiple": 0.2})
    0.5
    """
    simple = sum(acc[c] for c in NON_LIVE_SIMPLE) / 3
    return (simple + sum(acc[c] for c in NON_LIVE_OTHER)) / 4


def parts(acc: dict[str, Any], n: dict[str, Any]) -> dict[str, Any]:
    """Non-live, live and irrelevance from per-category accuracies (scalars or arrays of
    bootstrap replicates) and entry counts, exactly as bfcl-eval weighs them."""
    missing = [c for c in SUMMARY_CATEGORIES if c not in acc]
    if missing:
        raise ValueError(f"BFCL single-turn summary needs categories {missing} (not scored)")
    non_live = non_live_ast(acc)
    live_n = sum(n[c] for c in LIVE_AST)
    live = sum(acc[c] * n[c] for c in LIVE_AST) / live_n
    irrelevance = sum(acc[c] for c in IRRELEVANCE) / 2
    return {"non_live_ast": non_live, "live_ast": live, "irrelevance": irrelevance}


def single_turn_summary(acc: dict[str, Any], n: dict[str, Any]) -> Any:
    """BFCL's overall formula on its single-turn parts, weights 10/10/10 renormalised to 1."""
    p = parts(acc, n)
    values = {"non_live": p["non_live_ast"], "live": p["live_ast"], "irrelevance": p["irrelevance"]}
    total = sum(OVERALL_WEIGHTS[k] for k in SINGLE_TURN_PARTS)
    return sum(OVERALL_WEIGHTS[k] * values[k] for k in SINGLE_TURN_PARTS) / total


def bfcl_overall_single_turn_only(acc: dict[str, Any], n: dict[str, Any]) -> Any:
    """What BFCL's "Overall Acc" shows for a run of single-turn categories only (others = 0)."""
    share = sum(OVERALL_WEIGHTS[k] for k in SINGLE_TURN_PARTS) / sum(OVERALL_WEIGHTS.values())
    return share * single_turn_summary(acc, n)


def _stats(entries: pd.DataFrame) -> dict[str, dict[str, Any]]:
    out = {}
    for category, group in entries.groupby("category", sort=False):
        correct = group["correct"].to_numpy(dtype=bool)
        called = group["called"].to_numpy(dtype=bool)
        out[str(category)] = {"acc": correct.mean(), "n": len(group), "hit_called": (correct & called).sum(),
                              "called": called.sum()}
    return out


def _metric_values(stats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every metric of ``METRICS`` from per-category stats (scalars or replicate arrays)."""
    acc = {c: s["acc"] for c, s in stats.items()}
    n = {c: s["n"] for c, s in stats.items()}
    out = dict(parts(acc, n))
    out["bfcl_single_turn_summary"] = single_turn_summary(acc, n)
    for name, cats in (("non_live_ast", NON_LIVE_AST), ("live_ast", LIVE_AST)):
        hits = sum(stats[c]["hit_called"] for c in cats)
        called = sum(stats[c]["called"] for c in cats)
        total = sum(n[c] for c in cats)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"accuracy_when_called_{name}"] = np.divide(hits, called, dtype=float)
        out[f"call_rate_{name}"] = np.divide(called, total, dtype=float)
    out["call_rate_irrelevance"] = np.divide(sum(stats[c]["called"] for c in IRRELEVANCE),
                                             sum(n[c] for c in IRRELEVANCE), dtype=float)
    return out


def summary_metrics(entries: pd.DataFrame) -> dict[str, float]:
    """One model's summary, its parts, accuracy when called and call rates (pooled over
    entries for the last two: every correct AST answer is a call)."""
    return {k: float(v) for k, v in _metric_values(_stats(entries)).items()}


def compare_summary(
    entries_a: pd.DataFrame, entries_b: pd.DataFrame, metrics: tuple[str, ...] = HEADLINE_METRICS,
    n_boot: int = 10_000, seed: int = 0,
) -> list[dict[str, Any]]:
    """B - A for each metric with a paired, category-stratified bootstrap 95% CI.

    Both tables need columns ``category``, ``id``, ``correct``, ``called``; only the entries
    both models have are compared. ``n`` = entries the metric is computed over."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; expected some of {METRICS}")
    a = entries_a.set_index(["category", "id"])
    b = entries_b.set_index(["category", "id"])
    shared = a.index.intersection(b.index)
    rng = np.random.default_rng(seed)
    point_a, point_b, boot_a, boot_b = {}, {}, {}, {}
    for category in SUMMARY_CATEGORIES:
        ids = shared[shared.get_level_values(0) == category]
        if len(ids) == 0:
            raise ValueError(f"category {category} is missing from one of the evaluations")
        idx = rng.integers(0, len(ids), size=(n_boot, len(ids)))
        for frame, point, boot in ((a, point_a, boot_a), (b, point_b, boot_b)):
            correct = frame.loc[ids, "correct"].to_numpy(dtype=bool)
            called = frame.loc[ids, "called"].to_numpy(dtype=bool)
            point[category] = {"acc": correct.mean(), "n": len(ids), "hit_called": (correct & called).sum(),
                               "called": called.sum()}
            c, k = correct[idx], called[idx]
            boot[category] = {"acc": c.mean(axis=1), "n": len(ids), "hit_called": (c & k).sum(axis=1),
                              "called": k.sum(axis=1)}
    va, vb = _metric_values(point_a), _metric_values(point_b)
    ra, rb = _metric_values(boot_a), _metric_values(boot_b)
    rows = []
    for metric in metrics:
        cats = METRIC_CATEGORIES[metric]
        diffs = rb[metric] - ra[metric]
        lo, hi = np.nanquantile(diffs, [0.025, 0.975]) if np.isfinite(diffs).any() else (np.nan, np.nan)
        rows.append({"metric": metric, "n": int(sum(point_a[c]["n"] for c in cats)),
                     "value_a": float(va[metric]), "value_b": float(vb[metric]),
                     "diff": float(vb[metric] - va[metric]), "ci_low": float(lo), "ci_high": float(hi)})
    return rows


def read_overall_csv(root: str | Path, model_name: str) -> dict[str, float | None]:
    """BFCL's ``score/data_overall.csv`` row of ``model_name`` as fractions (N/A -> None)."""
    path = Path(root) / "score" / "data_overall.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run BFCL's scorer on {root} first")
    with path.open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("Model") == model_name]
    if not rows:
        raise ValueError(f"{path}: no row for model {model_name!r}")
    out: dict[str, float | None] = {}
    for column, key in CSV_COLUMNS.items():
        text = rows[0].get(column, "N/A")
        out[key] = None if text in ("N/A", "", None) else float(text.rstrip("%")) / 100
    return out


def bfcl_overall(summary: pd.DataFrame | list[dict[str, Any]], full_categories: bool = True) -> dict[str, Any]:
    """BFCL's Overall over the parts that ran, with the missing parts and categories named.

    Parts as bfcl-eval builds them: non-live = mean(mean of the simple_* three, multiple,
    parallel, parallel_multiple); live = entry-weighted mean of the four live AST
    categories; irrelevance = mean(irrelevance, live_irrelevance); multi-turn = mean of its
    four categories; agentic (web search, memory) never runs here. A part counts only when
    all its categories were scored.
    """
    frame = pd.DataFrame(summary)
    acc = dict(zip(frame["category"], frame["accuracy"], strict=True)) if len(frame) else {}
    n = dict(zip(frame["category"], frame["n"], strict=True)) if len(frame) else {}
    values: dict[str, float | None] = {}
    for part, categories in PART_CATEGORIES.items():
        if not all(c in acc for c in categories):
            values[part] = None
        elif part == "non_live":
            simple = sum(acc[c] for c in NON_LIVE_SIMPLE) / len(NON_LIVE_SIMPLE)
            values[part] = (simple + sum(acc[c] for c in NON_LIVE_OTHER)) / 4
        elif part == "live":
            values[part] = sum(acc[c] * n[c] for c in categories) / sum(n[c] for c in categories)
        else:
            values[part] = sum(acc[c] for c in categories) / len(categories)
    ran = [p for p, v in values.items() if v is not None]
    weight = sum(OVERALL_WEIGHTS[p] for p in ran)
    overall = sum(OVERALL_WEIGHTS[p] * values[p] for p in ran) / weight if ran else None  # type: ignore[operator]
    return {
        "parts": values,
        "parts_run": ran,
        "parts_missing": [p for p in PART_CATEGORIES if p not in ran],
        "categories_missing": [c for p in PART_CATEGORIES for c in PART_CATEGORIES[p] if c not in acc],
        "weights": {p: OVERALL_WEIGHTS[p] for p in PART_CATEGORIES},
        "overall_over_parts_run": overall,
        "weight_share_run": weight / sum(OVERALL_WEIGHTS.values()),
        "bfcl_overall_missing_as_zero": sum(OVERALL_WEIGHTS[p] * values[p] for p in ran)  # type: ignore[operator]
        / sum(OVERALL_WEIGHTS.values()),
        "partial": not full_categories,
    }


def overall_note(overall: dict[str, Any]) -> str:
    """One honest sentence for a report."""
    if overall["overall_over_parts_run"] is None:
        return "BFCL Overall: no part of it ran completely."
    missing = ", ".join(overall["categories_missing"]) or "none"
    return (
        f"BFCL Overall over the parts that ran ({', '.join(overall['parts_run'])}; "
        f"{overall['weight_share_run']:.0%} of BFCL's weight): {overall['overall_over_parts_run']:.4f}. "
        f"Not run: {missing}. BFCL's own Overall (missing = 0): "
        f"{overall['bfcl_overall_missing_as_zero']:.4f}."
        + (" Subset (--limit) estimate." if overall.get("partial") else "")
    )
