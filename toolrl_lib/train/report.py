"""Reading a finished run back: curves, before/after numbers, completions side by side.

Notebook 03 calls these; they only read the run directory (metrics.csv, validation.csv,
run_info.json, last/), so they work on any run, including one trained on another machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolrl_lib.plotting import plot_metric_curves, save_figure
from toolrl_lib.run_dir import RunDir, read_run_info, run_base

CURVES = (
    ("reward components", ("reward/format", "reward/name", "reward/args", "reward/reasoning", "reward")),
    ("zero-variance groups (fraction)", ("frac_reward_zero_std",)),
    ("completion length (tokens)", ("completions/mean_length",)),
    ("clip ratio / KL", ("clip_ratio/region_mean", "kl")),
)


def load_tables(run_dir: str | Path) -> tuple[Any, Any]:
    """(metrics, validation) DataFrames; a missing file is an error naming the notebook."""
    import pandas as pd

    run_dir = Path(run_dir)
    if not (run_dir / "metrics.csv").is_file():
        raise FileNotFoundError(f"{run_dir}/metrics.csv not found: train first (notebook 03 / toolrl train)")
    metrics = pd.read_csv(run_dir / "metrics.csv")
    path = run_dir / "validation.csv"
    validation = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    return metrics, validation


def before_after(validation: Any, key: str) -> tuple[float, float]:
    """``key`` (e.g. ``binary_mean@16``) of the start model (stage base) and of the saved final adapter."""
    base = validation[validation["stage"] == "base"]
    final = validation[validation["stage"] == "final"]
    if base.empty or final.empty:
        raise ValueError("validation.csv lacks a 'base' or 'final' row: enable validation.before_training")
    return float(base[key].iloc[0]), float(final[key].iloc[-1])


def plot_training_curves(metrics: Any, out_path: str | Path, curves: Any = None) -> Path:
    """A 2x2 grid of metric curves by step; ``curves`` = four (title, columns) (default CURVES)."""
    return plot_metric_curves(metrics, out_path, curves or CURVES)


def plot_validation(validation: Any, out_path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [c for c in validation.columns if "_mean@" in c]
    labels = [f"{s}@{t}" for s, t in zip(validation["stage"], validation["step"], strict=True)]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(keys), 1)
    for i, key in enumerate(keys):
        ax.bar([x + i * width for x in range(len(labels))], validation[key], width, label=key)
    ax.set_xticks([x + width * (len(keys) - 1) / 2 for x in range(len(labels))], labels, rotation=20)
    ax.set_title("validation mean@k by stage (stage@step)")
    ax.legend()
    return save_figure(fig, out_path)


def compare_completions(
    run_dir: str | Path, examples: list[Any], *, max_new_tokens: int = 128, device: str = "cpu",
    dtype: str = "auto",
) -> Any:
    """Greedy completions of the start model and of base + ``last/`` for the same prompts."""
    import pandas as pd

    from toolrl_lib.generation import generate
    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.rewards import score
    from toolrl_lib.train.backend import load_adapter_model

    run = RunDir(run_dir)
    info = read_run_info(run.root)
    family = info.family
    adapter = get_adapter(family)
    start = load_tokenizer(info.model_name)
    columns: dict[str, list[str]] = {}
    for label, model_path, adapter_dir in (("before", info.model_name, None),
                                           ("after", run_base(run.root, info), run.last)):
        tokenizer = start if adapter_dir is None else load_tokenizer(model_path)
        model = (load_model(model_path, dtype=dtype, device=device) if adapter_dir is None
                 else load_adapter_model(model_path, str(adapter_dir), dtype, device))
        prompts = [adapter.render_prompt(e, tokenizer) for e in examples]
        columns[label] = [c[0] for c in generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens)]
        del model
    rows = []
    for i, example in enumerate(examples):
        row = {"id": example.id, "query": example.query,
               "expected": json.dumps(example.ground_truth, ensure_ascii=False)}
        for label in ("before", "after"):
            text = columns[label][i]
            row[label] = text
            row[f"{label}_binary"] = score(text, example.ground_truth, example.tools, scheme="binary",
                                           family=family).total
        rows.append(row)
    return pd.DataFrame(rows)


def completion_browser(table: Any) -> Any:
    """An ipywidgets slider over the rows of ``compare_completions`` (interactive sessions)."""
    import ipywidgets as widgets

    out = widgets.HTML()

    def show(index: int) -> None:
        import html

        row = table.iloc[index]
        out.value = (
            f"<b>{html.escape(str(row['id']))}</b>: {html.escape(str(row['query']))}<br>"
            f"<b>expected</b>: <code>{html.escape(str(row['expected']))}</code><br>"
            f"<b>before</b> (binary {row['before_binary']:.0f}):<pre>{html.escape(str(row['before']))}</pre>"
            f"<b>after</b> (binary {row['after_binary']:.0f}):<pre>{html.escape(str(row['after']))}</pre>"
        )

    slider = widgets.IntSlider(min=0, max=max(len(table) - 1, 0), description="example")
    slider.observe(lambda change: show(change["new"]), names="value")
    show(0)
    return widgets.VBox([slider, out])
