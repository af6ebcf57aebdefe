"""Bounded, never-raising building blocks for reading tool calls out of model text.

Completions are untrusted: during RL the policy will emit anything — megabyte strings,
JSON nested thousands deep, thousands of ``<tool_call>`` blocks, ``NaN``, duplicate keys.
Everything here therefore

* caps the work: at most ``MAX_CHARS`` characters are looked at, at most ``MAX_CALLS``
  calls are decoded, nested values deeper than ``MAX_DEPTH`` are rejected;
* scans with ``str.find`` and ``json.JSONDecoder.raw_decode`` only (linear time, no
  backtracking regular expressions, nothing is ever ``eval``-ed);
* reports problems as data (an error string), never as an exception.

The family-specific grammars (where the calls sit in the text) live in ``toolrl_lib.prompts``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_CHARS = 131_072  # longer completions are cut here and marked invalid
MAX_CALLS = 32  # more calls than this in one completion is invalid (and not decoded)
MAX_DEPTH = 32  # deeper nesting inside arguments is invalid
MAX_NAME_CHARS = 256
MAX_CONTAINERS = 512  # more '{' + '[' than this in what is left to decode is invalid
MAX_ITEMS = 2048  # more ',' + ':' than this (members/elements) is invalid

# End-of-turn markers that decoders sometimes leave at the end of a completion.
END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|endoftext|>", "<|end|>")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass
class ParseResult:
    """What a completion contains.

    Attributes:
        calls: decoded calls ``{"name": str, "arguments": dict}``, in order (also those
            recovered from a completion whose format is otherwise invalid).
        valid: the whole completion follows the family's format exactly.
        reasoning: the text of a leading ``<think>…</think>`` block (stripped), or None.
        error: why the format is invalid (first problem found), or None.
        content: the text outside reasoning and calls (a plain-text answer), stripped.
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    valid: bool = True
    reasoning: str | None = None
    error: str | None = None
    content: str = ""

    def fail(self, error: str) -> ParseResult:
        """Mark invalid, keeping the first error (the most useful one)."""
        if self.valid:
            self.valid, self.error = False, error
        return self


