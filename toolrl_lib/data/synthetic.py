"""Procedural tool-calling examples, for training offline (no hub) and for tests.

Kinds follow BFCL: ``simple`` (one tool, one call), ``multiple`` (several tools, one call),
``parallel`` (one tool, several calls), ``parallel_multiple`` (several tools, calls to
different ones) and ``irrelevance`` (no offered tool fits: the answer is no call). The same
seed always gives the same examples.

Plain ``irrelevance`` offers functions from *other* domains: an easy negative. Two harder
no-call generators (``HARD_NEGATIVES``; the examples' kind is still ``irrelevance``, the
generator is in ``meta["negative"]``): ``irrelevance_near`` asks for a function that is absent
while offering its same-domain siblings (near misses: a forecast for a current-weather
question), and ``irrelevance_missing`` offers the right function but leaves its required
arguments out of the query ("Can you convert an amount from one currency to another?"), where
the right answer is to ask, not to call with invented values. ``to_raw`` emits them as raw xLAM or ToolACE rows, so
the prepare pipeline reads synthetic data through the real loaders.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from toolrl_lib.data.catalog import BY_NAME, FUNCTIONS, Function, Param
from toolrl_lib.data.example import Example

HARD_NEGATIVES = ("irrelevance_near", "irrelevance_missing")
GENERATED_KINDS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", *HARD_NEGATIVES)
MISSING_FRAMES = ("Can you {}?", "I'd like to {}.", "Please {}.", "Could you help me {}?", "I want to {}.")
KIND_WEIGHTS = {"simple": 0.25, "multiple": 0.3, "parallel": 0.15, "parallel_multiple": 0.15,
                "irrelevance": 0.15}
PREFIXES = ("", "", "", "Hi! ", "Hey, ", "Quick question: ", "I need some help. ", "Hello. ")
SUFFIXES = ("", "", "", " Thanks!", " Thank you.", " Please.", " Cheers.")
JOINERS = (" Also, ", " And then ", " On top of that, ", " After that, ", " Additionally, ")


def render_value(value: Any, param: Param) -> str:
    """How a value is written in the query text (must let a reader recover it)."""
    if param.render and isinstance(value, dict):
        return param.render.format(**value)
    if isinstance(value, list):
        if any(isinstance(v, list | dict) for v in value):
            return json.dumps(value)
        words = [str(v) for v in value]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return str(value)


def _sample_call(fn: Function, rng: random.Random) -> tuple[dict[str, Any], str]:
    """One call of ``fn`` and a query that states exactly its arguments."""
    arguments: dict[str, Any] = {}
    used: set[str] = set()
    phrases = []
    for param in fn.params:
        if not param.required and rng.random() < 0.5:
            continue
        value = rng.choice(param.pool)
        for _ in range(6):  # origin != destination, from != to, ...
            if json.dumps(value) not in used:
                break
            value = rng.choice(param.pool)
        used.add(json.dumps(value))
        arguments[param.name] = value
        if not param.required:
            phrases.append(param.phrase.format(render_value(value, param)))
    texts = {p.name: render_value(arguments[p.name], p) for p in fn.params if p.name in arguments}
    query = rng.choice(fn.templates).format(**texts)
    if phrases:
        end = query[-1] if query[-1] in ".?!" else ""
        query = query.rstrip(".?!") + " " + " ".join(phrases) + (end or ".")
    call = {"name": fn.name, "arguments": {p.name: arguments[p.name] for p in fn.params
                                           if p.name in arguments}}
    return call, query[0].upper() + query[1:]


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text and not text[:2].isupper() else text


def _distractors(pool: Sequence[Function], exclude: set[str], k: int,
                 rng: random.Random) -> list[Function]:
    candidates = [f for f in pool if f.name not in exclude]
    return rng.sample(candidates, min(k, len(candidates)))


def _same_domain_first(target: Function, k: int, exclude: set[str],
                       rng: random.Random) -> list[Function]:
    """Distractors: half from the target's domain (harder), the rest from anywhere."""
    near = [f for f in FUNCTIONS if f.domain == target.domain]
    picked = _distractors(near, exclude, (k + 1) // 2, rng)
    exclude = exclude | {f.name for f in picked}
    return picked + _distractors(FUNCTIONS, exclude, k - len(picked), rng)


def make_example(kind: str, rng: random.Random, example_id: str) -> Example:
    """One example of ``kind`` drawn with ``rng``."""
    target = rng.choice(FUNCTIONS)
    calls: list[dict[str, Any]] = []
    queries: list[str] = []
    if kind == "simple":
        offered = [target]
        call, query = _sample_call(target, rng)
        calls, queries = [call], [query]
    elif kind == "multiple":
        offered = [target, *_same_domain_first(target, rng.randint(1, 3), {target.name}, rng)]
        call, query = _sample_call(target, rng)
        calls, queries = [call], [query]
    elif kind == "parallel":
        offered = [target]
        wanted = rng.choice((2, 2, 3))
        for _ in range(4 * wanted):  # distinct calls only
            if len(calls) == wanted:
                break
            call, query = _sample_call(target, rng)
            if call not in calls:
                calls.append(call)
                queries.append(query)
    elif kind == "parallel_multiple":
        others = _same_domain_first(target, rng.choice((1, 1, 2)), {target.name}, rng)
        called = [target, *others]
        offered = called + _distractors(FUNCTIONS, {f.name for f in called}, rng.randint(0, 2), rng)
        for fn in called:
            call, query = _sample_call(fn, rng)
            calls.append(call)
            queries.append(query)
    elif kind == "irrelevance":
        others = [f for f in FUNCTIONS if f.domain != target.domain]
        offered = rng.sample(others, rng.randint(1, 3))
        _, query = _sample_call(target, rng)
        queries = [query]
    elif kind == "irrelevance_near":  # the needed function absent, its siblings offered
        siblings = [f for f in FUNCTIONS if f.domain == target.domain and f.name != target.name]
        offered = rng.sample(siblings, min(len(siblings), rng.randint(1, 3)))
        _, query = _sample_call(target, rng)
        queries = [query]
    elif kind == "irrelevance_missing":  # the right function, but its required values unstated
        offered = [target, *_distractors(FUNCTIONS, {target.name}, rng.randint(0, 2), rng)]
        task = target.description.rstrip(".")
        queries = [rng.choice(MISSING_FRAMES).format(task[0].lower() + task[1:])]
    else:
        raise ValueError(f"unknown kind {kind!r}; choose from {GENERATED_KINDS}")
    if kind in ("parallel", "parallel_multiple") and len(calls) < 2:
        return make_example("simple", rng, example_id)
    rng.shuffle(offered)
    text = queries[0]
    for query in queries[1:]:
        text += rng.choice(JOINERS) + _lower_first(query)
    prefix = rng.choice(PREFIXES)
    text = prefix + (_lower_first(text) if prefix.endswith(", ") else text) + rng.choice(SUFFIXES)
    meta = {"domain": target.domain, "target": target.name}
    if kind in HARD_NEGATIVES:
        meta["negative"] = kind
    return Example(
        id=example_id, source="synthetic",
        messages=[{"role": "user", "content": text}],
        tools=[f.schema() for f in offered], ground_truth=calls,
        kind="irrelevance" if kind in HARD_NEGATIVES else kind, meta=meta,
    )


def generate_examples(n: int, seed: int = 0, kinds: Sequence[str] | None = None,
                      hard_negatives: float = 0.0, prefix: str = "synthetic") -> list[Example]:
    """``n`` examples, deterministic in ``seed``; ``kinds`` restricts (and evenly mixes) kinds,
    else they follow ``KIND_WEIGHTS``. ``hard_negatives``: the share of ``irrelevance`` draws
    replaced by the two hard generators (half each); 0 keeps the default data unchanged."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= hard_negatives <= 1.0:
        raise ValueError(f"hard_negatives must be a share in [0, 1], got {hard_negatives}")
    unknown = [k for k in kinds or () if k not in GENERATED_KINDS]
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown}; choose from {GENERATED_KINDS}")
    rng = random.Random(seed)
    names = list(kinds) if kinds else list(KIND_WEIGHTS)
    weights = [1.0] * len(names) if kinds else [KIND_WEIGHTS[k] for k in names]
    out = []
    for i in range(n):
        kind = rng.choices(names, weights)[0]
        if kind == "irrelevance" and hard_negatives and rng.random() < hard_negatives:
            kind = rng.choice(HARD_NEGATIVES)
        out.append(make_example(kind, rng, f"{prefix}-{seed}-{i}"))
    return out


def to_raw(examples: Sequence[Example], fmt: str) -> list[dict[str, Any]]:
    """Raw rows in ``fmt`` = ``xlam`` | ``toolace`` | ``parquet`` (verl-style)."""
    from toolrl_lib.data.parquet import example_to_parquet_row
    from toolrl_lib.data.toolace import example_to_toolace
    from toolrl_lib.data.xlam import example_to_xlam

    if fmt == "xlam":
        return [example_to_xlam(e, e.id) for e in examples]
    if fmt == "toolace":
        return [example_to_toolace(e) for e in examples]
    if fmt == "parquet":
        return [example_to_parquet_row(e, i) for i, e in enumerate(examples)]
    raise ValueError(f"unknown raw format {fmt!r}; use xlam, toolace or parquet")


def catalog_summary() -> dict[str, Any]:
    """Sizes of the catalogue (for the notebook and tests)."""
    types = sorted({p.type for f in FUNCTIONS for p in f.params})
    return {"functions": len(FUNCTIONS), "domains": len({f.domain for f in FUNCTIONS}),
            "param_types": types, "names": sorted(BY_NAME)}
