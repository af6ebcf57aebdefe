"""Reading a multi-turn run back: curves, episode success by stage, one transcript.

Notebook 06 calls these; they read only the run directory (metrics.csv, validation.csv,
episodes/<stage>.jsonl), so they work on a run trained elsewhere (the GPU session's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.plotting import plot_metric_curves, save_figure

CURVES = (
    ("reward components", ("reward/success", "reward/calls", "reward/turns", "reward/format", "reward")),
    ("zero-variance groups (fraction)", ("frac_reward_zero_std",)),
    ("tokens per episode", ("episode/model_tokens", "episode/injected_tokens")),
    ("steps per episode / refused calls", ("episode/steps", "episode/refused", "episode/forced")),
)


def plot_curves(metrics: Any, out_path: str | Path) -> Path:
    """The multi-turn run's curves, in the same grid as the single-turn report's."""
    return plot_metric_curves(metrics, out_path, CURVES)


def stage_table(validation: Any) -> Any:
    """Episode success and its components per stage (rows) -- the before/after table."""
    keep = [c for c in validation.columns if c in ("step", "stage", "success", "turns", "calls", "format",
                                                   "forced", "truncated") or c.startswith("success_")]
    return validation[keep].set_index("stage")


def plot_stages(validation: Any, out_path: str | Path) -> Path:
    """Success per stage, overall and per task kind / environment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["success", *sorted(c for c in validation.columns if c.startswith("success_"))]
    stages = list(validation["stage"])
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / max(len(stages), 1)
    for i, stage in enumerate(stages):
        row = validation.iloc[i]
        ax.bar([x + i * width for x in range(len(keys))], [row.get(k, 0) for k in keys], width, label=stage)
    ax.set_xticks([x + width * (len(stages) - 1) / 2 for x in range(len(keys))],
                  [k.replace("success_", "") for k in keys], rotation=30)
    ax.set_ylim(0, 1)
    ax.set_title("episode success on validation tasks, by stage")
    ax.legend()
    return save_figure(fig, out_path)


