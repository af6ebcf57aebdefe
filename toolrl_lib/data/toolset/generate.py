"""The broad generator end to end: signatures -> BFCL check -> held-out splits -> examples -> files.

``generate_broad`` returns the splits, the overlap report and the statistics;
``write_broad`` writes them in the layout ``prepare`` writes
(``OUT/{train,val,test}.jsonl``) plus ``stats.json``, ``contamination.json`` and
``contamination.md``. Everything is deterministic in ``seed``.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrl_lib.data.contamination import ContaminationIndex
from toolrl_lib.data.example import Example
from toolrl_lib.data.pipeline import write_examples
from toolrl_lib.data.toolset.kinds import BUILT_KINDS, KIND_WEIGHTS, Pool, build_example
from toolrl_lib.data.toolset.overlap import (
    PHRASE_NGRAM,
    OverlapReport,
    check_examples,
    check_signatures,
    count_phrase_overlaps,
)
from toolrl_lib.data.toolset.signatures import Signature, all_signatures
from toolrl_lib.data.toolset.splits import SPLITS, split_signatures

References = Callable[[], Iterable[tuple[str, dict[str, Any]]]]


@dataclass
class BroadData:
    """A generated set: examples and signatures per split, the overlap report, the stats."""

    examples: dict[str, list[Example]]
    signatures: dict[str, list[Signature]]
    report: OverlapReport
    seconds: float

    def stats(self) -> dict[str, Any]:
        return broad_stats(self)


def _draw(n: int, pool: Pool, rng: random.Random, split: str, seed: int) -> list[Example]:
    """``n`` distinct examples (query and answer) with kinds by ``KIND_WEIGHTS``."""
    names, weights = list(KIND_WEIGHTS), list(KIND_WEIGHTS.values())
    seen: set[str] = set()
    out: list[Example] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 3 * n + 100:
            raise ValueError(f"could not draw {n} distinct {split} examples from {len(pool.signatures)} signatures")
        kind = rng.choices(names, weights)[0]
        example = build_example(kind, pool, rng, f"broad-{seed}-{split}-{len(out)}")
        fingerprint = example.query + json.dumps(example.ground_truth, sort_keys=True)
        if fingerprint not in seen:
            seen.add(fingerprint)
            out.append(example)
    return out


def generate_broad(n: int, seed: int = 0, *, val_fraction: float = 0.1, test_fraction: float = 0.1,
                   references: References | None = None, index: ContaminationIndex | None = None,
                   phrase_index: ContaminationIndex | None = None, contamination: bool = True) -> BroadData:
    """``n`` examples over held-out signature splits (the split sizes follow the fractions).

    ``references`` yields BFCL's function docs, ``index`` and ``phrase_index`` its user turns
    (13 and 8-word runs; defaults: the packaged BFCL data); ``contamination=False`` skips
    the checks (tests of other things)."""
    if n < len(SPLITS):
        raise ValueError(f"n (the number of examples) must be at least {len(SPLITS)}, got {n}")
    started = time.perf_counter()
    report = OverlapReport()
    signatures: list[Signature] = list(all_signatures())
    if contamination:
        from toolrl_lib.data.contamination import bfcl_index
        from toolrl_lib.data.toolset.overlap import bfcl_functions

        signatures = check_signatures(signatures, (references or bfcl_functions)(), report)
        index = index if index is not None else bfcl_index()
        phrase_index = phrase_index if phrase_index is not None else bfcl_index(PHRASE_NGRAM)
        report.query_check = "exact or 13-word overlap with BFCL scored user turns"
    else:
        report.signatures_checked = len(signatures)
    by_split = split_signatures(signatures, seed, val_fraction, test_fraction)
    sizes = {"val": round(n * val_fraction), "test": round(n * test_fraction)}
    sizes["train"] = n - sizes["val"] - sizes["test"]
    examples = {}
    for split in SPLITS:
        rng = random.Random(f"broad/{seed}/{split}")
        drawn = _draw(sizes[split], Pool(by_split[split]), rng, split, seed)
        examples[split] = check_examples(drawn, index if contamination else None, report)
        if phrase_index is not None:
            count_phrase_overlaps(examples[split], phrase_index, report)
    return BroadData(examples, by_split, report, time.perf_counter() - started)


def broad_stats(data: BroadData) -> dict[str, Any]:
    """Signatures, domains, parameter types, naming styles, kinds and counts per split."""
    everything = [s for sigs in data.signatures.values() for s in sigs]
    types: Counter = Counter()
    for sig in everything:
        for param in sig.params:
            schema = param.schema()
            label = schema["type"] + (f"[{schema['items']['type']}]" if schema["type"] == "array" else "")
            types[label + (" enum" if "enum" in schema or "enum" in schema.get("items", {}) else "")] += 1
    per_split = {}
    for split in SPLITS:
        rows = data.examples[split]
        per_split[split] = {
            "examples": len(rows), "signatures": len(data.signatures[split]),
            "domains": len({s.domain for s in data.signatures[split]}),
            "kinds": dict(sorted(Counter(e.kind for e in rows).items())),
            "negatives": dict(sorted(Counter(e.meta.get("negative", "-") for e in rows).items())),
        }
    return {"signatures": len(everything), "domains": len({s.domain for s in everything}),
            "naming_styles": dict(sorted(Counter(s.style for s in everything).items())),
            "verbs": dict(sorted(Counter(s.verb for s in everything).items())),
            "parameter_types": dict(types.most_common()),
            "parameters": sum(types.values()),
            "optional_parameters": sum(1 for s in everything for p in s.params if not p.required),
            "with_default": sum(1 for s in everything for p in s.params if p.default is not None),
            "kinds": dict(sorted(Counter(e.kind for rows in data.examples.values() for e in rows).items())),
            "built_kinds": list(BUILT_KINDS), "splits": per_split,
            "contamination": data.report.summary(), "seconds": round(data.seconds, 2)}


def write_broad(data: BroadData, out_dir: str | Path) -> dict[str, Any]:
    """Write the splits, ``stats.json`` and the contamination report; returns the stats."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        write_examples(data.examples[split], out / f"{split}.jsonl")
    stats = broad_stats(data)
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    (out / "contamination.json").write_text(json.dumps(data.report.to_json(), indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    (out / "contamination.md").write_text(data.report.to_markdown(), encoding="utf-8")
    return stats
