"""Tool schemas: every source's parameter spec -> one JSON Schema shape, and value checks.

Sources describe parameters differently: xLAM uses Python-typing-like strings
(``"List[int]"``, ``"str, optional"``), ToolACE and BFCL use JSON-Schema-ish dicts with
their own type names (``"dict"``, ``"float"``, ``"tuple"``). Rewards and prompts only ever
see the normalised form ``{"name", "description", "parameters": {"type": "object",
"properties": {...}, "required": [...]}}`` with the six JSON types below.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from toolrl_lib.data.errors import RowError

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")

_ALIASES = {
    "str": "string", "string": "string", "text": "string", "char": "string", "any": "string",
    "date": "string", "datetime": "string", "date-time": "string", "time": "string",
    "timestamp": "string", "email": "string", "url": "string", "uri": "string", "enum": "string",
    "int32": "integer", "int64": "integer", "uint": "integer", "float32": "number",
    "float64": "number",
    "int": "integer", "integer": "integer", "long": "integer",
    "float": "number", "number": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "boolean": "boolean",
    "list": "array", "array": "array", "tuple": "array", "set": "array", "sequence": "array",
    "dict": "object", "object": "object", "mapping": "object", "hashmap": "object",
}
# Keys of a property we keep; anything else (format, examples, ...) is dropped.
_KEEP = ("description", "enum", "default")


def parse_type_string(text: str) -> tuple[dict[str, Any], bool]:
    """Cached front of ``_parse_type_string`` (type strings repeat across rows); returns a
    fresh copy each time, so callers may modify it."""
    schema, optional = _parse_type_string_cached(text)
    return _copy(schema), optional


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in schema.items()}


@lru_cache(maxsize=4096)
def _parse_type_string_cached(text: str) -> tuple[dict[str, Any], bool]:
    return _parse_type_string(text)


def _parse_type_string(text: str) -> tuple[dict[str, Any], bool]:
    """``"List[int], optional"`` -> (``{"type": "array", "items": {"type": "integer"}}``, optional).

    Understands ``X, optional``, ``Optional[X]``, ``X | None``, ``List[X]``/``list[X]``,
    ``Tuple[...]``, ``Dict[...]``, ``Union[X, ...]`` (first non-None member) and bare names.
    Raises ValueError for anything else.
    """
    optional = False
    text = text.strip()
    # "str, optional" / "int, default=5" / "str (optional)"
    head, *rest = _split_args(text) or [""]
    tail = ",".join(rest).lower()
    if "optional" in tail or "default" in tail:
        optional, text = True, head
    if re.search(r"\(optional\)\s*$", text, re.IGNORECASE):
        optional, text = True, re.sub(r"\(optional\)\s*$", "", text, flags=re.IGNORECASE).strip()
    return _parse_type(text), optional or _is_optional(text)


def _is_optional(text: str) -> bool:
    compact = text.replace(" ", "").lower()
    return compact.startswith("optional[") or compact.endswith("|none") or ",none]" in compact


def _split_args(inner: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in inner:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _parse_type(text: str) -> dict[str, Any]:
    text = text.strip().strip("'\"")
    match = re.fullmatch(r"([A-Za-z_.]+)\s*\[(.*)\]", text)
    if match:
        outer, args = match.group(1).split(".")[-1].lower(), _split_args(match.group(2))
        if outer in ("optional",):
            return _parse_type(args[0])
        if outer == "union":
            return _union([a for a in args if a.lower() not in ("none", "nonetype")])
        if outer in ("list", "sequence", "set", "iterable"):
            return {"type": "array", "items": _parse_type(args[0])} if args else {"type": "array"}
        if outer == "tuple":
            kinds = {tuple(sorted(_parse_type(a).items())) for a in args if a != "..."}
            items = _parse_type(args[0]) if len(kinds) == 1 else None
            return {"type": "array", "items": items} if items else {"type": "array"}
        if outer in ("dict", "mapping"):
            return {"type": "object"}
        if outer == "literal":
            values = [a.strip("'\"") for a in args]
            return {"type": "string", "enum": values}
        raise ValueError(f"unsupported type {text!r}")
    if "|" in text or " or " in text:
        members = re.split(r"\||\bor\b", text)
        return _union([m for m in members if m.strip().lower() not in ("none", "nonetype")])
    name = text.lower()
    if name not in _ALIASES:
        raise ValueError(f"unsupported type {text!r}")
    return {"type": _ALIASES[name]}


def _union(members: list[str]) -> dict[str, Any]:
    """``Union[int, float]`` -> number; otherwise the first member's type."""
    if not members:
        return {"type": "string"}
    kinds = [_parse_type(m) for m in members]
    if {k["type"] for k in kinds} == {"integer", "number"}:
        return {"type": "number"}
    return kinds[0]


