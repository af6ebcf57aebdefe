"""Tidy BFCL tables: per entry, per category, aggregates, comparisons, error taxonomy.

Irrelevance-style categories reward silence: a model that never calls scores 100% there.
So every summary carries the *call rate* (share of entries with at least one call) and
the *format-validity rate* (our family parser's verdict) next to BFCL's accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.data.bfcl import LIVE, NON_LIVE
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.stats import bootstrap_ci, mcnemar_exact, paired_bootstrap

ENTRY_COLUMNS = ["model", "category", "id", "correct", "error_type", "n_calls", "called", "format_valid"]
NON_LIVE_AST_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST_OTHER = ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
NOT_RUN_NOTE = (
    "BFCL v4 Overall also weighs multi-turn (30%) and agentic (40%) categories, which are not "
    "run here; no Overall is reported."
)


def entries_table(
    out_dir: str | Path, name: str, categories: list[str], scores: dict[str, Any], label: str
) -> pd.DataFrame:
    """One row per scored entry: BFCL's verdict (from its failures) plus our call stats."""
    rows = []
    for category in categories:
        failures = {str(f["id"]): f for f in scores[category].failures}
        entries = results.read_results(results.result_file(out_dir, name, category))
        for entry in entries:
            failure = failures.get(str(entry["id"]))
            rows.append({
                "model": label,
                "category": category,
                "id": str(entry["id"]),
                "correct": failure is None,
                "error_type": "" if failure is None else failure_error_type(failure),
                "n_calls": int(entry.get("n_calls", 0)),
                "called": int(entry.get("n_calls", 0)) > 0,
                "format_valid": bool(entry.get("format_valid", False)),
            })  # fmt: skip
        ours = sum(1 for r in rows if r["category"] == category and r["correct"])
        if ours != scores[category].correct or len(entries) != scores[category].total:
            raise RuntimeError(
                f"{category}: BFCL reports {scores[category].correct}/{scores[category].total} "
                f"correct but its failure list implies {ours}/{len(entries)}"
            )
    return pd.DataFrame(rows, columns=ENTRY_COLUMNS)


def failure_error_type(failure: dict[str, Any]) -> str:
    """BFCL's ``error_type`` of a score-file failure (multi-turn nests it under ``error``)."""
    if failure.get("error_type"):
        return str(failure["error_type"])
    error = failure.get("error")
    if isinstance(error, dict) and error.get("error_type"):
        return str(error["error_type"])
    return "unknown"


def summary_table(entries: pd.DataFrame, ci: bool = True, seed: int = 0) -> pd.DataFrame:
    """Tidy ``model x category``: accuracy, n, correct, call_rate, valid_rate (+ 95% CI)."""
    rows = []
    for (model, category), group in entries.groupby(["model", "category"], sort=False):
        row = {
            "model": model,
            "category": category,
            "accuracy": float(group["correct"].mean()),
            "n": len(group),
            "correct": int(group["correct"].sum()),
            "call_rate": float(group["called"].mean()),
            "valid_rate": float(group["format_valid"].mean()),
        }
        if ci:
            row["ci_low"], row["ci_high"] = bootstrap_ci(group["correct"].to_numpy(), seed=seed)
        rows.append(row)
    return pd.DataFrame(rows)


def call_precision(entries: pd.DataFrame, groups: dict[str, tuple[str, ...]] | None = None,
                   seed: int = 0) -> pd.DataFrame:
    """Did a model get better at calling, or only call more often? Per model and group of
    categories (default: non-live and live AST): entries pooled, call rate, accuracy, and
    accuracy among the entries it answered with a call (bootstrap 95% CI). On AST categories
    every correct answer is a call, so accuracy = call_rate x accuracy_when_called."""
    groups = groups or {"non_live_ast": NON_LIVE_AST_SIMPLE + NON_LIVE_AST_OTHER, "live_ast": LIVE_AST}
    rows = []
    for model, frame in entries.groupby("model", sort=False):
        for name, categories in groups.items():
            part = frame[frame["category"].isin(categories)]
            if part.empty:
                continue
            called = part[part["called"]]
            low, high = bootstrap_ci(called["correct"].to_numpy(), seed=seed)
            rows.append({
                "model": model, "group": name, "n": len(part), "calls": len(called),
                "call_rate": float(part["called"].mean()), "accuracy": float(part["correct"].mean()),
                "accuracy_when_called": float(called["correct"].mean()) if len(called) else float("nan"),
                "ci_low": low, "ci_high": high,
            })  # fmt: skip
    return pd.DataFrame(rows)


