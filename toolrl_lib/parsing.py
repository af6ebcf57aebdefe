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

Data files are untrusted too, so the loaders (xLAM, ToolACE, BFCL, parquet) parse every JSON
value and every pythonic call through the same door, with looser caps (``DATA_LIMITS``,
``SOURCE_LIMITS``): ``load_json``, ``iter_embedded_json``, ``parse_python_expression`` and
``literal_value`` raise ``ParseRefused`` (a ValueError saying why) instead of recursing,
allocating or looping without bound.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_CHARS = 131_072  # longer completions are cut here and marked invalid
MAX_CALLS = 32  # more calls than this in one completion is invalid (and not decoded)
MAX_DEPTH = 32  # deeper nesting inside arguments is invalid
MAX_NAME_CHARS = 256
MAX_CONTAINERS = 512  # more '{' + '[' than this in what is left to decode is invalid
MAX_ITEMS = 2048  # more ',' + ':' than this (members/elements) is invalid



@dataclass(frozen=True)
class Limits:
    """What one parse may cost: characters read, nesting depth and (completions only) a cheap
    count of brackets and separators that bounds the decoder's work before it starts."""

    max_chars: int
    max_depth: int
    max_containers: int | None = None
    max_items: int | None = None
    check_surrogates: bool = False  # data is written back as UTF-8: lone surrogates cannot be


COMPLETION_LIMITS = Limits(MAX_CHARS, MAX_DEPTH, MAX_CONTAINERS, MAX_ITEMS)
# Raw data rows and their JSON fields: real tool lists nest < 10 deep and rows stay well under
# a megabyte; beyond these a row is refused (dropped with the reason), never half-read.
DATA_LIMITS = Limits(max_chars=4_000_000, max_depth=64, check_surrogates=True)
# Python source of one pythonic call list: ``ast`` needs ~100x the text in memory.
SOURCE_LIMITS = Limits(max_chars=100_000, max_depth=64, check_surrogates=True)
MAX_EMBEDDED_FAILURES = 256  # bracket positions tried in vain before giving up on a text


