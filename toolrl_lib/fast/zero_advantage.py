"""Skip the loss forward and backward of a GRPO micro-batch whose advantages are all zero.

When every completion of a group scores the same, its advantages are zero, and for the clipped
policy-gradient losses without a KL term (``beta: 0``) so is every token's loss and gradient:
TRL still runs the micro-batch forward and backward to multiply by zero. On a CPU that is a
whole micro-batch of compute (notebook 06's smoke steps: every group alike, ~25 s a step).
``install`` hooks ``compute_loss`` (the Trainer's public override point, through
``trl_compat.hook``): such a micro-batch returns ``0 * parameters`` instead, so every trainable
parameter gets an exact zero gradient and the optimizer step (Adam's moments, weight decay,
clipping) is what it would have been. Tested against TRL's own loss in ``tests/test_zero_advantage.py``.

Not applied where the loss has a term that does not scale with the advantage: a KL penalty
(``beta`` != 0), a mixture-of-experts router loss, or loss types outside ``SKIPPABLE``; nor
under several processes, where every rank must run its forward for the collective backward. Of
the metrics TRL logs from the skipped forward, the clip ratios are logged as the exact 0 they
would be; the entropy needs the forward, so it averages over the micro-batches that ran (absent
for a step whose every micro-batch was skipped); ``zero_advantage_skipped`` is the share skipped.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat

SKIPPABLE = ("grpo", "bnpo", "dr_grpo", "dapo")  # per-token loss = -min(r A, clip(r) A) (+ beta KL)
# TRL's clip counters for these losses: each counts tokens clipped with A < 0 or A > 0
CLIP_METRICS = ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
                "clip_ratio/low_min", "clip_ratio/high_max")


def applies(trainer: Any) -> bool:
    """Whether a zero-advantage micro-batch has an exactly zero loss under this trainer's settings."""
    args = trainer.args
    one_process = trainer.accelerator.num_processes == 1  # DDP/ZeRO expect every rank's forward
    return (one_process and getattr(args, "beta", 1.0) == 0.0 and getattr(args, "loss_type", None) in SKIPPABLE
            and not getattr(trainer, "aux_loss_enabled", False))


def install(trainer: Any) -> str | None:
    """Hook the skip into ``trainer.compute_loss``; None (nothing installed) where it does not apply."""
    if not applies(trainer):
        return None

    def compute_loss(call: Any, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any | None = None) -> Any:
        advantages = inputs.get("advantages")
        if return_outputs or advantages is None or bool(advantages.any()):
            trl_compat.log_metric(trainer, "train", "zero_advantage_skipped", 0.0)
            return call(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        trl_compat.log_metric(trainer, "train", "zero_advantage_skipped", 1.0)
        for key in CLIP_METRICS:  # no token is clipped where every advantage is 0: exactly 0
            trl_compat.log_metric(trainer, "train", key, 0.0)
        return sum((p * 0).sum() for p in model.parameters() if p.requires_grad)

    return trl_compat.hook(trainer, "compute_loss", compute_loss)
