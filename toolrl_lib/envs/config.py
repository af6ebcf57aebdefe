"""The ``multi_turn`` section of a run config: episodes in our environments instead of prompts.

With ``enabled: true`` a run trains on episodes (``toolrl_lib.train.multi_turn``): the tasks are
generated here (no data files), priming is SFT on gold transcripts, rollouts go through
TRL's ``rollout_func`` and the reward is the episode scheme below. The ``grpo`` section
still sets the optimiser, group size, loss and sampling temperature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_ENVS = ["calendar", "bank", "files", "inbox"]


@dataclass
class MultiTurnSection:
    enabled: bool = False
    environments: list[str] = field(default_factory=lambda: list(ALL_ENVS))
    kinds: list[str] | None = None  # task kinds (toolrl_lib.envs.ALL_KINDS); None = the default KINDS, evenly
    train_tasks: int = 256  # GRPO prompts: train-split tasks, cycling over environments and kinds
    val_tasks: int = 32  # validation-split tasks scored before/after (greedy episode success)
    eval_base: bool = True  # also score the start model (before priming) when validating before
    step_limit: int = 4  # model steps with calls per user turn before the turn is cut
    max_new_tokens: int = 96  # tokens of one model step
    max_episode_tokens: int = 1024  # completion tokens (model + injected) of one episode
    rollout_batch_size: int = 16  # episodes decoded together in one generation round
    priming_episodes: int = 128  # gold transcripts for priming SFT (first train tasks)
    # kinds of the priming episodes (train split); None = the first train tasks (of ``kinds``).
    # Priming on kinds other than the held-out ones teaches the format, not the answers.
    priming_kinds: list[str] | None = None
    reward_success: float = 1.0  # weight of whole-episode success
    reward_calls: float = 0.0  # shaped: weight of the share of gold calls made exactly
    reward_turns: float = 0.0  # shaped: weight of the share of turns passed
    reward_refused: float = 0.0  # charge: weight of the share of an episode's calls the environment refused


def multi_turn_violations(config: Any) -> list[tuple[str, Any, str]]:
    """Rules of the section (only when enabled), as ``(key, value, rule)`` like ``validate``."""
    mt = config.multi_turn
    if not mt.enabled:
        return []
    from toolrl_lib.envs import ALL_KINDS, KINDS, env_names, task_env
    from toolrl_lib.envs.base import CALL_STEPS

    out: list[tuple[str, Any, str]] = []

    def rule(ok: bool, key: str, value: Any, text: str) -> None:
        if not ok:
            out.append((f"multi_turn.{key}", value, text))

    rule(bool(mt.environments), "environments", mt.environments, "needs at least one environment")
    for name in mt.environments:
        rule(name in env_names(), "environments", name, f"unknown environment; use {env_names()}")
    apps = [name for name in mt.environments if name in env_names()]
    for key in ("kinds", "priming_kinds"):
        for kind in getattr(mt, key) or []:
            rule(kind in ALL_KINDS, key, kind, f"unknown task kind; use {list(ALL_KINDS)}")
            rule(kind not in ALL_KINDS or any(task_env(app, kind) for app in apps), key, kind,
                 f"no environment of {apps} generates this kind")
    hard = list(dict.fromkeys(k for k in (mt.kinds or []) + (mt.priming_kinds or [])
                              if k in ALL_KINDS and k not in KINDS))  # the default kinds keep their rules
    needed = max((CALL_STEPS[k] for k in hard), default=0) + 1
    rule(not hard or mt.step_limit >= needed, "step_limit", mt.step_limit,
         f"the kinds {hard} have gold turns of {needed - 1} steps with calls before the reply (a turn "
         f"is cut after step_limit of them); use step_limit >= {needed}")
    for key in ("train_tasks", "step_limit", "max_new_tokens", "rollout_batch_size"):
        rule(getattr(mt, key) >= 1, key, getattr(mt, key), "must be >= 1")
    rule(mt.val_tasks >= 0 and mt.priming_episodes >= 0, "val_tasks", mt.val_tasks, "counts must be >= 0")
    rule(mt.max_episode_tokens >= 2 * mt.max_new_tokens, "max_episode_tokens", mt.max_episode_tokens,
         f"must hold at least two steps of max_new_tokens ({mt.max_new_tokens})")
    weights = (mt.reward_success, mt.reward_calls, mt.reward_turns)
    rule(min(weights) >= 0 and sum(weights) > 0, "reward_success", weights,
         "reward weights must be >= 0 with a positive sum")
    rule(mt.reward_refused >= 0, "reward_refused", mt.reward_refused, "a charge (subtracted): must be >= 0")
    rule(config.backend != "unsloth", "enabled", mt.enabled, UNSLOTH_REFUSAL)
    rule(config.grpo.loss_type != "rlsd", "enabled", mt.enabled,
         "grpo.loss_type rlsd needs single-turn privileged prompts; use grpo, dapo, dr_grpo or gspo")
    rule(not config.filtering.enabled, "enabled", mt.enabled, "filtering is single-turn only; disable it")
    return out


UNSLOTH_REFUSAL = (
    "multi-turn rollouts run on the peft backend only: Unsloth keeps TRL's rollout_func hook and "
    "applies env_mask in its loss, but our rollout loop drives the model's forward with its own "
    "KV cache, which Unsloth's patched fast forward is not known to accept (unmeasured: no GPU "
    "run yet); set backend: peft")
