"""The CPU key/value-cache decoder: one growing cache, shared by every CPU decoding path.

``toolrl_lib.generation`` is the plain batched decoding loop; this module holds the caches it
and the multi-turn evaluation decode with, all built on one layer type, ``GrowingLayer``:

* ``GrowingCache``: keys/values are views of one buffer sized for the whole generation, so a
  new token is an in-place write (``DynamicCache`` copies the whole cache at every token); the
  prefill's rows are written k times straight into it (the k samples of a prompt). Used by
  ``generation.decode_padded`` (CUDA, attention other than sdpa) and by ``TranscriptCache``.
* ``SharedPrefixCache``: a ``GrowingLayer`` for the new tokens of each sample plus the
  prompt's keys/values stored ONCE for its k samples (``prefix``). Sampling k completions per
  prompt (mean@k validation, GRPO rollouts) used to keep k copies of every prompt's
  keys/values and read all k at every decoded token; on a CPU that read is memory-bound and
  the prompt (hundreds of tokens of tool schemas) dwarfs the completion. Prompts are prefilled
  one at a time (no padding computed; the padded batch padded every prompt to its group's
  longest, ~40% of the smoke validation's prefill work) straight into their row of the prefix.
  A decode step attends over the prefix and the new tokens and joins the two with the
  log-sum-exp rule (``decode_attention``): softmax attention over [prompt; new tokens], as
  before. ``shared_prefix_applies`` is the switch (a CPU model with sdpa attention), and
  ``shared_prefix_steps`` what ``generation.decode_shared`` runs the sampling loop in.
* ``TranscriptCache``: multi-turn steps, one episode at a time (greedy, batch 1). A step's
  prompt is the previous prompt plus the reply and the tool results; the episode's
  ``GrowingCache`` is kept between steps, its longest common token prefix with the new prompt
  re-used and only the rest prefilled (``multi_turn_base_0``: ~6.8k tokens a step, mostly
  function docs). The reused keys/values are exactly those a fresh prefill computes (causal
  attention), so the greedy tokens equal ``generation.generate``'s up to float rounding.
  Caches are dropped least-recently-used first beyond ``max_cache_bytes``.

What stays apart: the multi-turn cache is per episode, fed several tokens at once after a
re-use (the shared prefix is written only by whole-prompt prefills), and the GPU slot engine
(``toolrl_lib.fast.slots``) keeps its caches on the device in fixed slots.
Measured in ``benchmarks/results/workbook_profile.md`` (shared prefix, in-place cache) and
``benchmarks/decode_attention.py`` (the fused prefix attention against the explicit softmax).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

ATTENTION = "toolrl_shared_prefix"


# --- one growing layer ------------------------------------------------------------------------

def _growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values are views of one buffer sized for the whole
        generation, so a new token is an in-place write instead of a copy of the cache.

        The prefill's rows are written ``repeat`` times each (the k samples of a prompt share
        its prefill), straight into that buffer: no second, repeated copy of the cache exists.
        ``room`` is the number of tokens still to come; selecting rows (dropping finished
        samples) copies the kept rows into a smaller buffer with the same room."""

        repeat: int = 1
        room: int = 64

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self._kbuf = self._vbuf = None
            old = self.keys.shape[-2] if self._kbuf is not None else 0
            new = old + key_states.shape[-2]
            if self._kbuf is None or self._kbuf.shape[-2] < new:
                self._allocate(key_states, value_states, old, new)
            else:
                self._kbuf[:, :, old:new] = key_states
                self._vbuf[:, :, old:new] = value_states
            self.keys, self.values = self._kbuf[:, :, :new], self._vbuf[:, :, :new]
            if not old and self.repeat > 1:  # the prefill attends over its own (unrepeated) rows
                return key_states, value_states
            return self.keys, self.values

        def _allocate(self, key_states: Any, value_states: Any, old: int, new: int) -> None:
            rows = key_states.shape[0] * (self.repeat if not old else 1)
            size = new + max(1, self.room)
            kbuf = key_states.new_empty((rows, key_states.shape[1], size, key_states.shape[-1]))
            vbuf = value_states.new_empty((rows, value_states.shape[1], size, value_states.shape[-1]))
            if old:
                kbuf[:, :, :old], vbuf[:, :, :old] = self.keys, self.values
                kbuf[:, :, old:new], vbuf[:, :, old:new] = key_states, value_states
            else:  # the prefill: each row repeated in place, prompt-major like repeat_interleave
                r = self.repeat
                kview = kbuf.view(key_states.shape[0], r, *kbuf.shape[1:])
                vview = vbuf.view(value_states.shape[0], r, *vbuf.shape[1:])
                for j in range(r):
                    kview[:, j, :, :new] = key_states
                    vview[:, j, :, :new] = value_states
            self._kbuf, self._vbuf = kbuf, vbuf

        def batch_select_indices(self, indices: Any) -> None:
            if self._kbuf is None:
                return super().batch_select_indices(indices)
            used = self.keys.shape[-2]
            self._kbuf = self._kbuf.index_select(0, indices)
            self._vbuf = self._vbuf.index_select(0, indices)
            self.keys, self.values = self._kbuf[:, :, :used], self._vbuf[:, :, :used]

    return GrowingLayer


