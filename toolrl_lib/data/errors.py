"""Why a raw row was dropped: one reason code per failure, with the field and a message."""

from __future__ import annotations

import re

# Every reason the pipeline may drop a row for (summary.json counts these).
DROP_REASONS = {
    "bad_json": "a field that should hold JSON (tools/answers) does not parse",
    "missing_field": "a column the source format needs is absent or empty",
    "empty_query": "no user text to answer",
    "bad_tool_schema": "a tool description cannot be turned into JSON Schema",
    "no_tools": "the row offers no tools",
    "bad_call": "a ground-truth call cannot be parsed (syntax, positional args, non-literals)",
    "unknown_function": "a ground-truth call names a function that is not offered",
    "missing_required_argument": "a ground-truth call omits a required argument",
    "unknown_argument": "a ground-truth call passes an argument the function does not declare",
    "type_mismatch": "an argument value does not have the declared type",
    "enum_mismatch": "an argument value is not one of the declared enum values",
    "duplicate": "same query, tools and answer as an earlier row",
    "near_duplicate": "almost the same query (and the same functions called) as an earlier row",
    "contaminated": "the query overlaps a BFCL scored test entry",
    "unsupported": "a row type we do not turn into examples (e.g. no assistant step)",
    "loader_error": "the loader failed on this row unexpectedly (a bug: the message names it)",
}


class RowError(ValueError):
    """A raw row that cannot become a valid Example; ``reason`` is a key of DROP_REASONS."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        if reason not in DROP_REASONS:
            raise KeyError(f"unknown drop reason {reason!r}")
        super().__init__(f"{field}: {message}")
        self.reason, self.field, self.message = reason, field, message

    def at_row(self, row: str | int) -> str:
        """The one-line error the strict mode raises: row, field, what was expected."""
        return f"row {row}: field {self.field!r}: {self.message} [{self.reason}]"


def id_part(label: object) -> str:
    """A row label (``file.json:12``, ``Team-ACE/ToolACE:7``) as a safe piece of an id."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(label)).strip("-")
