"""Each LoRA projection as one autograd node with three matmuls forward and five backward.

PEFT computes an adapted projection as ``base(x) + lora_B(lora_A(dropout(x))) * scaling``:
three ``nn.Linear`` calls, a dropout, a multiply, an add and a cast, each its own op forward
and its own autograd node backward (plus autocast's casts of the float32 adapter weights).
For a small model on a GPU every one of those is a kernel launch the host has to issue, and
the embedded model's GRPO step is bound by the host (the GPU busy about a quarter of a
mid-round step: ``benchmarks/results/grpo_step_profile.md``). Measured: a third fewer aten
ops per forward and backward (``benchmarks/results/lora_host_cost.md``), but an H100's
mid-round step stayed at 0.28 s (``grpo_throughput.md``, run 5), so these launches are not
what bounds it; the option stays off by default.

``LoraProjection`` computes the same ``x W^T + s (x A^T) B^T`` with the adapter's product and
the add in one ``addmm``, and writes its backward by hand::

    dx = dy W + s (dy B) A        dA = s (dy B)^T x        dB = s dy^T (x A^T)

Same operands, dtypes and products as PEFT under bf16 autocast; the result differs by float
rounding only (one rounding of the sum instead of three), tested against PEFT in
``tests/test_fused_lora.py``. A projection the fused path does not cover (dropout, DoRA or
another LoRA variant, several active adapters, merged or disabled adapters, a trainable base
weight or bias, mixed dtypes outside autocast) keeps PEFT's own forward, so TRL's weight sync
(``merge_adapter``) and ``disable_adapter`` behave as before.

Installed per module (an instance ``forward``), never on PEFT's class: other models in the
process keep PEFT's code. ``fast.fused_lora``, peft backend (Unsloth has its own fused LoRA).
"""

from __future__ import annotations

import types
from typing import Any

import torch


class LoraProjection(torch.autograd.Function):
    """``x W^T (+ bias) + scale (x A^T) B^T`` with W (and bias) frozen, in compute dtype ``dtype``."""

    @staticmethod
    def forward(ctx: Any, x: Any, weight: Any, bias: Any, lora_a: Any, lora_b: Any, scale: float,
                dtype: Any) -> Any:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(dtype)
        w, a, b = weight.to(dtype), lora_a.to(dtype), lora_b.to(dtype)
        xa = x2 @ a.t()
        base = x2 @ w.t() if bias is None else torch.addmm(bias.to(dtype), x2, w.t())
        y = torch.addmm(base, xa, b.t(), alpha=scale)
        ctx.save_for_backward(x2, w, a, b, xa)
        ctx.scale, ctx.x_dtype = scale, x.dtype
        ctx.a_dtype, ctx.b_dtype = lora_a.dtype, lora_b.dtype
        return y.view(*shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx: Any, dy: Any) -> tuple[Any, ...]:
        x2, w, a, b, xa = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1]).to(w.dtype)
        dy_b = dy2 @ b
        dx = da = db = None
        if ctx.needs_input_grad[0]:
            dx = torch.addmm(dy2 @ w, dy_b, a, alpha=ctx.scale).view(*dy.shape[:-1], -1).to(ctx.x_dtype)
        if ctx.needs_input_grad[3]:
            da = (dy_b.t() @ x2).to(ctx.a_dtype).mul_(ctx.scale)
        if ctx.needs_input_grad[4]:
            db = (dy2.t() @ xa).to(ctx.b_dtype).mul_(ctx.scale)
        return dx, None, None, da, db, None, None


def static_parts(layer: Any) -> tuple[str, Any, Any, Any, Any, float] | None:
    """(adapter, weight, bias, A, B, scale) of a PEFT ``lora.Linear`` whose one adapter the fused
    path covers (plain LoRA, no dropout, a frozen ``nn.Linear`` base), else None. Read once at
    install: the optimizer updates these parameters in place."""
    if len(layer.lora_A) != 1:
        return None
    name = next(iter(layer.lora_A))
    base = layer.base_layer
    if (name in getattr(layer, "lora_variant", {}) or layer.use_dora.get(name)
            or not isinstance(layer.lora_dropout[name], torch.nn.Identity) or type(base) is not torch.nn.Linear
            or getattr(layer, "fan_in_fan_out", False)):
        return None
    lora_a, lora_b = layer.lora_A[name], layer.lora_B[name]
    if lora_a.bias is not None or lora_b.bias is not None or base.weight.requires_grad or (
            base.bias is not None and base.bias.requires_grad):
        return None
    return name, base.weight, base.bias, lora_a.weight, lora_b.weight, float(layer.scaling[name])


def compute_dtype(x: Any, weight: Any, lora_a: Any, lora_b: Any) -> Any:
    """The dtype the fused path computes in: autocast's, or the one dtype of all operands; None
    (PEFT's own casts) for mixed dtypes outside autocast."""
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    if x.dtype == weight.dtype == lora_a.dtype == lora_b.dtype:
        return x.dtype
    return None


def _forward(layer: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    name, weight, bias, lora_a, lora_b, scale = layer._toolrl_fused_parts
    dtype = None
    if not (args or kwargs or layer.disable_adapters or layer.merged) and layer.active_adapters == [name]:
        dtype = compute_dtype(x, weight, lora_a, lora_b)
    if dtype is None:  # adapters off or merged (TRL's weight sync), another adapter, mixed dtypes
        return type(layer).forward(layer, x, *args, **kwargs)
    return LoraProjection.apply(x, weight, bias, lora_a, lora_b, scale, dtype)


def fuse_lora_layers(model: Any) -> int:
    """Give every PEFT ``lora.Linear`` of ``model`` that ``static_parts`` covers the fused
    forward; returns how many (the others keep PEFT's)."""
    from peft.tuners.lora.layer import Linear

    count = 0
    for module in model.modules():
        parts = static_parts(module) if type(module) is Linear else None
        if parts is not None:
            module._toolrl_fused_parts = parts
            module.forward = types.MethodType(_forward, module)
            count += 1
    return count


def install(trainer: Any) -> int:
    """``fuse_lora_layers`` on the trainer's model; refuses a model without LoRA layers."""
    count = fuse_lora_layers(trainer.model)
    if count == 0:
        raise ValueError("fast.fused_lora: the model has no LoRA linear layer the fused path covers (lora.enabled: "
                         "false, another adapter type, or LoRA dropout / DoRA on every projection)")
    return count


__all__ = ["LoraProjection", "compute_dtype", "fuse_lora_layers", "install", "static_parts"]
