"""GRPO's loss forward with each prompt computed once for all of its completions (CPU).

A GRPO micro-batch holds several completions of the same prompt. TRL scores each row as
prompt + completion, so a prompt of ~450 tokens (tool schemas) is run forward and backward
once per completion: with 4 completions of ~60 tokens, four fifths of the training compute is
the same prompt again. ``shared_prompt_logps`` runs each distinct prompt once (all but its last
token, keys/values kept), then all of that prompt's completions together on top of those
keys/values (the prompt's last token leads each row, so its prediction of the first completion
token is scored as before). Gradients flow back into the prompt's one forward through the
shared keys/values. Same log-probs and entropies as TRL's loop (float rounding only; tested
against it in ``tests/test_shared_prompt.py``), through the model's own fused LM head.

On a CPU the prompts go one at a time (no padding: the smoke profile's path). On a GPU, where
a small model's step is bound by how many tokens it moves rather than by launches,
``batched_shared_prompt_logps`` runs all the distinct prompts of a chunk as one left-padded
batch, then all their completions in a second call: two forwards per chunk, whatever the
number of prompts. It pays when a micro-batch holds whole groups (``fast.group_batches``:
TRL otherwise shuffles the rows of a round, so a micro-batch of 64 holds ~40 distinct prompts).

Installed by ``install`` with ``trl_compat.hook`` on ``_get_per_token_logps_and_entropies``
(``fast.shared_prompt``, on in the smoke profile); anything it does not handle (multimodal
inputs, MoE aux loss, rows without a shared prompt) goes to TRL's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from toolrl_lib.fast import trl_compat

_TRL_ONLY = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
             "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")


_LAYER_CACHE: Any = None


def _layer_cache_class() -> Any:
    """A ``DynamicCache`` whose ``update`` stays out of ``torch.compile``'s graphs: compiled
    layers (``fast.compile_layers``) then share one graph instead of one per layer index
    (eager: the same cache, the same numbers)."""
    global _LAYER_CACHE
    if _LAYER_CACHE is None:
        import torch
        from transformers import DynamicCache

        class _Cache(DynamicCache):
            @torch.compiler.disable
            def update(self, *args: Any, **kwargs: Any) -> Any:
                return super().update(*args, **kwargs)

        _LAYER_CACHE = _Cache
    return _LAYER_CACHE


def prompt_groups(input_ids: Any, attention_mask: Any, completion_length: int) -> list[tuple[list[int], list[int]]]:
    """(prompt token ids without padding, the rows that share it), in first-seen order."""
    prompt_part = input_ids[:, :-completion_length].tolist()
    prompt_mask = attention_mask[:, :-completion_length].tolist()
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, (ids, mask) in enumerate(zip(prompt_part, prompt_mask, strict=True)):
        groups.setdefault(tuple(t for t, m in zip(ids, mask, strict=True) if m), []).append(row)
    return [(list(prompt), rows) for prompt, rows in groups.items()]


def shared_prompt_logps(
    model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, compute_entropy: bool,
    groups: list[tuple[list[int], list[int]]] | None = None,
) -> tuple[Any, Any]:
    """Per-token log-probs (and entropies) of the last ``logits_to_keep`` tokens of each row,
    with every distinct prompt run once (see the module docstring); ``groups`` as
    ``prompt_groups`` returns them, when the caller has them already."""
    import torch

    rows = input_ids.shape[0]
    logps: list[Any] = [None] * rows
    entropies: list[Any] = [None] * rows
    completion = input_ids[:, -logits_to_keep:]
    completion_mask = attention_mask[:, -logits_to_keep:]
    if groups is None:
        groups = prompt_groups(input_ids, attention_mask, logits_to_keep)
    for prompt, members in groups:
        if len(prompt) < 2:
            raise ValueError("shared_prompt_logps needs prompts of at least 2 tokens")
        device, n = input_ids.device, len(members)
        head = torch.tensor([prompt[:-1]], device=device)
        cache = _layer_cache_class()()
        model(input_ids=head, past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(n)  # a view per row in autograd: gradients sum back
        index = torch.tensor(members, device=device)
        tail = torch.cat([torch.full((n, 1), prompt[-1], device=device, dtype=input_ids.dtype),
                          completion[index]], dim=1)
        tail_mask = torch.cat([torch.ones((n, 1), device=device, dtype=attention_mask.dtype),
                               completion_mask[index]], dim=1)
        mask = torch.cat([torch.ones((n, len(prompt) - 1), device=device, dtype=attention_mask.dtype),
                          tail_mask], dim=1)
        labels = tail.masked_fill(tail_mask == 0, -100)
        positions = torch.arange(len(prompt) - 1, len(prompt) + logits_to_keep, device=device)
        out = model(input_ids=tail, attention_mask=mask, position_ids=positions.expand(n, -1),
                    past_key_values=cache, use_cache=True, labels=labels, fused_lm_head=True)
        for j, row in enumerate(members):
            logps[row] = out.log_probs[j, -logits_to_keep:]
            if compute_entropy:
                entropies[row] = out.entropy[j, -logits_to_keep:]
    return torch.stack(logps), (torch.stack(entropies) if compute_entropy else None)


def tail_hidden(backbone: Any, head: Any, head_mask: Any, head_positions: Any, owner: Any, tail: Any,
                mask: Any, positions: Any) -> Any:
    """The last hidden states of every completion row (``tail``, led by its prompt's last token),
    each on top of its prompt's keys and values: the prompts (``head``, left-padded, all but their
    last token) run once, their cache rows are picked per completion by ``owner``."""
    cache = _layer_cache_class()()
    backbone(input_ids=head, attention_mask=head_mask, position_ids=head_positions, past_key_values=cache,
             use_cache=True)
    cache.batch_select_indices(owner)  # an index: each prompt's gradient sums over its completions
    return backbone(input_ids=tail, attention_mask=mask, position_ids=positions, past_key_values=cache,
                    use_cache=True).last_hidden_state


def causal_lm(model: Any) -> Any:
    """The ``*ForCausalLM`` under a PEFT wrapper (or ``model`` itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class _Given:
    """Stands in for a backbone for one call: returns the hidden states it holds; anything else
    (the input embeddings the head's lookup checks) is the real backbone's."""

    def __init__(self, real: Any, hidden: Any) -> None:
        self.real, self.hidden = real, hidden

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(last_hidden_state=self.hidden)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextlib.contextmanager
def given_backbone(lm: Any, hidden: Any) -> Iterator[None]:
    """For the duration, ``lm``'s backbone returns ``hidden``: TRL's fused LM head, which looks its
    backbone up on every call (``base_model``), then scores hidden states computed elsewhere with its
    own code (temperature, scaling, entropy). Restored on exit, error or not."""
    prefix = lm.base_model_prefix
    real = lm._modules[prefix]
    lm._modules[prefix] = _Given(real, hidden)
    try:
        yield
    finally:
        lm._modules[prefix] = real


def batched_shared_prompt_logps(
    model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, compute_entropy: bool,
    groups: list[tuple[list[int], list[int]]], pad_token_id: int = 0, graphs: Any = None,
) -> tuple[Any, Any]:
    """``shared_prompt_logps`` with all of ``groups``' prompts in one left-padded forward and all
    their completions in a second one (what a GPU wants; ``tail_hidden``), then TRL's fused head on
    the completions' hidden states; same results up to float rounding. ``graphs`` (a
    ``cuda_graphs.GraphedBackbone``): the two passes replayed from CUDA graphs, the prompts' width
    and the completions' length rounded up to its buckets (masked either way)."""
    import torch

    device = input_ids.device
    if min(len(prompt) for prompt, _ in groups) < 2:
        raise ValueError("batched_shared_prompt_logps needs prompts of at least 2 tokens")
    width = max(len(prompt) for prompt, _ in groups) - 1  # the prompts less their last token
    length = logits_to_keep
    if graphs is not None:  # the sizes its graphs are recorded for
        width, length = graphs.padded(width, logits_to_keep)
    head = torch.full((len(groups), width), pad_token_id, dtype=input_ids.dtype)
    head_mask = torch.zeros((len(groups), width), dtype=attention_mask.dtype)
    for i, (prompt, _) in enumerate(groups):
        head[i, width - len(prompt) + 1:] = torch.tensor(prompt[:-1])
        head_mask[i, width - len(prompt) + 1:] = 1
    head, head_mask = head.to(device), head_mask.to(device)
    head_positions = (head_mask.cumsum(-1) - 1).clamp(min=0)
    owner = torch.tensor([i for i, (_, members) in enumerate(groups) for _ in members], device=device)
    order = torch.tensor([row for _, members in groups for row in members], device=device)
    last = torch.tensor([prompt[-1] for prompt, _ in groups], device=device, dtype=input_ids.dtype)[owner]
    completion = torch.full((len(order), length), pad_token_id, dtype=input_ids.dtype, device=device)
    completion_mask = torch.zeros((len(order), length), dtype=attention_mask.dtype, device=device)
    completion[:, :logits_to_keep] = input_ids[order, -logits_to_keep:]
    completion_mask[:, :logits_to_keep] = attention_mask[order, -logits_to_keep:]
    tail = torch.cat([last[:, None], completion], dim=1)
    tail_mask = torch.cat([torch.ones_like(completion_mask[:, :1]), completion_mask], dim=1)
    mask = torch.cat([head_mask[owner], tail_mask], dim=1)
    lengths = torch.tensor([len(prompt) for prompt, _ in groups], device=device)[owner]
    positions = (lengths - 1)[:, None] + torch.arange(length + 1, device=device)
    labels = tail.masked_fill(tail_mask == 0, -100)
    lm = causal_lm(model)
    tensors = (head, head_mask, head_positions, owner, tail, mask, positions)
    hidden = tail_hidden(lm._modules[lm.base_model_prefix], *tensors) if graphs is None else graphs(*tensors)
    with given_backbone(lm, hidden):  # TRL's own fused log-prob head on those hidden states
        out = lm(input_ids=tail, labels=labels, fused_lm_head=True)
    back = inverse(order)  # computed in group order, returned in row order
    logps = out.log_probs[:, :logits_to_keep][back]
    return logps, (out.entropy[:, :logits_to_keep][back] if compute_entropy else None)


def inverse(order: Any) -> Any:
    """The permutation that undoes ``order`` (``x[order][inverse(order)] == x``)."""
    import torch

    back = torch.empty_like(order)
    back[order] = torch.arange(order.numel(), device=order.device)
    return back


def chunk_groups(groups: list[tuple[list[int], list[int]]], rows: int,
                 by_length: bool = True) -> list[list[tuple[list[int], list[int]]]]:
    """Whole groups in chunks of at most ``rows`` rows (a larger group alone), shortest prompts
    first (``by_length=False``: in the order given).

    Each chunk's prompt forward is padded to its longest prompt, and each completion attends over
    that width, so groups of similar prompt lengths go together. For the smoke set's prompts
    (207-899 tokens), a round of 64 prompts in chunks of 128 rows pads the prompt forward to
    1.20x the real tokens instead of 1.73x in arrival order (``benchmarks/round_logprob_padding.py``).
    Which group shares a chunk changes no number: every row is computed on its own.

    >>> [[len(p) for p, _ in c] for c in chunk_groups([([1, 2, 3], [0, 1]), ([4, 5], [2, 3]), ([6, 7, 8], [4])], 3)]
    [[2], [3, 3]]
    """
    chunks: list[list[tuple[list[int], list[int]]]] = []
    size = 0
    for group in sorted(groups, key=lambda group: len(group[0])) if by_length else groups:
        if not chunks or size + len(group[1]) > rows:
            chunks.append([])
            size = 0
        chunks[-1].append(group)
        size += len(group[1])
    return chunks


def batched_in_chunks(
    model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, compute_entropy: bool,
    groups: list[tuple[list[int], list[int]]], rows: int, pad_token_id: int = 0, graphs: Any = None,
) -> tuple[Any, Any]:
    """``batched_shared_prompt_logps`` over chunks of whole groups of at most ``rows`` rows (TRL's
    ``batch_size``: the memory bound of its forward-only pass over a whole round)."""
    import torch

    parts = []
    for chunk in chunk_groups(groups, rows):
        members = [row for _, group_rows in chunk for row in group_rows]
        position = {row: i for i, row in enumerate(members)}
        index = torch.tensor(members, device=input_ids.device)
        renumbered = [(prompt, [position[r] for r in group_rows]) for prompt, group_rows in chunk]
        parts.append((index, *batched_shared_prompt_logps(
            model, input_ids[index], attention_mask[index], logits_to_keep, compute_entropy, renumbered,
            pad_token_id, graphs)))
    back = inverse(torch.cat([index for index, _, _ in parts]))
    logps = torch.cat([part[1] for part in parts])[back]
    return logps, (torch.cat([part[2] for part in parts])[back] if compute_entropy else None)


def install(trainer: Any, graphs: Any = None) -> str:
    """Hook ``shared_prompt_logps`` into ``trainer`` (TRL's loop stays for what it skips);
    ``graphs``: a ``cuda_graphs.GraphedBackbone`` for the GPU's batched forwards."""

    def per_token(call: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                  batch_size: int | None = None, compute_entropy: bool = False,
                  compute_aux_loss: bool = False, **kwargs: Any) -> Any:
        extra = any(kwargs.get(name) is not None for name in _TRL_ONLY)
        groups = None if extra else prompt_groups(input_ids, attention_mask, logits_to_keep)
        if extra or compute_aux_loss or len(groups) == input_ids.shape[0]:  # nothing shared
            return call(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                        compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        with trainer.accelerator.autocast():
            if not input_ids.is_cuda:
                logps, entropies = shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep,
                                                       compute_entropy, groups)
                return logps, entropies, None
            pad = getattr(getattr(trainer, "processing_class", None), "pad_token_id", None) or 0
            own = graphs if graphs is not None and graphs.serves(model) else None  # not a reference model
            logps, entropies = batched_in_chunks(model, input_ids, attention_mask, logits_to_keep,
                                                 compute_entropy, groups, batch_size or input_ids.shape[0], pad,
                                                 own)
        return logps, entropies, None

    return trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", per_token)
