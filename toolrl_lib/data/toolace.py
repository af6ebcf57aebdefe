"""Team-ACE/ToolACE dialogues <-> ``Example``.

A row is ``{"system": str, "conversations": [{"from": "user"|"assistant"|"tool", "value"}]}``.
The tool list is JSON embedded in the system text; assistant calls are pythonic
(``[Func Name(a=1)]``, parsed in ``pycalls``). A dialogue becomes one example per assistant
step that makes calls (plus, optionally, per prose reply that directly answers a user turn:
a "no call" example), with the earlier turns, calls and tool results kept in ``messages``.
"""

from __future__ import annotations

import json
from typing import Any

from toolrl_lib.data.errors import RowError, id_part
from toolrl_lib.data.example import Example
from toolrl_lib.data.pycalls import format_call_list, is_call_attempt, parse_call_list
from toolrl_lib.data.schema import normalize_tool
from toolrl_lib.parsing import ParseRefused, iter_embedded_json

HUB_ID = "Team-ACE/ToolACE"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant",
          "tool": "tool", "function": "tool", "observation": "tool", "system": "system"}

SYSTEM_TEMPLATE = (
    "You are an expert in composing functions. You are given a question and a set of possible "
    "functions. Based on the question, you will need to make one or more function/tool calls "
    "to achieve the purpose. If none of the function can be used, point it out.\n"
    "Here is a list of functions in JSON format that you can invoke:\n{tools}. \n"
    "Should you decide to return the function call(s), put them in the format of "
    "[func1(params_name=params_value, params_name2=params_value2...), func2(params)]\n"
    "NO other text MUST be included."
)


def extract_tools(system: str) -> list[dict[str, Any]]:
    """The first JSON list of objects with a ``name`` inside the system text (bounded: a tool
    list nested too deep, or bracket soup, is a ``bad_json`` RowError, never a crash)."""
    try:
        for value in iter_embedded_json(system):
            if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v
                                                         for v in value):
                return value
    except ParseRefused as error:
        raise RowError("bad_json", "system", f"tool list: {error}") from error
    raise RowError("bad_json", "system", "no JSON tool list found in the system text")


def toolace_row_to_examples(row: dict[str, Any], label: str | int, no_call_steps: bool = True,
                            errors: list[RowError] | None = None) -> list[Example]:
    """One dialogue -> examples, one per assistant decision (see module docstring).

    An assistant turn that tries to call (``pycalls.is_call_attempt``) must parse as calls;
    one that does not, or an empty assistant turn, is a bad turn, never a "no call" example.
    A bad turn raises RowError — unless ``errors`` is given and earlier steps already
    produced examples: then the error is appended there and those earlier examples are
    returned (later steps depend on the broken turn and are not used)."""
    if not isinstance(row.get("system"), str) or not isinstance(row.get("conversations"), list):
        raise RowError("missing_field", "system" if "system" not in row else "conversations",
                       "ToolACE rows need 'system' (text) and 'conversations' (list)")
    tools = [normalize_tool(t, f"tools[{i}]") for i, t in enumerate(extract_tools(row["system"]))]
    history: list[dict[str, Any]] = []
    examples: list[Example] = []
    previous = ""
    for turn_index, turn in enumerate(row["conversations"]):
        where = f"conversations[{turn_index}]"
        if not isinstance(turn, dict):
            raise RowError("missing_field", where, "a turn must be an object {from, value}")
        role = _ROLES.get(str(turn.get("from", turn.get("role", ""))).lower())
        text = turn.get("value", turn.get("content"))
        if role is None or not isinstance(text, str):
            raise RowError("missing_field", where, f"unknown turn {str(turn)[:80]!r}")
        if role == "assistant" and (not text.strip() or is_call_attempt(text)):
            try:
                if not text.strip():
                    raise RowError("bad_call", f"{where}.value",
                                   "empty assistant turn (neither calls nor an answer)")
                calls = parse_call_list(text, f"{where}.value")
            except RowError as error:
                if errors is None or not examples:
                    raise
                errors.append(error)
                return examples
            examples.append(_example(label, len(examples), history, tools, calls, turn_index))
            history.append({"role": "assistant", "content": "", "tool_calls": calls})
        elif role == "assistant":
            if no_call_steps and previous == "user":
                examples.append(_example(label, len(examples), history, tools, [], turn_index))
            history.append({"role": "assistant", "content": text})
        else:
            history.append({"role": role, "content": text})
        previous = role
    if not examples:
        raise RowError("unsupported", "conversations", "no assistant step to learn from")
    return examples


def _example(label: str | int, step: int, history: list[dict[str, Any]],
             tools: list[dict[str, Any]], calls: list[dict[str, Any]], turn: int) -> Example:
    messages = [dict(m) for m in history]
    if not any(m["role"] == "user" and m["content"].strip() for m in messages):
        raise RowError("empty_query", f"conversations[{turn}]", "no user turn before this step")
    return Example(id=f"toolace-{id_part(label)}-{step}", source="toolace", messages=messages,
                   tools=tools, ground_truth=calls,
                   meta={"row": str(label), "group": f"toolace-{id_part(label)}", "step": step,
                         "turn": turn})


def _toolace_property(prop: dict[str, Any]) -> dict[str, Any]:
    out = dict(prop)
    out["type"] = {"object": "dict", "number": "float"}.get(prop["type"], prop["type"])
    if "items" in prop:
        out["items"] = _toolace_property(prop["items"])
    if "properties" in prop:
        out["properties"] = {k: _toolace_property(v) for k, v in prop["properties"].items()}
    return out


def tool_to_toolace(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool["parameters"]
    return {"name": tool["name"], "description": tool["description"],
            "parameters": {"type": "dict",
                           "properties": {k: _toolace_property(v)
                                          for k, v in params["properties"].items()},
                           "required": list(params.get("required", []))},
            "required": None}


def example_to_toolace(example: Example, refusal: str | None = None) -> dict[str, Any]:
    """The raw ToolACE row for a single-step example (synthetic generator, samples)."""
    tools_json = json.dumps([tool_to_toolace(t) for t in example.tools], ensure_ascii=False)
    conversations = [{"from": m["role"], "value": m["content"]} for m in example.messages
                     if m["role"] in ("user", "assistant", "tool")]
    if example.ground_truth:
        answer = format_call_list(example.ground_truth)
    else:
        answer = refusal or "None of the available functions can help with this request."
    conversations.append({"from": "assistant", "value": answer})
    return {"system": SYSTEM_TEMPLATE.format(tools=tools_json), "conversations": conversations}