def normalize_property(prop: Any, where: str) -> tuple[dict[str, Any], bool]:
    """One parameter spec (any source's style) -> (JSON Schema property, optional flag)."""
    if not isinstance(prop, dict):
        raise RowError("bad_tool_schema", where, f"parameter spec must be an object, got {prop!r}")
    raw_type = prop.get("type", "string")
    if isinstance(raw_type, list):  # ["string", "null"]
        raw_type = next((t for t in raw_type if t != "null"), "string")
    try:
        out, optional = parse_type_string(str(raw_type))
    except ValueError as error:
        raise RowError("bad_tool_schema", where, str(error)) from error
    out["description"] = str(prop.get("description") or "")
    for key in _KEEP[1:]:
        if key in prop and prop[key] is not None:
            out[key] = prop[key]
    if "default" in prop:
        optional = True
    if out["type"] == "array" and isinstance(prop.get("items"), dict):
        items, _ = normalize_property(prop["items"], f"{where}.items")
        out["items"] = {k: v for k, v in items.items() if v != "" or k != "description"}
    if out["type"] == "object" and isinstance(prop.get("properties"), dict):
        nested = normalize_parameters(prop, where)
        out["properties"], out["required"] = nested["properties"], nested["required"]
    return out, optional


def normalize_parameters(params: Any, where: str) -> dict[str, Any]:
    """A tool's ``parameters`` in JSON Schema style *or* xLAM's flat ``{name: spec}`` style."""
    if params in (None, "", [], {}):
        return {"type": "object", "properties": {}, "required": []}
    if not isinstance(params, dict):
        raise RowError("bad_tool_schema", where, f"parameters must be an object, got {params!r}")
    schema_style = isinstance(params.get("properties"), dict) or params.get("type") in (
        "object", "dict")
    props = params.get("properties", {}) if schema_style else params
    if not isinstance(props, dict):
        raise RowError("bad_tool_schema", where, "properties must be an object")
    required = params.get("required") if schema_style else None
    properties, optional_names = {}, set()
    for name, spec in props.items():
        properties[str(name)], optional = normalize_property(spec, f"{where}.{name}")
        if optional:
            optional_names.add(str(name))
    if isinstance(required, list):
        required = [str(r) for r in required if str(r) in properties]
    else:
        required = [n for n in properties if n not in optional_names]
    return {"type": "object", "properties": properties, "required": required}


def normalize_tool(raw: Any, where: str = "tools") -> dict[str, Any]:
    """Any source's tool description -> ``{"name", "description", "parameters"}``."""
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"].strip():
        raise RowError("bad_tool_schema", where, f"a tool needs a non-empty 'name'; got {str(raw)[:80]!r}")
    name = raw["name"].strip()
    params = normalize_parameters(raw.get("parameters", raw.get("arguments")), f"{where}[{name}]")
    top_required = raw.get("required")
    if isinstance(top_required, list) and top_required and not params["required"]:
        params["required"] = [str(r) for r in top_required if str(r) in params["properties"]]
    return {"name": name, "description": str(raw.get("description") or ""), "parameters": params}


def _matches_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "string":
        return isinstance(value, str)
    if expected == "array":
        return isinstance(value, list | tuple)
    if expected == "object":
        return isinstance(value, dict)
    return True


def check_value(value: Any, schema: dict[str, Any], where: str) -> None:
    """Raise RowError(type_mismatch|enum_mismatch) when ``value`` does not fit ``schema``."""
    expected = schema.get("type")
    if expected and not _matches_type(value, expected):
        raise RowError("type_mismatch", where,
                       f"expected {expected}, got {type(value).__name__} {value!r:.60}")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        raise RowError("enum_mismatch", where, f"{value!r:.60} is not one of {schema['enum']}")
    if expected == "array" and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            check_value(item, schema["items"], f"{where}[{index}]")


def check_call(call: dict[str, Any], tools_by_name: dict[str, dict[str, Any]], where: str) -> None:
    """A ground-truth call must name an offered tool, give every required argument, no
    unknown argument, and values of the declared types."""
    name = call.get("name")
    if name not in tools_by_name:
        raise RowError("unknown_function", where, f"{name!r} is not among the tools "
                       f"{sorted(tools_by_name)[:8]}")
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        raise RowError("bad_call", where, f"arguments of {name!r} must be an object")
    params = tools_by_name[name]["parameters"]
    for required in params.get("required", []):
        if required not in arguments:
            raise RowError("missing_required_argument", f"{where}.{name}.{required}",
                           f"{name!r} needs argument {required!r}")
    for arg, value in arguments.items():
        if arg not in params["properties"]:
            raise RowError("unknown_argument", f"{where}.{name}.{arg}",
                           f"{name!r} has no parameter {arg!r}")
        check_value(value, params["properties"][arg], f"{where}.{name}.{arg}")
