"""Hostile raw rows for every loader, and the invariants ``prepare`` must keep on them.

Used by the property-based fuzz (``tests/test_loader_fuzz.py``, Hypothesis picks the kinds,
payloads and cut points) and by ``benchmarks/loader_fuzz.py`` (the same rows at volume).
A row is one JSON line; its ``kind`` says how it was spoiled and what must happen to it:

* ``good``/``control_chars`` (control characters, U+2028, U+0085 inside strings): every
  example of the row is kept with exactly its ground truth, whatever its neighbours are;
* ``not_json``, ``non_object``, ``truncated_line``, ``nan``, ``deep``, ``duplicate_keys``,
  ``surrogate``, ``unbalanced``, ``malformed_call``: the row (ToolACE: the broken step and
  the steps after it) is dropped with a reason, never turned into a label;
* ``wrong_type``, ``huge_string``: kept or dropped, but accounted for.

``check_prepared`` verifies, per input row: kept (an example with ``meta["row"]`` = its
label) or listed in ``dropped.jsonl`` (``input_row`` = its label) with a known reason, not
``loader_error``; kept rows + dropped-only rows = input rows; the expectations above.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrl_lib.data.errors import DROP_REASONS

LOADERS = ("xlam", "toolace", "bfcl", "parquet")
KINDS = ("good", "control_chars", "not_json", "non_object", "truncated_line", "nan", "deep",
         "duplicate_keys", "surrogate", "unbalanced", "malformed_call", "wrong_type",
         "huge_string")
MUST_DROP = frozenset(("not_json", "non_object", "truncated_line", "nan", "deep",
                       "duplicate_keys", "surrogate", "unbalanced", "malformed_call"))
CONTROL_CHARS = "\x00\x01\x08\x0b\x0c\x1b\x1f\x7f\x85\u2028\u2029\ufeff\r\t"
_CLOSERS = str.maketrans("", "", ")]}\"'\n")


@dataclass
class HostileRow:
    """One raw JSON line and what ``prepare`` must do with it.

    Attributes:
        line: the raw line (no newline in it, never blank).
        kind: one of ``KINDS``.
        expected: ground truths of the examples the row must yield (in step order), for rows
            that must be kept whole; None when not fixed.
        must_drop: no example of the row may be kept (ToolACE: see ``bad_turn``).
        bad_turn: ToolACE: the first malformed assistant turn; no kept example from it on.
    """

    line: str
    kind: str
    expected: list[list[dict[str, Any]]] | None = None
    must_drop: bool = False
    bad_turn: int | None = None


# --- good rows -----------------------------------------------------------------------------


def _bfcl_type(schema: dict[str, Any]) -> dict[str, Any]:
    kind = {"object": "dict", "number": "float"}.get(schema.get("type"), schema.get("type"))
    out = {"type": kind, "description": schema.get("description", "")}
    for key in ("enum", "default"):
        if key in schema:
            out[key] = schema[key]
    if isinstance(schema.get("items"), dict):
        out["items"] = _bfcl_type(schema["items"])
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: _bfcl_type(v) for k, v in schema["properties"].items()}
    return out


def _pythonic(call: dict[str, Any]) -> str:
    return call["name"] + "(" + ", ".join(f"{k}={v!r}" for k, v in call["arguments"].items()) + ")"


def good_rows(loader: str, n: int, seed: int = 0) -> list[tuple[dict[str, Any], list]]:
    """``n`` valid raw rows of one loader's format, each with the ground truths it must give.

    ToolACE rows with calls are two-step dialogues (the same request asked twice, a tool
    result between), so that a broken second step can keep the first.
    """
    from toolrl_lib.data.parquet import example_to_parquet_row
    from toolrl_lib.data.pycalls import format_call_list
    from toolrl_lib.data.synthetic import generate_examples, to_raw

    examples = generate_examples(n, seed=seed)
    rows: list[tuple[dict[str, Any], list]] = []
    for index, example in enumerate(examples):
        gold = example.ground_truth
        if loader == "xlam":
            row, expected = to_raw([example], "xlam")[0], [gold]
            row["id"] = index
        elif loader == "toolace":
            row = to_raw([example], "toolace")[0]
            expected = [gold]
            if gold:
                call = format_call_list(gold)
                row["conversations"] += [{"from": "tool", "value": '{"ok": true}'},
                                         {"from": "user", "value": "Please do that once more."},
                                         {"from": "assistant", "value": call}]
                expected = [gold, gold]
        elif loader == "parquet":
            row, expected = example_to_parquet_row(example, index), [gold]
        elif loader == "bfcl":
            functions = [{"name": t["name"], "description": t["description"],
                          "parameters": {"type": "dict",
                                         "properties": {k: _bfcl_type(v) for k, v in
                                                        t["parameters"]["properties"].items()},
                                         "required": list(t["parameters"]["required"])}}
                         for t in example.tools]
            row = {"id": f"exec_simple_{index}", "function": functions,
                   "question": [[{"role": "user", "content": example.query}]],
                   "ground_truth": [_pythonic(c) for c in gold]}
            expected = [gold]
        else:
            raise ValueError(f"unknown loader {loader!r}; choose from {LOADERS}")
        rows.append((row, expected))
    return rows


# --- spoiling ------------------------------------------------------------------------------


def _append_raw(row: dict[str, Any], raw: str) -> str:
    """The row's JSON with ``, <raw>`` added before the closing brace (raw text kept as is)."""
    return json.dumps(row, ensure_ascii=False)[:-1] + ", " + raw + "}"


