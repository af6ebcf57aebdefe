"""The synthetic generator: catalogue size, determinism, schema validity, raw round trips."""

from __future__ import annotations

from collections import Counter

import pytest

from toolrl_lib.data.catalog import FUNCTIONS
from toolrl_lib.data.example import KINDS
from toolrl_lib.data.schema import JSON_TYPES, check_call
from toolrl_lib.data.synthetic import (
    GENERATED_KINDS,
    HARD_NEGATIVES,
    KIND_WEIGHTS,
    catalog_summary,
    generate_examples,
    to_raw,
)
from toolrl_lib.data.toolace import toolace_row_to_examples
from toolrl_lib.data.validate import validate_example
from toolrl_lib.data.xlam import xlam_row_to_example


def _check_property(prop: dict, where: str) -> None:
    assert prop["type"] in JSON_TYPES, where
    assert isinstance(prop.get("description", ""), str), where
    if "enum" in prop:
        assert prop["enum"] and all(isinstance(v, str) for v in prop["enum"]), where
    if prop["type"] == "array":
        assert prop["items"]["type"] in JSON_TYPES, where
    if prop["type"] == "object" and "properties" in prop:
        for name, sub in prop["properties"].items():
            _check_property(sub, f"{where}.{name}")


def test_catalogue_is_large_and_typed():
    summary = catalog_summary()
    assert summary["functions"] >= 60 and summary["domains"] >= 10
    assert set(summary["param_types"]) == set(JSON_TYPES)
    assert len(set(summary["names"])) == len(FUNCTIONS)
    params = [p for f in FUNCTIONS for p in f.params]
    assert any(p.enum for p in params)
    assert any(not p.required and p.default is not None for p in params)
    for fn in FUNCTIONS:  # every required argument appears in every template
        required = [p.name for p in fn.params if p.required]
        for template in fn.templates:
            assert all("{" + name + "}" in template for name in required), (fn.name, template)


def test_generator_is_deterministic_by_seed():
    first = [e.to_dict() for e in generate_examples(150, seed=7)]
    assert first == [e.to_dict() for e in generate_examples(150, seed=7)]
    assert first != [e.to_dict() for e in generate_examples(150, seed=8)]


def test_every_generated_example_is_schema_valid():
    examples = generate_examples(600, seed=3, hard_negatives=0.5)
    assert Counter(e.kind for e in examples).keys() == set(KIND_WEIGHTS)
    assert {e.meta.get("negative") for e in examples} == {None, *HARD_NEGATIVES}
    for example in examples:
        assert example.kind in KINDS
        validate_example(example)  # raises on any invalid call
        for tool in example.tools:
            params = tool["parameters"]
            assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
            for name, prop in params["properties"].items():
                _check_property(prop, f"{tool['name']}.{name}")
        names = {t["name"] for t in example.tools}
        if example.kind == "irrelevance" and example.meta.get("negative") != "irrelevance_missing":
            assert example.ground_truth == [] and example.meta["target"] not in names
        if example.kind in ("parallel", "parallel_multiple"):
            assert len(example.ground_truth) >= 2


def test_queries_state_the_argument_values():
    for example in generate_examples(200, seed=11):
        for call in example.ground_truth:
            for value in call["arguments"].values():
                if isinstance(value, str):
                    assert value.lower() in example.query.lower(), (value, example.query)


@pytest.mark.parametrize("kind", GENERATED_KINDS)
def test_kinds_filter(kind):
    expected = "irrelevance" if kind in HARD_NEGATIVES else kind
    assert {e.kind for e in generate_examples(30, seed=0, kinds=[kind])} == {expected}


def test_hard_negatives_are_hard_and_leave_the_default_data_unchanged():
    from toolrl_lib.data.catalog import BY_NAME

    assert [e.to_dict() for e in generate_examples(80, seed=2)] == \
        [e.to_dict() for e in generate_examples(80, seed=2, hard_negatives=0.0)]
    for example in generate_examples(60, seed=4, kinds=["irrelevance_near"]):
        names = {t["name"] for t in example.tools}
        assert example.ground_truth == [] and example.meta["target"] not in names
        assert {BY_NAME[n].domain for n in names} == {example.meta["domain"]}  # same-domain siblings
    for example in generate_examples(60, seed=4, kinds=["irrelevance_missing"]):
        target = BY_NAME[example.meta["target"]]
        assert example.ground_truth == [] and target.name in {t["name"] for t in example.tools}
        # the query states none of the values a call would need (its description's task only)
        assert target.description.rstrip(".").lower()[1:] in example.query.lower()
    with pytest.raises(ValueError, match="hard_negatives"):
        generate_examples(3, hard_negatives=1.5)


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown kind"):
        generate_examples(3, kinds=["chitchat"])


def test_raw_xlam_and_toolace_round_trip_through_the_real_loaders():
    for example in generate_examples(120, seed=5):
        via_xlam = xlam_row_to_example(to_raw([example], "xlam")[0], 0)
        via_toolace = toolace_row_to_examples(to_raw([example], "toolace")[0], 0)
        assert len(via_toolace) == 1
        for loaded in (via_xlam, via_toolace[0]):
            assert loaded.tools == example.tools
            assert loaded.ground_truth == example.ground_truth
            assert loaded.messages == example.messages and loaded.kind == example.kind
            for call in loaded.ground_truth:
                check_call(call, {t["name"]: t for t in loaded.tools}, "gt")
