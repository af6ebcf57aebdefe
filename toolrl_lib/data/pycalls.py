"""Parse pythonic call lists like ``[f(a=1, b="x"), Market Trends API(country="us")]``.

ToolACE and BFCL's executable sets write calls as Python source, but ToolACE function names
may contain spaces and punctuation, so the text is not valid Python as a whole. We split
the calls at top-level commas, cut each name off at its first top-level ``(``, and parse
only the argument list with ``ast`` — values must be JSON-like literals (never ``eval``),
read through the bounded ``toolrl_lib.parsing`` helpers (size and depth caps).

``is_call_attempt`` is the one definition of "this assistant turn tries to make calls": a
turn that tries and does not parse is a bad call (dropped), never a prose (no-call) turn.
"""

from __future__ import annotations

import ast
import keyword
import re
from typing import Any

from toolrl_lib.data.errors import RowError
from toolrl_lib.parsing import SOURCE_LIMITS, ParseRefused, literal_value, parse_python_expression

_OPEN, _CLOSE = "([{", ")]}"
_NAME_LITERALS = {"true": True, "false": False, "null": None, "none": None}
# Argument names that are Python keywords (``from="USD"``) are legal in tool schemas but not
# in Python source; they are renamed for parsing and restored afterwards.
_KEYWORD_ARG = re.compile(r"(^|[,(]\s*)(" + "|".join(keyword.kwlist) + r")(\s*=(?!=))")
_ESCAPE = "__kw_"


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    """Split at ``separator`` outside brackets and string literals."""
    parts, depth, quote, start, index = [], 0, "", 0, 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
        index += 1
    if quote or depth != 0:
        raise ValueError("unbalanced brackets or quotes")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _mask_strings(text: str) -> str:
    """``text`` with every character inside a string literal replaced by a space."""
    out, quote, index = list(text), "", 0
    while index < len(text):
        char = text[index]
        if quote:
            out[index] = " "
            if char == "\\" and index + 1 < len(text):
                out[index + 1] = " "
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        index += 1
    return "".join(out)


def _escape_keyword_args(inner: str) -> tuple[str, str, int]:
    """Prefix argument names that are Python keywords (``from=``) outside string literals.

    Returns the new text, the prefix (one that occurs nowhere in ``inner``) and the count."""
    prefix = _ESCAPE
    while prefix in inner:
        prefix += "_"
    starts = [m.start(2) for m in _KEYWORD_ARG.finditer(_mask_strings(inner))]
    for start in reversed(starts):
        inner = inner[:start] + prefix + inner[start:]
    return inner, prefix, len(starts)


def parse_call(text: str, where: str = "call") -> dict[str, Any]:
    """``name(a=1, b='x')`` -> ``{"name": "name", "arguments": {"a": 1, "b": "x"}}``."""
    text = text.strip()
    cut = _first_top_level_paren(text)
    if cut <= 0 or not text.endswith(")"):
        raise RowError("bad_call", where, f"not a call `name(args)`: {text[:80]!r}")
    name, inner = text[:cut].strip(), text[cut + 1 : -1]
    prefix, renamed = _ESCAPE, 0  # keyword-named arguments renamed so that ``ast`` accepts them
    try:
        node = parse_python_expression(f"_f({inner})")
    except ParseRefused as error:
        if error.fatal:
            raise RowError("bad_call", where, f"arguments of {name!r}: {error}") from error
        try:
            escaped, prefix, renamed = _escape_keyword_args(inner)
            node = parse_python_expression(f"_f({escaped})")
        except ParseRefused:
            raise RowError("bad_call", where,
                           f"arguments of {name!r} do not parse: {error}") from error
    if not isinstance(node, ast.Call) or node.args:
        raise RowError("bad_call", where, f"{name!r} has positional arguments; keywords expected")
    arguments, restored = {}, 0
    for item in node.keywords:
        if item.arg is None:
            raise RowError("bad_call", where, f"{name!r} uses **kwargs")
        arg = item.arg
        if renamed and arg.startswith(prefix) and keyword.iskeyword(arg[len(prefix):]):
            arg, restored = arg[len(prefix):], restored + 1
        if arg in arguments:
            raise RowError("bad_call", f"{where}.{arg}", f"argument {arg!r} given twice")
        try:
            arguments[arg] = literal_value(item.value, names=_NAME_LITERALS)
        except ParseRefused as error:
            raise RowError("bad_call", f"{where}.{arg}",
                           f"value of {arg!r} is not a literal ({error})") from error
    if restored != renamed:  # the renaming also touched text inside a value: refuse, not corrupt
        raise RowError("bad_call", where, f"arguments of {name!r} do not parse")
    return {"name": name, "arguments": arguments}


def _first_top_level_paren(text: str) -> int:
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            return index
    return -1


def parse_call_list(text: str, where: str = "calls") -> list[dict[str, Any]]:
    """``[f(a=1), g(b=2)]`` (brackets optional) -> list of calls; RowError(bad_call) if not."""
    if len(text) > SOURCE_LIMITS.max_chars:
        raise RowError("bad_call", where, f"call text longer than {SOURCE_LIMITS.max_chars} "
                       "characters")
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    try:
        pieces = _split_top_level(body)
    except ValueError as error:
        raise RowError("bad_call", where, f"{error}: {text[:80]!r}") from error
    return [parse_call(piece, f"{where}[{i}]") for i, piece in enumerate(pieces)]


_BARE_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\(")


def is_call_attempt(text: str) -> bool:
    """Does this assistant turn try to make calls (so that it must parse as calls)?

    Yes when it starts with ``[`` (ToolACE's call-list format, also truncated: ``[set_timer(``),
    with ``{`` (a JSON call), with ``name(`` (a bare pythonic call), or holds a
    ``<tool_call>`` tag. Prose never starts that way; a prose turn that did would only cost
    its example (dropped as a bad call), whereas the opposite mistake would turn a broken
    call into a "no call is correct" label.
    """
    body = text.lstrip()
    if body[:1] in ("[", "{"):
        return True
    return _BARE_CALL.match(body) is not None or "<tool_call>" in body


def looks_like_call_list(text: str) -> bool:
    """Kept for callers that ask the old question; the same as ``is_call_attempt``."""
    return is_call_attempt(text)


def format_call_list(calls: list[dict[str, Any]]) -> str:
    """The inverse of ``parse_call_list`` (used to emit ToolACE-style rows)."""
    rendered = []
    for call in calls:
        args = ", ".join(f"{key}={value!r}" for key, value in call["arguments"].items())
        rendered.append(f"{call['name']}({args})")
    return "[" + ", ".join(rendered) + "]"
