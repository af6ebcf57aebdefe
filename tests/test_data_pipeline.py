"""prepare(): every drop reason, strict mode, de-duplication, contamination, split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrl_lib.data.contamination import build_index
from toolrl_lib.data.dedup import Deduplicator
from toolrl_lib.data.errors import DROP_REASONS
from toolrl_lib.data.example import Example, read_jsonl
from toolrl_lib.data.pipeline import prepare, prepare_sources, split_examples

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TOOL = {"name": "get_weather", "description": "Weather for a city",
        "parameters": {"city": {"type": "str", "description": "City"},
                       "unit": {"type": "str, optional", "description": "Unit", "enum": ["C", "F"],
                                "default": "C"},
                       "days": {"type": "int, optional", "description": "Days", "default": 1}}}
LONG = ("I am planning a long weekend of hiking in the mountains near {city} and would like to "
        "know what the weather will be like there so that I can pack the right clothes")


def xlam(i, query, answers, tools=None):
    return {"id": i, "query": query, "tools": json.dumps([TOOL] if tools is None else tools),
            "answers": answers if isinstance(answers, str) else json.dumps(answers)}


def call(**args):
    return [{"name": "get_weather", "arguments": args}]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def bfcl_question() -> str:
    from toolrl_lib.data.bfcl import load_bfcl_entries

    return load_bfcl_entries("simple_python")[0]["question"][0][0]["content"]


def rows_with_every_xlam_reason() -> list[dict]:
    return [
        xlam(0, "Weather in Oslo?", call(city="Oslo")),                                  # kept
        xlam(1, "Weather in Rome?", '[{"name": "get_weather", "arguments": {'),           # bad_json
        {"id": 2, "query": "Weather in Lima?", "tools": json.dumps([TOOL])},             # missing_field
        xlam(3, "  ", call(city="Lima")),                                                # empty_query
        xlam(4, "Weather in Kyiv?", call(city="Kyiv"),
             tools=[{"name": "f", "parameters": {"x": {"type": "Callable"}}}]),          # bad_tool_schema
        xlam(5, "Weather in Pune?", call(city="Pune"), tools=[]),                        # no_tools
        xlam(6, "Weather in Bern?", [{"arguments": {"city": "Bern"}}]),                  # bad_call
        xlam(7, "Weather in Riga?", [{"name": "get_forecast", "arguments": {}}]),        # unknown_function
        xlam(8, "Weather for 3 days?", call(days=3)),                                    # missing_required_argument
        xlam(9, "Weather in Baku?", call(city="Baku", wind=True)),                       # unknown_argument
        xlam(10, "Weather in Doha for 2 days?", call(city="Doha", days="2")),            # type_mismatch
        xlam(11, "Weather in Gdansk in kelvin?", call(city="Gdansk", unit="K")),         # enum_mismatch
        xlam(12, "weather in OSLO", call(city="Oslo")),                                  # duplicate of 0
        xlam(13, LONG.format(city="Bergen"), call(city="Bergen")),                       # kept
        xlam(14, LONG.format(city="Bergen").replace("long", "lovely"), call(city="Bergen")),  # near_duplicate
        xlam(15, bfcl_question(), call(city="Nuuk")),                                    # contaminated
    ]


def test_every_xlam_drop_reason_is_counted(tmp_path):
    path = write(tmp_path / "rows.jsonl", rows_with_every_xlam_reason())
    report = prepare("xlam", path, tmp_path / "out")
    expected = {"bad_json", "missing_field", "empty_query", "bad_tool_schema", "no_tools",
                "bad_call", "unknown_function", "missing_required_argument", "unknown_argument",
                "type_mismatch", "enum_mismatch", "duplicate", "near_duplicate", "contaminated"}
    assert report.dropped == {reason: 1 for reason in expected}
    assert report.kept == 2
    assert report.contamination[0]["id"] == "xlam-15"
    assert report.contamination[0]["bfcl_id"].startswith("simple_python")
    dropped = [json.loads(line) for line in (tmp_path / "out" / "dropped.jsonl").read_text().splitlines()]
    assert sorted(d["reason"] for d in dropped) == sorted(expected)
    assert all(d["field"] and d["message"] for d in dropped)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["kept"] == 2 and summary["dropped"] == report.dropped


def test_unsupported_reason_and_all_reasons_are_documented(tmp_path):
    row = {"system": "[]", "conversations": [{"from": "user", "value": "hi"}]}
    tools = json.dumps([{"name": "f", "description": "", "parameters": {}}])
    rows = [row, {"system": f"Tools: {tools}", "conversations": [{"from": "user", "value": "hi"}]}]
    report = prepare("toolace", write(tmp_path / "t.jsonl", rows), tmp_path / "out")
    assert report.dropped == {"bad_json": 1, "unsupported": 1}
    assert {"unsupported", "contaminated", "near_duplicate"} <= set(DROP_REASONS)


def test_strict_mode_stops_at_the_first_bad_row_naming_row_and_field(tmp_path):
    path = write(tmp_path / "rows.jsonl", rows_with_every_xlam_reason())
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: field 'answers'.*bad_json"):
        prepare("xlam", path, tmp_path / "out", strict=True)
    with pytest.raises(ValueError, match=r"ground_truth\[0\]\.get_weather\.days.*type_mismatch"):
        prepare("xlam", write(tmp_path / "one.jsonl", [rows_with_every_xlam_reason()[10]]),
                tmp_path / "out", strict=True)


def test_wrong_columns_is_a_clear_error_not_a_drop_count(tmp_path):
    with pytest.raises(ValueError, match="does not look like toolace rows"):
        prepare("toolace", SAMPLE / "xlam_sample.json", tmp_path / "out")


def test_samples_prepare_and_written_examples_read_back(tmp_path):
    report = prepare_sources([{"source": "xlam", "input": SAMPLE / "xlam_sample.json"},
                              {"source": "toolace", "input": SAMPLE / "toolace_sample.json"}],
                             tmp_path / "out", val_fraction=0.3)
    train = list(read_jsonl(tmp_path / "out" / "train.jsonl"))
    val = list(read_jsonl(tmp_path / "out" / "val.jsonl"))
    assert len(train) + len(val) == report.kept == 15
    assert report.sources["xlam"]["kept"] == 8 and report.sources["toolace"]["kept"] == 7
    # the two steps of the first ToolACE dialogue land in the same split
    sides = {e.id: "train" for e in train} | {e.id: "val" for e in val}
    assert sides["toolace-toolace_sample.json-0-0"] == sides["toolace-toolace_sample.json-0-1"]
    assert len({e.id for e in train + val}) == report.kept


def test_split_is_deterministic_grouped_and_sized():
    examples = [Example(id=f"e{i}", source="t", messages=[{"role": "user", "content": f"q{i}"}],
                        tools=[], ground_truth=[], meta={"group": f"g{i // 2}"}) for i in range(200)]
    train, val = split_examples(examples, seed=1, val_fraction=0.1)
    assert len(val) == 20 and len(train) == 180
    assert split_examples(examples, seed=1, val_fraction=0.1) == (train, val)
    assert {e.id for e in split_examples(examples, seed=2, val_fraction=0.1)[1]} != {e.id for e in val}
    val_groups = {e.meta["group"] for e in val}
    assert not val_groups & {e.meta["group"] for e in train}
    assert len(split_examples(examples[:4], seed=0, val_fraction=0.1)[1]) == 2  # >= 1 group


def _ex(i: int, text: str, calls: list[dict] | None = None) -> Example:
    return Example(id=f"x{i}", source="t", messages=[{"role": "user", "content": text}],
                   tools=[{"name": "f", "description": "", "parameters": {}}],
                   ground_truth=calls if calls is not None else [{"name": "f", "arguments": {}}])


def test_near_duplicates_need_similar_text_and_the_same_answer():
    dedup = Deduplicator(threshold=0.8)
    base = LONG.format(city="Oslo")
    assert dedup.check(_ex(0, base)) is None
    assert dedup.check(_ex(1, base.upper() + "!!")) == ("duplicate", "x0")
    assert dedup.check(_ex(2, base.replace("pack", "bring"))) == ("near_duplicate", "x0")
    # same text but another answer is not a duplicate; unrelated text is not either
    assert dedup.check(_ex(3, base, [{"name": "f", "arguments": {"a": 1}}])) is None
    assert dedup.check(_ex(4, "Completely different request about invoices")) is None


def test_contamination_index_exact_and_ngram_matches():
    reference = "Find the area of a triangle with a base of 10 units and height of 5 units in the plane."
    index = build_index([("simple_1", reference), ("simple_2", "Short one.")], ngram=8)
    assert index.match("find the AREA of a triangle with a base of 10 units, and height of 5 units in the plane") == ("simple_1", "exact")
    assert index.match("Please: find the area of a triangle with a base of 10 units today") == ("simple_1", "ngram")
    assert index.match("short one") == ("simple_2", "exact")
    assert index.match("Find the area of a circle") is None
    hit = index.check(_ex(0, "Short one!"))
    assert hit and hit["bfcl_id"] == "simple_2" and hit["id"] == "x0"


def test_bfcl_unscored_source_is_decontaminated(tmp_path):
    report = prepare("bfcl", None, tmp_path / "out", categories=["exec_simple", "exec_parallel"])
    assert report.kept > 100
    assert report.contamination_check.startswith("bfcl")
    assert report.sources["bfcl"]["rows"] == 150


def test_prepared_examples_render_and_score_perfectly_in_every_family(tmp_path):
    """The contract with prompts/rewards: a processed example's own ground truth, written in
    any family's format, parses back and gets full format/name/argument credit."""
    from toolrl_lib.prompts import FAMILIES, get_adapter
    from toolrl_lib.rewards import score

    prepare_sources([{"source": "synthetic", "n": 60},
                     {"source": "toolace", "input": SAMPLE / "toolace_sample.json"}],
                    tmp_path / "out")
    examples = list(read_jsonl(tmp_path / "out" / "train.jsonl"))
    assert any(e.ground_truth == [] for e in examples) and any(len(e.messages) > 1 for e in examples)
    for family in FAMILIES:
        adapter = get_adapter(family)
        for example in examples:
            completion = adapter.render_completion(example.ground_truth)
            result = score(completion, example.ground_truth, example.tools, family=family)
            assert (result.format, result.name, result.args) == (1.0, 1.0, 1.0), (family, example.id)


def test_partial_dialogue_is_kept_and_its_bad_step_counted(tmp_path):
    rows = json.loads((SAMPLE / "toolace_sample.json").read_text())[:1]
    rows[0]["conversations"][5]["value"] = "[/madlibs-diceware(4)]"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    report = prepare("toolace", path, tmp_path / "out")
    assert report.kept == 1 and report.dropped == {"bad_call": 1}
    with pytest.raises(ValueError, match="positional"):
        prepare("toolace", path, tmp_path / "out", strict=True)
