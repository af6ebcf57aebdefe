"""Notebook 05's paired-difference figure: written from analysis.compare's table, bad tables refused."""

import pandas as pd
import pytest

from toolrl_lib.evaluate import plots


def _pairs() -> pd.DataFrame:
    return pd.DataFrame({
        "category": ["simple_python", "irrelevance", "ALL"],
        "n": [400, 240, 640],
        "diff": [0.04, -0.23, -0.06],
        "ci_low": [0.02, -0.30, -0.08],
        "ci_high": [0.07, -0.16, -0.03],
    })


def test_paired_differences_figure_is_a_png(tmp_path):
    path = plots.plot_paired_differences(_pairs(), tmp_path / "sub" / "pairs.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paired_differences_refuses_tables_it_cannot_plot(tmp_path):
    with pytest.raises(ValueError, match="ci_low"):
        plots.plot_paired_differences(_pairs().drop(columns="ci_low"), tmp_path / "a.png")
    with pytest.raises(ValueError, match="no per-category rows"):
        plots.plot_paired_differences(_pairs()[_pairs().category == "ALL"], tmp_path / "b.png")
