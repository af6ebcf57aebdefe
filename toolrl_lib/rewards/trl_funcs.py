"""Reward functions with TRL's ``GRPOTrainer`` signature.

TRL calls each function as ``f(prompts=…, completions=…, completion_ids=…, **dataset_columns,
trainer_state=…, log_extra=…, log_metric=…)``. Our GRPO dataset carries per-row
``ground_truth`` and ``tools`` columns as JSON strings. One function returns the scheme's
total (so GRPO's advantage is computed on exactly that number) and, through
``log_metric``, logs the batch mean of each component as ``reward/<component>`` — the
curves that show *which* part of the behaviour is being learned — and, when the dataset has
a ``kind`` column, the mean reward and zero-variance share per kind (``groups.kind_metrics``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards.groups import kind_metrics
from toolrl_lib.rewards.schemes import COMPONENTS, REGISTRY, resolve_weights, score_resolved
from toolrl_lib.rewards.shaping import Shaping, check_shaping, shape, spurious_default

RewardFunc = Callable[..., list[float]]


def completion_text(completion: Any) -> str:
    """Plain text of a completion: a string, or (conversational data) the message contents."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return "" if completion is None else str(completion)


@lru_cache(maxsize=4096)
def _decode_cached(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return []


def _decoded(value: Any) -> Any:
    """Per-row JSON columns; cached because each row repeats G times (read-only use)."""
    return _decode_cached(value) if isinstance(value, str) else value


def make_reward_funcs(scheme: str = "weighted", family: str = "hermes", weights: dict[str, float] | None = None,
                      shaping: Shaping | None = None) -> list[RewardFunc]:
    """``[reward_<scheme>]`` for ``GRPOTrainer(reward_funcs=...)``; validates arguments now.

    ``shaping``: abstention-aware payouts on top of the scheme (``toolrl_lib.rewards.shaping``)."""
    if scheme not in REGISTRY:
        raise ValueError(f"unknown reward scheme {scheme!r}; expected one of {tuple(REGISTRY)}")
    get_adapter(family)
    resolved = resolve_weights(weights)
    shaping = check_shaping(shaping or Shaping(), scheme)
    cap = spurious_default(scheme, family) if shaping.active else 0.0

    def reward(prompts=None, completions=None, ground_truth=None, tools=None, log_metric=None, **kwargs):
        completions = list(completions or [])
        n = len(completions)
        gts = list(ground_truth) if ground_truth is not None else [[]] * n
        tool_lists = list(tools) if tools is not None else [[]] * n
        contexts = list(prompts) if prompts is not None else [None] * n
        results = []
        for k in range(n):
            context = contexts[k] if k < len(contexts) else None
            result = score_resolved(
                completion_text(completions[k]),
                _decoded(gts[k] if k < len(gts) else []),
                _decoded(tool_lists[k] if k < len(tool_lists) else []),
                scheme,
                family,
                resolved,
                completion_text(context) if context is not None else None,
            )
            results.append(shape(result, shaping, cap) if shaping.active else result)
        if log_metric is not None and results:
            for component in COMPONENTS:
                log_metric(f"reward/{component}", sum(getattr(r, component) for r in results) / n)
            kinds, ids = kwargs.get("kind"), kwargs.get("example_id")
            if kinds is not None and ids is not None and len(kinds) == len(ids) == n:
                for name, value in kind_metrics([r.total for r in results], list(kinds), list(ids)).items():
                    log_metric(name, value)
        return [r.total for r in results]

    reward.__name__ = f"reward_{scheme}"
    reward.__qualname__ = reward.__name__
    return [reward]
