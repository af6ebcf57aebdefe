"""RLSD-TR hyperparameters (``RLSDConfig``) and the λ schedule; no torch, so the run config
can embed them (formulas: the ``toolrl_lib.train.rlsd`` package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolrl_lib.config import ConfigError

TEACHER_KINDS = ("live", "trust_region")
BASE_LOSS_TYPES = ("dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo")
DEFAULT_PRIVILEGED_TEMPLATE = (
    "\n\nFor reference, a correct answer to this request is:\n{privileged}\nNow give your answer."
)


@dataclass
class RLSDConfig:
    """Hyperparameters of RLSD token reweighting (defaults: the seed's RLSD-TR run)."""

    lam: float = 0.5
    """λ: mix of the token weight with 1 (0 = plain GRPO, 1 = pure weight)."""
    eps_w: float = 0.2
    """ε_w: token weights are clipped to [1 − ε_w, 1 + ε_w]."""
    decay_steps: int = 0
    """Linearly decay λ to 0 over this many optimizer steps (0 = no decay)."""
    teacher: Literal["live", "trust_region"] = "trust_region"
    """Which weights score the privileged context: the live policy or a slow EMA copy."""
    teacher_update_rate: float = 0.1
    """ρ: trust-region teacher moves this fraction of the way to the policy per optimizer step."""
    privileged_template: str = DEFAULT_PRIVILEGED_TEMPLATE
    """How the ``privileged`` column is worded; must contain ``{privileged}``."""
    base_loss_type: Literal[
        "dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo"
    ] = "dapo"
    """TRL loss the token advantages are fed into (verl's token-mean ≈ ``dapo``)."""
    teacher_batch_size: int | None = None
    """Rows per teacher forward pass (None: TRL's ``per_device_train_batch_size``)."""

    def __post_init__(self) -> None:
        checks = [
            (0.0 <= self.lam <= 1.0, "lam", "a number in [0, 1]"),
            (0.0 < self.eps_w < 1.0, "eps_w", "a number in (0, 1)"),
            (self.decay_steps >= 0, "decay_steps", "an integer >= 0"),
            (self.teacher in TEACHER_KINDS, "teacher", f"one of {list(TEACHER_KINDS)}"),
            (0.0 <= self.teacher_update_rate <= 1.0, "teacher_update_rate", "a number in [0, 1]"),
            ("{privileged}" in self.privileged_template, "privileged_template",
             "a string containing '{privileged}'"),
            (self.base_loss_type in BASE_LOSS_TYPES, "base_loss_type", f"one of {list(BASE_LOSS_TYPES)}"),
            (self.teacher_batch_size is None or self.teacher_batch_size > 0, "teacher_batch_size",
             "a positive integer or null"),
        ]
        for ok, name, expected in checks:
            if not ok:
                raise ConfigError(f"rlsd.{name}: expected {expected}, got {getattr(self, name)!r}")

    def render_privileged(self, privileged: str) -> str:
        """The text inserted into the teacher's last user message."""
        return self.privileged_template.replace("{privileged}", privileged)


def effective_lambda(lam: float, decay_steps: int, step: int) -> float:
    """λ at optimizer step ``step``: linear decay to 0 over ``decay_steps`` (0 = constant)."""
    if decay_steps <= 0:
        return lam
    return lam * max(0.0, 1.0 - step / decay_steps)