def validation_curves(result: dict[str, Any]) -> Any:
    """Every GRPO variant's validation curve from a GPU result file (``rl_multi_turn.json``):
    one row per (variant, step) with ``success`` and the per-kind ``success_<kind>`` columns.
    Older result files carry only the selected variant's curve; that one is returned then."""
    import io

    import pandas as pd

    texts = result.get("variant_validation") or {
        result["selection"]["chosen"]: result["selection"].get("validation_csv", "")}
    frames = [pd.read_csv(io.StringIO(text)).assign(variant=name) for name, text in texts.items() if text.strip()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def runs_side_by_side(results: dict[str, dict[str, Any]]) -> tuple[Any, Any]:
    """Several GPU runs' result files (label -> ``rl_multi_turn*.json``) in one view, for arms that
    ran in separate sessions (run 5's G=8 and run 6's G=16): one row a run (the selected variant, its
    steps, primed and GRPO success on the held-out test tasks, the difference and its paired 95% CI),
    and every variant's validation curve named ``label: variant`` (``plot_validation_curves`` takes it).
    Each run primed its own model, so the rows are not a paired comparison of the arms."""
    import pandas as pd

    rows, frames = [], []
    for label, result in results.items():
        chosen = result["selection"]["chosen"]
        test = next((c for c in result.get("comparisons", []) if c["metric"] == "own_task_success"), None)
        models = result.get("models", {})
        rows.append({"run": label, "variant": chosen, "steps": result.get("variants", {}).get(chosen, {}).get("step"),
                     "primed": models.get("primed", {}).get("own_task_success"),
                     "grpo": models.get("grpo", {}).get("own_task_success"),
                     **{key: (test or {}).get(key) for key in ("diff", "ci_low", "ci_high")}})
        curves = validation_curves(result)
        if not curves.empty:
            frames.append(curves.assign(variant=f"{label}: " + curves["variant"]))
    table = pd.DataFrame(rows).set_index("run")
    return table, (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())


def plot_validation_curves(curves: Any, chosen: str, kinds: list[str], out_path: str | Path) -> Path:
    """Left: validation success by step for each variant. Right: the selected variant by task kind
    (no ``kinds``: the left panel alone)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not kinds:
        fig, left = plt.subplots(figsize=(6.5, 4))
    else:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    for variant, rows in curves.groupby("variant", sort=True):
        left.plot(rows["step"], rows["success"], marker="o", label=variant + (" (selected)" if variant == chosen else ""))
    left.set(xlabel="GRPO step", ylabel="episode success", title="validation success, every variant")
    left.legend()
    if not kinds:
        return save_figure(fig, out_path)
    picked = curves[curves["variant"] == chosen]
    for kind in kinds:
        if f"success_{kind}" in picked.columns:
            right.plot(picked["step"], picked[f"success_{kind}"], marker=".", label=kind)
    right.set(xlabel="GRPO step", ylabel="episode success", title=f"{chosen}: validation success by task kind")
    right.set_ylim(-0.02, 1.02)
    right.legend(fontsize=8, ncol=2)
    return save_figure(fig, out_path)


def success_breakdown(rows: list[dict[str, Any]]) -> Any:
    """Per-task outcome rows (``episodes/<stage>.jsonl``) as a table: tasks and success rate
    by kind and by app (a task across two apps counts under both)."""
    import pandas as pd

    from toolrl_lib.envs.evaluate import success_groups

    table = [{"by": field, "name": name, "tasks": len(values), "success": sum(values) / len(values)}
             for field in ("kind", "app") for name, values in success_groups(rows, field).items()]
    return pd.DataFrame(table, columns=["by", "name", "tasks", "success"]).set_index(["by", "name"])


def common_refusals(rows: list[dict[str, Any]], top: int = 3) -> dict[str, dict[str, Any]]:
    """Per task kind: refused calls an episode and the ``top`` most common refusals, digits as ``N``
    (rows written before evaluation rows kept ``refusals`` are counted but not itemised).

    >>> common_refusals([{"kind": "chain", "refused": 2, "refusals": ["Error: no event with id 7",
    ...                                                             "Error: no event with id 9"]}])
    {'chain': {'episodes': 1, 'refused_per_episode': 2.0, 'top': [['Error: no event with id N', 2]]}}
    """
    import re
    from collections import Counter, defaultdict

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    out = {}
    for kind, group in sorted(by_kind.items()):
        counts = Counter(re.sub(r"\d+", "N", text) for row in group for text in row.get("refusals") or [])
        out[kind] = {"episodes": len(group), "refused_per_episode": sum(r.get("refused", 0) for r in group) / len(group),
                     "top": [[text, n] for text, n in counts.most_common(top)]}
    return out


def paired_success(run_dir: str | Path, a: str = "primed", b: str = "final") -> tuple[list[float], list[float]]:
    """Per-task 0/1 success of two stages on the same validation tasks (for a paired CI)."""
    from toolrl_lib.envs.evaluate import read_rows

    rows_a = {r["task_id"]: r for r in read_rows(Path(run_dir) / "episodes" / f"{a}.jsonl")}
    rows_b = {r["task_id"]: r for r in read_rows(Path(run_dir) / "episodes" / f"{b}.jsonl")}
    ids = [i for i in rows_a if i in rows_b]
    return [float(rows_a[i]["success"]) for i in ids], [float(rows_b[i]["success"]) for i in ids]


def catalogue_table() -> Any:
    """Every environment's tools: name, required parameters, and whether a task holds it back."""
    import pandas as pd

    from toolrl_lib.envs import env_names, get_env

    rows = []
    for name in env_names():
        env = get_env(name)
        held = set(env.generate(0, "missing_function").hidden)
        for schema in env.tools:
            rows.append({"environment": name, "tool": schema["name"], "description": schema["description"],
                         "required": ", ".join(schema["parameters"]["required"]),
                         "held back": schema["name"] in held})
    return pd.DataFrame(rows)


def scripted_outcomes(task: Any, adapter: Any, tokenizer: Any, scheme: Any) -> Any:
    """The reward of three scripted episodes of one task: the gold steps; the gold steps with
    every plain reply replaced by "OK." (state right, asked-for facts missing); and a model
    that answers every turn in plain text without calling (nothing done)."""
    import pandas as pd

    from toolrl_lib.envs import get_env
    from toolrl_lib.envs.episode import Episode, EpisodeSettings, encode, gold_replies
    from toolrl_lib.envs.rewards import components, episode_reward

    gold = gold_replies(task, adapter)
    plain = [adapter.render_completion(s.calls, content="OK.") for t in task.turns for s in t.steps]
    scripts = {"gold": gold, "gold calls, replies 'OK.'": plain,
               "never calls": ["I cannot do that."] * len(task.turns)}
    rows = []
    for label, texts in scripts.items():
        episode = Episode(get_env(task.env), task, adapter, tokenizer, EpisodeSettings(max_episode_tokens=8192))
        for text in texts:
            if episode.done:
                break
            episode.feed(encode(tokenizer, text) + [tokenizer.eos_token_id])
        outcome = episode.result()
        rows.append({"episode": label, **components(outcome), "turns passed": outcome["turns_passed"],
                     "reward": episode_reward(outcome, scheme)})
    return pd.DataFrame(rows).set_index("episode")