class ParseRefused(ValueError):
    """Bounded parsing said no; ``fatal`` = a cap was hit (not merely a syntax error)."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


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
        refused: the text was not read at all (not a string, or longer than MAX_CHARS): no
            calls are decoded and every reward scheme gives its minimum.
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    valid: bool = True
    reasoning: str | None = None
    error: str | None = None
    content: str = ""
    refused: bool = False

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


def decode_json_prefix(text: str, start: int = 0, limits: Limits = COMPLETION_LIMITS
                       ) -> tuple[Any, int, str | None]:
    """Decode one strict JSON value at ``text[start:]`` (after whitespace).

    Returns ``(value, end, error)``; on failure ``value`` is None and ``error`` says why.
    Strict = no NaN/Infinity constants, no duplicate keys, nesting ≤ ``limits.max_depth``;
    for completions also at most MAX_CONTAINERS objects/arrays and MAX_ITEMS separators
    (counted over the rest of the text, quotes included: a cheap C-level bound on decoding
    work for hostile input).
    """
    value, end, error, _ = _decode(text, start, limits)
    return value, end, error


_DEPTH_ERROR = "JSON nested deeper than {}"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _decode(text: str, start: int, limits: Limits) -> tuple[Any, int, str | None, bool]:
    """``decode_json_prefix`` plus whether the failure was a cap (``fatal``)."""
    start = skip_space(text, start)
    if len(text) - start > limits.max_chars:
        return None, start, f"JSON text longer than {limits.max_chars} characters", True
    if limits.max_containers is not None and (
            text.count("{", start) + text.count("[", start) > limits.max_containers):
        return None, start, f"more than {limits.max_containers} JSON objects/arrays", True
    if limits.max_items is not None and (
            text.count(",", start) + text.count(":", start) > limits.max_items):
        return None, start, f"more than {limits.max_items} JSON members/elements", True
    try:
        value, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        return None, start, _DEPTH_ERROR.format(limits.max_depth), True
    except _JSONRejected as error:
        return None, start, f"invalid JSON: {error}", False
    except (ValueError, MemoryError, OverflowError) as error:
        return None, start, f"invalid JSON: {str(error)[:80]}", False
    if (isinstance(value, dict | list) and _may_be_deep(text, start, end, limits.max_depth)
            and too_deep(value, limits.max_depth)):
        return None, start, _DEPTH_ERROR.format(limits.max_depth), True
    if limits.check_surrogates and _SURROGATE_ESCAPE.search(text, start, end) and \
            has_lone_surrogate(value):
        return None, start, "invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff)", False
    return value, end, None, False


def load_json(text: str, limits: Limits = DATA_LIMITS) -> Any:
    """The whole ``text`` as one strict JSON value (see ``decode_json_prefix``), else
    ``ParseRefused`` saying why: the one JSON reader of the data loaders."""
    value, end, error, fatal = _decode(text, 0, limits)
    if error:
        raise ParseRefused(error, fatal)
    if skip_space(text, end) != len(text):
        raise ParseRefused(f"invalid JSON: extra text after the value (char {end})")
    return value


def iter_embedded_json(text: str, limits: Limits = DATA_LIMITS,
                       max_failures: int = MAX_EMBEDDED_FAILURES) -> Iterator[Any]:
    """Every top-level JSON object/array inside prose (a system prompt holding a tool list).

    Tries each ``{``/``[`` in turn; a cap hit (depth, size) raises ``ParseRefused`` at once, and
    so do more than ``max_failures`` positions that do not start a value (bounds the work on
    bracket soup, which would otherwise cost one decode attempt per bracket).
    """
    if len(text) > limits.max_chars:
        raise ParseRefused(f"text longer than {limits.max_chars} characters", True)
    index, failures = 0, 0
    while True:
        starts = [i for i in (text.find("{", index), text.find("[", index)) if i != -1]
        if not starts:
            return
        start = min(starts)
        value, end, error, fatal = _decode(text, start, limits)
        if error is None:
            yield value
            index = end
            continue
        if fatal:
            raise ParseRefused(error, True)
        failures += 1
        if failures > max_failures:
            raise ParseRefused(f"no JSON value at {max_failures} brackets in a row; gave up", True)
        index = start + 1


def has_lone_surrogate(value: Any) -> bool:
    """A string (or key) with a lone UTF-16 surrogate: cannot be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):
        return True
    return False


def parse_python_expression(source: str, limits: Limits = SOURCE_LIMITS) -> ast.expr:
    """``ast.parse(source, mode="eval").body`` that raises only ``ParseRefused``.

    ``ast`` itself raises MemoryError (long unary chains), RecursionError (long operator
    chains), ValueError (NUL bytes) and SyntaxError (nesting > 200, > 4300-digit ints); all of
    them mean "not a readable call" here. Nothing is ever evaluated.
    """
    if len(source) > limits.max_chars:
        raise ParseRefused(f"source longer than {limits.max_chars} characters", True)
    try:
        return ast.parse(source, mode="eval").body
    except SyntaxError as error:
        raise ParseRefused(f"does not parse: {error.msg}") from error
    except (MemoryError, RecursionError) as error:
        raise ParseRefused(f"too deeply nested to parse ({type(error).__name__})", True) from error
    except ValueError as error:
        raise ParseRefused(f"does not parse: {str(error)[:80]}") from error


_BIN_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
            ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def literal_value(node: ast.AST, names: dict[str, Any] | None = None, arithmetic: bool = False,
                  limits: Limits = SOURCE_LIMITS, depth: int = 0) -> Any:
    """A JSON value from a Python literal node, or ``ParseRefused``.

    Lists/tuples/sets become lists, dicts need string keys, numbers must be finite, strings
    valid Unicode; ``names`` maps bare names (``true``, ``null``) to values; ``arithmetic``
    allows ``+ - * / // %`` between numbers (BFCL answers write ``p=1/6``). Depth is capped,
    so the recursion is bounded whatever the source.
    """
    if depth > limits.max_depth:
        raise ParseRefused(f"value nested deeper than {limits.max_depth}", True)
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | int | str):
            if isinstance(value, str) and limits.check_surrogates:
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise ParseRefused("a string holds a lone surrogate") from error
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ParseRefused("non-finite number")
            return value
        raise ParseRefused(f"{type(value).__name__} is not a JSON value")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = literal_value(node.operand, names, arithmetic, limits, depth + 1)
        if not _is_number(operand):
            raise ParseRefused("sign on a non-number")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Name) and names is not None and node.id.lower() in names:
        return names[node.id.lower()]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [literal_value(e, names, arithmetic, limits, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            key = None if key_node is None else literal_value(key_node, names, arithmetic,
                                                              limits, depth + 1)
            if not isinstance(key, str):
                raise ParseRefused("dict keys must be strings")
            out[key] = literal_value(value_node, names, arithmetic, limits, depth + 1)
        return out
    if arithmetic and isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        left = literal_value(node.left, names, arithmetic, limits, depth + 1)
        right = literal_value(node.right, names, arithmetic, limits, depth + 1)
        if not (_is_number(left) and _is_number(right)):
            raise ParseRefused("arithmetic on non-numbers")
        try:
            result = _BIN_OPS[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError) as error:
            raise ParseRefused(f"arithmetic fails: {error}") from error
        if isinstance(result, float) and not math.isfinite(result):
            raise ParseRefused("non-finite number")
        return result
    raise ParseRefused(f"{type(node).__name__} is not a literal")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _may_be_deep(text: str, start: int, end: int, limit: int = MAX_DEPTH) -> bool:
    """Cheap pre-check: fewer opening brackets than the limit cannot nest that deep."""
    return text.count("{", start, end) + text.count("[", start, end) > limit


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
    """Common first step: refuse what is not a string or is over the cap, drop end markers.

    A refused completion comes back as ``("", result)`` with ``result.refused``: reading a
    prefix of it would give credit for text the scorer never looked at."""
    result = ParseResult()
    if not isinstance(text, str):
        result.refused = True
        return "", result.fail("completion is not a string")
    if len(text) > MAX_CHARS:
        result.refused = True
        return "", result.fail(f"completion longer than {MAX_CHARS} characters")
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
