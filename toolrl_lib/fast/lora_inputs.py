"""LoRA branches fed the bf16 activations as they are, not a float32 copy (GPU, bf16 autocast).

PEFT keeps the adapter weights in float32 and casts each LoRA layer's input to their dtype
(``_cast_input_dtype``) before ``lora_A``; under bf16 autocast, ``lora_A`` then casts that copy
straight back to bf16. Two full-size copies of the activations per adapted projection, forward
and backward: on an H200 the embedded model's GRPO step spent 23% of its GPU time in copies
(``benchmarks/gpu/step_profile.py``). With PEFT's own switch (``disable_input_dtype_casting``)
around the loss forwards, autocast casts the small weight instead, and the LoRA matmuls see the
same bf16 operands as before: the same numbers, fewer bytes moved.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat


def install(trainer: Any) -> str:
    """Hook ``_get_per_token_logps_and_entropies``: its forwards run with PEFT's input cast off."""
    from peft.helpers import disable_input_dtype_casting

    def per_token(call: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        with disable_input_dtype_casting(model):
            return call(model, *args, **kwargs)

    return trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", per_token)
