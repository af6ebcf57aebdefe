"""Rewards for tool calling: pure functions of (completion, ground truth, tools).

``score(...) -> RewardBreakdown`` with schemes ``weighted`` (seed), ``binary`` (Tool-N1) and
``fine_grained`` (ToolRL); exact definitions in ``toolrl_lib.rewards.schemes`` and value
matching rules in ``toolrl_lib.rewards.matching``. ``make_reward_funcs`` wraps a scheme for
TRL's ``GRPOTrainer``.
"""

from toolrl_lib.rewards.matching import argument_credit, assign, values_match
from toolrl_lib.rewards.schemes import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    SCHEMES,
    RewardBreakdown,
    normalize_calls,
    resolve_weights,
    reward_range,
    score,
)
from toolrl_lib.rewards.trl_funcs import completion_text, make_reward_funcs

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "SCHEMES",
    "RewardBreakdown",
    "argument_credit",
    "assign",
    "completion_text",
    "make_reward_funcs",
    "normalize_calls",
    "resolve_weights",
    "reward_range",
    "score",
    "values_match",
]
