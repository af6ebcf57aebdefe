"""The one place that reaches into TRL's private rollout method.

TRL has no public hook around ``model.generate``. Merged-weight rollouts
(``merged_generation``) and per-rank generation timing (``gen_timing``) both wrap the
method that calls it. TRL 1.x names it ``_generate_single_turn`` and returns
``(completion_ids, logprobs)``; releases without it only had ``_generate``, which returns
``(prompt_ids, completion_ids, ...)``. ``_generate`` is not the same thing in 1.x: it also
gathers lengths from every rank, so anything timed around it waits for the slowest rank.
A TRL rename fails here, loudly, instead of silently timing or merging nothing.
"""

from __future__ import annotations

from typing import Any

METHOD_NAMES = ("_generate_single_turn", "_generate")


def generation_method(trainer: Any) -> tuple[str, Any]:
    """(name, bound method) of TRL's method around ``model.generate`` on this trainer."""
    for name in METHOD_NAMES:
        method = getattr(trainer, name, None)
        if method is not None:
            return name, method
    raise RuntimeError(f"this TRL's GRPOTrainer has none of {METHOD_NAMES}: TRL renamed its "
                       "rollout method; update toolrl_lib/train/trl_generation.py")


def completion_ids_of(method_name: str, result: Any) -> list[list[int]]:
    """The per-completion token-id lists in what ``method_name`` returned."""
    return result[0] if method_name == "_generate_single_turn" else result[1]
