"""Contamination check of the broad tool set against BFCL: names, parameters, queries.

Three questions, each answered with counts and examples (``OverlapReport``):

* function names: does one of our names equal a BFCL function's, whatever the spelling
  (``naming.name_key``: ``apiary.getHive`` = ``get_hive``)? Such signatures are dropped
  before any example is drawn.
* parameter lists: does a signature of ours take exactly the parameters (3 or more, by
  name key) of a BFCL function? Dropped too: that is a copied interface. Single parameter
  names (``date``, ``city``) are common English; their overlap is counted, not dropped.
* queries: does a user turn overlap a BFCL scored user turn (``data/contamination.py``:
  exact after normalisation, or a shared run of 13 words)? Such examples are dropped.
  Shorter shared runs (``PHRASE_NGRAM`` = 8 words) are counted and shown, not dropped: at
  six words common phrases ("I need the details of the") already match.

BFCL's functions and user turns are read offline from the ``bfcl-eval`` package
(``data/bfcl.py``); the checks take them as arguments so a test can plant an overlap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from toolrl_lib.data.contamination import ContaminationIndex
from toolrl_lib.data.example import Example
from toolrl_lib.data.toolset.naming import name_key
from toolrl_lib.data.toolset.signatures import Signature

MIN_SHARED_PARAMS = 3
PHRASE_NGRAM = 8
SHOWN = 20  # examples of each overlap kept in the report


@dataclass
class OverlapReport:
    """What the check found and what it dropped (``to_json`` is ``contamination.json``)."""

    bfcl_functions: int = 0
    signatures_checked: int = 0
    name_overlaps: list[dict[str, str]] = field(default_factory=list)
    parameter_set_overlaps: list[dict[str, Any]] = field(default_factory=list)
    parameter_names_ours: int = 0
    parameter_names_shared: list[str] = field(default_factory=list)
    examples_checked: int = 0
    query_overlaps: list[dict[str, str]] = field(default_factory=list)
    query_check: str = "not run"
    phrase_overlaps: list[dict[str, str]] = field(default_factory=list)

    def dropped_signatures(self) -> set[str]:
        return {o["ours"] for o in self.name_overlaps} | {o["ours"] for o in self.parameter_set_overlaps}

    def summary(self) -> dict[str, Any]:
        """The counts alone (what notebook 01 shows)."""
        return {"bfcl_functions": self.bfcl_functions, "signatures_checked": self.signatures_checked,
                "name_overlaps": len(self.name_overlaps),
                "parameter_set_overlaps": len(self.parameter_set_overlaps),
                "signatures_dropped": len(self.dropped_signatures()),
                "parameter_names_ours": self.parameter_names_ours,
                "parameter_names_shared": len(self.parameter_names_shared),
                "examples_checked": self.examples_checked, "query_overlaps": len(self.query_overlaps),
                "examples_dropped": len(self.query_overlaps), "query_check": self.query_check,
                f"phrase_overlaps_{PHRASE_NGRAM}_words": len(self.phrase_overlaps)}

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("name_overlaps", "parameter_set_overlaps", "query_overlaps", "phrase_overlaps"):
            out[key] = out[key][:SHOWN]
        return {"summary": self.summary(), **out}

    def to_markdown(self) -> str:
        """The human-readable report (``contamination.md``)."""
        s = self.summary()
        lines = ["# Broad tool set: contamination check against BFCL", "",
                 f"BFCL functions compared: {s['bfcl_functions']}; our signatures: {s['signatures_checked']}; "
                 f"examples: {s['examples_checked']} (query check: {s['query_check']}).", "",
                 "| check | overlaps | dropped |", "|---|---|---|",
                 f"| function name (style-free) | {s['name_overlaps']} | {s['name_overlaps']} signatures |",
                 f"| parameter list (>= {MIN_SHARED_PARAMS} names, exact) | {s['parameter_set_overlaps']} | "
                 f"{s['parameter_set_overlaps']} signatures |",
                 f"| single parameter names | {s['parameter_names_shared']} of {s['parameter_names_ours']} | "
                 "none (common words) |",
                 f"| query (exact or 13-word run) | {s['query_overlaps']} | {s['examples_dropped']} examples |",
                 f"| query ({PHRASE_NGRAM}-word run) | {len(self.phrase_overlaps)} | none (reported) |", ""]
        for title, rows in (("Function names", self.name_overlaps),
                            ("Parameter lists", self.parameter_set_overlaps),
                            ("Queries", self.query_overlaps),
                            (f"Queries sharing {PHRASE_NGRAM} words (kept)", self.phrase_overlaps)):
            lines.append(f"## {title}: {len(rows)}")
            lines.extend(f"- `{json.dumps(row, ensure_ascii=False)}`" for row in rows[:SHOWN])
            lines.append("")
        shared = ", ".join(f"`{n}`" for n in self.parameter_names_shared[:40])
        lines += ["## Shared parameter names (first 40)", shared or "(none)", ""]
        return "\n".join(lines)


def bfcl_functions() -> list[tuple[str, dict[str, Any]]]:
    """``(where, function doc)`` of every function BFCL's scored categories offer, single-turn
    entries and the multi-turn function docs."""
    from toolrl_lib.data import bfcl

    out = []
    for category in bfcl.SCORED_SINGLE_TURN:
        for entry in bfcl.load_bfcl_entries(category):
            out.extend((str(entry["id"]), f) for f in entry.get("function") or [] if isinstance(f, dict))
    docs = bfcl.bfcl_data_dir() / "multi_turn_func_doc"
    for path in sorted(docs.glob("*.json")) if docs.is_dir() else []:
        out.extend((f"multi_turn_func_doc/{path.stem}", f) for f in bfcl._read_json_lines(path))
    return out


def _param_keys(properties: Any) -> frozenset[str]:
    return frozenset(name_key(str(k)) for k in properties) if isinstance(properties, dict) else frozenset()


def check_signatures(signatures: Sequence[Signature], references: Iterable[tuple[str, dict[str, Any]]],
                     report: OverlapReport) -> list[Signature]:
    """The signatures that survive the name and parameter-list checks (overlaps go to ``report``)."""
    names: dict[str, tuple[str, str]] = {}
    param_sets: dict[frozenset[str], tuple[str, str]] = {}
    param_names: set[str] = set()
    count = 0
    for where, function in references:
        count += 1
        name = str(function.get("name", ""))
        names.setdefault(name_key(name), (name, where))
        keys = _param_keys((function.get("parameters") or {}).get("properties"))
        param_names |= keys
        if len(keys) >= MIN_SHARED_PARAMS:
            param_sets.setdefault(keys, (name, where))
    report.bfcl_functions, report.signatures_checked = count, len(signatures)
    ours = {name_key(p.name) for s in signatures for p in s.params}
    report.parameter_names_ours = len(ours)
    report.parameter_names_shared = sorted(ours & param_names)
    kept = []
    for sig in signatures:
        hit = names.get(name_key(sig.name))
        keys = frozenset(name_key(p.name) for p in sig.params)
        same_params = param_sets.get(keys) if len(keys) >= MIN_SHARED_PARAMS else None
        if hit:
            report.name_overlaps.append({"ours": sig.name, "bfcl": hit[0], "bfcl_where": hit[1]})
        if same_params:
            report.parameter_set_overlaps.append({"ours": sig.name, "bfcl": same_params[0],
                                                  "bfcl_where": same_params[1], "parameters": sorted(keys)})
        if not hit and not same_params:
            kept.append(sig)
    return kept


def check_examples(examples: Sequence[Example], index: ContaminationIndex | None,
                   report: OverlapReport) -> list[Example]:
    """The examples whose user turns do not overlap BFCL's (``index`` None: check skipped)."""
    report.examples_checked += len(examples)
    if index is None:
        return list(examples)
    kept = []
    for example in examples:
        hit = index.check(example)
        if hit:
            report.query_overlaps.append(hit)
        else:
            kept.append(example)
    return kept


def count_phrase_overlaps(examples: Sequence[Example], index: ContaminationIndex, report: OverlapReport) -> None:
    """Record (not drop) examples sharing a shorter word run with a BFCL user turn."""
    for example in examples:
        hit = index.check(example)
        if hit:
            report.phrase_overlaps.append(hit)
