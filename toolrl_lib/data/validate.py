"""Checks every converted example must pass before it may be trained on."""

from __future__ import annotations

from toolrl_lib.data.errors import RowError
from toolrl_lib.data.example import Example
from toolrl_lib.data.schema import check_call


def validate_example(example: Example) -> Example:
    """Raise RowError (with the reason and field) when the example is not usable."""
    if not example.query.strip():
        raise RowError("empty_query", "messages", "no non-empty user message")
    if not example.tools:
        raise RowError("no_tools", "tools", "no tools are offered")
    names = [t["name"] for t in example.tools]
    if len(set(names)) != len(names):
        duplicated = sorted({n for n in names if names.count(n) > 1})
        raise RowError("bad_tool_schema", "tools", f"duplicate tool name(s) {duplicated}")
    tools_by_name = {t["name"]: t for t in example.tools}
    for index, call in enumerate(example.ground_truth):
        check_call(call, tools_by_name, f"ground_truth[{index}]")
    return example
