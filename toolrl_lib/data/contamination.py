"""Contamination check: does a training query overlap a BFCL *scored* test entry?

An example is contaminated when one of its user turns equals a BFCL user turn after
normalisation (case, punctuation, spacing), or shares a run of ``ngram`` consecutive words
with one (13 words, as in the GPT-3 overlap study, catches pasted or lightly edited test
questions without flagging common phrases). Overlaps are reported with the BFCL entry id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from toolrl_lib.data.example import Example
from toolrl_lib.data.textnorm import hash_ngrams64, normalize_text

DEFAULT_NGRAM = 13


@dataclass
class ContaminationIndex:
    """Normalised reference texts and their word n-grams, each mapped to a reference id."""

    ngram: int = DEFAULT_NGRAM
    exact: dict[str, str] = field(default_factory=dict)
    grams: dict[int, str] = field(default_factory=dict)

    def add(self, ref_id: str, text: str) -> None:
        norm = normalize_text(text)
        if not norm:
            return
        self.exact.setdefault(norm, ref_id)
        if len(norm.split()) >= self.ngram:
            for gram in hash_ngrams64(norm, self.ngram):
                self.grams.setdefault(gram, ref_id)

    def match(self, text: str) -> tuple[str, str] | None:
        """``(reference id, "exact"|"ngram")`` for the first overlap, else None."""
        norm = normalize_text(text)
        if not norm:
            return None
        if norm in self.exact:
            return self.exact[norm], "exact"
        if len(norm.split()) >= self.ngram:
            for gram in hash_ngrams64(norm, self.ngram):
                if gram in self.grams:
                    return self.grams[gram], "ngram"
        return None

    def check(self, example: Example) -> dict[str, str] | None:
        """An overlap report for the example (None when clean)."""
        for message in example.messages:
            if message.get("role") != "user":
                continue
            hit = self.match(str(message.get("content", "")))
            if hit:
                return {"id": example.id, "bfcl_id": hit[0], "match": hit[1],
                        "query": str(message.get("content", ""))[:200]}
        return None


def build_index(references: Iterable[tuple[str, str]], ngram: int = DEFAULT_NGRAM) -> ContaminationIndex:
    """Index ``(reference id, text)`` pairs."""
    index = ContaminationIndex(ngram=ngram)
    for ref_id, text in references:
        index.add(ref_id, text)
    return index


def bfcl_user_texts(categories: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """``(entry id, user text)`` of every user turn in BFCL's scored categories that ship
    question files (single-turn and multi-turn; memory/web search are not in the package)."""
    from toolrl_lib.data import bfcl

    if categories is None:
        categories = bfcl.SCORED_SINGLE_TURN + bfcl.MULTI_TURN
    texts = []
    for category in categories:
        for entry in bfcl.load_bfcl_entries(category):
            texts.extend((str(entry["id"]), t) for t in _user_turns(entry.get("question")))
    return texts


def _user_turns(question: object) -> list[str]:
    if isinstance(question, str):
        return [question]
    out = []
    for item in question if isinstance(question, list) else []:
        if isinstance(item, list):
            out.extend(_user_turns(item))
        elif isinstance(item, dict) and item.get("role") == "user":
            out.append(str(item.get("content", "")))
    return out


@cache
def bfcl_index(ngram: int = DEFAULT_NGRAM) -> ContaminationIndex:
    """The index over all BFCL scored user turns (built once per process, ~1 s)."""
    return build_index(bfcl_user_texts(), ngram=ngram)
