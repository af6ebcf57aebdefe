"""A key/value cache whose k samples of a prompt share that prompt's keys/values (CPU decoding).

Sampling k completions per prompt (mean@k validation, GRPO rollouts) used to keep k copies of
every prompt's keys/values and read all k at every decoded token. On a CPU that read is
memory-bound, and the prompt (hundreds of tokens of tool schemas) dwarfs the completion, so
most of it was the same bytes read k times. Here each prompt's keys/values are stored once
(``prefix``: prompts x heads x width x dim, left-padded to the group's longest prompt) and only
the new tokens per sample (``suffix``: rows x heads x steps x dim, no padding: every row starts
decoding at the same step). A decode step attends over both parts and joins them with the usual
log-sum-exp rule, so the result is softmax attention over [prompt; new tokens], as before.

Prompts are prefilled one at a time (no padding computed at all; the batched prefill padded
every prompt to its group's longest, ~40% of the smoke validation's prefill work) and written
straight into their row of the prefix. ``decode`` in ``toolrl_lib.generation`` drives it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

ATTENTION = "toolrl_shared_prefix"


class SharedPrefixState:
    """What the attention function needs besides the layer's tensors: which prompt slot each
    live row samples from, and which prefix columns are padding."""

    def __init__(self, lengths: list[int], k: int, room: int, device: Any) -> None:
        import torch

        self.k, self.room, self.width = k, room, max(lengths)
        self.lengths = torch.tensor(lengths, device=device)
        # row r of the batch samples from prompt slots[r] // k (prompt-major, as repeat_interleave)
        self.slots = torch.arange(len(lengths) * k, device=device)
        self.prompts = len(lengths)
        self.cursor: tuple[int, int] | None = None  # (prompt, first column) while prefilling
        self._bias = None

    def prefix_bias(self, dtype: Any) -> Any:
        """(prompts, width) additive mask: 0 on a prompt's tokens, -inf on its left padding."""
        import torch

        if self._bias is None or self._bias.dtype != dtype:
            columns = torch.arange(self.width, device=self.lengths.device)
            pad = columns[None, :] < (self.width - self.lengths)[:, None]
            self._bias = torch.zeros(pad.shape, dtype=dtype, device=pad.device).masked_fill(pad, float("-inf"))
        return self._bias

    def keep_rows(self, keep: Any) -> Any:
        """Drop finished rows; when every sample of a prompt finished, drop the prompt too.
        Returns the kept prompt indices (for the layers' prefix tensors)."""
        import torch

        self.slots = self.slots[keep]
        prompt_of_row = torch.div(self.slots, self.k, rounding_mode="floor")
        kept_prompts = torch.unique(prompt_of_row)  # sorted
        if len(kept_prompts) < self.prompts:
            new_index = torch.full((self.prompts,), -1, dtype=torch.long, device=self.slots.device)
            new_index[kept_prompts] = torch.arange(len(kept_prompts), device=self.slots.device)
            self.slots = new_index[prompt_of_row] * self.k + self.slots % self.k
            self.lengths = self.lengths[kept_prompts]
            self.prompts = len(kept_prompts)
            if self._bias is not None:
                self._bias = self._bias[kept_prompts]
        return kept_prompts


def _layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class SharedPrefixLayer(DynamicLayer):
        """One layer's prefix (once per prompt) and suffix (per row) keys/values."""

        state: SharedPrefixState

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:

            state = self.state
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                heads, dim = key_states.shape[1], key_states.shape[-1]
                shape = (state.prompts, heads, state.width, dim)
                # zeros, not empty: padded columns are masked, but 0 * NaN garbage would be NaN
                self.prefix_k = key_states.new_zeros(shape)
                self.prefix_v = value_states.new_zeros(shape)
                rows = state.prompts * state.k
                self.suffix_k = key_states.new_empty((rows, heads, state.room, dim))
                self.suffix_v = value_states.new_empty((rows, heads, state.room, dim))
                self.used = 0
            if state.cursor is not None:  # prefill of one prompt: attention over itself
                prompt, start = state.cursor
                self.prefix_k[prompt, :, start:] = key_states[0]
                self.prefix_v[prompt, :, start:] = value_states[0]
                return key_states, value_states
            if self.used >= self.suffix_k.shape[-2]:
                raise RuntimeError("shared-prefix cache is full: more tokens than its room")
            self.suffix_k[:, :, self.used] = key_states[:, :, 0]
            self.suffix_v[:, :, self.used] = value_states[:, :, 0]
            self.used += 1
            self.keys, self.values = self.suffix_k[:, :, : self.used], self.suffix_v[:, :, : self.used]
            return self.keys, self.values

        def keep(self, rows: Any, prompts: Any | None) -> None:
            self.suffix_k, self.suffix_v = self.suffix_k[rows], self.suffix_v[rows]
            if prompts is not None:
                self.prefix_k, self.prefix_v = self.prefix_k[prompts], self.prefix_v[prompts]

        def get_seq_length(self) -> int:
            return self.state.width + getattr(self, "used", 0)

        def get_mask_sizes(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
            return self.get_seq_length(), 0

    return SharedPrefixLayer


_LAYER: type | None = None


def SharedPrefixCache(state: SharedPrefixState) -> Any:  # noqa: N802 (a factory that reads like a class)
    """A transformers ``Cache`` of shared-prefix layers bound to ``state``."""
    from transformers.cache_utils import Cache

    global _LAYER
    if _LAYER is None:
        _LAYER = _layer_class()
    layer = type("SharedPrefixLayerBound", (_LAYER,), {"state": state})
    cache = Cache(layer_class_to_replicate=layer)
    cache.shared_prefix_state = state
    return cache


def keep_rows(cache: Any, keep: Any) -> None:
    """Keep the batch rows ``keep`` (finished samples leave the batch)."""
    state: SharedPrefixState = cache.shared_prefix_state
    before = state.prompts
    prompts = state.keep_rows(keep)
    for layer in cache.layers:
        if getattr(layer, "is_initialized", False):
            layer.keep(keep, prompts if len(prompts) < before else None)


def attend_with_lse(query: Any, key: Any, value: Any, scaling: float, bias: Any = None) -> tuple[Any, Any]:
    """Softmax attention of ``query`` (batch, heads, q, dim) over ``key``/``value`` (batch,
    heads, len, dim) and its log-sum-exp (batch, heads, q), so two parts of one softmax can
    be joined. On a CPU this is PyTorch's fused flash kernel (one pass over the keys and
    values, no score tensor written out); elsewhere the explicit product and softmax.
    ``bias`` is an additive mask broadcastable to (batch, heads, q, len).

    >>> import torch
    >>> q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    >>> out, lse = attend_with_lse(q, k, v, 8 ** -0.5)
    >>> scores = q @ k.transpose(-1, -2) * 8 ** -0.5
    >>> bool(torch.allclose(out, scores.softmax(-1) @ v, atol=1e-5))
    True
    >>> bool(torch.allclose(lse, scores.logsumexp(-1), atol=1e-5))
    True
    """
    import torch

    if query.device.type == "cpu" and query.dtype in (torch.float32, torch.float64):
        mask = None if bias is None else bias.expand(*query.shape[:-1], key.shape[-2])
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, False, attn_mask=mask, scale=scaling)
    return explicit_attend_with_lse(query, key, value, scaling, bias)