_GROWING_LAYER: type | None = None


def _growing_layer() -> type:
    """``GrowingLayer``, built once (transformers is imported on first use only)."""
    global _GROWING_LAYER
    if _GROWING_LAYER is None:
        _GROWING_LAYER = _growing_layer_class()
    return _GROWING_LAYER


def GrowingCache(repeat: int = 1, room: int = 64) -> Any:  # noqa: N802 (a factory that reads like a class)
    """A transformers ``Cache`` of ``GrowingLayer``s (created lazily, one per layer): the
    prefill's rows repeated ``repeat`` times, ``room`` spare token positions per row."""
    from transformers.cache_utils import Cache

    layer = type("GrowingLayerSized", (_growing_layer(),), {"repeat": repeat, "room": room})
    return Cache(layer_class_to_replicate=layer)


# --- the shared prefix: k samples of a prompt read its keys/values once --------------------


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


def _shared_prefix_layer_class() -> type:
    class SharedPrefixLayer(_growing_layer()):
        """One layer's prompt keys/values (``prefix``: prompts x heads x width x dim, left-padded
        to the group's longest prompt, once per prompt) and each row's new tokens (the inherited
        growing buffer: rows x heads x steps x dim, no padding, as every row starts decoding at
        the same step)."""

        state: SharedPrefixState
        repeat = 1

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            state = self.state
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self._kbuf = self._vbuf = None
                shape = (state.prompts, key_states.shape[1], state.width, key_states.shape[-1])
                # zeros, not empty: padded columns are masked, but 0 * NaN garbage would be NaN
                self.prefix_k, self.prefix_v = key_states.new_zeros(shape), value_states.new_zeros(shape)
            if state.cursor is not None:  # prefill of one prompt: attention over itself
                prompt, start = state.cursor
                self.prefix_k[prompt, :, start:] = key_states[0]
                self.prefix_v[prompt, :, start:] = value_states[0]
                return key_states, value_states
            return super().update(key_states, value_states)  # a new token per row, in place

        def keep(self, rows: Any, prompts: Any | None) -> None:
            if self._kbuf is not None:  # no new token is stored before the first decode step
                self.batch_select_indices(rows)
            if prompts is not None:
                self.prefix_k, self.prefix_v = self.prefix_k[prompts], self.prefix_v[prompts]

        def get_seq_length(self) -> int:
            return self.state.width + (self.keys.shape[-2] if self._kbuf is not None else 0)

        def get_mask_sizes(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
            return self.get_seq_length(), 0

    return SharedPrefixLayer


_SHARED_PREFIX_LAYER: type | None = None


def SharedPrefixCache(state: SharedPrefixState) -> Any:  # noqa: N802 (a factory that reads like a class)
    """A transformers ``Cache`` of shared-prefix layers bound to ``state``, room for
    ``state.room`` new tokens per row."""
    from transformers.cache_utils import Cache

    global _SHARED_PREFIX_LAYER
    if _SHARED_PREFIX_LAYER is None:
        _SHARED_PREFIX_LAYER = _shared_prefix_layer_class()
    # the first decoded token allocates 1 + room positions: state.room in all
    layer = type("SharedPrefixLayerBound", (_SHARED_PREFIX_LAYER,), {"state": state, "room": state.room - 1})
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


def shared_prefix_applies(model: Any) -> bool:
    """The switch: the shared-prefix decoder runs where it pays and is tested, a CPU model with
    sdpa attention (on CUDA batched prefill and fused attention kernels win)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    return (getattr(config, "_attn_implementation", None) in ("sdpa", "sdpa_gqa")
            and next(base.parameters()).device.type == "cpu" and hasattr(base, "set_attn_implementation"))


@contextlib.contextmanager
def shared_prefix_steps(model: Any, prompt_ids: list[list[int]], k: int, max_new_tokens: int) -> Iterator[tuple[Any, Any, Any]]:
    """Prefill each prompt alone into a ``SharedPrefixCache``; yields ``(logits, drop, forward)``
    for ``generation.sample_tokens``: the first logits of every row (prompt-major, k rows a
    prompt), ``drop(keep)`` to shrink the batch and ``forward(ids, step)`` -> the next logits.
    The shared-prefix attention is on for the body."""
    import torch

    device = next(model.parameters()).device
    state = SharedPrefixState([len(ids) for ids in prompt_ids], k, max(1, max_new_tokens), device)
    cache = SharedPrefixCache(state)
    with attention(model):
        last = []
        for index, ids in enumerate(prompt_ids):
            state.cursor = (index, state.width - len(ids))
            out = model(input_ids=torch.tensor([ids], device=device),
                        position_ids=torch.arange(len(ids), device=device)[None], past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
            last.append(out.logits[:, -1, :].float())
        state.cursor = None
        logits = torch.cat(last).repeat_interleave(k, dim=0)
        positions = state.lengths.repeat_interleave(k)  # the first new token's position, per row

        def drop(keep: Any) -> None:
            nonlocal positions
            keep_rows(cache, keep)
            positions = positions[keep]

        def forward(ids: Any, step: int) -> Any:
            return model(input_ids=ids, position_ids=(positions + step).unsqueeze(-1), past_key_values=cache,
                         use_cache=True, past_key_values_shared=cache).logits[:, -1, :].float()

        yield logits, drop, forward


# --- multi-turn transcripts -------------------------------------------------------------------


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def cache_bytes(cache: Any) -> int:
    """Memory held by a cache's keys and values (their buffers, spare room included)."""
    total = 0
    for layer in cache.layers:
        keys = getattr(layer, "_kbuf", None)
        keys = keys if keys is not None else getattr(layer, "keys", None)
        if keys is not None:
            total += 2 * keys.numel() * keys.element_size()
    return total


def truncate(cache: Any, length: int) -> None:
    """Keep the first ``length`` positions of every layer (views: no copy)."""
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, :length]
        layer.values = layer.values[:, :, :length]


