"""Report of benchmarks/gpu/rl_learning_gpu.py: score the GPU generations with BFCL's own scorer
(here, on the CPU box), pair them, and write tables and figures.

    python -m benchmarks.gpu.rl_learning_gpu report --archive rl_learning.tar.gz \
        --work runs/rl_learning --out benchmarks/results
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pandas as pd

PAIRS = [  # (A, B): rows report B - A
    ("primed", "grpo"), ("base", "grpo"), ("grpo", "rlsd"), ("pair", "rlsd"), ("primed", "rlsd"),
    ("base", "primed"),
]  # "pair": RLSD-TR's GRPO twin (same loss), evaluated when the selection chose another variant


def extract(archive: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")


def validation_table(work: Path) -> pd.DataFrame:
    """One row per (variant, step): validation mean@k, with base and primed at step 0."""
    start = json.loads((work / "start_validation.json").read_text())
    rows = [{"variant": stage, "stage": stage, "step": 0, **scores}
            for stage, scores in start["validation"].items()]
    for run in sorted((work / "runs").iterdir()):
        path = run / "validation.csv"
        if path.is_file():
            frame = pd.read_csv(path)
            frame.insert(0, "variant", run.name)
            rows += frame.to_dict(orient="records")
    return pd.DataFrame(rows)


def training_table(work: Path, validation: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per variant: steps run, mean step time, reward at start/end, zero-std share, val best/final."""
    rows = []
    primed = float(validation.loc[validation.variant == "primed", key].iloc[0])
    for run in sorted((work / "runs").iterdir()):
        metrics_path = run / "metrics.csv"
        if not metrics_path.is_file():
            rows.append({"variant": run.name, "steps": 0})
            continue
        m = pd.read_csv(metrics_path)
        val = validation[(validation.variant == run.name) & validation.stage.isin(["grpo", "final"])]
        head, tail = m.head(10), m.tail(10)
        row: dict[str, Any] = {
            "variant": run.name, "steps": int(m["step"].max()),
            "step_time_s": float(m["step_time"].median()) if "step_time" in m else float("nan"),
            "reward_first10": float(head["reward"].mean()), "reward_last10": float(tail["reward"].mean()),
            "zero_std_frac": float(m["frac_reward_zero_std"].mean()),
            "mean_length_last10": float(tail["completions/mean_length"].mean()),
            f"val_primed_{key}": primed,
        }
        if not val.empty:
            best = val.loc[val[key].idxmax()]
            final = val[val.stage == "final"]
            row.update({f"val_best_{key}": float(best[key]), "val_best_step": int(best["step"]),
                        f"val_final_{key}": float(final[key].iloc[-1]) if len(final) else float("nan")})
        rows.append(row)
    return pd.DataFrame(rows)


def common_ids(folders: list[Path]) -> set[str]:
    """Entry ids generated for every model (an interrupted bfcl phase leaves some short)."""
    from toolrl_lib.evaluate import bfcl_results as results

    sets = [{row["id"] for path in (folder / "generations").glob("*.jsonl")
             for row in results.read_results(path)} for folder in folders]
    return set.intersection(*sets) if sets else set()


def score_bfcl(work: Path, common_subset: bool = False) -> tuple[dict[str, Path], int | None]:
    """Score every generated model folder under work/bfcl with BFCL's scorer (no model load).

    ``common_subset``: score only the entries every model has (paired, but NOT BFCL's
    categories in full: the subset is whatever the interrupted generation reached)."""
    from toolrl_lib.evaluate.runner import evaluate_bfcl

    folders = sorted((work / "bfcl").iterdir())
    only = common_ids(folders) if common_subset else None
    scored = {}
    for folder in folders:
        settings = json.loads((folder / "generation.json").read_text())
        run_json = folder / "run.json"  # absent when the generating process was killed
        limit = json.loads(run_json.read_text()).get("limit") if run_json.is_file() else None

        evaluate_bfcl(settings["model"], folder, family=settings["family"], label=f"rl{folder.name}",
                      max_new_tokens=settings["max_new_tokens"], dtype=settings["dtype"], limit=limit,
                      generate=False, only_ids=only)
        scored[folder.name] = folder
    return scored, None if only is None else len(only)


def pairs_for(labels: list[str]) -> list[tuple[str, str]]:
    """The fixed pairs, then each extra variant (``--also``) against primed and the selected GRPO."""
    known = {label for pair in PAIRS for label in pair}
    extra = [(a, label) for label in sorted(set(labels) - known) for a in ("primed", "grpo")]
    return [*PAIRS, *extra]


