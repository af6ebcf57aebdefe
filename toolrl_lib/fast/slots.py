"""Batched greedy multi-turn decoding with every episode's key/value cache kept on the device.

The GPU counterpart of ``toolrl_lib.fast.decode.TranscriptCache``. On an H200 the batched ``generate``
over whole transcripts cost ~5-7 s per entry: every step re-prefilled ~6-8k tokens per episode
(mostly function docs), and transformers' SDPA path copies each key/value head for its group
of query heads at every decoded token. Here:

* each live episode owns a *slot* of one preallocated cache per layer, ``[slots, kv_heads,
  capacity, head_dim]``; a step pre-fills only what is new since the slot's cached tokens
  (their longest common prefix), in micro-batches, written straight into the slots;
* all live episodes then decode together, one forward per token over the occupied slots (a
  view, no copy); grouped-query attention reads the unrepeated heads (no per-token copy);
* finished rows keep decoding as padding (their tokens are ignored) until every row stops.

Only the attention and the cache are ours: projections, rotary embeddings, norms and MLPs are
the model's own modules (Llama-like decoders: ``model.model.layers[i].self_attn``). Greedy
tokens equal ``generation.generate``'s up to float rounding (tested on CPU, float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolrl_lib.fast.decode import common_prefix
from toolrl_lib.generation import pad_token_id, stop_token_ids

ATTENTION = "toolrl_slots"


def supports_slots(model: Any) -> bool:
    """True for a decoder whose layers this engine can drive (Llama, Qwen, Mistral-like)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    return bool(layers) and hasattr(inner, "rotary_emb") and hasattr(inner, "embed_tokens") \
        and hasattr(model, "lm_head") and all(hasattr(layer, "self_attn") for layer in layers)


def kv_shape(model: Any) -> tuple[int, int, int]:
    """(layers, key/value heads, head dim) of a decoder."""
    config = model.config
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return len(model.model.layers), kv_heads, getattr(config, "head_dim", None) or config.hidden_size // heads


def slot_bytes(model: Any, capacity: int) -> int:
    """Device memory of one slot: keys and values of ``capacity`` positions in every layer."""
    layers, kv_heads, dim = kv_shape(model)
    return 2 * layers * kv_heads * dim * capacity * next(model.parameters()).element_size()


@dataclass
class Plan:
    """Where one forward's new keys/values go and what each query may attend to (built once
    per forward, shared by every layer: no per-layer host sync).

    ``slots``: per batch row, its slot; ``write_rows``/``write_cols``: the (row, offset) of each
    real new token, ``write_slots``/``write_pos`` where it goes; ``allowed``: ``[rows, width,
    keys_len]``, query i of row b sees positions <= start_b + i; ``view``: the rows are slots
    0..n-1 in order, so attention reads the cache as a view."""

    slots: Any
    write_rows: Any
    write_cols: Any
    write_slots: Any
    write_pos: Any
    allowed: Any
    keys_len: int
    view: bool
    causal_only: bool = False


def make_plan(slots: Any, start: Any, lengths: Any, width: int, keys_len: int, view: bool,
              causal_only: bool = False) -> Plan:  # fmt: skip
    import torch

    device = slots.device
    offsets = torch.arange(width, device=device)
    if width == 1:
        rows = torch.arange(slots.shape[0], device=device)
        cols = torch.zeros_like(rows)
    else:
        rows, cols = (offsets.unsqueeze(0) < lengths.unsqueeze(1)).nonzero(as_tuple=True)
    limit = start.unsqueeze(1) + offsets.unsqueeze(0)  # [rows, width]
    allowed = None if causal_only else (
        torch.arange(keys_len, device=device).view(1, 1, -1) <= limit.unsqueeze(-1))
    return Plan(slots, rows, cols, slots[rows], start[rows] + cols, allowed, keys_len, view, causal_only)


class SlotCache:
    """Duck-typed transformers cache: ``update`` writes into the slots and returns what the
    attention reads (the plan's rows, ``keys_len`` positions)."""

    def __init__(self, keys: list[Any], values: list[Any]) -> None:
        self.keys, self.values = keys, values
        self.plan: Plan | None = None

    def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
        plan = self.plan
        if plan.causal_only:  # a fresh episode on its own: attend over its new keys directly
            n = key_states.shape[2]
            self.keys[layer_idx][plan.slots[0], :, :n] = key_states[0]
            self.values[layer_idx][plan.slots[0], :, :n] = value_states[0]
            return key_states, value_states
        self.keys[layer_idx][plan.write_slots, :, plan.write_pos] = key_states[plan.write_rows, :, plan.write_cols]
        self.values[layer_idx][plan.write_slots, :, plan.write_pos] = value_states[plan.write_rows, :, plan.write_cols]
        if plan.view:
            n = plan.slots.shape[0]
            return self.keys[layer_idx][:n, :, : plan.keys_len], self.values[layer_idx][:n, :, : plan.keys_len]
        return (self.keys[layer_idx][plan.slots, :, : plan.keys_len],
                self.values[layer_idx][plan.slots, :, : plan.keys_len])  # fmt: skip


