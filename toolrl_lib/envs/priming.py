"""Priming rows from gold episodes: whole transcripts, loss on the assistant's tokens only.

Each task's gold steps are played through the same ``Episode`` machinery the rollouts use,
so the SFT sees exactly the token layout GRPO will sample in (tool results and user turns
injected as continuations). One row per episode: ``input_ids`` (prompt + transcript) and
``completion_mask`` (0 on the prompt and on injected tokens, 1 on the assistant's), which
TRL's SFTTrainer turns into labels (``completion_only_loss``).
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.envs import get_env
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings, play_gold


def gold_transcript_rows(tasks: list[Task], adapter: Any, tokenizer: Any, settings: EpisodeSettings,
                         max_length: int) -> tuple[list[dict[str, list[int]]], dict[str, int]]:
    """SFT rows of the gold episodes that succeed and fit ``max_length``; and the counts."""
    rows, report = [], {"kept": 0, "too_long": 0, "not_successful": 0}
    for task in tasks:
        episode = play_gold(Episode(get_env(task.env), task, adapter, tokenizer, settings))
        if not episode.result()["success"]:  # e.g. cut by the step or token limit
            report["not_successful"] += 1
            continue
        ids = episode.prompt_ids + episode.completion_ids
        if len(ids) > max_length:
            report["too_long"] += 1
            continue
        rows.append({"input_ids": ids, "completion_mask": [0] * len(episode.prompt_ids) + episode.env_mask})
        report["kept"] += 1
    return rows, report