def bfcl_tables(scored: dict[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per-category summary, paired per-category rows, paired aggregates, and call precision."""
    from toolrl_lib.evaluate.analysis import (
        call_precision,
        compare,
        compare_aggregate,
        load_entries,
        summary_table,
    )

    entries = {label: load_entries(folder).assign(model=label) for label, folder in scored.items()}
    combined = pd.concat(entries.values())
    summary, calls = summary_table(combined), call_precision(combined)
    pairs, aggs = [], []
    for a, b in pairs_for(list(entries)):
        if a in entries and b in entries:
            pairs.append(compare(entries[a], entries[b]).assign(a=a, b=b))
            for name in ("non_live_ast", "live_ast"):
                aggs.append({"a": a, "b": b, **compare_aggregate(entries[a], entries[b], name)})
    return summary, pd.concat(pairs) if pairs else pd.DataFrame(), pd.DataFrame(aggs), calls


def plot_validation(validation: pd.DataFrame, key: str, path: Path, only: list[str] | None = None) -> None:
    import matplotlib.pyplot as plt

    from toolrl_lib.plotting import save_figure

    fig, ax = plt.subplots(figsize=(7, 4))
    primed = float(validation.loc[validation.variant == "primed", key].iloc[0])
    base = float(validation.loc[validation.variant == "base", key].iloc[0])
    for variant, group in validation[~validation.variant.isin(["base", "primed"])].groupby("variant"):
        if only and variant not in only:
            continue
        group = group.sort_values("step")
        steps = [0, *group["step"].tolist()]
        ax.plot(steps, [primed, *group[key].tolist()], marker="o", label=variant)
    ax.axhline(primed, color="grey", ls="--", lw=1, label="primed (step 0)")
    ax.axhline(base, color="black", ls=":", lw=1, label="base model")
    ax.set_xlabel("GRPO optimizer step")
    ax.set_ylabel(f"validation {key}")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def markdown(frame: pd.DataFrame, digits: int = 3) -> str:
    if frame.empty:
        return "(none)\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        cells = [f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(archive: Path, out: Path, work: Path, figures: Path = Path("figures"),
           common_subset: bool = False, tag: str = "") -> None:
    """``tag``: a second experiment's files sit beside the first (rl_learning_<tag>*, 07_<tag>_*)."""
    name = f"rl_learning_{tag}" if tag else "rl_learning"
    suffix = f"{tag}_" if tag else ""
    extract(archive, work)
    selection = json.loads((work / "selection.json").read_text())
    # a variant that never ran scored -inf in archives made before select_grpo skipped it
    selection["scores"] = {k: v for k, v in selection["scores"].items() if v != float("-inf")}
    key = selection["key"]
    validation = validation_table(work)
    training = training_table(work, validation, key)
    scored, n_common = score_bfcl(work, common_subset)
    summary, pairs, aggs, calls = bfcl_tables(scored)
    out.mkdir(parents=True, exist_ok=True)
    validation.to_csv(out / f"{name}_validation.csv", index=False)
    training.to_csv(out / f"{name}_training.csv", index=False)
    summary.to_csv(out / f"{name}_bfcl.csv", index=False)
    pairs.to_csv(out / f"{name}_bfcl_pairs.csv", index=False)
    calls.to_csv(out / f"{name}_bfcl_calls.csv", index=False)
    (out / f"{name}.json").write_text(json.dumps({
        "selection": selection, "aggregates": aggs.to_dict(orient="records"),
        "bfcl_common_subset_entries": n_common,
        "start": json.loads((work / "start_validation.json").read_text()),
    }, indent=2))
    plot_validation(validation, key, figures / f"07_{suffix}validation_curves.png")
    rlsd = selection.get("rlsd", "rlsd-weighted")  # archives before the key existed ran rlsd-weighted
    twin = selection.get("rlsd_twin", "grpo-weighted")
    if rlsd and (work / "runs" / rlsd).is_dir():
        plot_validation(validation, key, figures / f"08_{suffix}grpo_vs_rlsd.png",
                        only=[twin, rlsd])
    if not summary.empty:
        from toolrl_lib.evaluate.plots import plot_accuracy

        plot_accuracy(summary, figures / f"07_{suffix}bfcl_categories.png",
                      title="BFCL v4 single-turn, embedded model (bootstrap 95% CIs)")
    acc = summary.pivot(index="category", columns="model", values="accuracy").reset_index()
    headline = pairs[pairs.category == "ALL"][["a", "b", "n", "acc_a", "acc_b", "diff", "ci_low", "ci_high",
                                               "mcnemar_p"]] if not pairs.empty else pairs
    text = [
        "# GRPO vs format priming on the embedded model (GPU), BFCL v4 single-turn\n",
        f"Selected GRPO variant (by validation {key}, never BFCL): **{selection['chosen']}**; "
        f"validation scores of the candidates: {json.dumps(selection['scores'])}\n",
        "## Training and validation (mean@k on our validation split)\n", markdown(training),
        *([f"**Partial BFCL evaluation**: only the {n_common} entries generated for every model are "
           "scored (the generation was interrupted; it runs shortest prompts first, so this subset "
           "leans to short prompts). Paired, but not BFCL's full categories.\n"] if n_common else []),
        "## BFCL accuracy per category (official scorer)\n", markdown(acc),
        "## Paired differences on BFCL aggregates (B - A, category-stratified paired bootstrap 95% CI)\n",
        markdown(aggs[["a", "b", "aggregate", "n", "acc_a", "acc_b", "diff", "ci_low", "ci_high"]]
                 if not aggs.empty else aggs, 4),
        "## Paired differences over all scored entries pooled (B - A)\n", markdown(headline, 4),
        "## Calling more, or calling better? (AST entries pooled; accuracy among the entries answered "
        "with a call, bootstrap 95% CI)\n", markdown(calls, 3),
        f"Per-category paired rows: {name}_bfcl_pairs.csv.\n",
    ]
    (out / (f"{name}.md" if tag else "rl_learning_gpu.md")).write_text("\n".join(text))
    print("\n".join(text))
