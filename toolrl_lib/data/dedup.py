"""Exact and near-duplicate removal.

Exact: same normalised conversation, same tool names, same calls. Near: same tool names and
same calls, and user text whose word-trigram Jaccard similarity is at least ``threshold``
(typos, punctuation, a reworded word). Candidates are found with MinHash + LSH so 70k rows
stay linear; each candidate pair is confirmed with the exact Jaccard. Keeps the first row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from toolrl_lib.data.example import Example
from toolrl_lib.data.textnorm import hash_ngrams, jaccard, normalize_text

_PRIME = np.uint64(4294967291)  # < 2**32, so (a*h + b) fits in uint64


def user_text(example: Example) -> str:
    return "\n".join(str(m.get("content", "")) for m in example.messages if m.get("role") == "user")


def answer_key(example: Example) -> str:
    """Tools offered + calls expected, order-insensitive (the part a near-duplicate shares)."""
    calls = example.ground_truth
    if len(calls) > 1:
        calls = sorted(calls, key=lambda c: json.dumps(c, sort_keys=True))
    tools = sorted(t["name"] for t in example.tools)
    return json.dumps([tools, calls], sort_keys=True)


def exact_key(example: Example, answer: str | None = None) -> str:
    turns = [[m.get("role"), normalize_text(str(m.get("content", "")))] for m in example.messages]
    answer = answer_key(example) if answer is None else answer
    return hashlib.sha1((answer + json.dumps(turns)).encode()).hexdigest()


@dataclass
class Deduplicator:
    """Streaming de-duplicator: ``check(example)`` -> None (new) or ``(reason, kept_id)``."""

    threshold: float = 0.8
    num_perm: int = 32
    bands: int = 8
    seed: int = 0
    _exact: dict[str, str] = field(default_factory=dict)
    _buckets: dict[tuple, list[tuple[str, set[int]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self._a = rng.integers(1, int(_PRIME), self.num_perm, dtype=np.uint64)
        self._b = rng.integers(0, int(_PRIME), self.num_perm, dtype=np.uint64)
        self._rows = self.num_perm // self.bands

    def _signature(self, grams: set[int]) -> np.ndarray:
        values = np.fromiter(grams, dtype=np.uint64, count=len(grams)) % _PRIME
        return ((np.outer(self._a, values) + self._b[:, None]) % _PRIME).min(axis=1)

    def check(self, example: Example) -> tuple[str, str] | None:
        group = answer_key(example)
        key = exact_key(example, group)
        if key in self._exact:
            return "duplicate", self._exact[key]
        self._exact[key] = example.id
        grams = hash_ngrams(user_text(example), 3)
        if not grams:
            return None
        signature = self._signature(grams)
        bucket_keys = [(group, band, signature[band * self._rows:(band + 1) * self._rows].tobytes())
                       for band in range(self.bands)]
        for bucket in bucket_keys:
            for kept_id, kept_grams in self._buckets.get(bucket, ()):
                if jaccard(grams, kept_grams) >= self.threshold:
                    return "near_duplicate", kept_id
        for bucket in bucket_keys:
            self._buckets.setdefault(bucket, []).append((example.id, grams))
        return None
