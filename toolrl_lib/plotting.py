"""The one way notebooks' figures are written: tight layout, parent folder created, figure closed
(so long notebook runs do not accumulate open matplotlib figures)."""

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
