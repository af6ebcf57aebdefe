"""RLSD-TR: self-distilled token reweighting with a trust-region teacher (arXiv 2604.03128).

GRPO gives every token of a completion the same advantage A (the sequence's group-relative
reward). RLSD keeps A as the *direction* of the update and lets a self-distillation signal
set the per-token *magnitude*. The teacher is the same model, conditioned on privileged
information r (here: the ground-truth tool call(s), rendered by the family adapter):

    Δ_t  = sg[ log π_T(y_t | x, r, y_<t) − log π_S(y_t | x, y_<t) ]          (evidence)
    w_t  = clip( exp( sign(A) · Δ_t ), 1 − ε_w, 1 + ε_w )                    (token weight)
    λ_k  = λ · max(0, 1 − k / decay_steps)   (k = optimizer step; λ_k = λ if decay_steps = 0)
    Â_t  = A · ( (1 − λ_k) + λ_k · w_t )                                     (token advantage)

Â_t replaces A inside TRL's GRPO loss unchanged (clipped ratio, token/sequence
aggregation, KL term): so λ = 0 is exactly plain GRPO. A token the teacher finds more
likely than the student (Δ_t > 0) is pushed harder on a good completion (A > 0) and
pulled back more gently on a bad one (A < 0); tokens the teacher disagrees with get the
opposite. Because w_t only rescales |A| within [1 − ε_w, 1 + ε_w], the privileged
signal can never flip an update's sign: that is what keeps the teacher's leaked answer
from becoming the objective.

Teachers (``RLSDConfig.teacher``):

- ``live``: the current policy itself, with r in its context.
- ``trust_region``: a slow copy θ_T that starts at the reference (the policy before
  training) and after every optimizer step moves toward the policy,
  θ_T ← (1 − ρ) θ_T + ρ θ_S (ρ = ``teacher_update_rate``). With LoRA it is a second,
  frozen adapter on the same base (EMA of the LoRA A/B matrices); with full fine-tuning it
  is a separate frozen copy of the model. ρ = 0 keeps the reference, ρ = 1 is ``live``
  lagged by one step.

Privileged context: the dataset's ``privileged`` column (ground-truth calls rendered with
the family adapter's ``render_completion``) is formatted with ``privileged_template`` and
appended to the end of the *last user message* of the prompt (for string prompts the
chat template's "end of user turn + assistant header" suffix is located and the text is
inserted before it). Only the teacher forward pass sees it; the student's generation and
loss inputs are the plain prompt.

Logged per generation batch (``rlsd/…``): ``weight_mean``, ``weight_min``, ``weight_max``
and ``clip_frac`` over tokens of completions with A ≠ 0 (the only tokens whose loss the
weight changes; left out of a batch that has none, e.g. when every group is tied),
``delta_mean`` over all completion tokens, ``teacher_kl`` (the k3 estimate
E[exp(Δ) − 1 − Δ] of KL(π_S ‖ π_T) on the student's own samples) and ``lambda``.

The package: ``config`` (``RLSDConfig``, import-light so run configs can embed it),
``weights`` (Δ_t, w_t, Â_t as pure tensor functions), ``context`` (where r goes in the
teacher's prompt), ``teacher`` (live / trust-region), ``trainer`` (``RLSDGRPOTrainer``,
exported here lazily: importing this package pulls in neither torch nor TRL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolrl_lib.train.rlsd.config import (
    BASE_LOSS_TYPES,
    DEFAULT_PRIVILEGED_TEMPLATE,
    TEACHER_KINDS,
    RLSDConfig,
    effective_lambda,
)

if TYPE_CHECKING:  # the real import is lazy (module __getattr__ below)
    from toolrl_lib.train.rlsd.trainer import RLSDGRPOTrainer


def __getattr__(name: str) -> Any:
    """Lazy export of the trainer (imports torch/TRL only when asked for)."""
    if name == "RLSDGRPOTrainer":
        from toolrl_lib.train.rlsd.trainer import RLSDGRPOTrainer

        return RLSDGRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BASE_LOSS_TYPES",
    "DEFAULT_PRIVILEGED_TEMPLATE",
    "TEACHER_KINDS",
    "RLSDConfig",
    "RLSDGRPOTrainer",
    "effective_lambda",
]
