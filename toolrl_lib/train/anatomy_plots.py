"""Figures for "One step, by hand" (notebook 03): one completion's tokens as a heat strip."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from toolrl_lib.plotting import save_figure


def plot_token_strip(tokens: pd.DataFrame, completion: int, path: str | Path,
                     value: str = "adv_x_ratio", per_line: int = 16) -> Path:
    """One completion's tokens in reading order, coloured by ``value`` (a column of
    ``Step.tokens``; red pushes the token down, blue up); clipped tokens get a black frame."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    rows = tokens[tokens["completion"] == completion].sort_values("position")
    if rows.empty:
        raise ValueError(f"completion {completion} has no tokens; choose one of {sorted(tokens['completion'].unique())}")
    n = len(rows)
    lines = -(-n // per_line)
    grid = np.full((lines, per_line), np.nan)
    grid.flat[:n] = rows[value].to_numpy()
    limit = max(float(np.nanmax(np.abs(grid))), 1e-9)
    fig, ax = plt.subplots(figsize=(min(1.0 * per_line, 16), 0.55 * lines + 1.2))
    image = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    clipped = (rows["clip_low"] | rows["clip_high"]).to_numpy()
    for k, (text, clip) in enumerate(zip(rows["token"], clipped, strict=True)):
        y, x = divmod(k, per_line)
        label = text.replace("\n", "\\n").replace("$", r"\$")[:8] or "·"
        ax.text(x, y, label, ha="center", va="center", fontsize=7, family="monospace")
        if clip:
            ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=1.6, ec="black"))
    ax.set_xticks([])
    ax.set_yticks(range(lines), [f"{i * per_line}" for i in range(lines)], fontsize=7)
    adv = float(rows["advantage"].iloc[0])
    ax.set_title(f"completion {completion} (A = {adv:+.3f}): {value} per token; framed = clipped", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    return save_figure(fig, path)
