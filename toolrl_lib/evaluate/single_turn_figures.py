"""Figures and tables of the committed single-turn GPU results, drawn from their JSON in
benchmarks/results (``rl_single_turn*.json``, ``rl_single_turn*_diagnosis.json``, and
``rl_at_scale.json``, which has the same shape plus pass@k curves and zero-variance shares), for
notebooks 03 and 05."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolrl_lib.evaluate.plots import _plt, _save, plot_paired_differences


def load_result(path: str | Path) -> dict[str, Any]:
    """A results JSON (clear error when it is missing: run the benchmark that writes it)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: it is written by the benchmark named in its .md")
    return json.loads(path.read_text())


def comparison_table(result: dict[str, Any], a: str = "primed", b: str = "grpo") -> pd.DataFrame:
    """The paired differences B − A of one pair, one row per metric (``category`` = metric)."""
    rows = [r for r in result.get("comparisons", []) if r["a"] == a and r["b"] == b]
    if not rows:
        raise ValueError(f"no comparison {a} -> {b} in the result (pairs: "
                         f"{sorted({(r['a'], r['b']) for r in result.get('comparisons', [])})})")
    return pd.DataFrame(rows).rename(columns={"metric": "category"})[["category", "n", "diff", "ci_low", "ci_high"]]


def pass_at_k_curves(result: dict[str, Any]) -> pd.DataFrame:
    """A result's ``pass_at_k`` (model -> split -> curves) as one row per (model, split) and
    columns ``pass@1`` ... ``pass@n``, plus ``gap`` = pass@(largest k) − pass@(smallest k): how
    much more n samples find than one, the most RL could sharpen into pass@1. A split's curve is
    its ``overall`` (our splits) or ``non_live_ast`` (BFCL); a split whose sampling did not
    finish (no curve) is left out."""
    rows = {}
    for model, splits in result.get("pass_at_k", {}).items():
        for split, curves in splits.items():
            curve = curves.get("overall") or curves.get("non_live_ast")
            if curve:
                rows[(model, split)] = {int(k): float(v) for k, v in curve.items()}
    if not rows:
        raise ValueError("no pass@k curves in the result (its key 'pass_at_k' is empty or missing)")
    frame = pd.DataFrame.from_dict(rows, orient="index").sort_index(axis=1)
    frame.index.names = ["model", "split"]
    frame["gap"] = frame[frame.columns.max()] - frame[frame.columns.min()]
    return frame.rename(columns=lambda k: k if k == "gap" else f"pass@{k}")


def zero_variance_table(result: dict[str, Any], variant: str | None = None) -> pd.DataFrame:
    """Share of GRPO groups whose completions all got one reward (no gradient), per prompt kind
    (``all`` = every group): over all steps, the first and the last tenth of training. ``variant``
    defaults to the GRPO variant the result selected."""
    shares = result.get("zero_variance", {})
    variant = variant or result.get("selection", {}).get("grpo", {}).get("chosen")
    if variant not in shares:
        raise ValueError(f"no zero-variance shares for variant {variant!r} (variants: {sorted(shares)})")
    return pd.DataFrame(shares[variant]).T[["all_steps", "first_tenth", "last_tenth"]]


def plot_comparisons(result_path: str | Path, path: str | Path, a: str = "primed", b: str = "grpo") -> Path:
    """Forest plot of B − A on the issue's headline metrics, with paired bootstrap 95% CIs."""
    result = load_result(result_path)
    chosen = result.get("selection", {}).get("chosen", b)
    return plot_paired_differences(comparison_table(result, a, b), path,
                                   title=f"{b} ({chosen}) − {a}")


def plot_transitions(diagnosis_path: str | Path, path: str | Path) -> Path:
    """Heatmap of per-entry outcomes on non-live AST: A's outcome (rows) against B's (columns)."""
    diagnosis = load_result(diagnosis_path)
    table = pd.DataFrame(diagnosis["transitions"])  # columns: B outcomes; index: A outcomes
    table = table.loc[list(table.columns)]
    a, b = diagnosis.get("pair", ["A", "B"])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4))
    values = table.to_numpy(dtype=float)
    shade = np.log1p(values)
    ax.imshow(shade, cmap="Blues")
    for (i, j), value in np.ndenumerate(values):
        ax.text(j, i, f"{int(value)}", ha="center", va="center",
                color="white" if shade[i, j] > shade.max() * 0.6 else "black")
    ax.set_xticks(range(len(table.columns)), table.columns)
    ax.set_yticks(range(len(table.index)), table.index)
    ax.set_xlabel(f"under {b}")
    ax.set_ylabel(f"under {a}")
    ax.set_title("Non-live AST entries: what changed")
    return _save(fig, path)


def plot_signal_by_kind(diagnosis_path: str | Path, path: str | Path, runs: list[str] | None = None) -> Path:
    """Bars: share of GRPO groups with no reward variance (no gradient), per prompt kind and run."""
    signal = load_result(diagnosis_path)["signal_by_kind"]
    runs = runs or sorted(signal)
    frame = pd.DataFrame({run: {kind: row["frac_reward_zero_std"] for kind, row in signal[run].items()}
                          for run in runs if signal.get(run)})
    if frame.empty:
        raise ValueError(f"no per-kind GRPO signal for runs {runs} in {diagnosis_path}")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(frame.columns)
    x = np.arange(len(frame.index))
    for i, run in enumerate(frame.columns):
        ax.bar(x + i * width, frame[run].to_numpy(dtype=float), width, label=run)
    ax.set_xticks(x + width * (len(frame.columns) - 1) / 2, frame.index)
    ax.set_ylabel("groups with zero reward std")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("Where GRPO had no gradient, by prompt kind")
    return _save(fig, path)
