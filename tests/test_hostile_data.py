"""Issue 22: hostile data never stops a job and never flips a label.

The three defects of the issue are pinned by ``test_issue22_*``; the bounded parsing they
rest on (``toolrl_lib.parsing``) is tested below them. The property-based fuzz of every
loader is in ``test_loader_fuzz.py``.
"""

from __future__ import annotations

import json

import pytest

from toolrl_lib.parsing import (
    DATA_LIMITS,
    MAX_CHARS,
    ParseRefused,
    iter_embedded_json,
    literal_value,
    load_json,
    parse_python_expression,
)
from toolrl_lib.rewards import SCHEMES, reward_range, score

TIMER_TOOL = {"name": "set_timer", "description": "Start a timer.",
              "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}},
                             "required": ["minutes"]}}


# --- defect 3: an over-long completion earns nothing ----------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("gold", [[], [{"name": "set_timer", "arguments": {"minutes": 40}}]])
def test_issue22_overlong_completion_gets_the_scheme_minimum(scheme, gold):
    overlong = "I will not call anything. " * (MAX_CHARS // 20)
    assert len(overlong) > MAX_CHARS
    result = score(overlong, gold, [TIMER_TOOL], scheme=scheme)
    assert result.total == reward_range(scheme)[0]
    assert (result.format, result.name, result.args, result.reasoning) == (0, 0, 0, 0)
    assert "longer than" in result.error
    # the same text at the cap is read normally (a no-call answer to a no-call example)
    if not gold:
        assert score(overlong[:MAX_CHARS], gold, [TIMER_TOOL], scheme=scheme).name == 1.0


@pytest.mark.parametrize("scheme", SCHEMES)
def test_issue22_non_text_completion_gets_the_scheme_minimum(scheme):
    result = score(None, [], [TIMER_TOOL], scheme=scheme)  # type: ignore[arg-type]
    assert result.total == reward_range(scheme)[0] and result.name == 0.0


def test_overlong_completion_decodes_no_calls():
    from toolrl_lib.prompts import parse_completion

    call = '<tool_call>\n{"name": "set_timer", "arguments": {"minutes": 40}}\n</tool_call>'
    parsed = parse_completion(call + " " * MAX_CHARS)
    assert parsed.refused and parsed.calls == [] and not parsed.valid


# --- bounded parsing ----------------------------------------------------------------------


def test_load_json_refuses_deep_nesting_without_recursing():
    with pytest.raises(ParseRefused, match="nested deeper") as info:
        load_json("[" * 5000 + "]" * 5000)
    assert info.value.fatal
    with pytest.raises(ParseRefused, match="nested deeper"):  # under the stack limit, over ours
        load_json("[" * 100 + "]" * 100)
    assert load_json("[" * 60 + "]" * 60) is not None


@pytest.mark.parametrize(("text", "match"), [
    ('{"a": NaN}', "NaN"), ('{"a": 1, "a": 2}', "duplicate key"), ('{"a": 1} x', "extra text"),
    ('"\\ud800"', "lone surrogate"), ('{"a": ', "invalid JSON"),
])
def test_load_json_is_strict(text, match):
    with pytest.raises(ParseRefused, match=match):
        load_json(text)
    assert load_json('"\\ud83d\\ude00"') == "\U0001F600"  # a surrogate *pair* is fine


def test_load_json_refuses_oversized_text():
    with pytest.raises(ParseRefused, match="longer than"):
        load_json('"' + "x" * DATA_LIMITS.max_chars + '"')


def test_embedded_json_is_bounded_on_bracket_soup():
    assert list(iter_embedded_json('Tools: [{"name": "f"}] and {"x": 1}.')) == [
        [{"name": "f"}], {"x": 1}]
    with pytest.raises(ParseRefused, match="gave up"):
        list(iter_embedded_json("{" * 100_000))
    with pytest.raises(ParseRefused, match="nested deeper"):
        list(iter_embedded_json("tools: " + "[" * 5000 + "]" * 5000))


@pytest.mark.parametrize("source", [
    "-" * 100_000 + "1", "1+" * 50_000 + "1", "9" * 5000, "[" * 300 + "]" * 300, "f(a='\x00')",
    "x" * 200_000,
])
def test_python_parse_raises_only_parse_refused(source):
    with pytest.raises(ParseRefused):
        literal_value(parse_python_expression(source), arithmetic=True)


@pytest.mark.parametrize("source", ["1j", "b'x'", "...", "{1: 2}", "1e999", "'\\ud800'",
                                    "[" * 80 + "]" * 80, "f(1)"])
def test_literal_value_accepts_json_values_only(source):
    with pytest.raises(ParseRefused):
        literal_value(parse_python_expression(source))


def test_literal_value_reads_json_like_literals():
    node = parse_python_expression("{'a': [1, -2.5, (3,)], 'b': true, 'c': None, 'd': 1/4}")
    value = literal_value(node, names={"true": True}, arithmetic=True)
    assert value == {"a": [1, -2.5, [3]], "b": True, "c": None, "d": 0.25}
    json.dumps(value)
