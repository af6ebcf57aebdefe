"""Episode rewards: success, with optional shaped credit, logged per component.

``total = success * w_success + call_credit * w_calls + turn_share * w_turns`` where
``success`` is 1 when every turn passed the checker (state + asked-for facts), ``call_credit``
the share of gold calls made exactly and ``turn_share`` the share of turns passed. The
default scheme is success alone (w_calls = w_turns = 0): the sparse reward the task defines;
shaped credit gives partial episodes a gradient when whole successes are rare.

The TRL reward function reads the ``episode`` column that ``make_rollout_func`` returns and
logs ``reward/success``, ``reward/calls``, ``reward/turns``, ``reward/format`` (share of
steps whose text parsed) and a few episode counters, like the single-turn components.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class EpisodeRewardScheme:
    success: float = 1.0  # weight of whole-episode success (0/1)
    calls: float = 0.0  # weight of the share of gold calls made exactly
    turns: float = 0.0  # weight of the share of turns passed

    def check(self) -> EpisodeRewardScheme:
        weights = (self.success, self.calls, self.turns)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"episode reward weights must be >= 0 with a positive sum, got {weights}")
        return self


def components(outcome: dict[str, Any]) -> dict[str, float]:
    steps = max(int(outcome.get("steps", 0)), 1)
    return {
        "success": float(bool(outcome["success"])),
        "calls": float(outcome["call_credit"]),
        "turns": outcome["turns_passed"] / max(int(outcome["turns"]), 1),
        "format": outcome.get("valid_steps", 0) / steps,
    }


def episode_reward(outcome: dict[str, Any], scheme: EpisodeRewardScheme) -> float:
    parts = components(outcome)
    return scheme.success * parts["success"] + scheme.calls * parts["calls"] + scheme.turns * parts["turns"]


COUNTERS = ("steps", "forced", "truncated", "refused", "model_tokens", "injected_tokens", "rollout_s")


def make_episode_reward_funcs(scheme: EpisodeRewardScheme | None = None) -> list[Callable[..., list[float]]]:
    scheme = (scheme or EpisodeRewardScheme()).check()

    def reward_episode(prompts=None, completions=None, episode=None, log_metric=None, **kwargs):
        if episode is None:
            raise ValueError("reward_episode needs the 'episode' column: train with the multi-turn "
                             "rollout_func (toolrl_lib.train.multi_turn_rollout.make_rollout_func)")
        outcomes = list(episode)
        totals = [episode_reward(o, scheme) for o in outcomes]
        if log_metric is not None and outcomes:
            n = len(outcomes)
            parts = [components(o) for o in outcomes]
            for name in ("success", "calls", "turns", "format"):
                log_metric(f"reward/{name}", sum(p[name] for p in parts) / n)
            for name in COUNTERS:
                log_metric(f"episode/{name}", sum(float(o.get(name, 0)) for o in outcomes) / n)
        return totals

    return [reward_episode]