class TranscriptCache:
    """``complete({key: prompt})`` -> ``{key: reply}``, greedy, re-using each key's cache
    (one ``GrowingCache`` per key, e.g. per episode)."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int, max_cache_bytes: int = 1 << 30) -> None:
        from toolrl_lib.models import stop_token_ids

        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.max_cache_bytes = max_new_tokens, max_cache_bytes
        self.stops = set(stop_token_ids(tokenizer))
        self.entries: OrderedDict[str, tuple[list[int], Any]] = OrderedDict()
        self.reused_tokens = 0
        self.prefilled_tokens = 0

    def drop(self, key: str) -> None:
        self.entries.pop(key, None)

    def complete(self, prompts: dict[str, str]) -> dict[str, str]:
        return {key: self.complete_one(key, prompt) for key, prompt in prompts.items()}

    def complete_one(self, key: str, prompt: str, ids: list[int] | None = None) -> str:
        """``ids``: the prompt's tokens when the caller has them already."""
        import torch

        from toolrl_lib.models import inference_attention

        if ids is None:
            ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        cached_ids, cache = self.entries.pop(key, ([], None))
        reuse = min(common_prefix(cached_ids, ids), len(ids) - 1)  # feed >= 1 token for logits
        if cache is None or reuse <= 0:
            cache, reuse = GrowingCache(), 0
        else:
            truncate(cache, reuse)
        self.reused_tokens += reuse
        self.prefilled_tokens += len(ids) - reuse
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        new: list[int] = []
        try:
            with torch.inference_mode(), inference_attention(self.model):
                feed = torch.tensor([ids[reuse:]], dtype=torch.long, device=device)
                position = reuse
                for _ in range(self.max_new_tokens):
                    length = position + feed.shape[1]
                    logits = self.model(
                        input_ids=feed, attention_mask=torch.ones((1, length), dtype=torch.long, device=device),
                        position_ids=torch.arange(position, length, device=device).unsqueeze(0),
                        past_key_values=cache, use_cache=True, logits_to_keep=1,
                    ).logits[0, -1]  # fmt: skip
                    token = int(logits.argmax())
                    new.append(token)
                    if token in self.stops:
                        break
                    position, feed = length, torch.tensor([[token]], dtype=torch.long, device=device)
        finally:
            if was_training:
                self.model.train()
        # The cache now holds the prompt and every new token but the last (never fed).
        self.entries[key] = (ids + new[:-1], cache)
        self._evict()
        return self.tokenizer.decode(new, skip_special_tokens=True)

    def _evict(self) -> None:
        while len(self.entries) > 1 and sum(cache_bytes(c) for _, c in self.entries.values()) > self.max_cache_bytes:
            self.entries.popitem(last=False)
