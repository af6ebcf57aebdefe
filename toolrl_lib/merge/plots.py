"""Figure for notebook 04: what the merge changed on disk and how close the saved model stays
to base + adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.plotting import save_figure


def plot_merge_verification(report: Any, path: str | Path) -> Path:
    """Two panels from a ``MergeReport``: adapter vs merged size on disk (log scale), and the
    largest logit difference of each stage against base + adapter, with the dtype's limit."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    sizes = {"adapter": report.sizes["adapter_weights_bytes"] / 2**20,
             f"merged ({report.dtype})": report.sizes["merged_bytes"] / 2**20}
    left.bar(list(sizes), list(sizes.values()), color=["tab:orange", "tab:blue"])
    left.set_yscale("log")
    left.set_ylabel("MB (log scale)")
    left.set_title("size on disk")
    diffs = {
        "adapter effect\n(base vs base+adapter)": report.logits["adapter_effect"]["max_abs"],
        "merged fp32": report.logits.get("merge_fp32_vs_reference", {}).get("max_abs", float("nan")),
        f"saved {report.dtype}": report.logits["saved_vs_reference"]["max_abs"],
    }
    right.bar(list(diffs), list(diffs.values()), color=["tab:gray", "tab:green", "tab:blue"])
    right.axhline(report.logits["limits"]["max_abs"], color="tab:red", linestyle="--",
                  label=f"{report.dtype} limit")
    right.set_yscale("log")
    right.set_ylabel("max |logit difference|")
    right.set_title("vs base + adapter (fixed prompts)")
    right.legend()
    return save_figure(fig, path, dpi=120)
