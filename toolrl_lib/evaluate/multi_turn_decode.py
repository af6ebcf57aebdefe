"""Greedy multi-turn completion that keeps each conversation's key/value cache between steps.

A multi-turn step's prompt is the previous step's prompt plus the model's reply and the tool
results: on a CPU, pre-filling the whole conversation again at every step (~6.8k tokens for
``multi_turn_base_0``, mostly function docs) is nearly all of the cost. ``PrefixCache`` keeps,
per episode, the token ids whose keys/values are cached; the next prompt re-uses its longest
common token prefix and pre-fills only the rest. The reused keys/values are exactly those a
fresh pre-fill computes (causal attention: position i sees only tokens <= i), so the greedy
tokens are the same up to float rounding (tested against ``generation.generate``).

One episode at a time (batch 1, no padding): this is the CPU path. On a GPU,
``multi_turn_slots.SlotEngine`` keeps the caches on the device and batches the episodes. Caches are dropped least-recently-used first
beyond ``max_cache_bytes``; an evicted episode is simply pre-filled in full at its next step.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from toolrl_lib.generation import GrowingCache, stop_token_ids


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


class PrefixCache:
    """``complete({key: prompt})`` -> ``{key: reply}``, greedy, re-using each key's cache."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int,
                 max_cache_bytes: int = 1 << 30) -> None:  # fmt: skip
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


__all__ = ["PrefixCache", "common_prefix"]
