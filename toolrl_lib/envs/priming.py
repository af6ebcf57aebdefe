"""Priming rows from gold episodes: whole transcripts, loss on the assistant's tokens only.

Each task's gold steps are played through the same ``Episode`` machinery the rollouts use,
so the SFT sees exactly the token layout GRPO will sample in (tool results and user turns
injected as continuations). One row per episode: ``input_ids`` (prompt + transcript) and
``completion_mask`` (0 on the prompt and on injected tokens, 1 on the assistant's), which
TRL's SFTTrainer turns into labels (``completion_only_loss``).

Which gold episodes (``priming_tasks``): by default the first GRPO tasks. Priming on the very
kinds RL is scored on teaches their answers (a primed 135M model solved 80-87% of the default
kinds, leaving RL nothing to learn), so ``multi_turn.priming_kinds`` can draw priming from other
kinds -- e.g. the default kinds while the hard ones are held out: the call format and the
episode layout are taught, the hard kinds' behaviours are not. Priming always comes from the
train split, whose seeds never meet the validation or test tasks'.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.envs import get_env, make_tasks
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings, play_gold


def priming_tasks(train_tasks: list[Task], n: int, environments: list[str],
                  kinds: list[str] | None = None) -> list[Task]:
    """The ``n`` tasks priming trains on: the first of ``train_tasks``, or (``kinds`` given)
    train-split tasks of those kinds."""
    if kinds is None:
        return train_tasks[:n]
    return make_tasks("train", n, environments, kinds)


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
