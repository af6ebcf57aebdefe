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


# --- defects 1 and 2: loaders ---------------------------------------------------------------

GOOD_XLAM = {"id": 1, "query": "Set a timer for 40 minutes.",
             "tools": json.dumps([{"name": "set_timer", "description": "Start a timer.",
                                   "parameters": {"minutes": {"type": "int"}}}]),
             "answers": json.dumps([{"name": "set_timer", "arguments": {"minutes": 40}}])}
DEEP = "[" * 5000 + "]" * 5000


def _toolace_row(*assistant_turns: str) -> dict:
    tools = json.dumps([{"name": "set_timer", "description": "Start a timer.",
                         "parameters": {"type": "dict", "properties": {
                             "minutes": {"type": "integer"}}, "required": ["minutes"]}}])
    conversations = []
    for index, turn in enumerate(assistant_turns):
        conversations += [{"from": "user", "value": f"Request {index}: a timer for 40 minutes."},
                          {"from": "assistant", "value": turn}]
        if turn.startswith("[set_timer(minutes=40)]"):
            conversations.append({"from": "tool", "value": '{"ok": true}'})
    return {"system": "Functions you may call:\n" + tools, "conversations": conversations}


def _prepare(tmp_path, source: str, rows: list, name: str = "rows.jsonl"):
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.data.pipeline import prepare

    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    report = prepare(source, path, tmp_path / "out", contamination=False, dedup=False,
                     val_fraction=0.0)
    kept = list(read_jsonl(tmp_path / "out" / "train.jsonl"))
    drops = [json.loads(line) for line in (tmp_path / "out" / "dropped.jsonl").open()]
    return report, kept, drops


@pytest.mark.parametrize("field", ["answers", "tools"])
def test_issue22_deeply_nested_xlam_field_is_one_drop(tmp_path, field):
    bad = dict(GOOD_XLAM, id=2, **{field: DEEP})
    report, kept, drops = _prepare(tmp_path, "xlam", [GOOD_XLAM, bad, dict(GOOD_XLAM, id=3)])
    assert [e.id for e in kept] == ["xlam-1", "xlam-3"]
    assert [(d["input_row"], d["reason"], d["field"]) for d in drops] == [
        ("rows.jsonl:2", "bad_json", field)]
    assert "nested deeper than" in drops[0]["message"]


def test_issue22_deeply_nested_toolace_tool_list_is_one_drop(tmp_path):
    good = _toolace_row("[set_timer(minutes=40)]")
    bad = dict(good, system="Functions you may call:\n" + DEEP)
    report, kept, drops = _prepare(tmp_path, "toolace", [bad, good])
    assert [e.meta["row"] for e in kept] == ["rows.jsonl:2"]
    assert [(d["input_row"], d["reason"], d["field"]) for d in drops] == [
        ("rows.jsonl:1", "bad_json", "system")]


def test_issue22_deeply_nested_row_is_one_drop(tmp_path):
    deep_row = '{"query": "x", "tools": ' + DEEP + ', "answers": "[]"}'
    report, kept, drops = _prepare(tmp_path, "xlam", [deep_row, GOOD_XLAM])
    assert len(kept) == 1 and [d["reason"] for d in drops] == ["bad_json"]


@pytest.mark.parametrize("truncated", ["[set_timer(minutes=40", "[set_timer(", "[set_timer",
                                       "[", "[set_timer(minutes=40)", "set_timer(minutes=40",
                                       '[set_timer(minutes="40)]', "[set_timer(minutes=40)] ok",
                                       '{"name": "set_timer"', ""])
def test_issue22_malformed_toolace_call_is_a_drop_never_a_no_call_label(tmp_path, truncated):
    report, kept, drops = _prepare(tmp_path, "toolace", [_toolace_row(truncated)])
    assert kept == [] and report.kinds == {}
    assert [d["reason"] for d in drops] == ["bad_call"]


def test_issue22_malformed_later_call_keeps_earlier_steps_only(tmp_path):
    row = _toolace_row("[set_timer(minutes=40)]", "[set_timer(minutes=40", "Sure, done.")
    report, kept, drops = _prepare(tmp_path, "toolace", [row])
    assert [(e.ground_truth, e.meta["step"]) for e in kept] == [
        ([{"name": "set_timer", "arguments": {"minutes": 40}}], 0)]
    assert [(d["row"], d["reason"]) for d in drops] == [("rows.jsonl:1 (later steps)", "bad_call")]