def _label_text(loader: str, row: dict[str, Any]) -> tuple[str, Any]:
    """(field, text) holding the row's ground truth as text (what a malformed call breaks)."""
    if loader == "xlam":
        return "answers", row["answers"]
    if loader == "parquet":
        return "ground_truth", row["reward_model"]["ground_truth"]
    if loader == "bfcl":
        return "ground_truth", row["ground_truth"]
    return "conversations", None


def _set_query(loader: str, row: dict[str, Any], text: str) -> None:
    if loader == "xlam":
        row["query"] = text
    elif loader == "toolace":
        row["conversations"][0]["value"] = text
    elif loader == "parquet":
        row["prompt"][-1]["content"] = text
    else:
        row["question"][0][0]["content"] = text


def _query(loader: str, row: dict[str, Any]) -> str:
    if loader == "xlam":
        return row["query"]
    if loader == "toolace":
        return row["conversations"][0]["value"]
    if loader == "parquet":
        return row["prompt"][-1]["content"]
    return row["question"][0][0]["content"]


def _truncate(text: str, cut: int) -> str:
    """A proper, non-empty prefix (never the whole text)."""
    return text[: 1 + cut % max(len(text) - 1, 1)]


def _break_label(loader: str, row: dict[str, Any], cut: int, spoil: str) -> int | None:
    """Make the row's ground-truth text malformed in place; returns ToolACE's broken turn."""
    if loader == "toolace":
        turns = [i for i, t in enumerate(row["conversations"]) if t["from"] == "assistant"]
        turn = turns[cut % len(turns)]
        text = row["conversations"][turn]["value"]
        if not text.startswith("["):  # a prose (no-call) answer: make it a broken call instead
            text = "[lookup(query='" + text[:40].replace("'", "") + "')]"
        row["conversations"][turn]["value"] = spoil_text(text, cut, spoil)
        return turn
    field, text = _label_text(loader, row)
    if loader == "bfcl":
        calls = row["ground_truth"] or ["f(a=1)"]
        calls[cut % len(calls)] = spoil_text(calls[cut % len(calls)], cut, spoil)
        row["ground_truth"] = calls
    elif loader == "parquet":
        if not text:
            text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
        start = text.rfind("<tool_call>")  # cut inside the last block: never at a boundary
        broken = text[:start] + spoil_text(text[start:], cut, spoil)
        row["reward_model"]["ground_truth"] = broken
    else:
        row[field] = spoil_text(text, cut, spoil)
    return None


