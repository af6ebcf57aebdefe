"""Episode success of a model on held-out tasks (greedy by default), with per-task rows.

The per-task rows (``task_id``, ``success``, ...) are what paired comparisons need: two
models scored on the same tasks give 0/1 pairs for ``toolrl_lib.evaluate.stats``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings
from toolrl_lib.envs.rewards import components
from toolrl_lib.envs.rollout import SamplingSettings, new_episodes, run_episodes


def evaluate_episodes(model: Any, tokenizer: Any, tasks: list[Task], family: str,
                      settings: EpisodeSettings, sampling: SamplingSettings | None = None,
                      seed: int = 0, step: Any = None) -> tuple[list[dict[str, Any]], list[Episode]]:
    """Run every task once; returns the outcome rows (with each episode's ``transcript``: its step
    texts and refusals, cut short) and the finished episodes (``step``: another sampler for the
    rounds, ``rollout.vllm_step``)."""
    from toolrl_lib.prompts import get_adapter

    sampling = sampling or SamplingSettings(do_sample=False)
    episodes = new_episodes(tasks, get_adapter(family), tokenizer, settings)
    run_episodes(model, tokenizer, episodes, sampling, seed=seed, step=step)
    return [{**e.result(), **e.transcript()} for e in episodes], episodes


def success_groups(rows: list[dict[str, Any]], field: str) -> dict[str, list[float]]:
    """0/1 successes grouped by ``kind``, ``env`` or ``app`` (a task across two apps counts for
    both; rows written before tasks recorded their apps count for their environment)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        names = (row.get("apps") or [row["env"]]) if field == "app" else [row[field]]
        for name in names:
            groups[name].append(float(bool(row["success"])))
    return dict(sorted(groups.items()))


def summarise(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Success rate and shaped components overall, success per kind and per environment
    (``success_<name>``), and per app (``success_app_<app>``) once some task's apps differ
    from its environment (composites), so runs on the apps alone keep their columns."""
    if not rows:
        return {}
    n = len(rows)
    parts = [components(r) for r in rows]
    out = {name: sum(p[name] for p in parts) / n for name in ("success", "turns", "calls", "format")}
    out["forced"] = sum(r["forced"] > 0 for r in rows) / n
    out["truncated"] = sum(bool(r["truncated"]) for r in rows) / n
    for field in ("kind", "env"):
        for name, values in success_groups(rows, field).items():
            out[f"success_{name}"] = sum(values) / len(values)
    if any(row.get("apps", [row["env"]]) != [row["env"]] for row in rows):
        for name, values in success_groups(rows, "app").items():
            out[f"success_app_{name}"] = sum(values) / len(values)
    return out


def write_rows(path: str | Path, rows: list[dict[str, Any]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def transcript(episode: Episode, tokenizer: Any) -> str:
    """The episode as text, injected spans marked: what the model wrote vs what it was told."""
    parts, current, mask = [], [], None
    for token, bit in zip(episode.completion_ids, episode.env_mask, strict=True):
        if bit != mask and current:
            parts.append(("MODEL" if mask else "ENV", tokenizer.decode(current)))
            current = []
        current.append(token)
        mask = bit
    if current:
        parts.append(("MODEL" if mask else "ENV", tokenizer.decode(current)))
    head = tokenizer.decode(episode.prompt_ids[-40:])
    body = "\n".join(f"[{who}] {text.strip()}" for who, text in parts)
    return f"[PROMPT ...] {head.strip()}\n{body}"
