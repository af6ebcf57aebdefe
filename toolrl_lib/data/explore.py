"""What notebook 01 shows: which sources to mix, per-example statistics and the plots.

Source names (``source_specs``): ``synthetic`` (generated), ``xlam_sample``/``toolace_sample``
(our hand-written rows in ``data/sample/``), ``bfcl_unused`` (BFCL's unscored sets), and
``xlam``/``toolace`` (a local file given in ``inputs``, else the hub) or ``parquet`` (a file).
The broad tool set (``data/toolset/``) is shown by ``broad_variety``, ``plot_broad_variety``
and ``contamination_summary``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.paths import project_root
from toolrl_lib.plotting import save_figure

SOURCE_NAMES = ("synthetic", "xlam_sample", "toolace_sample", "bfcl_unused", "xlam", "toolace",
                "parquet")
# notebook 01's smoke profile (its parameters cell; a test keeps the two equal)
SMOKE_SOURCES = ("synthetic", "xlam_sample", "toolace_sample", "bfcl_unused")
SMOKE_SETTINGS = {"n_synthetic": 1000, "synthetic_seed": 0, "seed": 0, "val_fraction": 0.1}


def source_specs(sources: Sequence[str], *, n_synthetic: int = 1000, synthetic_seed: int = 0,
                 inputs: dict[str, str | None] | None = None, limit: int | None = None
                 ) -> list[dict[str, Any]]:
    """Notebook source names -> ``prepare_sources`` specs."""
    inputs = inputs or {}
    sample = project_root() / "data" / "sample"
    specs = []
    for name in sources:
        if name == "synthetic":
            specs.append({"source": "synthetic", "n": n_synthetic, "synthetic_seed": synthetic_seed})
        elif name in ("xlam_sample", "toolace_sample"):
            kind = name.removesuffix("_sample")
            specs.append({"source": kind, "input": sample / f"{kind}_sample.json"})
        elif name == "bfcl_unused":
            specs.append({"source": "bfcl", "input": None})
        elif name in ("xlam", "toolace", "parquet"):
            if name == "parquet" and not inputs.get(name):
                raise ValueError("source 'parquet' needs a file: set inputs['parquet']")
            specs.append({"source": name, "input": inputs.get(name), "limit": limit})
        else:
            raise ValueError(f"unknown source {name!r}; choose from {', '.join(SOURCE_NAMES)}")
    return specs


def prepare_smoke(out_dir: Path, force: bool = False) -> dict[str, Any] | None:
    """Notebook 01's smoke-profile set (``data/processed/smoke``) without running the notebook: the
    GPU benchmarks train on it, and a bare host or a fresh clone has none. Offline, about a second.
    Returns the prepare report, or None when ``train.jsonl`` is already there (unless ``force``)."""
    from toolrl_lib.data.pipeline import prepare_sources

    if (Path(out_dir) / "train.jsonl").is_file() and not force:
        return None
    specs = source_specs(SMOKE_SOURCES, n_synthetic=SMOKE_SETTINGS["n_synthetic"],
                         synthetic_seed=SMOKE_SETTINGS["synthetic_seed"])
    return prepare_sources(specs, out_dir, seed=SMOKE_SETTINGS["seed"],
                           val_fraction=SMOKE_SETTINGS["val_fraction"]).to_json()


def example_table(examples: Iterable[Example], split: str = "") -> Any:
    """One row per example: source, kind, tools offered, calls, query length, turns."""
    import pandas as pd

    rows = [{
        "id": e.id, "split": split, "source": e.source, "kind": e.kind,
        "tools": len(e.tools), "calls": len(e.ground_truth),
        "distinct_functions_called": len({c["name"] for c in e.ground_truth}),
        "query_words": len(e.query.split()), "turns": len(e.messages),
        "params_offered": sum(len(t["parameters"]["properties"]) for t in e.tools),
    } for e in examples]
    return pd.DataFrame(rows)


def parameter_types(examples: Iterable[Example]) -> Counter:
    """How often each JSON type (and enum / optional-with-default) is offered."""
    counts: Counter = Counter()
    for example in examples:
        for tool in example.tools:
            params = tool["parameters"]
            for name, prop in params["properties"].items():
                counts[prop.get("type", "?")] += 1
                if "enum" in prop:
                    counts["enum"] += 1
                if name not in params.get("required", []):
                    counts["optional"] += 1
                    if "default" in prop:
                        counts["optional with default"] += 1
    return counts


def prompt_lengths(examples: Sequence[Example], tokenizer: Any, family: str,
                   enable_thinking: bool = False) -> list[int]:
    """Prompt tokens per example as the model sees it: the family's rendering (tools
    included) through the tokenizer's chat template."""
    from toolrl_lib.prompts import get_adapter

    adapter = get_adapter(family)
    texts = [adapter.render_prompt(e, tokenizer, enable_thinking=enable_thinking) for e in examples]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def plot_sources(report: dict[str, Any], path: str | Path) -> Path:
    """Rows in / kept per source, and drop reasons."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    names = list(report["sources"])
    rows = [report["sources"][n]["rows"] for n in names]
    kept = [report["sources"][n]["kept"] for n in names]
    x = range(len(names))
    left.bar([i - 0.2 for i in x], rows, width=0.4, label="raw rows")
    left.bar([i + 0.2 for i in x], kept, width=0.4, label="examples kept")
    left.set_xticks(list(x), names)
    left.set_title("Rows per source")
    left.legend()
    reasons = sorted(report["dropped"].items(), key=lambda kv: -kv[1])
    right.barh([r for r, _ in reasons] or ["(none)"], [c for _, c in reasons] or [0])
    right.set_title("Dropped rows by reason")
    right.invert_yaxis()
    return _save(fig, path)


def plot_distributions(table: Any, path: str | Path) -> Path:
    """Tools per example, calls per example, kinds, query length."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for axis, column, title in ((axes[0], "tools", "tools offered"), (axes[1], "calls", "calls expected")):
        counts = table[column].value_counts().sort_index()
        axis.bar(counts.index.astype(str), counts.values)
        axis.set_title(f"{title} per example")
    kinds = table["kind"].value_counts()
    axes[2].barh(kinds.index, kinds.values)
    axes[2].set_title("kind")
    axes[2].invert_yaxis()
    axes[3].hist(table["query_words"], bins=30)
    axes[3].set_title("query length (words)")
    return _save(fig, path)