def aggregates(summary: pd.DataFrame | list[dict[str, Any]], full_categories: bool = True) -> dict[str, Any]:
    """BFCL's non-live and live AST summaries, computed only when all their parts were run.

    Non-live AST = unweighted mean of (mean of the three simple_* categories, multiple,
    parallel, parallel_multiple); live AST = entry-weighted mean of the four live AST
    categories (BFCL's own definitions). A missing part gives None, never a 0-filled
    number. With ``full_categories=False`` (a ``--limit`` run) the values are subset
    estimates, flagged ``partial``.
    """
    frame = pd.DataFrame(summary)
    acc = dict(zip(frame["category"], frame["accuracy"], strict=True)) if len(frame) else {}
    n = dict(zip(frame["category"], frame["n"], strict=True)) if len(frame) else {}
    out: dict[str, Any] = {"non_live_ast": None, "live_ast": None}
    if all(c in acc for c in NON_LIVE_AST_SIMPLE + NON_LIVE_AST_OTHER):
        simple = sum(acc[c] for c in NON_LIVE_AST_SIMPLE) / 3
        out["non_live_ast"] = (simple + sum(acc[c] for c in NON_LIVE_AST_OTHER)) / 4
    if all(c in acc for c in LIVE_AST):
        total = sum(n[c] for c in LIVE_AST)
        out["live_ast"] = sum(acc[c] * n[c] for c in LIVE_AST) / total
    out["missing_non_live"] = [c for c in NON_LIVE if c not in acc]
    out["missing_live"] = [c for c in LIVE if c not in acc]
    out["partial"] = not full_categories
    out["note"] = NOT_RUN_NOTE
    return out


def load_entries(eval_dir: str | Path) -> pd.DataFrame:
    path = Path(eval_dir) / "entries.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: {eval_dir} is not a finished `toolrl eval bfcl` directory"
        )
    frame = pd.read_csv(path, dtype={"id": str, "error_type": str}, keep_default_na=False)
    for column in ("correct", "called", "format_valid"):
        frame[column] = frame[column].astype(str).str.lower().isin(("true", "1"))
    return frame


