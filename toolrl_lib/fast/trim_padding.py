"""Forwards cut to their own rows' length: the padding of a rollout round left out.

TRL pads a round's prompts on the left and its completions on the right to the round's longest,
and every micro-batch of the loss, and every chunk of the round's log-prob pass, runs at that
width. Multi-turn episodes vary a lot (a prompt with distractor tools ~1,460 tokens, another
~400; an episode 100 to 1,000), so much of a micro-batch is padding: in issue 39's rounds ~40% of
the positions the trainer's forwards hold, ~13% once cut (1.4x fewer;
``benchmarks/trim_padding_tokens.py``, counted on CPU over the config's task prompts and run 6's
episode lengths).

Two changes, both exact up to float rounding:

- ``trimmed_logps``: each call of ``_get_per_token_logps_and_entropies`` runs its rows in length
  order, in chunks of ``batch_size``, each chunk cut to the columns where one of its rows has a
  token (the prompts' common left padding and the completions' common right padding). The
  results come back in the caller's row order and width, zeros where the cut was (padding,
  masked by every loss). Cutting the left shifts every row's RoPE positions by the same amount;
  attention reads relative positions only.
- ``sort_steps``: for a loss whose optimizer step is a sum over its rows with a normaliser that
  does not depend on how the rows are split into micro-batches (``SORTABLE_LOSSES``), the rows of
  each optimizer step are put in length order before TRL splits them into micro-batches, so a
  micro-batch holds rows of similar length. The step's rows, advantages and gradient stay the
  same; only which rows share a micro-batch changes (TRL's shuffle still decides which rows
  share a step).
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat

# dapo: normalised by the generation batch's token count; grpo: the mean of per-row means over
# equal micro-batches; dr_grpo: a constant. bnpo (the micro-batch's own token count) is not.
SORTABLE_LOSSES = ("dapo", "grpo", "dr_grpo")
# keyword arguments of TRL's method that carry per-row inputs this module does not cut
_TRL_ONLY = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
             "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")


def row_spans(attention_mask: Any, prompt_width: int) -> tuple[Any, Any]:
    """Each row's first attended column and its end (one past its last attended column, at
    least ``prompt_width + 1``: a chunk keeps one completion column even when it has none).

    >>> import torch
    >>> row_spans(torch.tensor([[0, 1, 1, 1, 0], [1, 1, 1, 0, 0]]), 3)
    (tensor([1, 0]), tensor([4, 4]))
    """
    import torch

    columns = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    attended = attention_mask.bool()
    first = torch.where(attended, columns, attention_mask.shape[1]).min(dim=1).values
    end = torch.where(attended, columns + 1, 0).max(dim=1).values
    first = torch.minimum(first, torch.full_like(first, prompt_width - 1))  # the token before the completion
    end = torch.maximum(end, torch.full_like(end, prompt_width + 1))
    return first, end


def trimmed_logps(call: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                  batch_size: int | None = None, compute_entropy: bool = False) -> tuple[Any, Any]:
    """``call`` (TRL's ``_get_per_token_logps_and_entropies``) chunk by chunk on rows in length
    order, each chunk cut to its own columns; (log-probs, entropies or None) as ``call`` returns
    them for the whole batch, in its row order, zeros in the cut columns."""
    import torch
    import torch.nn.functional as F

    rows, width = input_ids.shape
    prompt_width = width - logits_to_keep
    first, end = row_spans(attention_mask, prompt_width)
    order = torch.argsort(end - first, stable=True)  # similar lengths share a chunk
    size = batch_size or rows
    logps, entropies = [], []
    for start in range(0, rows, size):
        chunk = order[start:start + size]
        left, right = int(first[chunk].min()), int(end[chunk].max())
        kept = right - prompt_width  # completion columns this chunk keeps
        out, entropy, _ = call(model, input_ids[chunk, left:right], attention_mask[chunk, left:right], kept,
                               batch_size=len(chunk), compute_entropy=compute_entropy)
        logps.append(F.pad(out, (0, logits_to_keep - kept)))
        if entropy is not None:
            entropies.append(F.pad(entropy, (0, logits_to_keep - kept)))
    back = torch.argsort(order)  # the caller's row order
    return torch.cat(logps)[back], (torch.cat(entropies)[back] if entropies else None)


def sort_steps(batch: dict[str, Any], step_rows: int) -> dict[str, Any]:
    """``batch`` (TRL's dict of a round's rows, already shuffled) with the rows of each block of
    ``step_rows`` (one optimizer step) in length order; unchanged when the blocks do not tile it."""
    import torch

    prompt_mask, completion_mask = batch.get("prompt_mask"), batch.get("completion_mask")
    if prompt_mask is None or completion_mask is None:
        return batch
    rows = prompt_mask.shape[0]
    if step_rows < 2 or rows % step_rows:
        return batch
    first, end = row_spans(torch.cat([prompt_mask, completion_mask], dim=1), prompt_mask.shape[1])
    length = (end - first).cpu()  # the width trimmed_logps gives the row
    permutation = torch.cat([start + torch.argsort(length[start:start + step_rows], stable=True)
                             for start in range(0, rows, step_rows)])

    def permute(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == rows:
            return value[permutation.to(value.device)]
        if isinstance(value, list) and len(value) == rows:
            return [value[i] for i in permutation.tolist()]
        return value

    return {key: permute(value) for key, value in batch.items()}


def install(trainer: Any, loss_type: str, sort: bool = True) -> list[str]:
    """Hook both changes into ``trainer``; returns what was hooked (the sort only when ``sort``, for
    ``SORTABLE_LOSSES`` and when a round's micro-batches make whole optimizer steps; ``fast.group_batches``
    passes False: its micro-batches must hold whole groups)."""
    import trl.trainer.grpo_trainer as grpo_module

    def per_token(call: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                  batch_size: int | None = None, compute_entropy: bool = False,
                  compute_aux_loss: bool = False, **kwargs: Any) -> Any:
        if compute_aux_loss or any(kwargs.get(name) is not None for name in _TRL_ONLY):
            return call(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                        compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        logps, entropies = trimmed_logps(call, model, input_ids, attention_mask, logits_to_keep,
                                         batch_size, compute_entropy)
        return logps, entropies, None

    hooked = [trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", per_token)]
    args = trainer.args
    micro, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    if not sort or loss_type not in SORTABLE_LOSSES or args.steps_per_generation % accumulation:
        return hooked
    trl_shuffle = getattr(grpo_module, "shuffle_sequence_dict", None)
    if trl_shuffle is None:
        raise RuntimeError("trl.trainer.grpo_trainer.shuffle_sequence_dict is gone: update "
                           "toolrl_lib/fast/trim_padding.py (fast.trim_padding)")

    def prepare(call: Any, *args: Any, **kwargs: Any) -> Any:
        grpo_module.shuffle_sequence_dict = lambda batch: sort_steps(trl_shuffle(batch), micro * accumulation)
        try:
            return call(*args, **kwargs)
        finally:
            grpo_module.shuffle_sequence_dict = trl_shuffle

    hooked.append(trl_compat.hook(trainer, "_prepare_inputs", prepare))
    return hooked