def explicit_attend_with_lse(query: Any, key: Any, value: Any, scaling: float, bias: Any = None) -> tuple[Any, Any]:
    """``attend_with_lse`` with the scores, log-sum-exp and weights written out as tensors (off
    CPU; and the reference ``benchmarks/decode_attention.py`` times the fused kernel against)."""
    import torch

    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if bias is not None:
        scores = scores + bias
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), value), lse


def decode_attention(query: Any, layer: Any, state: SharedPrefixState, scaling: float) -> Any:
    """Attention of one new token per row over its prompt's prefix and its own suffix.

    ``query``: (rows, query heads, 1, dim). Query heads are grouped by key/value head as in
    transformers' ``repeat_kv`` (head h reads key/value head h // group). Each part is one
    fused attention with its log-sum-exp (``attend_with_lse``); the two are joined with the
    log-sum-exp rule. Returns (rows, 1, query heads, dim), the layout attention functions
    hand back."""
    import torch

    rows, q_heads, _, dim = query.shape
    prompts, kv_heads, _, _ = layer.prefix_k.shape
    group, k = q_heads // kv_heads, state.k
    q = query.reshape(rows, kv_heads, group, dim)
    # prefix: scatter rows into a (prompt, sample) grid so each prompt's keys are read once
    grid = q.new_zeros((prompts * k, kv_heads, group, dim))
    grid[state.slots] = q
    grid = grid.view(prompts, k, kv_heads, group, dim).transpose(1, 2).reshape(prompts, kv_heads, k * group, dim)
    p_out, p_lse = attend_with_lse(grid, layer.prefix_k, layer.prefix_v, scaling,
                                   state.prefix_bias(grid.dtype)[:, None, None, :])

    def to_rows(t: Any) -> Any:  # (prompts, kv, k*group, x) -> (rows, kv, group, x)
        x = t.shape[-1]
        return t.reshape(prompts, kv_heads, k, group, x).transpose(1, 2).reshape(prompts * k, kv_heads, group, x)[state.slots]

    p_out, p_lse = to_rows(p_out), to_rows(p_lse.unsqueeze(-1))
    s_out, s_lse = attend_with_lse(q, layer.keys, layer.values, scaling)  # (rows, kv, group, ...)
    prefix_share = torch.sigmoid(p_lse - s_lse.unsqueeze(-1))  # e^p / (e^p + e^s)
    out = s_out + prefix_share * (p_out - s_out)
    return out.reshape(rows, q_heads, dim).unsqueeze(1)


def shared_prefix_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
    scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any,
) -> tuple[Any, None]:
    """The attention implementation registered as ``toolrl_shared_prefix``: a prompt's prefill
    is plain causal SDPA over its own (unpadded) tokens; a decode step is ``decode_attention``."""
    import torch

    cache = kwargs.get("past_key_values_shared")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if cache is not None and query.shape[2] == 1 and cache.shared_prefix_state.cursor is None:
        layer = cache.layers[module.layer_idx]
        return decode_attention(query, layer, cache.shared_prefix_state, scale), None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=query.shape[2] > 1, scale=scale,
        enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """Prefill is one unpadded prompt (causal) and decode masks the prefix itself."""
    return None


def register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION, shared_prefix_attention)
    AttentionMaskInterface.register(ATTENTION, _no_mask)


@contextlib.contextmanager
def attention(model: Any) -> Iterator[None]:
    """Run the body with the shared-prefix attention (restores the model's own afterwards)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    old = base.config._attn_implementation
    register()
    base.set_attn_implementation(ATTENTION)
    try:
        yield
    finally:
        base.set_attn_implementation(old)