class _JSONRejected(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _JSONRejected(f"non-standard JSON constant {name}")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _JSONRejected(f"duplicate key {duplicate[:40]!r}")
    return result


# Only hooks that run per object or on a bad constant: per-number hooks would cost a Python
# call for every number (a 64 KB list of numbers would take milliseconds). Python's own int
# parser refuses absurdly long integers; infinite floats (``1e999``) are legal JSON and simply
# never match a gold value.
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def decode_json_prefix(text: str, start: int = 0) -> tuple[Any, int, str | None]:
    """Decode one strict JSON value at ``text[start:]`` (after whitespace).

    Returns ``(value, end, error)``; on failure ``value`` is None and ``error`` says why.
    Strict = no NaN/Infinity constants, no duplicate keys, nesting ≤ MAX_DEPTH, at most
    MAX_CONTAINERS objects/arrays and MAX_ITEMS separators (counted over the rest of the
    text, quotes included: a cheap C-level bound on decoding work for hostile input).
    """
    start = skip_space(text, start)
    if text.count("{", start) + text.count("[", start) > MAX_CONTAINERS:
        return None, start, f"more than {MAX_CONTAINERS} JSON objects/arrays"
    if text.count(",", start) + text.count(":", start) > MAX_ITEMS:
        return None, start, f"more than {MAX_ITEMS} JSON members/elements"
    try:
        value, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        return None, start, "JSON nested too deeply"
    except _JSONRejected as error:
        return None, start, f"invalid JSON: {error}"
    except (ValueError, MemoryError, OverflowError) as error:
        return None, start, f"invalid JSON: {str(error)[:80]}"
    if isinstance(value, dict | list) and _may_be_deep(text, start, end) and too_deep(value):
        return None, start, f"JSON nested deeper than {MAX_DEPTH}"
    return value, end, None


def _may_be_deep(text: str, start: int, end: int) -> bool:
    """Cheap pre-check: fewer opening brackets than the limit cannot nest that deep."""
    return text.count("{", start, end) + text.count("[", start, end) > MAX_DEPTH


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Iterative depth check (no recursion, so no stack overflow on hostile input)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_SPACE = re.compile(r"[ \t\r\n]*")


def skip_space(text: str, pos: int) -> int:
    """Index of the first non-JSON-whitespace character at or after ``pos``."""
    return _SPACE.match(text, pos).end()


def strip_end_markers(text: str) -> str:
    text = text.rstrip()
    changed = True
    while changed:
        changed = False
        for marker in END_MARKERS:
            if text.endswith(marker):
                text = text[: -len(marker)].rstrip()
                changed = True
    return text


def to_call(obj: Any, argument_keys: tuple[str, ...] = ("arguments", "parameters")) -> tuple[dict | None, str | None]:
    """Normalise one decoded object into ``{"name", "arguments"}`` or explain why not.

    ``arguments`` given as a JSON string (some models do this) is decoded; ``null`` or
    a missing key means no arguments.
    """
    if not isinstance(obj, dict):
        return None, f"a call must be a JSON object, got {type(obj).__name__}"
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, "a call needs a non-empty string 'name'"
    if len(name) > MAX_NAME_CHARS:
        return None, f"function name longer than {MAX_NAME_CHARS} characters"
    arguments: Any = None
    for key in argument_keys:
        if key in obj:
            arguments = obj[key]
            break
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        decoded, end, error = decode_json_prefix(arguments)
        if error or skip_space(arguments, end) != len(arguments):
            return None, "'arguments' is a string that is not a JSON object"
        arguments = decoded
    if not isinstance(arguments, dict):
        return None, f"'arguments' must be an object, got {type(arguments).__name__}"
    return {"name": name.strip(), "arguments": arguments}, None


def split_reasoning(text: str, result: ParseResult) -> str:
    """Take a leading ``<think>…</think>`` off ``text``; return the rest.

    Also accepts a completion that starts inside the reasoning (templates that open
    ``<think>`` in the prompt): text up to the first ``</think>`` is then the reasoning.
    A second or unterminated think block makes the format invalid. (Index arithmetic
    and ``str.find`` only: every scan is linear and none is repeated.)
    """
    start = skip_space(text, 0)
    if text.startswith(THINK_OPEN, start):
        close = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        if close == -1:  # no reasoning credit for a block that never ends
            result.fail("unterminated <think> block")
            return ""
        result.reasoning = text[start + len(THINK_OPEN) : close].strip()
    else:
        close = text.find(THINK_CLOSE, start)
        if close == -1:
            if text.find(THINK_OPEN, start) != -1:
                result.fail("<think> block not at the start")
            return text[start:]
        if text.find(THINK_OPEN, start, close) != -1:  # "text <think>…</think>": no credit
            result.fail("<think> block not at the start")
        else:
            result.reasoning = text[start:close].strip()
    rest = close + len(THINK_CLOSE)
    if text.find(THINK_OPEN, rest) != -1 or text.find(THINK_CLOSE, rest) != -1:
        result.fail("more than one <think> block")
    return text[rest:]


def prepare(text: Any) -> tuple[str, ParseResult]:
    """Common first step: coerce to str, cap the size, drop end markers."""
    result = ParseResult()
    if not isinstance(text, str):
        text = "" if text is None else str(text)
        result.fail("completion is not a string")
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        result.fail(f"completion longer than {MAX_CHARS} characters")
    return strip_end_markers(text), result


def decode_call_sequence(
    text: str, pos: int, result: ParseResult, separators: str = ";,", tag: str | None = None
) -> int:
    """Decode JSON calls (objects, or lists of objects) one after another from ``pos``.

    Between values only whitespace, one of ``separators`` or the repeated ``tag`` may
    appear. Stops at the first thing that is not a call; returns the position reached.
    """
    end = len(text)
    while True:
        pos = skip_space(text, pos)
        if tag and text.startswith(tag, pos):
            pos = skip_space(text, pos + len(tag))
        if pos >= end or text[pos] not in "{[":
            return pos
        value, new_pos, error = decode_json_prefix(text, pos)
        if error:
            result.fail(error)
            return pos
        items = value if isinstance(value, list) else [value]
        for item in items:
            if len(result.calls) >= MAX_CALLS:
                result.fail(f"more than {MAX_CALLS} calls")
                return end
            call, problem = to_call(item)
            if problem:
                result.fail(problem)
            else:
                result.calls.append(call)
        pos = skip_space(text, new_pos)
        if pos < end and text[pos] in separators:
            pos += 1
