"""BFCL multi-turn result files: canonical step strings, the sanitiser, ground-truth replay.

BFCL's multi-turn checker decodes each step string with the registered handler
(``QwenFCHandler``: ``<tool_call>\\n{json}\\n</tool_call>`` blocks) and ``eval``-s the call
strings it builds from them, name and argument keys unescaped. So nothing we hand it may
be other than the canonical rendering of calls that passed ``validate_call`` and executed
in BFCL's executor (``bfcl_multi_turn.env``). ``sanitise_multi_turn_row`` enforces this
for any result line (ours or a foreign one): it decodes every step the way BFCL's decoder
would, replays the episode through a fresh ``EnvPool`` episode (the time and size limits
included), and writes back only canonical strings; calls that did not execute become
``REJECTED_NAME`` calls (score as a call that failed; cannot run code). The original
result goes to ``unsanitised_result`` when anything changed.

``sanitise_result_file`` applies this to a whole result file in place (single-turn lines
are re-rendered canonically too, ``sanitise_single_turn_row``): the multi-turn runner
calls it on every file it writes, ``evaluate.rescore`` on foreign folders.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import MULTI_TURN, load_bfcl_entries
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.bfcl_multi_turn.env import (
    REJECTED_NAME,
    CallOutcome,
    EnvPool,
    parse_ground_truth_call,
)
from toolrl_lib.evaluate.bfcl_results import render_calls

# The registered handler's block syntax (its regex needs these newlines).
_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
MAX_STEP_CHARS = 1 << 20
MAX_STEPS_PER_TURN = 64
MAX_CALLS_PER_STEP = 64


@dataclass
class SanitiseReport:
    """What the sanitiser did to one result file."""

    category: str
    lines: int
    changed: int
    dropped: int


def canonical_step(outcomes: list[CallOutcome]) -> str:
    """The step string for a result file: executed calls as they ran, others rejected."""
    return render_calls([o.canonical() for o in outcomes])


def decode_step(text: Any, string_arguments: bool = True) -> list[dict[str, Any]] | None:
    """Calls in a step string as BFCL's decoder would find them (None: it would fail).

    Blocks that are not JSON are skipped (as BFCL does); an item that is not an object, or
    lacks ``name``/``arguments``, or whose arguments are neither an object nor a JSON
    string of one, makes the whole step undecodable (BFCL's multi-turn decoder reads JSON
    strings of arguments, its single-turn one does not: ``string_arguments=False``). Names
    and keys are NOT checked here (``validate_call`` does that).
    """
    if not isinstance(text, str) or len(text) > MAX_STEP_CHARS:
        return None
    calls = []
    for block in _BLOCK.findall(text):
        try:
            item = json.loads(block)
        except (ValueError, RecursionError):
            continue
        if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
            return None
        arguments = item["arguments"]
        if isinstance(arguments, str) and string_arguments:
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):
                return None
        if not isinstance(arguments, dict):
            return None
        calls.append({"name": item["name"], "arguments": arguments})
        if len(calls) > MAX_CALLS_PER_STEP:
            return None
    return calls


def run_turns(
    pool: EnvPool, key: str, turns: list[list[list[dict[str, Any]]]]
) -> list[list[list[CallOutcome]]]:
    """Execute ``turns[turn][step] = calls`` in an open episode; outcomes in the same shape."""
    return [[[pool.call(key, call) for call in step] for step in turn] for turn in turns]


def sanitise_multi_turn_row(row: dict[str, Any], entry: dict[str, Any], pool: EnvPool) -> dict[str, Any]:
    """A result line whose ``result`` BFCL can score without running anything but
    validated calls of the entry's classes.

    A non-list result (BFCL: ``inference_error``) becomes a plain error string; a turn
    that is not a list becomes an empty turn; a step that does not decode becomes ``""``.
    """
    out = dict(row)
    result = row.get("result")
    if not isinstance(result, list):
        text = result if isinstance(result, str) else "Error during inference: the result is not a list of turns"
        out["result"] = text if text.startswith("Error during inference") else (
            "Error during inference: the result is not a list of turns")
    else:
        decoded: list[list[list[dict[str, Any]] | None]] = []
        for turn in result:
            steps = turn if isinstance(turn, list) else []
            decoded.append([decode_step(step) for step in steps[:MAX_STEPS_PER_TURN]])
        key = f"sanitise::{entry['id']}"
        pool.open(key, entry)
        try:
            clean = []
            for turn in decoded:
                strings = []
                for calls in turn:
                    if calls is None:
                        strings.append("")
                        continue
                    strings.append(canonical_step([pool.call(key, call) for call in calls]))
                clean.append(strings)
        finally:
            pool.close(key)
        out["result"] = clean
    if out["result"] != result:
        out["unsanitised_result"] = result
    return out


def sanitise_single_turn_row(row: dict[str, Any]) -> dict[str, Any]:
    """A single-turn result line re-rendered canonically (BFCL's AST checker does not
    execute, but a foreign file is held to the same format): the calls decoded the way
    BFCL's decoder reads them; a name that is not a string becomes ``REJECTED_NAME`` (a
    wrong call, as BFCL would count it); a result BFCL could not decode becomes ``""``."""
    out = dict(row)
    result = row.get("result")
    calls = decode_step(result, string_arguments=False)
    clean = ""
    if calls is not None:
        clean = render_calls([c if isinstance(c["name"], str) and len(c["name"]) <= 256
                              else {"name": REJECTED_NAME, "arguments": {}} for c in calls])
    out["result"] = clean
    if clean != result:
        out["unsanitised_result"] = result
    return out


def sanitise_result_file(path: str | Path, category: str, pool: Any = None) -> SanitiseReport:
    """Rewrite one result file in place so that BFCL can score it without running code."""
    path = Path(path)
    rows = results.read_results(path)
    entries = {str(e["id"]): e for e in load_bfcl_entries(category)}
    clean, seen, changed = [], set(), 0
    for row in rows:
        key = str(row.get("id")) if isinstance(row, dict) else None
        if key not in entries or key in seen:
            continue
        seen.add(key)
        if category in MULTI_TURN:
            new = sanitise_multi_turn_row(row, entries[key], pool)
        else:
            new = sanitise_single_turn_row(row)
        new["id"] = entries[key]["id"]
        changed += "unsanitised_result" in new and "unsanitised_result" not in row
        clean.append(new)
    results.write_results(path, clean)
    return SanitiseReport(category, len(rows), changed, len(rows) - len(clean))


def sanitise_folder(root: str | Path, name: str, categories: list[str]) -> list[SanitiseReport]:
    """``sanitise_result_file`` on the result file of each of ``categories``, one executor shared."""
    reports = []
    with EnvPool() as pool:
        for category in categories:
            reports.append(sanitise_result_file(results.result_file(root, name, category), category, pool))
    return reports


def ground_truth_turns(entry: dict[str, Any], answer: list[list[str]], methods: dict[str, Any]) -> list[list[list[dict]]]:
    """BFCL's ground truth as our calls: one step per non-empty turn, then a final step
    with no call (as a model ends a turn)."""
    turns = []
    for calls in answer:
        parsed = [parse_ground_truth_call(text, methods) for text in calls]
        turns.append([parsed, []] if parsed else [[]])
    return turns


def ground_truth_row(entry: dict[str, Any], answer: list[list[str]], pool: EnvPool) -> dict[str, Any]:
    """A result line holding BFCL's ground truth, executed through our executor."""
    key = f"gt::{entry['id']}"
    methods = pool.open(key, entry)
    try:
        turns = ground_truth_turns(entry, answer, methods)
        outcomes = run_turns(pool, key, turns)
    finally:
        pool.close(key)
    refused = [o for turn in outcomes for step in turn for o in step if not o.executed]
    return {
        "id": entry["id"],
        "result": [[canonical_step(step) if step else "" for step in turn] for turn in outcomes],
        "raw": None,
        "n_calls": sum(len(step) for turn in outcomes for step in turn),
        "n_refused": len(refused),
        "format_valid": True,
    }


def write_ground_truth(out_dir: Any, categories: list[str], name: str = "groundtruth",
                       limit: int | None = None) -> dict[str, int]:
    """Result files of BFCL's multi-turn ground truth, run through our executor; returns
    the number of calls our executor refused per category (0 when all is well)."""
    from toolrl_lib.data.bfcl import load_possible_answers

    refused = {}
    with EnvPool() as pool:
        for category in categories:
            answers = load_possible_answers(category)
            rows = [ground_truth_row(e, answers[e["id"]], pool) for e in load_bfcl_entries(category)[:limit]]
            results.write_results(results.result_file(out_dir, name, category), rows)
            refused[category] = sum(r["n_refused"] for r in rows)
    return refused


__all__ = [
    "REJECTED_NAME",
    "SanitiseReport",
    "canonical_step",
    "decode_step",
    "ground_truth_row",
    "sanitise_folder",
    "sanitise_multi_turn_row",
    "sanitise_result_file",
    "sanitise_single_turn_row",
    "write_ground_truth",
]
