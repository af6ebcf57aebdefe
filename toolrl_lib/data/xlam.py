"""Salesforce/xlam-function-calling-60k rows <-> ``Example``.

A row is ``{"id", "query", "tools", "answers"}`` where ``tools`` and ``answers`` are JSON
*strings*; parameters are ``{name: {"type": "str, optional", "description", "default"}}``
with Python-typing-like type strings (converted to JSON Schema in ``schema.py``).
"""

from __future__ import annotations

import json
from typing import Any

from toolrl_lib.data.errors import RowError, id_part
from toolrl_lib.data.example import Example
from toolrl_lib.data.schema import normalize_tool
from toolrl_lib.parsing import ParseRefused, load_json

HUB_ID = "Salesforce/xlam-function-calling-60k"
COLUMNS = ("query", "tools", "answers")


def _decode(value: Any, field: str) -> Any:
    """A JSON-string column, read by the bounded strict reader (depth/size caps, no NaN, no
    duplicate keys); already-decoded values (hub, parquet) pass as they are."""
    if isinstance(value, str):
        try:
            return load_json(value)
        except ParseRefused as error:
            raise RowError("bad_json", field, str(error)) from error
    return value


def _call(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise RowError("bad_call", where, f"a call needs 'name' and 'arguments'; got {str(raw)[:80]!r}")
    arguments = _decode(raw.get("arguments", {}), f"{where}.arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RowError("bad_call", f"{where}.arguments", "arguments must be an object")
    return {"name": raw["name"], "arguments": arguments}


def xlam_row_to_example(row: dict[str, Any], label: str | int) -> Example:
    """One xLAM row -> Example (raises RowError naming the field when the row is bad)."""
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise RowError("missing_field", missing[0], f"xLAM rows need columns {list(COLUMNS)}")
    query = row["query"]
    if not isinstance(query, str) or not query.strip():
        raise RowError("empty_query", "query", "the query is empty")
    tools_raw = _decode(row["tools"], "tools")
    if not isinstance(tools_raw, list) or not tools_raw:
        raise RowError("no_tools", "tools", "expected a non-empty JSON list of tools")
    tools = [normalize_tool(t, f"tools[{i}]") for i, t in enumerate(tools_raw)]
    answers = _decode(row["answers"], "answers")
    if answers is None:
        answers = []
    if not isinstance(answers, list):
        raise RowError("bad_json", "answers", "expected a JSON list of calls")
    calls = [_call(a, f"answers[{i}]") for i, a in enumerate(answers)]
    row_id = row.get("id", label)
    return Example(
        id=f"xlam-{id_part(row_id)}",
        source="xlam",
        messages=[{"role": "user", "content": query.strip()}],
        tools=tools,
        ground_truth=calls,
        meta={"row": str(label)},
    )


def _type_string(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "string")
    if kind == "array":
        items = schema.get("items")
        return f"List[{_type_string(items)}]" if isinstance(items, dict) else "List"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
            "object": "dict"}.get(kind, "str")


def tool_to_xlam(tool: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema tool -> xLAM's flat parameter style (enum/properties kept as extras)."""
    params = tool["parameters"]
    out: dict[str, Any] = {}
    for name, prop in params["properties"].items():
        optional = name not in params.get("required", [])
        spec: dict[str, Any] = {"description": prop.get("description", ""),
                                "type": _type_string(prop) + (", optional" if optional else "")}
        for key in ("enum", "properties"):
            if key in prop:
                spec[key] = prop[key]
        if "default" in prop:
            spec["default"] = prop["default"]
        out[name] = spec
    return {"name": tool["name"], "description": tool["description"], "parameters": out}


def example_to_xlam(example: Example, row_id: int | str) -> dict[str, Any]:
    """The raw xLAM row for an example (used by the synthetic generator and benchmarks)."""
    return {
        "id": row_id,
        "query": example.query,
        "tools": json.dumps([tool_to_xlam(t) for t in example.tools], ensure_ascii=False),
        "answers": json.dumps(example.ground_truth, ensure_ascii=False),
    }
