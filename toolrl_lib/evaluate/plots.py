"""Figures for notebook 05: accuracy with CIs, call/validity rates, error taxonomy,
paired differences with CIs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolrl_lib.plotting import save_figure


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _grouped_bars(ax: Any, summary: pd.DataFrame, column: str, with_ci: bool) -> None:
    categories = list(dict.fromkeys(summary["category"]))
    models = list(dict.fromkeys(summary["model"]))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(categories))
    for i, model in enumerate(models):
        part = summary[summary["model"] == model].set_index("category").reindex(categories)
        values = part[column].to_numpy(dtype=float)
        yerr = None
        if with_ci and {"ci_low", "ci_high"} <= set(part.columns):
            low = np.clip(values - part["ci_low"].to_numpy(dtype=float), 0, None)
            high = np.clip(part["ci_high"].to_numpy(dtype=float) - values, 0, None)
            yerr = np.vstack([low, high])
        ax.bar(x + (i - (len(models) - 1) / 2) * width, values, width, yerr=yerr, capsize=2, label=model)
    ax.set_xticks(x, categories, rotation=35, ha="right")
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)


def plot_accuracy(summary: pd.DataFrame, path: str | Path, title: str = "BFCL v4 accuracy") -> Path:
    """Grouped bars: model x category accuracy with bootstrap 95% CIs."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * summary["category"].nunique() + 2), 4))
    _grouped_bars(ax, summary, "accuracy", with_ci=True)
    ax.set_ylabel("accuracy (BFCL official)")
    ax.set_title(title)
    ax.legend()
    return _save(fig, path)


def plot_rates(summary: pd.DataFrame, path: str | Path) -> Path:
    """Two panels: share of entries with a call, and share with a format-valid completion."""
    plt = _plt()
    width = max(6, 1.1 * summary["category"].nunique() + 2)
    fig, axes = plt.subplots(1, 2, figsize=(2 * width, 4))
    _grouped_bars(axes[0], summary, "call_rate", with_ci=False)
    axes[0].set_title("call rate (>= 1 call)")
    _grouped_bars(axes[1], summary, "valid_rate", with_ci=False)
    axes[1].set_title("format-valid rate (our parser)")
    axes[0].legend()
    return _save(fig, path)


def plot_errors(taxonomy: pd.DataFrame, path: str | Path) -> Path:
    """Stacked bars per model: share of entries failing with each BFCL error family."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    if taxonomy.empty:
        ax.text(0.5, 0.5, "no failures", ha="center", va="center")
    else:
        table = taxonomy.pivot_table(index="model", columns="error_type", values="share", aggfunc="sum").fillna(0)
        bottom = np.zeros(len(table))
        for column in table.columns:
            ax.bar(table.index, table[column], bottom=bottom, label=column)
            bottom += table[column].to_numpy()
        ax.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    ax.set_ylabel("share of all scored entries")
    ax.set_title("BFCL error types")
    return _save(fig, path)


def plot_paired_differences(pairs: pd.DataFrame, path: str | Path, title: str = "B − A per category") -> Path:
    """Forest plot: one row per category, the paired accuracy difference B − A with its
    bootstrap 95% interval (``analysis.compare`` columns); a row whose bar misses the zero
    line is a difference the data support, not just a higher number."""
    needed = {"category", "n", "diff", "ci_low", "ci_high"}
    if missing := needed - set(pairs.columns):
        raise ValueError(f"paired table lacks columns {sorted(missing)} (expected analysis.compare's output)")
    rows = pairs[pairs["category"] != "ALL"].iloc[::-1]
    if rows.empty:
        raise ValueError("paired table has no per-category rows to plot")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    y = np.arange(len(rows))
    diff = rows["diff"].to_numpy(dtype=float)
    low, high = rows["ci_low"].to_numpy(dtype=float), rows["ci_high"].to_numpy(dtype=float)
    err = np.vstack([diff - low, high - diff])
    supported = (low > 0) | (high < 0)
    err = np.clip(err, 0, None)
    for keep, color in ((supported, "tab:blue"), (~supported, "tab:gray")):
        if keep.any():
            ax.errorbar(diff[keep], y[keep], xerr=err[:, keep], fmt="o", color=color, capsize=2)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, [f"{c} (n={n})" for c, n in zip(rows["category"], rows["n"], strict=True)])
    ax.set_xlabel("B − A with paired bootstrap 95% CI (blue: excludes 0)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    return save_figure(fig, path, dpi=120)


def plot_pass_at_k(panels: dict[str, dict[str, dict[str, float]]], path: str | Path,
                   title: str = "pass@k: what sampling reaches, and what RL could sharpen") -> Path:
    """One panel per split (e.g. "validation", "BFCL non-live AST"), one curve per model:
    ``panels[split][model] = {k: pass@k}`` (k as strings or ints), k on a log2 axis. The gap
    between a model's pass@1 and its pass@n is what sharpening the distribution can at best gain."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (split, curves) in zip(axes[0], panels.items(), strict=True):
        for model, curve in curves.items():
            ks = sorted(int(k) for k in curve)
            ax.plot(ks, [curve[str(k)] if str(k) in curve else curve[k] for k in ks], marker="o", label=model)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k (samples)")
        ax.set_ylabel("pass@k")
        ax.set_ylim(0, 1)
        ax.set_title(split)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    return _save(fig, path)
