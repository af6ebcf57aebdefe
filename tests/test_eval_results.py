"""Result files in the registered handler's format; resumable writing; tidy tables."""

import json
import re

import pandas as pd
import pytest

from toolrl_lib.evaluate import analysis
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.runner import parse_categories
from toolrl_lib.evaluate.scorer import CategoryScore

QWEN_FC_PATTERN = r"<tool_call>\n(.*?)\n</tool_call>"  # BFCL QwenFCHandler's regex


def test_render_calls_matches_the_handler_regex():
    calls = [{"name": "a.b", "arguments": {"x": "line1\nline2", "n": 2}}, {"name": "c", "arguments": {}}]
    text = results.render_calls(calls)
    decoded = [json.loads(m) for m in re.findall(QWEN_FC_PATTERN, text, re.DOTALL)]
    assert decoded == calls
    assert results.render_calls([]) == ""


@pytest.mark.parametrize(
    "family,text",
    [
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'),
        ("qwen3", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'),
        ("llama3", '{"name": "f", "parameters": {"a": 1}}'),
        ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]'),
    ],
)
def test_any_family_is_rerendered_in_one_format(family, text):
    entry = results.to_result_entry("id1", text, family)
    assert entry["n_calls"] == 1 and entry["raw"] == text
    assert entry["result"] == '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'


def test_plain_text_is_no_call():
    entry = results.to_result_entry("id2", "I cannot help with that.", "hermes")
    assert entry["result"] == "" and entry["n_calls"] == 0


def test_model_names_and_paths(tmp_path):
    assert results.bfcl_model_name("/x/runs/my_model/merged") == "x-runs-my-model-merged"
    assert "_" not in results.bfcl_model_name("Qwen/Qwen3_8B")
    path = results.result_file(tmp_path, "m", "live_simple")
    assert path.parts[-3:] == ("m", "live", "BFCL_v4_live_simple_result.json")
    assert results.category_group("irrelevance") == "non_live"


def test_append_is_resumable_and_survives_a_torn_line(tmp_path):
    path = tmp_path / "g.jsonl"
    results.append_results(path, [results.calls_entry("a", []), results.calls_entry("b", [])])
    with path.open("a") as handle:
        handle.write('{"id": "c", "resu')  # interrupted mid-write
    assert results.done_ids(path) == {"a", "b"}
    results.append_results(path, [results.calls_entry("c", [])])
    assert [r["id"] for r in results.read_results(path)] == ["a", "b", "c"]


def test_parse_categories_refuses_unknown_names():
    assert parse_categories("simple_python, irrelevance") == ["simple_python", "irrelevance"]
    assert parse_categories(None)[0] == "simple_python" and len(parse_categories("all")) == 13
    assert parse_categories("live") == ["live_simple", "live_multiple", "live_parallel",
                                        "live_parallel_multiple", "live_irrelevance", "live_relevance"]
    with pytest.raises(ValueError, match="simple_pyhton"):
        parse_categories("simple_python,simple_pyhton")
    # multi-turn is evaluated too (issue 19), memory/web search are not
    assert parse_categories("multi_turn_base") == ["multi_turn_base"]
    assert len(parse_categories("multi_turn")) == 4
    with pytest.raises(ValueError, match="web_search"):
        parse_categories("web_search")


def _fake_eval(tmp_path, name, outcomes):
    """Write result files and matching fake scores; outcomes: {category: [(correct, n_calls)]}."""
    scores = {}
    for category, rows in outcomes.items():
        entries = [
            {**results.calls_entry(f"{category}_{i}", [{"name": "f", "arguments": {}}] * calls)}
            for i, (_, calls) in enumerate(rows)
        ]
        results.write_results(results.result_file(tmp_path, name, category), entries)
        failures = [{"id": f"{category}_{i}", "error_type": "value_error:string"}
                    for i, (ok, _) in enumerate(rows) if not ok]
        correct = sum(ok for ok, _ in rows)
        scores[category] = CategoryScore(category, correct / len(rows), correct, len(rows), failures)
    return analysis.entries_table(tmp_path, name, list(outcomes), scores, label=name)


def test_tables_rates_and_aggregates(tmp_path):
    outcomes = {
        "simple_python": [(1, 1), (0, 1), (1, 1), (0, 0)],
        "simple_java": [(1, 1), (1, 1)],
        "simple_javascript": [(0, 0), (0, 1)],
        "multiple": [(1, 1)],
        "parallel": [(0, 2)],
        "parallel_multiple": [(1, 2), (1, 2)],
        "irrelevance": [(1, 0), (1, 0), (0, 1)],
    }
    entries = _fake_eval(tmp_path, "m", outcomes)
    summary = analysis.summary_table(entries)
    row = summary.set_index("category").loc["simple_python"]
    assert (row["n"], row["correct"], row["accuracy"], row["call_rate"]) == (4, 2, 0.5, 0.75)
    assert summary.set_index("category").loc["irrelevance", "call_rate"] == pytest.approx(1 / 3)
    agg = analysis.aggregates(summary)
    simple = (0.5 + 1.0 + 0.0) / 3
    assert agg["non_live_ast"] == pytest.approx((simple + 1.0 + 0.0 + 1.0) / 4)
    assert agg["live_ast"] is None and "live_simple" in agg["missing_live"]
    taxonomy = analysis.error_taxonomy(entries)
    assert taxonomy["count"].sum() == (~entries["correct"]).sum()
    assert set(taxonomy["error_family"]) == {"value_error"}


def test_aggregates_refuse_missing_parts_and_weight_live_by_n():
    summary = pd.DataFrame([
        {"category": "live_simple", "accuracy": 1.0, "n": 10},
        {"category": "live_multiple", "accuracy": 0.0, "n": 30},
        {"category": "live_parallel", "accuracy": 0.5, "n": 4},
        {"category": "live_parallel_multiple", "accuracy": 0.5, "n": 6},
    ])  # fmt: skip
    agg = analysis.aggregates(summary)
    assert agg["live_ast"] == pytest.approx((10 + 0 + 2 + 3) / 50)
    assert agg["non_live_ast"] is None
    assert "Overall" in agg["note"]


def test_scores_must_match_failures(tmp_path):
    results.write_results(results.result_file(tmp_path, "m", "parallel"), [results.calls_entry("p0", [])])
    bad = {"parallel": CategoryScore("parallel", 1.0, 1, 1, [{"id": "p0", "error_type": "x"}])}
    with pytest.raises(RuntimeError, match="parallel"):
        analysis.entries_table(tmp_path, "m", ["parallel"], bad, label="m")


def test_compare_pairs_entries(tmp_path):
    a = _fake_eval(tmp_path / "a", "a", {"simple_python": [(0, 0)] * 6, "irrelevance": [(1, 0)] * 4})
    b = _fake_eval(tmp_path / "b", "b", {"simple_python": [(1, 1)] * 5 + [(0, 1)], "irrelevance": [(1, 0)] * 4})
    table = analysis.compare(a, b).set_index("category")
    sp = table.loc["simple_python"]
    assert (sp["acc_a"], sp["acc_b"], sp["a_only"], sp["b_only"]) == (0.0, 5 / 6, 0, 5)
    assert sp["mcnemar_p"] == pytest.approx(0.0625)
    assert sp["call_rate_a"] == 0.0 and sp["call_rate_b"] == 1.0
    assert table.loc["ALL", "n"] == 10 and table.loc["irrelevance", "diff"] == 0.0
