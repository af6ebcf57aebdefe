"""A GRPO step's loss with its big blocks mapped on their own (glibc, CPU): a lower peak RSS.

A CPU GRPO step rolls out, then runs each micro-batch's loss forward and back. The loss's
activations are many blocks of 1-5 MB (a layer's ~800 tokens x 576 or 1536 floats); glibc serves
them from its heap, and the holes they leave behind are reused only in part, so the heap, and the
process's RSS, keeps far more than the step holds at once. Mapping a block costs page faults on
first touch, so the threshold is a trade. Four smoke GRPO steps on the 2-core EPYC
(``benchmarks/grpo_memory.py``): peak 3.97 GiB by default, 3.42 at 1 MiB for 7% more step time,
3.12 at 256 KiB for 21% more; the losses identical.

``install`` sets the threshold when the loss phase begins and lifts it to glibc's own ceiling
while the trainer generates and scores completions: the step's peak is in the loss (rollouts
under 256 KiB with the loss on the default left the peak at 3.81 GiB; ad hoc, same box), so the
rollout keeps the heap's speed. A no-op off glibc (``set_mmap_threshold`` is False).
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat
from toolrl_lib.fast.memory import GLIBC_MAX_MMAP_THRESHOLD, set_mmap_threshold

ROLLOUT_PHASE = "_generate_and_score_completions"


def install(trainer: Any, threshold: int) -> bool:
    """Hook ``trainer`` so its loss phase maps blocks >= ``threshold`` bytes on their own; False
    (nothing hooked) for a threshold of 0 or where the C library cannot be told."""
    if not set_mmap_threshold(threshold):  # False for 0 and off glibc
        return False

    def rollout_phase(call: Any, *args: Any, **kwargs: Any) -> Any:
        set_mmap_threshold(GLIBC_MAX_MMAP_THRESHOLD)
        try:
            return call(*args, **kwargs)
        finally:
            set_mmap_threshold(threshold)  # what follows is the loss, forward and back

    trl_compat.hook(trainer, ROLLOUT_PHASE, rollout_phase)
    return True


def reset() -> None:
    """After training: glibc's ceiling again, so later stages in the process (validation) are not
    slowed by the loss's setting."""
    set_mmap_threshold(GLIBC_MAX_MMAP_THRESHOLD)
