"""Loaders (xLAM, ToolACE, verl parquet, BFCL) on our own sample rows, and schema conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrl_lib.data.errors import RowError
from toolrl_lib.data.parquet import parquet_row_to_example, parse_ground_truth
from toolrl_lib.data.pycalls import format_call_list, parse_call_list
from toolrl_lib.data.readers import iter_records
from toolrl_lib.data.schema import normalize_tool, parse_type_string
from toolrl_lib.data.toolace import extract_tools, toolace_row_to_examples
from toolrl_lib.data.xlam import xlam_row_to_example

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def _rows(name: str) -> list[dict]:
    return [record for _, record in iter_records(SAMPLE / name)]


@pytest.mark.parametrize(
    ("text", "schema", "optional"),
    [
        ("str", {"type": "string"}, False),
        ("int, optional", {"type": "integer"}, True),
        ("bool, optional", {"type": "boolean"}, True),
        ("float", {"type": "number"}, False),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}, False),
        ("List[str], optional", {"type": "array", "items": {"type": "string"}}, True),
        ("List[Dict[str, Any]]", {"type": "array", "items": {"type": "object"}}, False),
        ("Dict[str, int]", {"type": "object"}, False),
        ("Optional[int]", {"type": "integer"}, True),
        ("Tuple[float, float]", {"type": "array", "items": {"type": "number"}}, False),
        ("Literal['a', 'b']", {"type": "string", "enum": ["a", "b"]}, False),
        ("dict", {"type": "object"}, False),
        ("Union[int, float]", {"type": "number"}, False),
        ("Dict[str, Any], optional", {"type": "object"}, True),
        ("str, default='en'", {"type": "string"}, True),
        ("str or int", {"type": "string"}, False),
        ("int | None", {"type": "integer"}, True),
        ("date-time", {"type": "string"}, False),
    ],
)
def test_xlam_type_strings_become_json_schema(text, schema, optional):
    assert parse_type_string(text) == (schema, optional)


def test_unknown_type_string_is_an_error():
    with pytest.raises(ValueError, match="unsupported type"):
        parse_type_string("Callable[[int], str]")


def test_parse_type_string_returns_independent_copies():
    first, _ = parse_type_string("List[int]")
    first["items"]["type"] = "string"
    assert parse_type_string("List[int]")[0]["items"] == {"type": "integer"}


def test_xlam_sample_rows_load():
    rows = _rows("xlam_sample.json")
    example = xlam_row_to_example(rows[0], 0)
    assert example.id == "xlam-1" and example.source == "xlam"
    assert example.messages == [{"role": "user", "content": rows[0]["query"]}]
    params = example.tools[0]["parameters"]
    assert params["required"] == ["query"]  # ", optional" and defaults make the rest optional
    assert params["properties"]["languages"]["type"] == "array"
    assert params["properties"]["languages"]["items"] == {"type": "string"}
    assert example.ground_truth == [{"name": "search_books",
                                     "arguments": {"query": "Roman aqueducts", "limit": 5}}]
    kinds = {xlam_row_to_example(r, i).kind for i, r in enumerate(rows[:8])}
    assert kinds == {"simple", "multiple", "parallel", "parallel_multiple", "irrelevance"}


def test_xlam_bad_answers_json_names_the_field():
    row = _rows("xlam_sample.json")[8]
    with pytest.raises(RowError) as info:
        xlam_row_to_example(row, 8)
    assert info.value.reason == "bad_json" and info.value.field == "answers"


def test_toolace_multi_turn_dialogue_is_cut_per_call_step():
    row = _rows("toolace_sample.json")[0]
    examples = toolace_row_to_examples(row, 0)
    assert [e.ground_truth[0]["name"] for e in examples] == ["Market Trends API", "/madlibs-diceware"]
    first, second = examples
    assert first.messages == [{"role": "user", "content": "What are the market indexes in Germany right now?"}]
    assert first.ground_truth[0]["arguments"] == {"trend_type": "MARKET_INDEXES", "country": "de"}
    # the second step sees the earlier call, its tool result and the reply
    roles = [m["role"] for m in second.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert second.messages[1]["tool_calls"] == first.ground_truth
    assert "DAX" in second.messages[2]["content"]
    assert {e.meta["group"] for e in examples} == {"toolace-0"}
    assert first.tools[0]["parameters"]["type"] == "object"  # "dict" -> object


def test_toolace_nested_object_and_array_arguments():
    example = toolace_row_to_examples(_rows("toolace_sample.json")[1], 1)[0]
    args = example.ground_truth[0]["arguments"]
    assert args == {"weight_kg": 2.5, "dimensions": {"length": 30, "width": 20, "height": 10},
                    "services": ["express", "economy"]}
    dims = example.tools[0]["parameters"]["properties"]["dimensions"]
    assert dims["type"] == "object" and dims["required"] == ["length", "width", "height"]
    assert example.tools[0]["parameters"]["properties"]["weight_kg"]["type"] == "number"


def test_toolace_prose_reply_to_a_user_is_a_no_call_example():
    examples = toolace_row_to_examples(_rows("toolace_sample.json")[3], 3)
    assert len(examples) == 1 and examples[0].ground_truth == []
    assert examples[0].kind == "irrelevance"
    assert toolace_row_to_examples(_rows("toolace_sample.json")[4], 4, no_call_steps=False)[0].ground_truth


def test_toolace_rows_without_tools_or_with_positional_args_fail_clearly():
    rows = _rows("toolace_sample.json")
    with pytest.raises(RowError) as info:
        toolace_row_to_examples(rows[5], 5)
    assert info.value.reason == "bad_call" and "positional" in info.value.message
    with pytest.raises(RowError) as info:
        extract_tools(rows[6]["system"])
    assert info.value.reason == "bad_json" and info.value.field == "system"


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ('[Market Trends API(trend_type="MARKET_INDEXES", country="us")]',
         [{"name": "Market Trends API", "arguments": {"trend_type": "MARKET_INDEXES", "country": "us"}}]),
        ("[/madlibs-diceware(nphrase=2)]", [{"name": "/madlibs-diceware", "arguments": {"nphrase": 2}}]),
        ("[f(a='x, (y)'), g.h(b=[1, 2], c={'k': True}, d=None)]",
         [{"name": "f", "arguments": {"a": "x, (y)"}},
          {"name": "g.h", "arguments": {"b": [1, 2], "c": {"k": True}, "d": None}}]),
        ("[f(flag=true, other=null)]", [{"name": "f", "arguments": {"flag": True, "other": None}}]),
        ("[noargs()]", [{"name": "noargs", "arguments": {}}]),
        ("[convert(from='USD', to='EUR', amount=5)]",
         [{"name": "convert", "arguments": {"from": "USD", "to": "EUR", "amount": 5}}]),
        ("[f(x='class=1', in=[1])]", [{"name": "f", "arguments": {"x": "class=1", "in": [1]}}]),
        ("[f(in=1, x='a, in=2')]", [{"name": "f", "arguments": {"in": 1, "x": "a, in=2"}}]),
        ("[f(in=1, x=\"it's, from=2\")]", [{"name": "f", "arguments": {"in": 1, "x": "it's, from=2"}}]),
        ("[f(__kw_from=1, in=2)]", [{"name": "f", "arguments": {"__kw_from": 1, "in": 2}}]),
    ],
)
def test_pythonic_calls_with_odd_names_parse(text, calls):
    assert parse_call_list(text) == calls
    assert parse_call_list(format_call_list(calls)) == calls


@pytest.mark.parametrize("text", ["[f(1)]", "[f(a=__import__('os'))]", "[f(a=1]", "[f(**k)]", "[nope]"])
def test_pythonic_calls_never_evaluate_code(text):
    with pytest.raises(RowError) as info:
        parse_call_list(text)
    assert info.value.reason == "bad_call"


def test_parquet_row_with_tool_call_blocks_and_system_tools():
    tool = {"name": "get_time", "description": "Time in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}
    row = {"prompt": [{"role": "system", "content": "Tools:\n" + json.dumps(tool)},
                      {"role": "user", "content": "Time in Oslo?"}],
           "reward_model": {"ground_truth": '<tool_call>\n{"name": "get_time", "parameters": {"city": "Oslo"}}\n</tool_call>'},
           "extra_info": {"index": 7}}
    example = parquet_row_to_example(row, 0)
    assert example.id == "parquet-7" and example.tools[0]["name"] == "get_time"
    assert example.messages == [{"role": "user", "content": "Time in Oslo?"}]
    assert example.ground_truth == [{"name": "get_time", "arguments": {"city": "Oslo"}}]


@pytest.mark.parametrize(
    "value",
    ['[{"name": "f", "arguments": {"x": 1}}]', [{"name": "f", "arguments": '{"x": 1}'}],
     "[f(x=1)]", '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'],
)
def test_parquet_ground_truth_encodings(value):
    assert parse_ground_truth(value) == [{"name": "f", "arguments": {"x": 1}}]


def test_parquet_row_without_ground_truth_names_the_field():
    with pytest.raises(RowError) as info:
        parquet_row_to_example({"prompt": [{"role": "user", "content": "hi"}]}, 0)
    assert info.value.reason == "missing_field" and info.value.field == "reward_model.ground_truth"


def test_normalize_tool_accepts_openai_wrapper_and_rejects_nameless():
    wrapped = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}
    assert normalize_tool(wrapped)["parameters"]["required"] == ["n"]
    with pytest.raises(RowError) as info:
        normalize_tool({"description": "no name"})
    assert info.value.reason == "bad_tool_schema"


def test_bfcl_unscored_file_loads_through_the_eval_converter():
    from toolrl_lib.data import bfcl
    from toolrl_lib.data.bfcl_source import bfcl_row_to_example, iter_bfcl_rows

    path = bfcl.question_path("exec_simple")
    label, entry, category, answer = next(iter_bfcl_rows(path))
    assert category == "exec_simple" and answer is not None
    example = bfcl_row_to_example(entry, category, answer)
    assert example.id == "bfcl-exec_simple_0" and example.ground_truth[0]["name"] == entry["function"][0]["name"]
    with pytest.raises(RowError) as info:
        bfcl_row_to_example({"id": "x", "question": [], "function": []}, "multi_turn_composite", None)
    assert info.value.reason == "unsupported"


def test_reader_counts_a_broken_jsonl_line_and_rejects_non_data(tmp_path):
    good = json.dumps({"query": "q"})
    path = tmp_path / "rows.jsonl"
    path.write_text(f"{good}\n{{broken\n{good}\n", encoding="utf-8")
    records = [r for _, r in iter_records(path)]
    assert isinstance(records[1], RowError) and records[1].reason == "bad_json"
    assert records[0] == records[2] == {"query": "q"}
    (tmp_path / "prose.json").write_text("just some prose\nno data here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a data file"):
        list(iter_records(tmp_path / "prose.json"))
    (tmp_path / "fake.parquet").write_text("nope", encoding="utf-8")
    with pytest.raises(ValueError, match="not a parquet file"):
        list(iter_records(tmp_path / "fake.parquet"))


def _call_strategy():
    from hypothesis import strategies as st

    name = st.from_regex(r"[A-Za-z/][A-Za-z0-9 _./-]{0,20}[A-Za-z0-9]", fullmatch=True)
    scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
    arg = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True) | st.sampled_from(
        ["in", "from", "class", "__kw_from", "__kw_"])  # Python keywords; the escape prefix
    return st.builds(lambda n, a: {"name": n, "arguments": a}, name,
                     st.dictionaries(arg, values, max_size=4))


def test_pythonic_call_lists_round_trip_property():
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None)
    @given(st.lists(_call_strategy(), min_size=1, max_size=3))
    @example([{"name": "A0", "arguments": {"_": {"__kw_": None}}}])  # once refused (CI, stop 13)
    @example([{"name": "f", "arguments": {"in": 1, "x": ", from=2", "__kw_from": "__kw_"}}])
    def check(calls):
        assert parse_call_list(format_call_list(calls)) == calls

    check()


def test_toolace_bad_later_step_keeps_the_earlier_steps():
    row = _rows("toolace_sample.json")[0]
    row["conversations"][5]["value"] = "[/madlibs-diceware(4)]"  # positional: unparseable
    with pytest.raises(RowError):
        toolace_row_to_examples(row, 0)
    errors: list[RowError] = []
    examples = toolace_row_to_examples(row, 0, errors=errors)
    assert [e.ground_truth[0]["name"] for e in examples] == ["Market Trends API"]
    assert len(errors) == 1 and errors[0].reason == "bad_call"
