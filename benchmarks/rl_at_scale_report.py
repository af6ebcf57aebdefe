"""Issue 38 report: base, SFT and GRPO on BFCL v4 single-turn (BFCL's scorer), the pass@k ceilings,
the zero-variance shares by kind and the validation curves -> benchmarks/results/rl_at_scale.{md,json}.

    python -m benchmarks.gpu.rl_at_scale report --archive rl_at_scale.tar.gz --work runs/rl_at_scale \
        --command "python -m benchmarks.gpu.rl_at_scale run --work /tmp/ras --out \\$OUT"

The JSON has the shape of ``rl_single_turn.json`` (``selected_on``, ``selection``, ``models``,
``comparisons`` of ``a``, ``b``, ``metric``, ``n``, ``diff``, ``ci_low``, ``ci_high``) plus
``pass_at_k`` (model -> split -> curve), ``zero_variance`` (variant -> kind -> share of groups with
one reward, first and last tenth of training), ``validation_curves`` and ``goals``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd

PAIRS = (("sft", "grpo"), ("base", "grpo"), ("base", "sft"))
NEVER_CALLING_SUMMARY = 0.333  # the untrained embedded model on BFCL's single-turn summary (issue 38)


def pass_at_k_panels(work: Path) -> dict[str, dict[str, Any]]:
    """model -> {"validation": curves, "bfcl_non_live_ast": curves}; BFCL samples scored here."""
    from toolrl_lib.evaluate.bfcl_pass_at_k import score_samples

    out: dict[str, dict[str, Any]] = {}
    for path in sorted((work / "pass_at_k").glob("*-validation.json")):
        out.setdefault(path.name.split("-")[0], {})["validation"] = json.loads(path.read_text())
    for folder in sorted((work / "bfcl_pass_at_k").glob("*")):
        if (folder / "sampling.json").is_file():
            try:
                curves = score_samples(folder)
            except RuntimeError as error:  # sampling cut by a deadline: say so, keep the other curves
                curves = {"incomplete": str(error)}
            out.setdefault(folder.name, {})["bfcl_non_live_ast"] = curves
    return out


def zero_variance(work: Path) -> dict[str, dict[str, dict[str, float]]]:
    """variant -> kind -> mean share of zero-variance groups over all steps, the first and the
    last tenth of the steps (TRL's ``frac_reward_zero_std`` per kind, from metrics.csv)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for path in sorted((work / "runs").glob("*/metrics.csv")):
        frame = pd.read_csv(path)
        columns = [c for c in frame if c.startswith("frac_reward_zero_std")]
        if frame.empty or not columns:
            continue
        tenth = max(1, len(frame) // 10)
        out[path.parent.name] = {
            (c.split("/kind/")[1] if "/kind/" in c else "all"): {
                "all_steps": round(float(frame[c].mean()), 4), "first_tenth": round(float(frame[c].head(tenth).mean()), 4),
                "last_tenth": round(float(frame[c].tail(tenth).mean()), 4)}
            for c in columns}
    return out


def validation_curves(work: Path, key: str) -> dict[str, list[dict[str, Any]]]:
    """variant -> rows of (step, stage, the selection key and its per-kind columns)."""
    out = {}
    scheme, k = key.split("_")[0], key.split("@")[-1]  # binary_summary@8 -> kind/<kind>/binary@8
    for path in sorted((work / "runs").glob("*/validation.csv")):
        frame = pd.read_csv(path)
        columns = ["step", "stage", *[c for c in frame if c == key or c.startswith(key.split("@")[0])
                                      or (c.startswith("kind/") and c.endswith(f"/{scheme}@{k}"))]]
        columns = list(dict.fromkeys(c for c in columns if c in frame))
        out[path.parent.name] = json.loads(frame[columns].to_json(orient="records"))
    return out


def goals(comparisons: list[dict[str, Any]], models: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals, each with the measured numbers and met: true/false."""
    def row(a: str, b: str, metric: str) -> dict[str, Any] | None:
        return next((c for c in comparisons if (c["a"], c["b"], c["metric"]) == (a, b, metric)), None)

    out: dict[str, Any] = {}
    summary = row("sft", "grpo", "bfcl_single_turn_summary")
    if summary:
        out["summary_grpo_minus_sft_ge_0.03_ci_above_0"] = {
            "diff": summary["diff"], "ci": [summary["ci_low"], summary["ci_high"]],
            "met": summary["diff"] >= 0.03 and summary["ci_low"] > 0}
    called = row("sft", "grpo", "accuracy_when_called_non_live_ast")
    if called:
        out["accuracy_when_called_non_live_grpo_minus_sft_ci_above_0"] = {
            "diff": called["diff"], "ci": [called["ci_low"], called["ci_high"]], "met": called["ci_low"] > 0}
    irrelevance = row("sft", "grpo", "irrelevance")
    if irrelevance:
        out["irrelevance_not_significantly_lower"] = {
            "diff": irrelevance["diff"], "ci": [irrelevance["ci_low"], irrelevance["ci_high"]],
            "met": irrelevance["ci_high"] >= 0}
    if "grpo" in models:
        base = models.get("base", {}).get("bfcl_single_turn_summary", NEVER_CALLING_SUMMARY)
        out["stretch_grpo_summary_above_never_calling_base"] = {
            "grpo": models["grpo"]["bfcl_single_turn_summary"], "base": base,
            "met": models["grpo"]["bfcl_single_turn_summary"] > base}
    return out


def repo_path(path: str | Path) -> str:
    """``path`` relative to the repository when inside it: result files name no machine's folders."""
    path = Path(path).resolve()
    root = Path(__file__).resolve().parents[1]
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def figures(result: dict[str, Any], folder: Path) -> list[str]:
    from toolrl_lib.evaluate.plots import plot_pass_at_k
    from toolrl_lib.plotting import save_figure

    written = []
    panels: dict[str, dict[str, Any]] = {}
    for model, splits in result["pass_at_k"].items():
        for split, curves in splits.items():
            curve = curves.get("overall") or curves.get("non_live_ast")
            if curve:
                panels.setdefault(split, {})[model] = curve
    if panels:
        written.append(repo_path(plot_pass_at_k(panels, folder / "07_rl_at_scale_pass_at_k.png")))
    key = result["selection"]["grpo"].get("key")
    if result["validation_curves"] and key:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for variant, rows in result["validation_curves"].items():
            frame = pd.DataFrame(rows)
            if key in frame:
                ax.plot(frame["step"], frame[key], marker="o", label=variant)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(f"validation {key}")
        ax.set_title("GRPO from the SFT model: validation (held-out functions)")
        ax.grid(alpha=0.3)
        ax.legend()
        written.append(repo_path(save_figure(fig, folder / "07_rl_at_scale_validation.png", dpi=120)))
    return written


def markdown(result: dict[str, Any]) -> str:
    from benchmarks.rl_single_turn_report import tables

    sel = result["selection"]
    lines = ["# RL at scale (issue 38): broad tool set, SFT warm start, long GRPO — BFCL v4 single-turn", "",
             f"SFT start selected on validation ({sel['sft'].get('key')}): **{sel['sft'].get('chosen')}** "
             f"(scores {json.dumps(sel['sft'].get('scores'))}); GRPO variant selected on validation "
             f"({sel['grpo'].get('key')}): **{sel['grpo'].get('chosen')}** (scores {json.dumps(sel['grpo'].get('scores'))}, "
             f"best steps {json.dumps(sel['grpo'].get('best_steps'))}). BFCL never chose anything.", "",
             *([f"The base model's evaluation (the unchanged embedded model, the same settings) comes from an "
                f"earlier run's archive, {result['training']['base_reused_from']}, not evaluated again.", ""]
               if result.get("training", {}).get("base_reused_from") else []),
             *tables(result)]
    lines += ["", "Goals:", ""] + [f"- {name}: {'**met**' if g['met'] else 'not met'} ({json.dumps({k: v for k, v in g.items() if k != 'met'})})"
                                   for name, g in result["goals"].items()]
    lines += ["", "pass@k (unbiased estimator; validation judged by our binary reward, BFCL by its AST checker):", ""]
    for model, splits in result["pass_at_k"].items():
        for split, curves in splits.items():
            if "incomplete" in curves:
                lines.append(f"- {model}, {split}: not measured, its sampling did not finish ({curves['incomplete']})")
                continue
            curve = curves.get("overall") or curves.get("non_live_ast") or {}
            still = curves.get("all_or_none", {}).get("overall")  # the n samples all right or all wrong
            lines.append(f"- {model}, {split} (n={curves.get('n')}): " + ", ".join(f"@{k} {v:.3f}" for k, v in curve.items())
                         + (f"; all {curves.get('n')} samples agree on {still:.0%} of examples" if still is not None else ""))
    if result["zero_variance"]:
        lines += ["", "Zero-variance groups by kind (share of groups; all steps / first tenth / last tenth):", ""]
        for variant, kinds in result["zero_variance"].items():
            lines.append(f"- {variant}: " + "; ".join(f"{kind} {v['all_steps']:.2f}/{v['first_tenth']:.2f}/{v['last_tenth']:.2f}"
                                                       for kind, v in kinds.items()))
    for variant, rows in result.get("validation_curves", {}).items():
        if not rows:
            continue
        columns = [c for c in rows[0] if c not in ("step", "stage")]
        lines += ["", f"Validation of {variant} (held-out functions; per kind):", "",
                  "| step | stage | " + " | ".join(c.replace("kind/", "") for c in columns) + " |",
                  "|---|---|" + "---|" * len(columns)]
        lines += [f"| {r['step']} | {r['stage']} | " + " | ".join(f"{r[c]:.3f}" for c in columns) + " |" for r in rows]
    if result.get("diagnosis"):
        lines += ["", "## Reading", "", result["diagnosis"]]
    if result.get("training"):
        lines += ["", f"Training: {json.dumps(result['training'])}"]
    if result.get("commands"):
        lines += ["", "Commands, in order:", ""] + [f"- `{c}`" for c in result["commands"]]
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu import bfcl_multi_turn as bmt
    from benchmarks.rl_single_turn_report import build, score_entries

    work = Path(args.work)
    if args.archive:
        bmt.unpack(Path(args.archive), work)
    sft_selection = json.loads((work / "sft_selection.json").read_text())
    grpo_selection = json.loads((work / "grpo_selection.json").read_text()) if (work / "grpo_selection.json").is_file() else {}
    entries = score_entries(work)
    result = build(entries, {"chosen": grpo_selection.get("chosen")}, sft_selection.get("validation", {}),
                   args.n_boot, pairs=PAIRS)
    result["selection"] = {"sft": {k: v for k, v in sft_selection.items() if k != "validation"}, "grpo": grpo_selection}
    state = json.loads((work / "state.json").read_text())
    result.update(
        pass_at_k=pass_at_k_panels(work), zero_variance=zero_variance(work),
        validation_curves=validation_curves(work, grpo_selection.get("key") or sft_selection["key"]),
        training={"calls": state["calls"], "variants": state["variants"],
                  "base_reused_from": state.get("base_reused_from"), "sft": {
            m: {k: json.loads((work / "sft" / m / "sft.json").read_text()).get(k)
                for k in ("steps", "epochs_done", "best_step", "best_eval_loss", "seconds", "tokens")}
            for m in state["sft_methods"] if (work / "sft" / m / "sft.json").is_file()}},
        commands=[*args.command, "python -m benchmarks.gpu.rl_at_scale report " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in (("archive", args.archive), ("work", args.work),
                                                        ("note", args.note)) if v)])
    result["goals"] = goals(result["comparisons"], result["models"])
    if args.note:
        result["diagnosis"] = Path(args.note).read_text().strip()
    result["figures"] = figures(result, Path(args.figures))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_at_scale.json").write_text(json.dumps(result, indent=2, default=float))
    text = markdown(result)
    (out / "rl_at_scale.md").write_text(text)
    print(text)
    return result
