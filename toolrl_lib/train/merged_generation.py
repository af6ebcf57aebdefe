"""Generate with the LoRA update merged into a copy of the weights.

A LoRA projection computes ``W x + s B (A x)``: three matmuls where the merged model needs
one. While decoding (one token per step) the two extra small matmuls per projection, seven
projections per layer, cost far more than their FLOPs: on the CPU box the LoRA path decoded
1.15-1.34x slower than the merged one (``benchmarks/merged_generation.py``).
For the rollout only, each adapted projection gets ``W + s B A`` (a fresh tensor: ``W`` is
kept untouched, so nothing drifts through bf16 merge/unmerge round trips) and the adapters
are switched off; afterwards ``W`` and the adapters are back. Memory: one extra copy of the
adapted weights while generating. Training and its gradients never see the merged copy.

The merged projection rounds differently from the LoRA path (one bf16 matmul instead of
three), so sampled completions differ by rounding from what the LoRA path would sample;
TRL's loss uses log-probs recomputed with the LoRA path either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _lora_layers(model: Any) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


@contextmanager
def lora_merged(model: Any) -> Iterator[Any]:
    """Inside: ``model`` (a PeftModel) computes with ``W + s B A`` and adapters disabled."""
    import torch

    layers = _lora_layers(model)
    if not layers:
        raise ValueError("lora_merged needs a PEFT LoRA model; this model has no LoRA layers")
    swapped: list[tuple[Any, Any]] = []
    try:
        with torch.no_grad():
            for layer in layers:
                base = layer.get_base_layer()
                if not isinstance(base, torch.nn.Linear) or layer.merged:
                    raise ValueError(
                        f"lora_merged supports unmerged LoRA on torch.nn.Linear only, got "
                        f"{type(base).__name__} (merged={layer.merged}): set "
                        f"grpo.merged_generation=false for this model")
                active = [name for name in layer.active_adapters if name in layer.lora_A]
                if not active:
                    continue
                weight = base.weight.data
                merged = weight.clone()
                for name in active:
                    merged += layer.get_delta_weight(name).to(weight.dtype)
                base.weight.data = merged
                swapped.append((base, weight))
        with model.disable_adapter():
            yield model
    finally:
        for base, weight in swapped:
            base.weight.data = weight


def generation_method(trainer: Any) -> tuple[str, Any]:
    """TRL's private method around ``model.generate`` on this trainer: (name, bound method).

    TRL has no public hook there; 1.x calls it ``_generate_single_turn`` (older: ``_generate``)."""
    for name in ("_generate_single_turn", "_generate"):
        method = getattr(trainer, name, None)
        if method is not None:
            return name, method
    raise RuntimeError("this TRL's GRPOTrainer has neither _generate_single_turn nor _generate")


def generate_with_merged_lora(trainer: Any) -> str:
    """Make ``trainer`` (a TRL GRPOTrainer on a PEFT LoRA model) roll out with merged weights;
    returns the name of the generation method it wrapped."""
    name, method = generation_method(trainer)
    peft_model = trainer.accelerator.unwrap_model(trainer.model)

    def merged_rollout(*args: Any, **kwargs: Any) -> Any:
        with lora_merged(peft_model):
            return method(*args, **kwargs)

    setattr(trainer, name, merged_rollout)
    return name
