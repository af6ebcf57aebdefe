"""BFCL v4 data read from the bfcl-eval package files (no import of bfcl_eval)."""

import pytest

from toolrl_lib.data import bfcl


def test_categories_and_counts():
    assert len(bfcl.SCORED_SINGLE_TURN) == 13
    assert set(bfcl.SCORED_SINGLE_TURN) <= set(bfcl.SCORED_CATEGORIES)
    assert not set(bfcl.UNSCORED_CATEGORIES) & set(bfcl.SCORED_CATEGORIES)
    counts = {c: len(bfcl.load_bfcl_entries(c)) for c in bfcl.SCORED_SINGLE_TURN}
    assert counts["simple_python"] == 400 and counts["live_multiple"] == 1053
    assert counts["live_irrelevance"] == 884 and counts["live_parallel"] == 16
    assert sum(counts.values()) == 3641
    answers = bfcl.load_possible_answers("simple_python")
    assert len(answers) == 400 and "simple_python_0" in answers
    assert bfcl.load_possible_answers("irrelevance") == {}


def test_unknown_and_agentic_categories_are_refused_by_name():
    with pytest.raises(ValueError, match="simple_pyton"):
        bfcl.load_bfcl_entries("simple_pyton")
    with pytest.raises(ValueError, match="memory_kv"):
        bfcl.check_category("memory_kv")


def test_entry_to_example_maps_types_and_picks_an_accepted_answer():
    entry = {
        "id": "x_1",
        "question": [[{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]],
        "function": [{
            "name": "f.g", "description": "d",
            "parameters": {"type": "dict", "required": ["a", "c"], "properties": {
                "a": {"type": "float", "description": "A"},
                "b": {"type": "tuple", "items": {"type": "integer"}, "description": "B"},
                "c": {"type": "dict", "properties": {"z": {"type": "any"}}, "description": "C"},
                "d": {"type": "string", "description": "D"},
            }},
        }],
    }  # fmt: skip
    answer = [{"f.g": {"a": [1.5], "b": ["", [1, 2]], "c": ["", {"z": ["v"]}], "d": ["x", ""]}}]
    ex = bfcl.bfcl_entry_to_example(entry, "simple_python", answer)
    props = ex.tools[0]["parameters"]["properties"]
    assert ex.tools[0]["parameters"]["type"] == "object"
    assert props["a"]["type"] == "number" and "float type" in props["a"]["description"]
    assert props["b"] == {"description": "B", "type": "array", "items": {"type": "integer"}}
    assert props["c"]["type"] == "object" and props["c"]["properties"]["z"]["type"] == "string"
    assert "Python 3 syntax" in ex.tools[0]["description"]
    # optional b omitted (first accepted is ""), required c gets its first real value
    assert ex.ground_truth == [{"name": "f.g", "arguments": {"a": 1.5, "c": {"z": "v"}, "d": "x"}}]
    assert [m["role"] for m in ex.messages] == ["system", "user"]
    assert ex.kind == "simple" and ex.meta["category"] == "simple_python"


def test_java_parameters_become_strings_with_hints():
    ex = bfcl.load_bfcl_examples("simple_java", limit=2)[1]
    props = ex.tools[0]["parameters"]["properties"]
    assert {p["type"] for p in props.values()} == {"string"}
    assert "Java 8 SDK" in ex.tools[0]["description"]
    assert "Java boolean type parameter in string representation" in props["useShortName"]["description"]


def test_irrelevance_and_relevance_examples():
    irr = bfcl.load_bfcl_examples("irrelevance", limit=1)[0]
    assert irr.ground_truth == [] and irr.kind == "irrelevance"
    rel = bfcl.load_bfcl_examples("live_relevance", limit=1)[0]
    assert rel.meta["any_call_correct"] is True


def test_pythonic_calls_parse_without_eval():
    assert bfcl.parse_pythonic_call("m.f(n=20, p=1/6, xs=[1, 'a'])") == {
        "name": "m.f", "arguments": {"n": 20, "p": pytest.approx(1 / 6), "xs": [1, "a"]}
    }  # fmt: skip
    assert bfcl.parse_pythonic_call("f(1, 2)") is None  # positional: names unknown
    assert bfcl.parse_pythonic_call("__import__('os').system('x')") is None
    assert bfcl.parse_pythonic_call("f(a=open('x'))") is None
    with pytest.raises(ValueError, match="rest_0"):
        bfcl.load_bfcl_examples("rest", limit=1)
    assert len(bfcl.load_bfcl_examples("exec_simple", limit=3)) == 3
