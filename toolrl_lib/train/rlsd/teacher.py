"""The RLSD teacher: which weights score (prompt + privileged context + completion).

- ``LiveTeacher``: the policy as it is now.
- ``AdapterTeacher`` (LoRA): a second, frozen adapter on the same base model, started as
  a copy of the policy adapter at construction (= the reference: a fresh LoRA adapter is
  zero) and moved toward the policy adapter after each optimizer step (EMA of A and B).
- ``CopyTeacher`` (full fine-tuning): a frozen copy of the whole model, same EMA.

Every teacher exposes ``active(model)`` (a context manager that yields the module to run),
``update()`` (after an optimizer step) and ``state_dict``/``load_state_dict`` (keyed by the
*policy's* parameter names, for checkpoints). Sharded setups (FSDP, ZeRO-3) are not
supported by the EMA teachers: the EMA reads full parameters.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch

TEACHER_ADAPTER = "rlsd_teacher"
POLICY_ADAPTER = "default"


@torch.no_grad()
def ema_update_(pairs: list[tuple[torch.Tensor, torch.Tensor]], rate: float) -> None:
    """θ_T ← (1 − rate) θ_T + rate θ_S for each (teacher, student) pair; rate 0 is a no-op."""
    if rate <= 0.0:
        return
    for teacher, student in pairs:
        teacher.lerp_(student.detach().to(teacher.dtype), rate)


class LiveTeacher:
    """The current policy is its own teacher."""

    kind = "live"

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[Any]:
        yield model

    def update(self) -> None:
        pass

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        pass


class _EMATeacher:
    """Shared EMA bookkeeping: ``self.pairs`` maps policy names to (teacher, student) tensors."""

    kind = "trust_region"

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.pairs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def update(self) -> None:
        ema_update_(list(self.pairs.values()), self.rate)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: t.detach().cpu().clone().contiguous() for name, (t, _) in self.pairs.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = sorted(set(self.pairs) - set(state))
        if missing:
            raise KeyError(f"RLSD teacher state lacks {len(missing)} tensors, e.g. {missing[0]}")
        with torch.no_grad():
            for name, (teacher, _) in self.pairs.items():
                teacher.copy_(state[name].to(teacher.device, teacher.dtype))


class AdapterTeacher(_EMATeacher):
    """LoRA: the teacher is adapter ``rlsd_teacher`` next to the policy's ``default``."""

    def __init__(self, peft_model: Any, rate: float) -> None:
        super().__init__(rate)
        self.peft_model = peft_model
        if TEACHER_ADAPTER not in peft_model.peft_config:
            config = copy.deepcopy(peft_model.peft_config[POLICY_ADAPTER])
            config.inference_mode = True
            peft_model.add_adapter(TEACHER_ADAPTER, config)
        marker = f".{POLICY_ADAPTER}."
        for name, param in peft_model.named_parameters():
            if marker in name:
                teacher = peft_model.get_parameter(name.replace(marker, f".{TEACHER_ADAPTER}."))
                self.pairs[name] = (teacher, param)
        if not self.pairs:
            raise ValueError("RLSD trust-region teacher: the PEFT model has no 'default' adapter weights")
        with torch.no_grad():
            for teacher, student in self.pairs.values():
                teacher.copy_(student.detach())
                teacher.requires_grad_(False)

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[Any]:
        previous = self.peft_model.active_adapter
        self.peft_model.set_adapter(TEACHER_ADAPTER)
        try:
            yield model
        finally:
            self.peft_model.set_adapter(previous)  # also restores which adapter is trainable
            for teacher, _ in self.pairs.values():
                teacher.requires_grad_(False)


class CopyTeacher(_EMATeacher):
    """Full fine-tuning: a frozen copy of the model at construction time."""

    def __init__(self, model: Any, rate: float) -> None:
        super().__init__(rate)
        self.model = copy.deepcopy(model)
        self.model.requires_grad_(False)
        self.model.eval()
        teacher_params = dict(self.model.named_parameters())
        for name, param in model.named_parameters():
            self.pairs[name] = (teacher_params[name], param)

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[Any]:
        yield self.model


def make_teacher(kind: str, model: Any, rate: float) -> LiveTeacher | AdapterTeacher | CopyTeacher:
    """The teacher for ``kind`` (live | trust_region) and an unwrapped (PEFT or plain) model."""
    if kind == "live":
        return LiveTeacher()
    if kind != "trust_region":
        raise ValueError(f"rlsd.teacher: expected 'live' or 'trust_region', got {kind!r}")
    from accelerate.utils import is_peft_model

    if is_peft_model(model):
        return AdapterTeacher(model, rate)
    return CopyTeacher(model, rate)
