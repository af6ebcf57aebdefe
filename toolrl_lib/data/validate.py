"""Checks every converted example must pass before it may be trained on."""

from __future__ import annotations

import math

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
        if _non_finite(call.get("arguments")):
            raise RowError("bad_call", f"ground_truth[{index}]",
                           "an argument holds NaN or an infinite number (no answer can match)")
    return example


def _non_finite(value: object) -> bool:
    """Any NaN/±inf inside (iterative: values are depth-capped by the readers anyway)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
