"""Prompt/format adapters: how each model family sees tools and writes tool calls.

An adapter is a pair that must agree: *render* (an ``Example`` → chat messages / prompt
text with the tools included) and *parse* (completion text → calls). The property tests
check ``parse(render_completion(calls)).calls == calls`` for every family.

Families (``FAMILIES``):

* ``qwen3`` — Qwen3's own chat template with ``tools=`` (tools in the system turn inside
  ``<tools></tools>``); calls are ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>``
  blocks, one call per block; optional leading ``<think>…</think>``; thinking on/off via
  ``enable_thinking``. With a tokenizer whose template ignores ``tools=`` the adapter
  writes the same system block itself (and, thinking off, the empty think block Qwen3
  puts in the prompt), so it works with any tokenizer.
* ``hermes`` — ChatML models whose template ignores ``tools=`` (e.g. SmolLM2): a Hermes-style
  system prompt with the tools in ``<tools></tools>``; same ``<tool_call>`` output.
* ``llama3`` — Llama-3.1 JSON calls ``{"name": …, "parameters": {…}}`` (several calls: one
  object per line; an optional ``<|python_tag|>`` prefix is accepted).
* ``mistral`` — ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]``.

Format validity (``ParseResult.valid``) is strict: an optional leading think block, then
either only call syntax (plus whitespace), or plain text with no call syntax at all (a
"no call" answer). Calls are still recovered from an invalid completion where possible,
so a reward can give name/argument credit separately from format credit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.parsing import (
    MAX_CALLS,
    ParseResult,
    decode_call_sequence,
    decode_json_prefix,
    prepare,
    skip_space,
    split_reasoning,
    to_call,
)

NO_CALL_TEXT = "None of the available functions can be used to answer this request."
QWEN3_EMPTY_THINK = "<think>\n\n</think>\n\n"
THINKING_INSTRUCTION = (
    "First think step by step inside <think></think> tags, then give your answer."
)


# Markers that must not appear raw inside rendered JSON (they would end a block early);
# inside JSON strings they are written with equivalent escapes instead.
_JSON_ESCAPES = (
    ("</tool_call>", "<\\/tool_call>"),
    ("<tool_call>", "\\u003ctool_call>"),
    ("</think>", "<\\/think>"),
    ("<think>", "\\u003cthink>"),
)


def _dumps(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if "<" in text:
        for raw, escaped in _JSON_ESCAPES:
            text = text.replace(raw, escaped)
    return text


def _function_entries(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools in the OpenAI/HF ``{"type": "function", "function": …}`` wrapping."""
    return [{"type": "function", "function": tool} for tool in tools]


