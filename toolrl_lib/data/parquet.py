"""verl / ToolRL-style rows (usually parquet) <-> ``Example``.

A row is ``{"prompt": [chat messages], "reward_model": {"ground_truth": ...}, "extra_info"}``.
The tools are taken from a ``tools`` column (or ``extra_info.tools``) when present, else from
the JSON embedded in the system message. The ground truth may be a list of calls, a JSON
string, ``<tool_call>{json}</tool_call>`` blocks (one call per line inside) or a pythonic list.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolrl_lib.data.errors import RowError, id_part
from toolrl_lib.data.example import Example
from toolrl_lib.data.pycalls import looks_like_call_list, parse_call_list
from toolrl_lib.data.schema import normalize_tool

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _json_objects(text: str) -> list[Any]:
    """Every top-level JSON value that starts with ``{`` or ``[`` in a text."""
    decoder, found, index = json.JSONDecoder(), [], 0
    while True:
        starts = [i for i in (text.find("{", index), text.find("[", index)) if i != -1]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
            found.append(value)
            index = end
        except json.JSONDecodeError:
            index = start + 1


def tools_from_text(text: str) -> list[dict[str, Any]]:
    """Tool dicts (with a name and parameters) embedded anywhere in a system prompt."""
    tools = []
    for value in _json_objects(text):
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and item.get("type") == "function" and "function" in item:
                item = item["function"]
            if isinstance(item, dict) and "name" in item and "parameters" in item:
                tools.append(item)
    return tools


def parse_ground_truth(value: Any, where: str = "reward_model.ground_truth") -> list[dict[str, Any]]:
    """Any of the accepted ground-truth encodings -> list of ``{"name", "arguments"}``."""
    if isinstance(value, str):
        text = value.strip()
        blocks = _TOOL_CALL.findall(text)
        if blocks:
            value = [v for block in blocks for v in _json_objects(block)]
        elif looks_like_call_list(text):
            return parse_call_list(text, where)
        elif not text:
            value = []
        else:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise RowError("bad_json", where, f"not JSON or <tool_call> blocks ({error.msg})") from error
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise RowError("bad_json", where, "expected a list of calls")
    calls = []
    for index, call in enumerate(value):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise RowError("bad_call", f"{where}[{index}]", "a call needs 'name' and 'arguments'")
        arguments = call.get("arguments", call.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as error:
                raise RowError("bad_json", f"{where}[{index}].arguments", error.msg) from error
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
            raw_tools = json.loads(raw_tools)
        except json.JSONDecodeError as error:
            raise RowError("bad_json", "tools", error.msg) from error
    system = "\n".join(str(m.get("content", "")) for m in prompt
                       if isinstance(m, dict) and m.get("role") == "system")
    if not raw_tools:
        raw_tools = tools_from_text(system)
    if not raw_tools:
        raise RowError("no_tools", "prompt", "no tools column and no tool JSON in the system message")
    tools = [normalize_tool(t, f"tools[{i}]") for i, t in enumerate(raw_tools)]
    messages = [{"role": str(m.get("role")), "content": str(m.get("content", ""))}
                for m in prompt if isinstance(m, dict) and m.get("role") != "system"]
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