def test_prose_toolace_reply_is_still_a_no_call_example(tmp_path):
    report, kept, drops = _prepare(tmp_path, "toolace", [_toolace_row(
        "I cannot set timers, sorry (no such tool).")])
    assert [e.ground_truth for e in kept] == [[]] and drops == []


def test_is_call_attempt_is_the_one_definition():
    from toolrl_lib.data.pycalls import is_call_attempt

    for text in ["[f(a=1)]", " [f(a=1", "[", "{\"name\": 1}", "get_weather(city='x')",
                 "pkg.f(", "Sure <tool_call>{}</tool_call>"]:
        assert is_call_attempt(text), text
    for text in ["Sure, here it is.", "Paris (France) is sunny.", "", "Note: f (x) = 1"]:
        assert not is_call_attempt(text), text


@pytest.mark.parametrize("line", [
    '{"query": "a", "query": "b", "tools": "[]", "answers": "[]"}',  # duplicate key
    '{"query": NaN, "tools": "[]", "answers": "[]"}', '[1, 2]', '"text"', "{\"query\": \"\\ud800\"}",
    '{"query": "x", "tools": "[{\\"name\\": \\"\\\\ud800\\"}]", "answers": "[]"}',
])
def test_hostile_lines_cost_one_row_each(tmp_path, line):
    report, kept, drops = _prepare(tmp_path, "xlam", [GOOD_XLAM, line, dict(GOOD_XLAM, id=3)])
    assert len(kept) == 2 and [d["input_row"] for d in drops] == ["rows.jsonl:2"]


def test_line_separator_inside_a_string_does_not_split_the_row(tmp_path):
    row = dict(GOOD_XLAM, query="Set a timer\u2028for 40 minutes\x85now.")
    (tmp_path / "rows.jsonl").write_text("\ufeff" + json.dumps(row, ensure_ascii=False) + "\n"
                                         + json.dumps(GOOD_XLAM) + "\n", encoding="utf-8")
    from toolrl_lib.data.pipeline import prepare

    report = prepare("xlam", tmp_path / "rows.jsonl", tmp_path / "out", contamination=False,
                     dedup=False)
    assert report.kept == 2 and report.dropped == {}


def test_json_array_file_with_a_bad_element_keeps_the_others(tmp_path):
    from toolrl_lib.data.readers import iter_records

    path = tmp_path / "rows.json"
    path.write_text("[\n" + json.dumps(GOOD_XLAM) + ",\n" + DEEP + ",\n{\"a\": NaN},\n"
                    + json.dumps(GOOD_XLAM) + "\n]\n")
    records = [r for _, r in iter_records(path)]
    assert [isinstance(r, dict) for r in records] == [True, False, False, True]


def test_bfcl_entry_without_answer_is_not_a_no_call_label():
    from toolrl_lib.data.bfcl_source import bfcl_row_to_example
    from toolrl_lib.data.errors import RowError

    entry = {"id": "exec_simple_9", "question": [[{"role": "user", "content": "Timer, 40 min"}]],
             "function": [{"name": "set_timer", "parameters": {"type": "dict", "properties": {}}}]}
    with pytest.raises(RowError, match="no possible answer"):
        bfcl_row_to_example(entry, "exec_simple", None)
    with pytest.raises(RowError) as info:
        bfcl_row_to_example(dict(entry, question=[[["user"]]]), "exec_simple", ["f(a=1)"])
    assert info.value.reason == "missing_field"


@pytest.mark.parametrize("truth", [
    '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "g"',
    'Here: <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "f", "arguments": {}} trailing\n</tool_call>', "[f(a=1",
])
def test_partly_readable_parquet_ground_truth_is_a_drop(truth):
    from toolrl_lib.data.errors import RowError
    from toolrl_lib.data.parquet import parse_ground_truth

    with pytest.raises(RowError):
        parse_ground_truth(truth)


def test_real_parquet_file_with_hostile_values(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.fixtures.hostile import good_rows
    from toolrl_lib.data.pipeline import prepare

    (good, gold), (other, _) = good_rows("parquet", 2, seed=5)
    bad = json.loads(json.dumps(other))
    bad["reward_model"]["ground_truth"] = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": NaN}}"
    bad["prompt"][-1]["content"] += "\x00\u2028"
    rows = [dict(good, score=float("nan")), dict(bad, score=1.0)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    report = prepare("parquet", tmp_path / "rows.parquet", tmp_path / "out", contamination=False,
                     dedup=False, val_fraction=0.0)
    assert report.kept == 1 and report.dropped == {"bad_call": 1}