def run_info(eval_dir: str | Path) -> dict[str, Any]:
    path = Path(eval_dir) / "run.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def compare(entries_a: pd.DataFrame, entries_b: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per category (and ``ALL``): accuracies on the shared entries, B - A with a paired
    bootstrap 95% CI, the exact McNemar p-value, and both models' call/validity rates."""
    a = entries_a.set_index(["category", "id"])
    b = entries_b.set_index(["category", "id"])
    shared = a.index.intersection(b.index)
    if len(shared) == 0:
        raise ValueError("the two evaluations share no (category, id) entries; nothing to compare")
    a, b = a.loc[shared], b.loc[shared]
    rows = []
    groups = [(c, shared[shared.get_level_values(0) == c]) for c in dict.fromkeys(shared.get_level_values(0))]
    groups.append(("ALL", shared))
    for category, index in groups:
        x = a.loc[index, "correct"].to_numpy(dtype=float)
        y = b.loc[index, "correct"].to_numpy(dtype=float)
        diff = paired_bootstrap(x, y, seed=seed)
        test = mcnemar_exact(x, y)
        rows.append({
            "category": category, "n": diff.n,
            "acc_a": diff.acc_a, "acc_b": diff.acc_b, "diff": diff.diff,
            "ci_low": diff.ci_low, "ci_high": diff.ci_high,
            "a_only": test.a_only, "b_only": test.b_only, "mcnemar_p": test.p_value,
            "call_rate_a": float(a.loc[index, "called"].mean()),
            "call_rate_b": float(b.loc[index, "called"].mean()),
            "valid_rate_a": float(a.loc[index, "format_valid"].mean()),
            "valid_rate_b": float(b.loc[index, "format_valid"].mean()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def compare_dirs(dir_a: str | Path, dir_b: str | Path, seed: int = 0) -> pd.DataFrame:
    return compare(load_entries(dir_a), load_entries(dir_b), seed=seed)


def error_taxonomy(entries: pd.DataFrame) -> pd.DataFrame:
    """Counts of BFCL ``error_type`` per model (and its coarse family before ':')."""
    failed = entries[~entries["correct"]].copy()
    if failed.empty:
        return pd.DataFrame(columns=["model", "error_family", "error_type", "count", "share"])
    failed["error_family"] = failed["error_type"].str.split(":").str[0]
    table = failed.groupby(["model", "error_family", "error_type"]).size().reset_index(name="count")
    totals = entries.groupby("model").size()
    table["share"] = table["count"] / table["model"].map(totals)
    return table.sort_values(["model", "count"], ascending=[True, False]).reset_index(drop=True)


def example_failures(eval_dir: str | Path, category: str, k: int = 3) -> list[dict[str, Any]]:
    """The first ``k`` failures of a category with the raw text, our calls and BFCL's error."""
    info = run_info(eval_dir)
    name = info.get("name")
    if not name:
        return []
    score_path = results.score_file(eval_dir, name, category)
    if not score_path.is_file():
        return []
    lines = [json.loads(line) for line in score_path.read_text().splitlines() if line][1:]
    generated = {r["id"]: r for r in results.read_results(results.result_file(eval_dir, name, category))}
    out = []
    for failure in lines[:k]:
        entry = generated.get(failure["id"], {})
        out.append({
            "id": failure["id"],
            "error_type": failure.get("error_type"),
            "error": failure.get("error"),
            "raw": entry.get("raw"),
            "result": entry.get("result"),
            "possible_answer": failure.get("possible_answer"),
        })  # fmt: skip
    return out


def combined_entries(eval_dirs: list[str | Path]) -> pd.DataFrame:
    """Entry tables of several finished evaluations, stacked (the ``model`` column tells them apart)."""
    return pd.concat([load_entries(d) for d in eval_dirs], ignore_index=True)


def wide(summary: pd.DataFrame, value: str = "accuracy") -> pd.DataFrame:
    """Category rows x model columns of one summary column (for display)."""
    order = list(dict.fromkeys(summary["category"]))
    return summary.pivot(index="category", columns="model", values=value).reindex(order)


def aggregate_value(acc: dict[str, Any], n: dict[str, int], name: str) -> Any:
    """BFCL's ``non_live_ast`` or ``live_ast`` from per-category accuracies (scalars or
    arrays of bootstrap replicates alike)."""
    if name == "non_live_ast":
        simple = sum(acc[c] for c in NON_LIVE_AST_SIMPLE) / 3
        return (simple + sum(acc[c] for c in NON_LIVE_AST_OTHER)) / 4
    if name == "live_ast":
        total = sum(n[c] for c in LIVE_AST)
        return sum(acc[c] * n[c] for c in LIVE_AST) / total
    raise ValueError(f"unknown aggregate {name!r}; expected non_live_ast or live_ast")


def compare_aggregate(
    entries_a: pd.DataFrame, entries_b: pd.DataFrame, name: str = "non_live_ast",
    n_boot: int = 10_000, seed: int = 0,
) -> dict[str, float]:
    """B - A on a BFCL aggregate with a paired, category-stratified bootstrap 95% CI.

    Each replicate resamples the entries of every category (the same indices for A and B,
    so the pairing is kept) and recomputes the aggregate exactly as BFCL weighs it.
    """
    import numpy as np

    parts = NON_LIVE_AST_SIMPLE + NON_LIVE_AST_OTHER if name == "non_live_ast" else LIVE_AST
    a = entries_a.set_index(["category", "id"])["correct"].astype(float)
    b = entries_b.set_index(["category", "id"])["correct"].astype(float)
    rng = np.random.default_rng(seed)
    acc_a, acc_b, boot_a, boot_b, n = {}, {}, {}, {}, {}
    for category in parts:
        present = category in a.index.get_level_values(0) and category in b.index.get_level_values(0)
        ids = a.loc[category].index.intersection(b.loc[category].index) if present else []
        if len(ids) == 0:
            raise ValueError(f"{name}: category {category} is missing from one of the evaluations")
        x = a.loc[category].loc[ids].to_numpy()
        y = b.loc[category].loc[ids].to_numpy()
        idx = rng.integers(0, len(ids), size=(n_boot, len(ids)))
        acc_a[category], acc_b[category] = x.mean(), y.mean()
        boot_a[category], boot_b[category] = x[idx].mean(axis=1), y[idx].mean(axis=1)
        n[category] = len(ids)
    value_a, value_b = aggregate_value(acc_a, n, name), aggregate_value(acc_b, n, name)
    diffs = aggregate_value(boot_b, n, name) - aggregate_value(boot_a, n, name)
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    return {"aggregate": name, "n": sum(n.values()), "acc_a": float(value_a), "acc_b": float(value_b),
            "diff": float(value_b - value_a), "ci_low": float(lo), "ci_high": float(hi)}
