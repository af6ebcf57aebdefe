"""TRL's no-grad log-prob forward over a rollout round in fewer, larger chunks.

When a round spans several optimizer steps, TRL 1.15 runs the policy forward over the whole
round without gradients (its ``old_per_token_logps``) in chunks of
``per_device_train_batch_size`` rows, the memory bound of a forward *with* gradients. Without
them a chunk holds no activations for backward, and with TRL's fused LM head no
``(rows, length, vocab)`` logits either, so far larger chunks fit. For a small model on a GPU
each chunk costs about the same host time to launch whatever its size: 8 chunks of 64 for a
round of 512 launch eight forwards' kernels where one would do. Same log-probs up to float
rounding (only which rows share a padded forward changes).

``fast.round_logprob_rows`` (0: TRL's chunk). Training-mode forwards only: validation and
the loss forwards keep their own sizes.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat

# batch_size's place after ``model`` in TRL's signature (trl_compat.PRIVATE_API checks the order)
BATCH_SIZE_AT = trl_compat.PRIVATE_API["_get_per_token_logps_and_entropies"].index("batch_size") - 1


def install(trainer: Any, rows: int) -> str:
    """Hook ``_get_per_token_logps_and_entropies``: a no-grad call in training mode gets ``rows``."""
    import torch

    def per_token(call: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled() and model.training:
            if len(args) > BATCH_SIZE_AT:  # (input_ids, attention_mask, logits_to_keep, batch_size, ...)
                args = (*args[:BATCH_SIZE_AT], rows, *args[BATCH_SIZE_AT + 1:])
            elif "batch_size" in kwargs:
                kwargs["batch_size"] = rows
        return call(model, *args, **kwargs)

    return trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", per_token)