def chat_template_text(tokenizer: Any) -> str:
    """The tokenizer's chat template as one string ('' when it has none)."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        return "\n".join(str(v) for v in template.values())
    return str(template or "")


def template_handles_tools(tokenizer: Any) -> bool:
    """Does the template read a ``tools`` variable? (SmolLM2's plain ChatML does not.)"""
    return "tools" in chat_template_text(tokenizer)


@dataclass(frozen=True)
class FormatAdapter:
    """Base adapter: subclasses define the tool block, the call syntax and the parser."""

    family: str = ""
    # True: use the tokenizer's own ``tools=`` support when its template has it.
    native_tools: bool = False

    # -- rendering ---------------------------------------------------------------------
    def tools_block(self, tools: list[dict[str, Any]], enable_thinking: bool = False) -> str:
        raise NotImplementedError

    def render_completion(
        self, calls: list[dict[str, Any]], reasoning: str | None = None, content: str | None = None
    ) -> str:
        """The assistant text for ``calls`` in this family's format, without end-of-turn.

        No calls → ``content`` (default ``NO_CALL_TEXT``) as a plain answer.
        """
        head = f"<think>\n{reasoning.strip()}\n</think>\n\n" if reasoning else ""
        if not calls:
            return head + (content if content is not None else NO_CALL_TEXT)
        return head + self.format_calls(calls)

    def format_calls(self, calls: list[dict[str, Any]]) -> str:
        raise NotImplementedError

    def tool_result_message(self, content: str) -> dict[str, str]:
        return {"role": "tool", "content": content}

    def render_messages(self, example: Example, enable_thinking: bool = False) -> list[dict[str, Any]]:
        """Chat messages with the tools written into the system prompt (for templates
        that ignore ``tools=``); earlier assistant calls become text in this format."""
        system_parts = [
            str(m.get("content") or "") for m in example.messages if m.get("role") == "system"
        ]
        if example.tools:
            system_parts.append(self.tools_block(example.tools, enable_thinking))
        elif enable_thinking and self.family != "qwen3":
            system_parts.append(THINKING_INSTRUCTION)
        system = "\n\n".join(part for part in system_parts if part)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for message in example.messages:
            role = message.get("role")
            if role == "system":
                continue
            if role == "assistant":
                calls = message.get("tool_calls") or []
                text = str(message.get("content") or "")
                if calls:
                    text = self.format_calls([_plain_call(c) for c in calls])
                messages.append({"role": "assistant", "content": text})
            elif role == "tool":
                messages.append(self.tool_result_message(str(message.get("content") or "")))
            else:
                messages.append({"role": str(role), "content": str(message.get("content") or "")})
        return messages

    def native_messages(self, example: Example) -> list[dict[str, Any]]:
        """Messages for a template that renders tools and tool calls itself."""
        messages: list[dict[str, Any]] = []
        call_index = 0
        for message in example.messages:
            out = {"role": message.get("role"), "content": str(message.get("content") or "")}
            if message.get("role") == "assistant" and message.get("tool_calls"):
                out["tool_calls"] = []
                for call in message["tool_calls"]:
                    plain = _plain_call(call)
                    out["tool_calls"].append(
                        {"id": f"call{call_index:05d}", "type": "function", "function": plain}
                    )
                    call_index += 1
            if message.get("role") == "tool":
                out["tool_call_id"] = f"call{max(call_index - 1, 0):05d}"
            messages.append(out)
        return messages

    def render_prompt(self, example: Example, tokenizer: Any, enable_thinking: bool = False) -> str:
        """Full prompt text ending with the assistant generation prompt."""
        extra = {"enable_thinking": enable_thinking}
        if self.native_tools and example.tools and template_handles_tools(tokenizer):
            try:
                return tokenizer.apply_chat_template(
                    self.native_messages(example),
                    tools=_function_entries(example.tools),
                    add_generation_prompt=True,
                    tokenize=False,
                    **extra,
                )
            except Exception:  # noqa: BLE001 - a template that rejects our messages: own block
                pass
        text = tokenizer.apply_chat_template(
            self.render_messages(example, enable_thinking),
            add_generation_prompt=True,
            tokenize=False,
            **extra,
        )
        return text + self.prompt_suffix(tokenizer, enable_thinking)

    def prompt_suffix(self, tokenizer: Any, enable_thinking: bool) -> str:
        return ""

    # -- parsing -----------------------------------------------------------------------
    def parse(self, text: str) -> ParseResult:
        """Completion → calls + validity. Never raises (hostile text → invalid result)."""
        try:
            body, result = prepare(text)
            if result.refused:  # not read at all: no calls, no content
                return result
            rest = split_reasoning(body, result)
            self.parse_calls(rest, result)
            return result
        except Exception as error:  # noqa: BLE001 - the contract is "never raises"
            return ParseResult(calls=[], valid=False, error=f"parser failure: {type(error).__name__}")

    def parse_calls(self, text: str, result: ParseResult) -> None:
        raise NotImplementedError


def _plain_call(call: dict[str, Any]) -> dict[str, Any]:
    """Accept both ``{"name", "arguments"}`` and HF ``{"function": {...}}`` call dicts."""
    inner = call.get("function", call) if isinstance(call, dict) else {}
    arguments = inner.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    return {"name": inner.get("name", ""), "arguments": arguments}


# ---------------------------------------------------------------------------------------
class _ToolCallTagAdapter(FormatAdapter):
    """``<tool_call>\\n{json}\\n</tool_call>`` blocks (Qwen3 and Hermes)."""

    OPEN, CLOSE = "<tool_call>", "</tool_call>"

    def format_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(
            f"{self.OPEN}\n{_dumps({'name': c['name'], 'arguments': c.get('arguments', {})})}\n{self.CLOSE}"
            for c in calls
        )

    def tool_result_message(self, content: str) -> dict[str, str]:
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}

    def parse_calls(self, text: str, result: ParseResult) -> None:
        first = text.find(self.OPEN)
        if first == -1:
            if self.CLOSE in text:
                result.fail(f"{self.CLOSE} without {self.OPEN}")
            result.content = text.strip()
            return
        if text[:first].strip():
            result.fail(f"text before the first {self.OPEN}")
            result.content = text[:first].strip()
        pos, blocks = first, 0
        while pos != -1:
            blocks += 1
            if blocks > MAX_CALLS:  # count blocks, not calls: failed blocks cost work too
                result.fail(f"more than {MAX_CALLS} calls")
                return
            start = pos + len(self.OPEN)
            close = text.find(self.CLOSE, start)
            if close == -1:
                result.fail(f"unterminated {self.OPEN}")
                self._decode_block(text, start, len(text), result)
                return
            self._decode_block(text, start, close, result)
            after = close + len(self.CLOSE)
            pos = text.find(self.OPEN, after)
            between = text[after : pos if pos != -1 else len(text)]
            if between.strip():
                result.fail(f"text after {self.CLOSE}")
                if self.CLOSE in between:
                    result.fail(f"{self.CLOSE} without {self.OPEN}")

    def _decode_block(self, text: str, start: int, end: int, result: ParseResult) -> None:
        body = text[start:end]
        value, stop, error = decode_json_prefix(body)
        if error:
            result.fail(f"tool call {len(result.calls) + 1}: {error}")
            return
        if skip_space(body, stop) != len(body):
            result.fail(f"tool call {len(result.calls) + 1}: extra text after the JSON object")
        call, problem = to_call(value)
        if problem:
            result.fail(f"tool call {len(result.calls) + 1}: {problem}")
        else:
            result.calls.append(call)


