"""The one way notebooks' figures are written: tight layout, parent folder created, figure closed
(so long notebook runs do not accumulate open matplotlib figures); and the grid of training
curves both runs' reports draw (single-turn ``train.report``, multi-turn ``envs.report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_metric_curves(metrics: Any, out_path: str | Path, curves: Any) -> Path:
    """A 2x2 grid of ``metrics.csv`` curves by step; ``curves`` = four (title, columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (title, columns) in zip(axes.flat, curves, strict=True):
        for column in columns:
            if column in metrics.columns and metrics[column].notna().any():
                ax.plot(metrics["step"], metrics[column], marker="o", ms=3, label=column)
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        if ax.lines:
            ax.legend(fontsize=7)
    return save_figure(fig, out_path)
