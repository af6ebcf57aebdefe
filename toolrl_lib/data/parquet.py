"""verl / ToolRL-style rows (usually parquet) <-> ``Example``.

A row is ``{"prompt": [chat messages], "reward_model": {"ground_truth": ...}, "extra_info"}``.
The tools are taken from a ``tools`` column (or ``extra_info.tools``) when present, else from
the JSON embedded in the system message. The ground truth may be a list of calls, a JSON
string, ``<tool_call>{json}</tool_call>`` blocks (one call per line inside) or a pythonic list.
Every text is read by the bounded parsers of ``toolrl_lib.parsing``; a ground truth that is
partly readable (a truncated block, text between blocks) is a bad call, never a shorter label.
"""

from __future__ import annotations

import json
from typing import Any

from toolrl_lib.data.errors import RowError, id_part
from toolrl_lib.data.example import Example
from toolrl_lib.data.pycalls import is_call_attempt, parse_call_list
from toolrl_lib.data.schema import normalize_tool
from toolrl_lib.parsing import (
    DATA_LIMITS,
    ParseRefused,
    decode_json_prefix,
    iter_embedded_json,
    load_json,
    skip_space,
)

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_ROLES = ("system", "user", "assistant", "tool")


def tools_from_text(text: str) -> list[dict[str, Any]]:
    """Tool dicts (with a name and parameters) embedded anywhere in a system prompt."""
    tools = []
    try:
        values = list(iter_embedded_json(text))
    except ParseRefused as error:
        raise RowError("bad_json", "prompt", f"system message: {error}") from error
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and item.get("type") == "function" and "function" in item:
                item = item["function"]
            if isinstance(item, dict) and "name" in item and "parameters" in item:
                tools.append(item)
    return tools


def _tool_call_blocks(text: str, where: str) -> list[Any]:
    """The JSON values of ``<tool_call>…</tool_call>`` blocks; the text must be blocks and
    whitespace only, and each block JSON values and whitespace only (else bad_call)."""
    values: list[Any] = []
    pos = skip_space(text, 0)
    while pos < len(text):
        if not text.startswith(_OPEN, pos):
            raise RowError("bad_call", where, f"text outside <tool_call> blocks at char {pos}")
        close = text.find(_CLOSE, pos)
        if close == -1:
            raise RowError("bad_call", where, "unterminated <tool_call> block")
        body, cursor = text[pos + len(_OPEN):close], 0
        while (cursor := skip_space(body, cursor)) < len(body):
            value, cursor, error = decode_json_prefix(body, cursor, DATA_LIMITS)
            if error:
                raise RowError("bad_call", where, f"<tool_call> block {len(values) + 1}: {error}")
            values.append(value)
        pos = skip_space(text, close + len(_CLOSE))
    return values


def parse_ground_truth(value: Any, where: str = "reward_model.ground_truth") -> list[dict[str, Any]]:
    """Any of the accepted ground-truth encodings -> list of ``{"name", "arguments"}``."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) > DATA_LIMITS.max_chars:
            raise RowError("bad_json", where, f"longer than {DATA_LIMITS.max_chars} characters")
        if not text:
            value = []
        elif _OPEN in text or _CLOSE in text:
            value = _tool_call_blocks(text, where)
        else:
            try:
                value = load_json(text)
            except ParseRefused as error:
                if not error.fatal and is_call_attempt(text) and not text.startswith("{"):
                    return parse_call_list(text, where)  # pythonic: [f(a=1)]
                raise RowError("bad_json", where, f"not JSON, pythonic calls or <tool_call> "
                               f"blocks ({error})") from error
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise RowError("bad_json", where, "expected a list of calls")
    value = [item for entry in value for item in (entry if isinstance(entry, list) else [entry])]
    calls = []
    for index, call in enumerate(value):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise RowError("bad_call", f"{where}[{index}]", "a call needs 'name' and 'arguments'")
        arguments = call.get("arguments", call.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = load_json(arguments)
            except ParseRefused as error:
                raise RowError("bad_json", f"{where}[{index}].arguments", str(error)) from error
        if not isinstance(arguments, dict):
            raise RowError("bad_call", f"{where}[{index}].arguments", "arguments must be an object")
        calls.append({"name": call["name"], "arguments": arguments})
    return calls


def parquet_row_to_example(row: dict[str, Any], label: str | int) -> Example:
    """One verl/ToolRL row -> Example."""
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, list) or not prompt:
        raise RowError("missing_field", "prompt", "expected a non-empty list of chat messages")
    reward_model = row.get("reward_model") or {}
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise RowError("missing_field", "reward_model.ground_truth", "no ground truth in the row")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    raw_tools = row.get("tools") or extra.get("tools")
    if isinstance(raw_tools, str):
        try:
            raw_tools = load_json(raw_tools)
        except ParseRefused as error:
            raise RowError("bad_json", "tools", str(error)) from error
    for index, message in enumerate(prompt):
        if not (isinstance(message, dict) and message.get("role") in _ROLES
                and isinstance(message.get("content", ""), str | None)):
            raise RowError("missing_field", f"prompt[{index}]",
                           f"a message needs a role in {list(_ROLES)} and text content")
    system = "\n".join(m.get("content") or "" for m in prompt if m["role"] == "system")
    if not raw_tools:
        raw_tools = tools_from_text(system)
    if not raw_tools:
        raise RowError("no_tools", "prompt", "no tools column and no tool JSON in the system message")
    if not isinstance(raw_tools, list):
        raw_tools = [raw_tools]
    tools = [normalize_tool(t, f"tools[{i}]") for i, t in enumerate(raw_tools)]
    messages = [{"role": m["role"], "content": m.get("content") or ""}
                for m in prompt if m["role"] != "system"]
    if not any(m["role"] == "user" and m["content"].strip() for m in messages):
        raise RowError("empty_query", "prompt", "no user message")
    calls = parse_ground_truth(reward_model["ground_truth"])
    index = extra.get("index", label)
    return Example(id=f"parquet-{id_part(index)}",
                   source="parquet", messages=messages, tools=tools, ground_truth=calls,
                   meta={"row": str(label), "data_source": str(row.get("data_source", ""))})


def example_to_parquet_row(example: Example, index: int) -> dict[str, Any]:
    """A verl-style row (Hermes-like system prompt with the tools, ``<tool_call>`` truth)."""
    tools = "\n".join(json.dumps(t, ensure_ascii=False) for t in example.tools)
    system = f"You may call these tools:\n<tools>\n{tools}\n</tools>"
    truth = "\n".join(f"<tool_call>\n{json.dumps(c, ensure_ascii=False)}\n</tool_call>"
                      for c in example.ground_truth)
    return {"data_source": "toolrl_synthetic",
            "prompt": [{"role": "system", "content": system}, *example.messages],
            "ability": "tool_call",
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": "train", "index": index}}
