"""One example of each BFCL kind, from a pool of signatures.

Kinds are the project's (``example.KINDS``): ``simple`` (one function, one call),
``multiple`` (2-5 functions offered, one called), ``parallel`` (one function, 2-3 calls),
``parallel_multiple`` (calls to 2-3 different functions among up to 5) and ``irrelevance``
(no call is right). The no-call generator is named in ``meta["negative"]``, as
``synthetic.py`` does: ``irrelevance`` (functions from other domains), ``irrelevance_near``
(same-domain near misses: the entity's other verbs, the verb on other entities) and
``irrelevance_missing`` (the right function, but the query leaves its required values out).
Distractors prefer the target's domain, so telling functions apart takes reading them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.data.toolset.phrasing import missing_query, sample_call
from toolrl_lib.data.toolset.signatures import Signature

NEGATIVES = ("irrelevance", "irrelevance_near", "irrelevance_missing")
BUILT_KINDS = ("simple", "multiple", "parallel", "parallel_multiple", *NEGATIVES)
KIND_WEIGHTS = {"simple": 0.2, "multiple": 0.25, "parallel": 0.12, "parallel_multiple": 0.13,
                "irrelevance": 0.1, "irrelevance_near": 0.1, "irrelevance_missing": 0.1}
PREFIXES = ("", "", "", "Hi! ", "Hello, ", "Quick one: ", "Hey there. ", "Good morning! ")
SUFFIXES = ("", "", "", " Thanks!", " Thank you.", " Cheers.", " Much appreciated.")
ASKING_VERBS = ("get", "create", "update", "cancel", "export", "schedule", "share", "estimate", "archive")
JOINERS = (" Also, ", " And then ", " After that, ", " Next, ", " On top of that, ")


@dataclass
class Pool:
    """The signatures one split may use, indexed by domain and by (domain, entity)."""

    signatures: Sequence[Signature]
    by_domain: dict[str, list[Signature]] = field(default_factory=dict)
    by_entity: dict[tuple[str, str], list[Signature]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.signatures:
            raise ValueError("a signature pool needs at least one signature")
        for sig in self.signatures:
            self.by_domain.setdefault(sig.domain, []).append(sig)
            self.by_entity.setdefault((sig.domain, sig.entity), []).append(sig)


def _lower_first(text: str) -> str:
    """Lower-case a sentence's first letter to continue a sentence ("I" stays "I").

    >>> _lower_first("Show me"), _lower_first("I'd like"), _lower_first("I need")
    ('show me', "I'd like", 'I need')
    """
    if text.split(" ", 1)[0].split("'")[0] == "I":
        return text
    return text[0].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


def near_misses(target: Signature, pool: Pool) -> list[Signature]:
    """Same entity with another verb, or the same verb on another entity of the domain."""
    same_entity = [s for s in pool.by_entity[(target.domain, target.entity)] if s.name != target.name]
    same_verb = [s for s in pool.by_domain[target.domain] if s.verb == target.verb and s.name != target.name]
    return same_entity + same_verb


def distractors(target: Signature, pool: Pool, k: int, exclude: set[str], rng: random.Random) -> list[Signature]:
    """``k`` other functions: about half near misses, the rest from the target's domain or anywhere."""
    near = [s for s in near_misses(target, pool) if s.name not in exclude]
    picked = rng.sample(near, min(len(near), (k + 1) // 2))
    taken = exclude | {s.name for s in picked}
    for _ in range(8 * k):
        if len(picked) == k:
            break
        source = pool.by_domain[target.domain] if rng.random() < 0.5 else pool.signatures
        candidate = rng.choice(source)
        if candidate.name not in taken:
            picked.append(candidate)
            taken.add(candidate.name)
    return picked


def _text(queries: list[str], rng: random.Random) -> str:
    text = queries[0]
    for query in queries[1:]:
        text += rng.choice(JOINERS) + _lower_first(query)
    prefix = rng.choice(PREFIXES)
    return prefix + (_lower_first(text) if prefix.endswith(", ") else text) + rng.choice(SUFFIXES)


def build_example(kind: str, pool: Pool, rng: random.Random, example_id: str) -> Example:
    """One example of ``kind`` (a ``BUILT_KINDS`` name) from ``pool``."""
    if kind not in BUILT_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {BUILT_KINDS}")
    target = rng.choice(pool.signatures)
    calls: list[dict[str, Any]] = []
    queries: list[str] = []
    if kind in ("simple", "multiple", "parallel"):
        offered = [target]
        if kind == "multiple":
            offered += distractors(target, pool, rng.randint(1, 4), {target.name}, rng)
        wanted = rng.choice((2, 2, 3)) if kind == "parallel" else 1
        for _ in range(4 * wanted):
            call, query = sample_call(target, rng)
            if call["arguments"] not in [c["arguments"] for c in calls]:
                calls.append(call)
                queries.append(query)
            if len(calls) == wanted:
                break
    elif kind == "parallel_multiple":
        partners = distractors(target, pool, rng.choice((1, 1, 2)), {target.name}, rng)
        called = [target, *partners]
        offered = called + distractors(target, pool, rng.randint(0, 5 - len(called)),
                                       {s.name for s in called}, rng)
        for sig in called:
            call, query = sample_call(sig, rng)
            calls.append(call)
            queries.append(query)
    elif kind == "irrelevance":
        others = [s for s in pool.signatures if s.domain != target.domain]
        offered = rng.sample(others, min(len(others), rng.randint(1, 4)))
        queries = [sample_call(target, rng)[1]]
    elif kind == "irrelevance_near":
        near = near_misses(target, pool)
        offered = rng.sample(near, min(len(near), rng.randint(1, 4)))
        queries = [sample_call(target, rng)[1]]
    else:  # irrelevance_missing: only verbs whose request is unanswerable without its values
        if target.verb not in ASKING_VERBS:
            target = rng.choice([s for s in pool.signatures if s.verb in ASKING_VERBS] or [target])
        offered = [target, *distractors(target, pool, rng.randint(0, 3), {target.name}, rng)]
        queries = [missing_query(target, rng)]
    if not offered:  # no sibling (or no other domain) in a small pool: the next easier negative
        easier = "irrelevance" if kind == "irrelevance_near" else "irrelevance_missing"
        return build_example(easier, pool, rng, example_id)
    if (kind == "multiple" and len(offered) < 2) or (kind.startswith("parallel") and len(calls) < 2):
        return build_example("simple", pool, rng, example_id)  # a pool too small for the kind
    rng.shuffle(offered)
    meta: dict[str, Any] = {"domain": target.domain, "target": target.name, "generator": "broad",
                            "signatures": sorted(s.name for s in offered)}
    if kind in NEGATIVES:
        meta["negative"] = kind
    return Example(id=example_id, source="broad", messages=[{"role": "user", "content": _text(queries, rng)}],
                   tools=[s.schema() for s in offered], ground_truth=calls,
                   kind="irrelevance" if kind in NEGATIVES else kind, meta=meta)