def slot_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                   dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:  # fmt: skip
    """Attention under a ``Plan`` (passed as ``attention_mask``): query i of row b sees key
    positions <= start_b + i. With one query per row (decoding), each kv head's group of query
    heads is attended as a short query sequence, so the cached heads are read once, unrepeated."""
    import torch

    plan: Plan = attention_mask
    rows, heads, width, dim = query.shape
    kv_heads = key.shape[1]
    if plan.causal_only:
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, is_causal=True, scale=scaling, enable_gqa=heads != kv_heads)
        return out.transpose(1, 2).contiguous(), None
    allowed = plan.allowed
    if width == 1:  # the kv heads' query groups become a query length of ``groups``: no copy
        q = query.view(rows, kv_heads, heads // kv_heads, dim)
        out = torch.nn.functional.scaled_dot_product_attention(
            q, key, value, attn_mask=allowed.view(rows, 1, 1, -1), scale=scaling)
        return out.view(rows, heads, 1, dim).transpose(1, 2).contiguous(), None
    if heads != kv_heads:
        key = key.repeat_interleave(heads // kv_heads, dim=1)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=allowed.unsqueeze(1), scale=scaling)
    return out.transpose(1, 2).contiguous(), None


class SlotEngine:
    """``complete({key: token ids})`` -> ``{key: reply}``, greedy, every key's cache kept in
    its slot until ``drop(key)``. At most ``slots`` keys at once; ``capacity`` positions per slot
    (the window), grown when a prompt plus ``max_new_tokens`` needs more."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int, slots: int, capacity: int,
                 prefill_tokens: int = 16384, mask_elements: int = 1 << 28) -> None:  # fmt: skip
        import torch

        if not supports_slots(model):
            raise ValueError(f"{type(model).__name__}: not a decoder the slot engine can drive")
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.capacity = -(-capacity // 64) * 64
        self.prefill_tokens, self.mask_elements = prefill_tokens, mask_elements
        layers, kv_heads, dim = kv_shape(model)
        param = next(model.parameters())
        self.device = param.device
        shape = (slots, kv_heads, self.capacity, dim)
        self.cache = SlotCache([torch.zeros(shape, dtype=param.dtype, device=self.device) for _ in range(layers)],
                               [torch.zeros(shape, dtype=param.dtype, device=self.device) for _ in range(layers)])
        self.slots = slots
        self.stops = stop_token_ids(tokenizer)
        self.pad = pad_token_id(tokenizer)
        self.owner: dict[str, int] = {}
        self.ids: dict[str, list[int]] = {}
        self.reused_tokens = self.prefilled_tokens = self.forwards = 0

    def drop(self, key: str) -> None:
        self.owner.pop(key, None)
        self.ids.pop(key, None)

    def _slot(self, key: str) -> int:
        if key not in self.owner:
            used = set(self.owner.values())
            free = next((s for s in range(self.slots) if s not in used), None)
            if free is None:
                raise RuntimeError(f"all {self.slots} slots are in use (raise max_live's slots or drop keys)")
            self.owner[key] = free
        return self.owner[key]

    def _grow(self, need: int) -> None:
        """Room for ``need`` positions per slot: new buffers, the cached part copied (a run
        with a window sized the cache for it; this is for runs without a window check)."""
        self.capacity = -(-need // 64) * 64
        for store in (self.cache.keys, self.cache.values):
            for i, old in enumerate(store):
                new = old.new_zeros((*old.shape[:2], self.capacity, old.shape[-1]))
                new[:, :, : old.shape[2]] = old
                store[i] = new

    def complete(self, prompts: dict[str, list[int]]) -> dict[str, str]:
        import torch

        if not prompts:
            return {}
        rows = []  # (slot, key, ids, reuse)
        for key, ids in prompts.items():
            if len(ids) + self.max_new_tokens > self.capacity:
                self._grow(len(ids) + self.max_new_tokens)
            slot = self._slot(key)
            reuse = min(common_prefix(self.ids.get(key, []), ids), len(ids) - 1)
            self.reused_tokens += reuse
            self.prefilled_tokens += len(ids) - reuse
            rows.append((slot, key, list(ids), reuse))
        rows.sort()
        from transformers import AttentionInterface

        AttentionInterface.register(ATTENTION, slot_attention)
        base = self.model
        old = base.config._attn_implementation
        was_training = base.training
        base.eval()
        base.config._attn_implementation = ATTENTION
        try:
            with torch.inference_mode():
                first = self._prefill(rows)
                new = self._decode(rows, first)
        finally:
            base.config._attn_implementation = old
            if was_training:
                base.train()
        out = {}
        for (_, key, ids, _), tokens in zip(rows, new, strict=True):
            self.ids[key] = ids + tokens[:-1]  # the last new token was never fed
            out[key] = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return out

    def _forward(self, ids: Any, positions: Any, plan: Plan, last: Any) -> Any:
        """Logits at ``last`` (per row, an index into the width) of one forward under ``plan``."""
        import torch

        inner = self.model.model
        self.cache.plan = plan
        self.forwards += 1
        hidden = inner.embed_tokens(ids)
        embeddings = inner.rotary_emb(hidden, position_ids=positions)
        for layer in inner.layers:
            hidden = layer(hidden, attention_mask=plan, position_ids=positions, past_key_values=self.cache,
                           position_embeddings=embeddings)  # fmt: skip
        hidden = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return self.model.lm_head(inner.norm(hidden)).float()

    def _prefill(self, rows: list[tuple[int, str, list[int], int]]) -> list[int]:
        """Pre-fill each row's new tokens in micro-batches (by length); its first new token."""
        import torch

        order = sorted(range(len(rows)), key=lambda i: len(rows[i][2]) - rows[i][3])
        first = [0] * len(rows)
        start = 0
        while start < len(order):
            stop = start + 1
            while stop < len(order):
                width = len(rows[order[stop]][2]) - rows[order[stop]][3]
                keys = max(len(rows[i][2]) for i in order[start : stop + 1])
                count = stop + 1 - start
                if count * width > self.prefill_tokens or count * width * keys > self.mask_elements:
                    break
                stop += 1
            part = [rows[i] for i in order[start:stop]]
            width = max(len(ids) - reuse for _, _, ids, reuse in part)
            feed = torch.full((len(part), width), self.pad, dtype=torch.long)
            for r, (_, _, ids, reuse) in enumerate(part):
                feed[r, : len(ids) - reuse] = torch.tensor(ids[reuse:], dtype=torch.long)
            lengths = torch.tensor([len(ids) - reuse for _, _, ids, reuse in part], device=self.device)
            begin = torch.tensor([reuse for _, _, _, reuse in part], device=self.device)
            plan = make_plan(torch.tensor([s for s, _, _, _ in part], device=self.device), begin, lengths,
                             width, keys_len=max(len(ids) for _, _, ids, _ in part), view=False,
                             causal_only=len(part) == 1 and part[0][3] == 0)  # fmt: skip
            positions = begin.unsqueeze(1) + torch.arange(width, device=self.device).unsqueeze(0)
            logits = self._forward(feed.to(self.device), positions.clamp(max=self.capacity - 1), plan, lengths - 1)
            for i, token in zip(order[start:stop], logits.argmax(-1).tolist(), strict=True):
                first[i] = token
            start = stop
        return first

    def _decode(self, rows: list[tuple[int, str, list[int], int]], first: list[int]) -> list[list[int]]:
        """Greedy tokens per row (stop token included), one forward per token for all rows."""
        import torch

        occupied = set(self.owner.values())
        slots = [s for s, _, _, _ in rows]
        view = set(slots) == occupied and max(slots) < 2 * len(slots)
        if view:  # rows = slots 0..n-1 (a free slot is a padding row, its writes land in nobody's slot)
            n = max(slots) + 1
            index = {s: r for r, s in enumerate(slots)}
            batch_slots = torch.arange(n, device=self.device)
            where = [index.get(s) for s in range(n)]
        else:
            n, batch_slots, where = len(rows), torch.tensor(slots, device=self.device), list(range(len(rows)))
        length = [len(rows[w][2]) if w is not None else 0 for w in where]
        token = [first[w] if w is not None else self.pad for w in where]
        positions = torch.tensor(length, device=self.device)
        current = torch.tensor(token, device=self.device)
        out = torch.full((n, self.max_new_tokens), self.pad, dtype=torch.long, device=self.device)
        out[:, 0] = current
        stops = torch.tensor(self.stops, device=self.device)
        real = torch.tensor([w is not None for w in where], device=self.device)
        done = torch.isin(current, stops) | ~real
        ones = torch.ones(n, dtype=torch.long, device=self.device)
        steps = 1
        for step in range(1, self.max_new_tokens):
            if step % 8 == 1 and bool(done.all()):
                break
            plan = make_plan(batch_slots, positions, ones, 1, keys_len=max(length) + step, view=view)
            logits = self._forward(current.unsqueeze(1), positions.unsqueeze(1), plan, ones - 1)
            current = logits.argmax(-1)
            out[:, step] = current
            done |= torch.isin(current, stops)
            positions = positions + 1
            steps = step + 1
        table = out[:, :steps].tolist()
        stop_set = set(self.stops)
        result: list[list[int]] = [[] for _ in rows]
        for r, w in enumerate(where):
            if w is None:
                continue
            tokens = []
            for t in table[r]:
                tokens.append(t)
                if t in stop_set:
                    break
            result[w] = tokens
        return result


__all__ = ["SlotEngine", "supports_slots"]
