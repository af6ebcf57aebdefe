"""BFCL-format rows as a *training* source: by default the unscored ``unused_datasets``.

BFCL v4 scores none of ``exec_*`` and ``sql``, so they may be trained on — after the
contamination check, since they were written alongside the scored sets. The entry ->
Example conversion is the evaluation module's (``toolrl_lib.data.bfcl``), so tools look the
same in training and at evaluation time. ``rest`` (answers are HTTP results), ``chatable``
(no functions) and ``multi_turn_composite`` (multi-turn) are not call-level examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolrl_lib.data.errors import RowError
from toolrl_lib.data.example import Example
from toolrl_lib.data.readers import iter_records

TRAINABLE_UNSCORED = ("exec_simple", "exec_multiple", "exec_parallel", "exec_parallel_multiple",
                      "sql")
_NAME = re.compile(r"BFCL_v\d+_(.+)\.jsonl?$")

BfclRow = tuple[str, dict[str, Any] | RowError, str, Any]


def category_of(path: str | Path) -> str:
    match = _NAME.search(Path(path).name)
    return match.group(1) if match else "exec_simple"


def iter_bfcl_rows(input_path: str | Path | None = None,
                   categories: tuple[str, ...] = TRAINABLE_UNSCORED) -> Iterator[BfclRow]:
    """``(label, entry, category, possible answer)`` for a BFCL question file (answers from
    the sibling ``possible_answer/`` folder when present) or for the packaged categories."""
    from toolrl_lib.data import bfcl

    if input_path is None:
        for category in categories:
            answers = bfcl.load_possible_answers(category)
            for entry in bfcl.load_bfcl_entries(category):
                yield f"{category}:{entry['id']}", entry, category, answers.get(entry["id"])
        return
    path = Path(input_path)
    category = category_of(path)
    answers: dict[str, Any] = {}
    answer_file = path.parent.parent / "possible_answer" / path.name
    if not answer_file.is_file():
        answer_file = path.parent / "possible_answer" / path.name
    if answer_file.is_file():
        for _, record in iter_records(answer_file):
            if isinstance(record, dict) and "id" in record:
                answers[str(record["id"])] = record.get("ground_truth")
    for label, record in iter_records(path):
        answer = answers.get(str(record.get("id"))) if isinstance(record, dict) else None
        if isinstance(record, dict) and answer is None and "ground_truth" in record:
            answer = record["ground_truth"]
        yield label, record, category, answer


def _check_entry(entry: dict[str, Any]) -> None:
    """The shape ``bfcl_entry_to_example`` relies on, checked first so that a hostile entry is
    a RowError naming its field instead of an AttributeError deep inside the conversion."""
    question = entry["question"]
    if isinstance(question, str):
        return  # the unscored ``chatable`` form
    first = question[0] if isinstance(question, list) and question else None
    turn = first if isinstance(first, list) else question
    if not isinstance(turn, list) or not turn:
        raise RowError("missing_field", "question", "expected a non-empty list of messages")
    for index, message in enumerate(turn):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content", ""), str)):
            raise RowError("missing_field", f"question[{index}]",
                           "a message needs a string 'role' and string 'content'")
    functions = entry["function"]
    if not isinstance(functions, list) or not functions:
        raise RowError("no_tools", "function", "expected a non-empty list of function docs")
    for index, function in enumerate(functions):
        params = function.get("parameters") if isinstance(function, dict) else None
        if not (isinstance(function, dict) and isinstance(function.get("name"), str)
                and isinstance(params, dict | None)
                and isinstance((params or {}).get("properties") or {}, dict)
                and isinstance((params or {}).get("required") or [], list)):
            raise RowError("bad_tool_schema", f"function[{index}]",
                           "a function doc needs a string 'name' and object 'parameters'")


def bfcl_row_to_example(entry: dict[str, Any], category: str, answer: Any) -> Example:
    from toolrl_lib.data.bfcl import NO_ANSWER_CATEGORIES, bfcl_entry_to_example

    for column in ("id", "question", "function"):
        if column not in entry:
            raise RowError("missing_field", column, "BFCL entries need id, question, function")
    if category.startswith("multi_turn") or category in ("rest", "chatable"):
        raise RowError("unsupported", "question", f"{category} entries are not single-step calls")
    if answer is None and category not in NO_ANSWER_CATEGORIES:
        # no answer is not "no call is correct": that label only exists for irrelevance sets
        raise RowError("missing_field", "ground_truth", f"no possible answer for this "
                       f"{category} entry")
    _check_entry(entry)
    try:
        example = bfcl_entry_to_example(entry, category, answer)
    except RowError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as error:
        raise RowError("bad_call", "ground_truth", str(error)[:200]) from error
    example.id = f"bfcl-{example.id}"
    example.meta = {"category": category}
    return example
