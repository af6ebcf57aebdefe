"""Micro-batches of whole groups: TRL's row shuffle of a rollout round replaced by a group shuffle.

TRL shuffles the rows of each round (``shuffle_sequence_dict``) before splitting it into the
round's optimizer steps, so a micro-batch of 64 completions of G=8 holds ~40 distinct prompts
and nothing is shared in its forward. Shuffling whole groups instead (the order of the groups
is random, each group's G rows stay together) keeps every step's share of the round the same
size, and each micro-batch then holds per_device_train_batch_size / G whole groups, whose
prompts ``fast.shared_prompt`` runs once. What changes: which completions share an optimizer
step (whole groups rather than a random sample of rows); the set of each round's rows, the
advantages and the loss of a row do not.

Where the round is not made of whole groups in order (a rank holding part of a group), TRL's
row shuffle runs unchanged.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat


def group_permutation(prompt_ids: Any, prompt_mask: Any, group_size: int) -> Any:
    """A permutation of the rows that moves whole consecutive groups of ``group_size`` rows with
    the same prompt, or None when the rows are not such groups."""
    import torch

    rows = prompt_ids.shape[0]
    if group_size < 1 or rows % group_size:
        return None
    ids = prompt_ids.reshape(rows // group_size, group_size, -1)
    mask = prompt_mask.reshape(rows // group_size, group_size, -1)
    if not (bool((ids == ids[:, :1]).all()) and bool((mask == mask[:, :1]).all())):
        return None
    order = torch.randperm(rows // group_size)
    return (order[:, None] * group_size + torch.arange(group_size)).flatten()


def shuffle_groups(batch: dict[str, Any], group_size: int, fallback: Any) -> dict[str, Any]:
    """``batch`` (TRL's dict of per-row tensors and lists) in a random order of whole groups;
    ``fallback`` (TRL's row shuffle) where ``group_permutation`` finds no groups."""
    import torch

    permutation = group_permutation(batch["prompt_ids"], batch["prompt_mask"], group_size)
    if permutation is None:
        return fallback(batch)

    def permute(value: Any) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[permutation.to(value.device)]
        return [value[i] for i in permutation.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def install(trainer: Any) -> str:
    """Hook ``_prepare_inputs`` so that, inside it, TRL's round shuffle moves whole groups."""
    import trl.trainer.grpo_trainer as grpo_module

    group_size = trainer.num_generations
    trl_shuffle = getattr(grpo_module, "shuffle_sequence_dict", None)
    if trl_shuffle is None:
        raise RuntimeError("trl.trainer.grpo_trainer.shuffle_sequence_dict is gone: update "
                           "toolrl_lib/fast/group_batches.py (fast.group_batches)")

    def prepare(call: Any, *args: Any, **kwargs: Any) -> Any:
        grpo_module.shuffle_sequence_dict = lambda batch: shuffle_groups(batch, group_size, trl_shuffle)
        try:
            return call(*args, **kwargs)
        finally:
            grpo_module.shuffle_sequence_dict = trl_shuffle

    return trl_compat.hook(trainer, "_prepare_inputs", prepare)
