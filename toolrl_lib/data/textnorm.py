"""Text normalisation and shingles shared by de-duplication and the contamination check."""

from __future__ import annotations

import hashlib
import re
import zlib

_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalize_text(text: str) -> str:
    """Lower case, punctuation -> space, single spaces: "What's  up?" -> "what s up"."""
    return _NON_WORD.sub(" ", text.lower()).strip()


def word_ngrams(text: str, n: int) -> list[str]:
    """Word n-grams of normalised text (the whole text when it is shorter than n words)."""
    words = normalize_text(text).split()
    if len(words) <= n:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def hash_ngrams(text: str, n: int) -> set[int]:
    """Stable 32-bit hashes of the word n-grams (Python's ``hash`` is salted per process)."""
    return {zlib.crc32(gram.encode()) for gram in word_ngrams(text, n)}


def hash_ngrams64(text: str, n: int) -> set[int]:
    """64-bit n-gram hashes: for exact look-ups against a large index, where 32-bit hashes
    collide (one false hit per ~4 billion / index size look-ups)."""
    return {int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "big")
            for gram in word_ngrams(text, n)}


def jaccard(a: set[int], b: set[int]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