def spoil_text(text: str, cut: int, spoil: str, payload: str = "") -> str:
    """``truncate``: a proper prefix; ``unbalanced``: an unmatched opener (and payload with
    its closers removed) appended. Either way no longer a complete call or JSON value."""
    if spoil == "truncate":
        return _truncate(text, cut)
    opener = "[{(\"'"[cut % 5]
    return text + opener + payload.translate(_CLOSERS)[:200]


def make_row(loader: str, kind: str, base: tuple[dict[str, Any], list], payload: str = "",
             cut: int = 0) -> HostileRow:
    """Spoil a good row (a deep copy of ``base``) in the way ``kind`` names."""
    row, expected = json.loads(json.dumps(base[0])), base[1]
    flat = payload.replace("\n", " ")
    if kind == "good":
        return HostileRow(json.dumps(row, ensure_ascii=False), kind, expected)
    if kind == "control_chars":
        query = _query(loader, row)
        chars = "".join(CONTROL_CHARS[(cut + i) % len(CONTROL_CHARS)] for i in range(1 + cut % 4))
        position = cut % (len(query) + 1)
        _set_query(loader, row, query[:position] + chars + query[position:])
        if not _query(loader, row).strip():
            _set_query(loader, row, query)
        return HostileRow(json.dumps(row, ensure_ascii=False), kind, expected)
    if kind == "not_json":
        return HostileRow("{" + flat.strip() + (" ," if cut % 2 else ""), kind, must_drop=True)
    if kind == "non_object":
        value = [[flat], flat, cut, None, True, [row]][cut % 6]
        return HostileRow(json.dumps(value, ensure_ascii=False), kind, must_drop=True)
    if kind == "truncated_line":
        return HostileRow(_truncate(json.dumps(row, ensure_ascii=False), cut), kind,
                          must_drop=True)
    if kind == "nan":
        constant = ("NaN", "Infinity", "-Infinity")[cut % 3]
        if loader == "xlam" and cut % 2:
            row["answers"] = row["answers"].replace("}", f', "nan_arg": {constant}}}', 1) \
                if "}" in row["answers"] else f'[{{"name": "f", "arguments": {{"x": {constant}}}}}]'
            return HostileRow(json.dumps(row), kind, must_drop=True)
        return HostileRow(_append_raw(row, f'"score": {constant}'), kind, must_drop=True)
    if kind == "deep":
        depth = 65 + cut % 6000
        nested = "[" * depth + "]" * depth
        if loader == "xlam":
            row["tools" if cut % 2 else "answers"] = nested
        elif loader == "toolace":
            row["system"] = "Here is a list of functions in JSON format:\n" + nested
        elif loader == "parquet" and cut % 2:
            row["reward_model"]["ground_truth"] = nested
        else:
            return HostileRow(_append_raw(row, f'"deep": {nested}'), kind, must_drop=True)
        return HostileRow(json.dumps(row), kind, must_drop=True)
    if kind == "duplicate_keys":
        key = next(iter(row))
        return HostileRow(_append_raw(row, f"{json.dumps(key)}: {json.dumps(flat)}"), kind,
                          must_drop=True)
    if kind == "surrogate":
        return HostileRow(_append_raw(row, '"note": "\\udc80' + flat.replace('"', "")
                                      .replace("\\", "")[:50] + '"'), kind, must_drop=True)
    if kind in ("unbalanced", "malformed_call"):
        if loader == "toolace" or expected[0]:
            spoil = "unbalanced" if kind == "unbalanced" else "truncate"
            bad_turn = _break_label(loader, row, cut, spoil)
            return HostileRow(json.dumps(row, ensure_ascii=False), kind,
                              must_drop=loader != "toolace", bad_turn=bad_turn)
        # no-call rows of the single-step loaders: break the (empty) answer itself
        field, text = _label_text(loader, row)
        broken = spoil_text(text if isinstance(text, str) and text else "[", cut,
                            "unbalanced", flat)
        if loader == "xlam":
            row["answers"] = broken
        elif loader == "parquet":
            row["reward_model"]["ground_truth"] = broken
        else:
            row["ground_truth"] = [broken]
        return HostileRow(json.dumps(row, ensure_ascii=False), kind, must_drop=True)
    if kind == "wrong_type":
        keys = list(row)
        value = [None, cut, 1.5, True, [], {}, flat, [flat], {"k": flat}][cut % 9]
        row[keys[cut % len(keys)]] = value
        return HostileRow(json.dumps(row, ensure_ascii=False), kind)
    if kind == "huge_string":
        size = 1000 + cut % 64_000
        _set_query(loader, row, ((flat or "x") * (size // max(len(flat), 1) + 1))[:size])
        return HostileRow(json.dumps(row, ensure_ascii=False), kind)
    raise ValueError(f"unknown hostile kind {kind!r}; choose from {KINDS}")


def write_rows(rows: list[HostileRow], path: str | Path) -> Path:
    """One line per row (the rows' labels are then ``<file name>:<1-based line>``)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(row.line + "\n")
    return path


# --- the invariants ------------------------------------------------------------------------


def check_prepared(rows: list[HostileRow], file_name: str, out_dir: str | Path) -> list[str]:
    """Problems with what ``prepare`` wrote for ``rows`` (empty list: all invariants hold)."""
    from toolrl_lib.data.example import read_jsonl

    out = Path(out_dir)
    kept: dict[str, list] = defaultdict(list)
    for split in ("train.jsonl", "val.jsonl"):
        if (out / split).is_file():
            for example in read_jsonl(out / split):
                kept[str(example.meta.get("row"))].append(example)
    dropped: dict[str, list] = defaultdict(list)
    with (out / "dropped.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            dropped[str(record.get("input_row"))].append(record)
    labels = [f"{file_name}:{number}" for number in range(1, len(rows) + 1)]
    problems = [f"{label}: not an input row" for label in set(kept) | set(dropped)
                if label not in set(labels)]
    kept_rows = dropped_only = 0
    for label, row in zip(labels, rows, strict=True):
        examples = sorted(kept.get(label, []), key=lambda e: e.meta.get("step", 0))
        drops = dropped.get(label, [])
        where = f"{label} ({row.kind})"
        kept_rows += bool(examples)
        dropped_only += bool(drops) and not examples
        if not examples and not drops:
            problems.append(f"{where}: neither kept nor dropped")
        for record in drops:
            if record.get("reason") not in DROP_REASONS or record["reason"] == "loader_error":
                problems.append(f"{where}: drop reason {record.get('reason')!r}: "
                                f"{record.get('message')}")
            elif not record.get("message"):
                problems.append(f"{where}: drop without a message")
        if row.expected is not None:
            truths = [e.ground_truth for e in examples]
            if drops or truths != row.expected:
                problems.append(f"{where}: good row not kept whole: kept {truths}, dropped "
                                f"{[d['message'] for d in drops]}")
        if row.must_drop and examples:
            problems.append(f"{where}: must be dropped, kept {[e.ground_truth for e in examples]}")
        if row.bad_turn is not None and any(e.meta.get("turn", -1) >= row.bad_turn
                                            for e in examples):
            problems.append(f"{where}: an example from or after the malformed turn "
                            f"{row.bad_turn} was kept")
    if kept_rows + dropped_only != len(rows):
        problems.append(f"kept rows {kept_rows} + dropped rows {dropped_only} != {len(rows)}")
    return problems