def plot_parameter_types(counts: Counter, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 3.6))
    items = counts.most_common()
    axis.barh([k for k, _ in items], [v for _, v in items])
    axis.invert_yaxis()
    axis.set_title("parameters offered, by type")
    return _save(fig, path)


def plot_prompt_lengths(lengths_by_source: dict[str, list[int]], model: str, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(8, 3.6))
    for source, lengths in lengths_by_source.items():
        axis.hist(lengths, bins=30, alpha=0.6, label=f"{source} (n={len(lengths)})")
    axis.set_xlabel("prompt tokens (chat template + rendered tools)")
    axis.set_title(f"prompt length (tokenizer: {model})")
    axis.legend()
    return _save(fig, path)


# --- the broad tool set (``toolrl_lib/data/toolset/``) ---------------------------------------


def broad_variety(data: Any) -> dict[str, Counter]:
    """How varied a broad set is: examples by target domain and by kind (no-call examples by
    their generator), signatures by naming style and parameters by type."""
    examples = [e for rows in data.examples.values() for e in rows]
    signatures = [s for sigs in data.signatures.values() for s in sigs]
    types: Counter = Counter()
    for sig in signatures:
        for param in sig.params:
            schema = param.schema()
            items = schema.get("items", {})
            types[schema["type"] + (f" of {items['type']}" if items else "")
                  + (" (enum)" if "enum" in schema or "enum" in items else "")] += 1
    return {
        "domain": Counter(e.meta.get("domain", "?") for e in examples),
        "kind": Counter(e.meta.get("negative", e.kind) for e in examples),
        "naming style": Counter(s.style for s in signatures),
        "parameter type": types,
    }


def plot_broad_variety(variety: dict[str, Counter], path: str | Path) -> Path:
    """One bar chart per count of ``broad_variety`` (domains: the 15 most common)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(variety), figsize=(4.2 * len(variety), 4))
    for axis, (title, counts) in zip(axes, variety.items(), strict=True):
        items = counts.most_common(15)
        axis.barh([k for k, _ in items], [v for _, v in items])
        axis.invert_yaxis()
        counted = {"naming style": "functions", "parameter type": "parameters"}.get(title, "examples")
        axis.set_title(f"{counted} by {title}" + (" (top 15)" if len(counts) > 15 else ""))
    return _save(fig, path)


def contamination_summary(source: Any) -> dict[str, Any]:
    """The overlap counts with BFCL of a broad set: a ``BroadData`` or a folder written by
    ``toolrl data generate --generator broad`` (its ``contamination.json``)."""
    if hasattr(source, "report"):
        return source.report.summary()
    path = Path(source) / "contamination.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: write it with `toolrl data generate --generator broad --out {source}`")
    import json

    return json.loads(path.read_text(encoding="utf-8"))["summary"]


def _save(fig: Any, path: str | Path) -> Path:
    return save_figure(fig, path)
