"""BFCL v4 data, read straight from the ``bfcl-eval`` package files (never imported here).

``bfcl-eval`` pins versions that clash with ours, so in this venv it is installed as a data
package only; its JSON-lines files are located through ``importlib.metadata``. The scorer
itself runs in its own venv (``toolrl_lib.evaluate.scorer``).

BFCL function docs use their own type names (``dict``, ``float``, ``tuple``, ``any``, Java's
``String``/``HashMap``...); ``bfcl_entry_to_example`` maps them to JSON Schema and adds the
same language hints BFCL shows to models, so what our prompt adapters render matches what
BFCL's own handlers would send.
"""

from __future__ import annotations

import ast
import copy
import json
import os
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from toolrl_lib.data.example import Example, infer_kind
from toolrl_lib.parsing import ParseRefused, literal_value, parse_python_expression

BFCL_PACKAGE = "bfcl-eval"
BFCL_VERSION = "2026.3.23"
PREFIX = "BFCL_v4"

NON_LIVE: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
LIVE: tuple[str, ...] = (
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
MULTI_TURN: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
MEMORY: tuple[str, ...] = ("memory_kv", "memory_vector", "memory_rec_sum")
WEB_SEARCH: tuple[str, ...] = ("web_search_base", "web_search_no_snippet")

# Everything scored offline here: BFCL v4's single-turn categories.
SCORED_SINGLE_TURN: tuple[str, ...] = NON_LIVE + LIVE
# All categories BFCL v4 scores (multi-turn and agentic are not run by this project).
SCORED_CATEGORIES: tuple[str, ...] = SCORED_SINGLE_TURN + MULTI_TURN + MEMORY + WEB_SEARCH
# Shipped in data/unused_datasets/ but not part of the v4 score.
UNSCORED_CATEGORIES: tuple[str, ...] = (
    "exec_simple",
    "exec_multiple",
    "exec_parallel",
    "exec_parallel_multiple",
    "rest",
    "sql",
    "chatable",
    "multi_turn_composite",
)
# Categories without a possible_answer file: correct = no call (irrelevance) or any call.
NO_ANSWER_CATEGORIES: tuple[str, ...] = ("irrelevance", "live_irrelevance", "live_relevance")

# BFCL function-doc type -> JSON Schema type (same table as BFCL's GORILLA_TO_OPENAPI).
TYPE_MAP: dict[str, str] = {
    "integer": "integer", "number": "number", "float": "number", "double": "number",
    "string": "string", "String": "string", "char": "string", "any": "string", "Any": "string",
    "boolean": "boolean", "Boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "ArrayList": "array", "Array": "array",
    "Queue": "array", "Stack": "array",
    "dict": "object", "object": "object", "HashMap": "object", "Hashtable": "object",
    "byte": "integer", "short": "integer", "long": "integer", "Bigint": "integer",
}  # fmt: skip


def bfcl_data_dir() -> Path:
    """The ``bfcl_eval/data`` folder: ``$TOOLRL_BFCL_DATA`` or the installed package's."""
    env = os.environ.get("TOOLRL_BFCL_DATA")
    if env:
        return Path(env).expanduser()
    return _package_data_dir()


@cache
def _package_data_dir() -> Path:
    hint = f"install it with: pip install --no-deps {BFCL_PACKAGE}=={BFCL_VERSION}"
    try:
        files = metadata.files(BFCL_PACKAGE) or []
    except metadata.PackageNotFoundError as error:
        raise FileNotFoundError(f"BFCL data needs the package {BFCL_PACKAGE!r}; {hint}") from error
    for entry in files:
        if entry.name == f"{PREFIX}_simple_python.json" and entry.parent.name == "data":
            return Path(entry.locate()).parent
    raise FileNotFoundError(f"{BFCL_PACKAGE} is installed but its data files are missing; {hint}")


def check_category(category: str) -> str:
    """Return ``category`` if it has a question file here; else a ValueError naming it."""
    if category in SCORED_SINGLE_TURN or category in MULTI_TURN or category in UNSCORED_CATEGORIES:
        return category
    if category in MEMORY or category in WEB_SEARCH:
        raise ValueError(
            f"BFCL category {category!r} is agentic (memory/web search): it needs tools or "
            "services this project does not run; use a single-turn category"
        )
    raise ValueError(
        f"unknown BFCL category {category!r}; known: {', '.join(SCORED_SINGLE_TURN + MULTI_TURN)}"
        f" (unscored: {', '.join(UNSCORED_CATEGORIES)})"
    )


def question_path(category: str) -> Path:
    check_category(category)
    base = bfcl_data_dir()
    if category in UNSCORED_CATEGORIES:
        return base / "unused_datasets" / "question" / f"{PREFIX}_{category}.json"
    return base / f"{PREFIX}_{category}.json"


def answer_path(category: str) -> Path:
    check_category(category)
    base = bfcl_data_dir()
    if category in UNSCORED_CATEGORIES:
        return base / "unused_datasets" / "possible_answer" / f"{PREFIX}_{category}.json"
    return base / "possible_answer" / f"{PREFIX}_{category}.json"


def _read_json_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON: {error}") from error
    return rows


def load_bfcl_entries(category: str) -> list[dict[str, Any]]:
    """The raw BFCL entries (``id``, ``question``, ``function``, ...) of one category.

    Entries without an id (the unscored ``chatable`` set) get ``<category>_<index>``.
    """
    rows = _read_json_lines(question_path(category))
    for index, row in enumerate(rows):
        row.setdefault("id", f"{category}_{index}")
    return rows


def load_possible_answers(category: str) -> dict[str, list[Any]]:
    """``id -> ground_truth`` (BFCL's possible answers); ``{}`` for categories without any."""
    path = answer_path(category)
    if not path.is_file():
        return {}
    return {row["id"]: row["ground_truth"] for row in _read_json_lines(path)}


def language_of(category: str) -> str:
    if "javascript" in category:
        return "javascript"
    if "java" in category:
        return "java"
    return "python"


def bfcl_function_to_schema(function: dict[str, Any], category: str = "simple_python") -> dict:
    """One BFCL function doc -> ``{"name", "description", "parameters": JSON Schema}``.

    Adds BFCL's language hint to the description; for Java/JavaScript every parameter
    becomes a string (BFCL expects source-code literals there), as BFCL's own pre-processing
    does.
    """
    function = copy.deepcopy(function)
    language = language_of(category)
    hint = {
        "java": " Note that the provided function is in Java 8 SDK syntax.",
        "javascript": " Note that the provided function is in JavaScript syntax.",
        "python": " Note that the provided function is in Python 3 syntax.",
    }[language]
    params = function.get("parameters") or {}
    properties = params.get("properties") or {}
    if language in ("java", "javascript"):
        properties = {k: _stringify_param(v, language) for k, v in properties.items()}
    schema = {
        "type": "object",
        "properties": {k: _to_json_schema(v) for k, v in properties.items()},
        "required": list(params.get("required") or []),
    }
    return {
        "name": function["name"],
        "description": str(function.get("description", "")) + hint,
        "parameters": schema,
    }


def _stringify_param(value: dict[str, Any], language: str) -> dict[str, Any]:
    value = dict(value)
    kind = value.get("type", "any")
    lang = "Java" if language == "java" else "JavaScript"
    desc = str(value.get("description", ""))
    if kind == "any":
        desc += f" This parameter can be of any type of {lang} object in string representation."
    else:
        desc += f" This is {lang} {kind} type parameter in string representation."
    if kind in ("ArrayList", "Array", "array") and "items" in value:
        item_type = value["items"].get("type", "any")
        desc += f" The list elements are of type {item_type}; they are not in string representation."
        value.pop("items")
    if language == "javascript" and kind == "dict" and "properties" in value:
        desc += (
            " The dictionary entries have the following schema; they are not in string"
            f" representation. {json.dumps(value['properties'])}"
        )
        value.pop("properties")
    value["description"] = desc
    value["type"] = "string"
    return value


def _to_json_schema(value: dict[str, Any]) -> dict[str, Any]:
    """Map BFCL's type names recursively (unknown or missing types become string)."""
    out = {k: v for k, v in value.items() if k not in ("type", "properties", "items")}
    kind = value.get("type")
    mapped = TYPE_MAP.get(kind, "string") if isinstance(kind, str) else "string"
    out["type"] = mapped
    if kind == "float" and "description" in out:
        out["description"] = str(out["description"]) + " This is a float type value."
    if isinstance(value.get("properties"), dict):
        out["properties"] = {k: _to_json_schema(v) for k, v in value["properties"].items()}
    if isinstance(value.get("items"), dict):
        out["items"] = _to_json_schema(value["items"])
    return out


def bfcl_answer_to_calls(
    answer: Any, required: dict[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """BFCL possible answers -> our calls (one accepted choice per argument).

    Scored sets: ``[{name: {arg: [accepted, ...]}}]``; the first accepted value is taken and
    arguments whose first accepted value is ``""`` (BFCL's "may be omitted") are dropped,
    unless ``required`` (function name -> required parameters) lists them: then the first
    non-empty accepted value is used (BFCL's data sometimes marks required ones omissible).
    Unscored exec sets: pythonic call strings, parsed with ``ast`` (literals and numeric
    arithmetic only). Anything else (multi-turn call lists, REST results) is a ValueError.
    """
    if answer is None:
        return []
    if not isinstance(answer, list):
        raise ValueError(f"possible answer is a {type(answer).__name__}, not a list of calls")
    calls = []
    for item in answer:
        if isinstance(item, str):
            parsed = parse_pythonic_call(item)
            if parsed is None:
                raise ValueError(f"cannot parse call string {item[:80]!r}")
            calls.append(parsed)
        elif isinstance(item, dict):
            for name, args in item.items():
                if not isinstance(args, dict | None):
                    raise ValueError(f"arguments of {str(name)[:40]!r} are a "
                                     f"{type(args).__name__}, not an object")
                chosen = {}
                must = set((required or {}).get(name, ()))
                for arg, accepted in (args or {}).items():
                    value = _first_accepted(accepted)
                    if value == "" and arg in must and isinstance(accepted, list):
                        value = next((_resolve_nested(v) for v in accepted if v != ""), "")
                    if value != "":
                        chosen[arg] = value
                calls.append({"name": name, "arguments": chosen})
        else:
            raise ValueError(f"possible answer item is a {type(item).__name__}, not a call")
    return calls


def parse_pythonic_call(text: str) -> dict[str, Any] | None:
    """``"mod.f(a=1, b='x')"`` -> ``{"name": "mod.f", "arguments": {...}}``; None if not that.

    Reads JSON-like literals (and numeric arithmetic such as ``1/6``) with the bounded
    parsers of ``toolrl_lib.parsing``; never evaluates code. Positional arguments are refused
    (their parameter names are unknown).
    """
    if not isinstance(text, str):
        return None
    try:
        node = parse_python_expression(text.strip())
    except ParseRefused:
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _dotted_name(node.func)
    if name is None:
        return None
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        try:
            arguments[keyword.arg] = literal_value(keyword.value, arithmetic=True)
        except ParseRefused:
            return None
    return {"name": name, "arguments": arguments}


def _dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def required_params(functions: list[Any]) -> dict[str, list[str]]:
    """Function name -> its required parameter names (from raw BFCL function docs)."""
    return {
        f["name"]: list((f.get("parameters") or {}).get("required") or [])
        for f in functions
        if isinstance(f, dict) and "name" in f
    }


def _first_accepted(accepted: Any) -> Any:
    """The first accepted value, with nested possible answers resolved the same way.

    Inside an accepted value, a dict maps each key to its own list of accepted values
    (``{"x": [60.2], "y": [12.3]}``), also when the dict sits in a list.
    """
    value = accepted[0] if isinstance(accepted, list) and accepted else accepted
    if isinstance(accepted, list) and not accepted:
        return ""  # BFCL data with no accepted value at all
    return _resolve_nested(value)


def _resolve_nested(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, accepted in value.items():
            chosen = _first_accepted(accepted)
            if chosen != "":
                out[key] = chosen
        return out
    if isinstance(value, list):
        return [_resolve_nested(v) if isinstance(v, dict) else v for v in value]
    return value


def bfcl_entry_to_example(
    entry: dict[str, Any], category: str, answer: list[Any] | None = None
) -> Example:
    """A BFCL entry -> ``Example`` (first turn's messages; tools as JSON Schema).

    ``ground_truth`` is one accepted choice of BFCL's possible answer (``[]`` when there is
    none, as in irrelevance); the raw possible answer is kept in ``meta["possible_answer"]``.
    """
    if "id" not in entry or "question" not in entry:
        raise ValueError(f"BFCL entry lacks 'id'/'question'; keys: {sorted(entry)}")
    turns = entry["question"]
    if isinstance(turns, str):  # the unscored ``chatable`` set
        turns = [[{"role": "user", "content": turns}]]
    first = turns[0] if turns and isinstance(turns[0], list) else turns
    messages = [{"role": m["role"], "content": str(m.get("content", ""))} for m in first]
    functions = entry.get("function") or []
    tools = [bfcl_function_to_schema(f, category) for f in functions if isinstance(f, dict)]
    multi_turn = category.startswith("multi_turn")
    try:
        calls = [] if multi_turn else bfcl_answer_to_calls(answer, required_params(functions))
    except ValueError as error:
        raise ValueError(f"BFCL {category} entry {entry['id']}: {error}") from error
    kind = "multi_turn" if multi_turn else infer_kind(calls, tools)
    return Example(
        id=str(entry["id"]),
        source="bfcl",
        messages=messages,
        tools=tools,
        ground_truth=calls,
        kind=kind,
        meta={
            "category": category,
            "possible_answer": answer,
            "turns": len(turns),
            # live_relevance has no answer file: any call is correct there, so an empty
            # ground_truth must not be read as "no call".
            "any_call_correct": category == "live_relevance",
        },
    )


def load_bfcl_examples(
    category: str, limit: int | None = None, skip_unconvertible: bool = False
) -> list[Example]:
    """Entries of ``category`` as Examples, in file order (first ``limit`` when given).

    An entry whose possible answer cannot be expressed as calls (REST results, positional
    pythonic calls) is a ValueError naming it, or is skipped with ``skip_unconvertible``.
    """
    entries = load_bfcl_entries(category)
    if limit is not None:
        entries = entries[:limit]
    answers = load_possible_answers(category)
    examples = []
    for entry in entries:
        try:
            examples.append(bfcl_entry_to_example(entry, category, answers.get(entry["id"])))
        except ValueError:
            if not skip_unconvertible:
                raise
    return examples
