"""Episode rewards: success, with optional shaped credit, logged per component.

``total = success * w_success + call_credit * w_calls + turn_share * w_turns - refused_share * w_refused``
where ``success`` is 1 when every turn passed the checker (state + asked-for facts), ``call_credit``
the share of gold calls made exactly, ``turn_share`` the share of turns passed and ``refused_share``
the share of the episode's calls the environment refused. The default scheme is success alone
(w_calls = w_turns = w_refused = 0): the sparse reward the task defines; shaped credit gives partial
episodes a gradient when whole successes are rare. Call credit alone never costs a wrong call, so a
policy can buy credit by calling more: GPU run 3's GRPO model went from 1.2 to 3.4 calls an episode on
``report`` tasks (0 to 1.8 of them refused) for call credit 0.42 -> 0.50 and no success. The refusal
charge prices that; a share, not a count, so one designed failure (``recover``) followed by the retry
costs less than giving up after it.

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
    refused: float = 0.0  # charge: weight of the share of the episode's calls the environment refused

    def check(self) -> EpisodeRewardScheme:
        weights = (self.success, self.calls, self.turns)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"episode reward weights must be >= 0 with a positive sum, got {weights}")
        if self.refused < 0:
            raise ValueError(f"the refusal charge is subtracted: its weight must be >= 0, got {self.refused}")
        return self


def scheme_of(section: Any) -> EpisodeRewardScheme:
    """A config's ``multi_turn`` reward weights as a scheme (the one place they are read)."""
    return EpisodeRewardScheme(section.reward_success, section.reward_calls, section.reward_turns,
                               section.reward_refused)


def components(outcome: dict[str, Any]) -> dict[str, float]:
    """An episode's reward parts, each in [0, 1].

    >>> parts = components({"success": False, "call_credit": 0.5, "turns_passed": 0, "turns": 1,
    ...                     "steps": 4, "valid_steps": 4, "calls": 4, "refused": 3})
    >>> parts["calls"], parts["refused"]
    (0.5, 0.75)
    """
    steps = max(int(outcome.get("steps", 0)), 1)
    return {
        "success": float(bool(outcome["success"])),
        "calls": float(outcome["call_credit"]),
        "turns": outcome["turns_passed"] / max(int(outcome["turns"]), 1),
        "format": outcome.get("valid_steps", 0) / steps,
        "refused": outcome.get("refused", 0) / max(int(outcome.get("calls", 0)), 1),
    }


def episode_reward(outcome: dict[str, Any], scheme: EpisodeRewardScheme) -> float:
    """The weighted sum of ``components``, the refusal share charged.

    >>> failed = {"success": False, "call_credit": 0.5, "turns_passed": 0, "turns": 1, "calls": 4, "refused": 3}
    >>> careful = {**failed, "calls": 2, "refused": 0}
    >>> charged = EpisodeRewardScheme(calls=0.25, refused=0.1)
    >>> round(episode_reward(failed, charged), 3), episode_reward(careful, charged)
    (0.05, 0.125)
    """
    parts = components(outcome)
    return (scheme.success * parts["success"] + scheme.calls * parts["calls"] + scheme.turns * parts["turns"]
            - scheme.refused * parts["refused"])


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
            for name in ("success", "calls", "turns", "format", "refused"):
                log_metric(f"reward/{name}", sum(p[name] for p in parts) / n)
            for name in COUNTERS:
                log_metric(f"episode/{name}", sum(float(o.get(name, 0)) for o in outcomes) / n)
        return totals

    return [reward_episode]