class Qwen3Adapter(_ToolCallTagAdapter):
    def tools_block(self, tools: list[dict[str, Any]], enable_thinking: bool = False) -> str:
        lines = "\n".join(_dumps(entry) for entry in _function_entries(tools))
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{lines}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )

    def prompt_suffix(self, tokenizer: Any, enable_thinking: bool) -> str:
        # Qwen3's template puts an empty think block in the prompt when thinking is off;
        # emulate it for templates that do not know ``enable_thinking``.
        if enable_thinking or "enable_thinking" in chat_template_text(tokenizer):
            return ""
        return QWEN3_EMPTY_THINK


class HermesAdapter(_ToolCallTagAdapter):
    def tools_block(self, tools: list[dict[str, Any]], enable_thinking: bool = False) -> str:
        lines = "\n".join(_dumps(entry) for entry in _function_entries(tools))
        think = (THINKING_INSTRUCTION + "\n") if enable_thinking else ""
        return (
            "You are a function calling AI model. You are provided with function signatures "
            f"within <tools></tools> XML tags:\n<tools>\n{lines}\n</tools>\n"
            f"{think}"
            "For each function call, return a JSON object with the function name and arguments "
            "within <tool_call></tool_call> XML tags, one call per block:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
            "If none of the functions fits the request, answer in plain text without <tool_call>."
        )


class Llama3Adapter(FormatAdapter):
    PYTHON_TAG = "<|python_tag|>"

    def tools_block(self, tools: list[dict[str, Any]], enable_thinking: bool = False) -> str:
        lines = "\n\n".join(_dumps(entry) for entry in _function_entries(tools))
        think = (THINKING_INSTRUCTION + "\n") if enable_thinking else ""
        return (
            "You have access to the following functions. To call a function, respond with a "
            'JSON object of the form {"name": function name, "parameters": dictionary of '
            "argument name and its value}. For several calls, write one JSON object per line. "
            "Do not use variables. If none of the functions fits, answer in plain text.\n"
            f"{think}\n{lines}"
        )

    def format_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(
            _dumps({"name": c["name"], "parameters": c.get("arguments", {})}) for c in calls
        )

    def tool_result_message(self, content: str) -> dict[str, str]:
        return {"role": "ipython", "content": content}

    def parse_calls(self, text: str, result: ParseResult) -> None:
        stripped = text.strip()
        if stripped.startswith(self.PYTHON_TAG):
            stripped = stripped[len(self.PYTHON_TAG) :].lstrip()
        key = stripped.find('"name"')
        if key == -1:
            result.content = stripped
            return
        if stripped[:1] in ("{", "["):
            start = 0
        else:  # prose, then a call: recover the call, but the format is invalid
            start = stripped.rfind("{", 0, key)
            if start == -1:  # a plain answer that happens to quote "name"
                result.content = stripped
                return
            before = stripped[:start].rstrip()
            if before.endswith("["):
                start = len(before) - 1
                before = before[:-1].rstrip()
            result.fail("text before the JSON call")
            result.content = before
        pos = decode_call_sequence(stripped, start, result, separators=";")
        if skip_space(stripped, pos) != len(stripped):
            result.fail("text after the JSON call")


