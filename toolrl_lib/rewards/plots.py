"""Figures for notebook 02 (reward design): worked examples, reward distributions,
zero-variance groups and hacking probes. Each takes the notebook's table and a path, and
writes the figure through ``toolrl_lib.plotting.save_figure``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.plotting import save_figure
from toolrl_lib.rewards.schemes import SCHEMES, reward_range

DPI = 120


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def normalised(total: float, scheme: str) -> float:
    """``total`` as a fraction of the scheme's range (0 = lowest, 1 = highest), so schemes
    with different scales share one colour bar or axis."""
    lo, hi = reward_range(scheme)
    return (total - lo) / (hi - lo)


def plot_worked_examples(worked: pd.DataFrame, path: str | Path,
                         schemes: tuple[str, ...] = SCHEMES) -> Path:
    """Heat map of the worked cases x schemes: the colour is the position in each scheme's range,
    the label the raw total."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 6.5))
    norm = pd.DataFrame({s: [normalised(v, s) for v in worked[s]] for s in schemes}, index=worked.index)
    image = ax.imshow(norm.values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(schemes)), schemes)
    ax.set_yticks(range(len(norm)), norm.index)
    for i, case in enumerate(worked.index):
        for j, scheme in enumerate(schemes):
            ax.text(j, i, f"{worked.loc[case, scheme]:g}", ha="center", va="center",
                    color="white" if norm.iloc[i, j] < 0.6 else "black", fontsize=8)
    ax.set_title("Worked examples: total per scheme (colour = position in the scheme's range)")
    fig.colorbar(image, ax=ax, fraction=0.04)
    return save_figure(fig, path, dpi=DPI)


def plot_reward_distribution(samples: pd.DataFrame, path: str | Path, title: str,
                             schemes: tuple[str, ...] = SCHEMES) -> Path:
    """One histogram per scheme of the sampled completions' totals, over the scheme's range."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(schemes), figsize=(12, 3.2), squeeze=False)
    for ax, scheme in zip(axes[0], schemes, strict=True):
        lo, hi = reward_range(scheme)
        ax.hist(samples[scheme], bins=20, range=(lo, hi), color="tab:blue", edgecolor="white")
        ax.set_title(f"{scheme}  (mean {samples[scheme].mean():.2f})")
        ax.set_xlabel("total reward")
    axes[0][0].set_ylabel("completions")
    fig.suptitle(title)
    return save_figure(fig, path, dpi=DPI)


def plot_zero_variance(zero_var: dict[str, float], path: str | Path, group_size: int) -> Path:
    """Bars: the share of groups whose rewards are all equal (no GRPO gradient), per scheme."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(list(zero_var), list(zero_var.values()), color=["tab:blue", "tab:orange", "tab:green"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of groups")
    ax.set_title(f"Groups with zero reward variance (G={group_size}) — no gradient")
    for i, v in enumerate(zero_var.values()):
        ax.text(i, v + 0.02, f"{v:.0%}", ha="center")
    return save_figure(fig, path, dpi=DPI)


def plot_hacking_probes(probes: pd.DataFrame, path: str | Path,
                        schemes: tuple[str, ...] = SCHEMES) -> Path:
    """Horizontal bars per probe and scheme, as a fraction of the scheme's range."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.27
    for j, scheme in enumerate(schemes):
        values = [normalised(v, scheme) for v in probes[scheme]]
        ax.barh([i + j * width for i in range(len(probes))], values, height=width, label=scheme)
    ax.set_yticks([i + width for i in range(len(probes))], probes.index)
    ax.invert_yaxis()
    ax.set_xlabel("total, as a fraction of the scheme's range")
    ax.set_title("Reward-hacking probes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, dpi=DPI)