class MistralAdapter(FormatAdapter):
    TAG, ARGS = "[TOOL_CALLS]", "[ARGS]"

    def tools_block(self, tools: list[dict[str, Any]], enable_thinking: bool = False) -> str:
        think = (THINKING_INSTRUCTION + "\n") if enable_thinking else ""
        return (
            f"[AVAILABLE_TOOLS]{_dumps(_function_entries(tools))}[/AVAILABLE_TOOLS]\n{think}"
            f"To call functions, reply with {self.TAG} followed by a JSON list of "
            '{"name": ..., "arguments": {...}} objects. If none of the functions fits, '
            "answer in plain text."
        )

    def format_calls(self, calls: list[dict[str, Any]]) -> str:
        body = [{"name": c["name"], "arguments": c.get("arguments", {})} for c in calls]
        return self.TAG + _dumps(body)

    def tool_result_message(self, content: str) -> dict[str, str]:
        return {"role": "tool", "content": f"[TOOL_RESULTS]{content}[/TOOL_RESULTS]"}

    def _parse_args_style(self, text: str, pos: int, result: ParseResult) -> None:
        """Newer Mistral tokenizers: ``[TOOL_CALLS]name[ARGS]{…}``, repeated per call."""
        blocks = 0
        while pos < len(text):
            blocks += 1
            if blocks > MAX_CALLS:
                result.fail(f"more than {MAX_CALLS} calls")
                return
            marker = text.find(self.ARGS, pos)
            if marker == -1:
                result.fail(f"{self.TAG} without {self.ARGS}")
                return
            name = text[pos:marker].strip()
            value, end, error = decode_json_prefix(text, marker + len(self.ARGS))
            if error:
                result.fail(error)
                return
            call, problem = to_call({"name": name, "arguments": value})
            if problem:
                result.fail(problem)
            else:
                result.calls.append(call)
            pos = skip_space(text, end)
            if text.startswith(self.TAG, pos):
                pos = skip_space(text, pos + len(self.TAG))
            elif pos < len(text):
                result.fail(f"text after the {self.TAG} call")
                return

    def parse_calls(self, text: str, result: ParseResult) -> None:
        tag = text.find(self.TAG)
        if tag == -1:
            result.content = text.strip()
            return
        if text[:tag].strip():
            result.fail(f"text before {self.TAG}")
            result.content = text[:tag].strip()
        start = tag + len(self.TAG)
        pos = skip_space(text, start)
        if text.find(self.ARGS, pos) != -1 and text[pos : pos + 1] not in ("[", "{"):
            self._parse_args_style(text, pos, result)
            return
        if pos >= len(text) or text[pos] not in "[{":
            result.fail(f"{self.TAG} not followed by JSON")
            return
        pos = decode_call_sequence(text, start, result, separators=",;", tag=self.TAG)
        if skip_space(text, pos) != len(text):
            result.fail(f"text after the {self.TAG} list")


FAMILY_REGISTRY: dict[str, FormatAdapter] = {}


def register_family(adapter: FormatAdapter) -> FormatAdapter:
    """Add a prompt family's adapter under its ``family`` name (``get_adapter`` finds it)."""
    FAMILY_REGISTRY[adapter.family] = adapter
    return adapter


register_family(Qwen3Adapter(family="qwen3", native_tools=True))
register_family(HermesAdapter(family="hermes", native_tools=False))
register_family(Llama3Adapter(family="llama3", native_tools=True))
register_family(MistralAdapter(family="mistral", native_tools=True))
FAMILIES = tuple(FAMILY_REGISTRY)  # the built-in families: qwen3, hermes, llama3, mistral


def get_adapter(family: str) -> FormatAdapter:
    """The adapter for a family name (one of ``FAMILIES``)."""
    try:
        return FAMILY_REGISTRY[family]
    except (KeyError, TypeError):
        raise ValueError(f"unknown prompt family {family!r}; expected one of {tuple(FAMILY_REGISTRY)}") from None


def detect_family(tokenizer: Any) -> str:
    """Guess the family from the chat template's markers (default ``hermes``)."""
    template = chat_template_text(tokenizer)
    if "[TOOL_CALLS]" in template or "[AVAILABLE_TOOLS]" in template or "[INST]" in template:
        return "mistral"
    if "<|start_header_id|>" in template or "<|python_tag|>" in template:
        return "llama3"
    if "<tool_call>" in template and "tools" in template:
        return "qwen3"
    return "hermes"


def parse_completion(text: str, family: str = "hermes") -> ParseResult:
    """Shortcut for ``get_adapter(family).parse(text)``."""
    return get_adapter(family).parse(text)


__all__ = [
    "FAMILIES",
    "NO_CALL_TEXT",
    "FormatAdapter",
    "ParseResult",
    "detect_family",
    "get_adapter",
    "parse_completion",
    "template_handles_tools",
    "to_call",
]
