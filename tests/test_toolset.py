"""The broad tool-set generator: size and variety, determinism, kinds, held-out splits,
validity, rewards, and value phrasings that read back to the canonical value."""

from __future__ import annotations

import json
import random
from collections import Counter
from functools import cache

import pytest

from toolrl_lib.data.example import KINDS
from toolrl_lib.data.toolset import all_signatures, generate_broad
from toolrl_lib.data.toolset.kinds import NEGATIVES, Pool, build_example
from toolrl_lib.data.toolset.naming import STYLES, function_name, name_key
from toolrl_lib.data.toolset.signatures import item_schema
from toolrl_lib.data.toolset.splits import split_signatures
from toolrl_lib.data.toolset.values import KINDS as VALUE_KINDS
from toolrl_lib.data.validate import validate_example
from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards import score


@cache
def _data(n: int = 2400, seed: int = 5):
    return generate_broad(n, seed, contamination=False)


def _all_examples():
    return [e for rows in _data().examples.values() for e in rows]


def test_at_least_2000_signatures_over_40_domains_in_every_style_and_type():
    signatures = all_signatures()
    assert len(signatures) >= 2000 and len({s.domain for s in signatures}) >= 40
    assert len({s.name for s in signatures}) == len(signatures)
    assert len({s.key for s in signatures}) == len(signatures)
    assert {s.style for s in signatures} == set(STYLES)
    schemas = [p.schema() for s in signatures for p in s.params]
    assert {x["type"] for x in schemas} == {"string", "integer", "number", "boolean", "array", "object"}
    assert {x["items"]["type"] for x in schemas if x["type"] == "array"} >= {"string", "integer", "number"}
    assert any("enum" in x for x in schemas) and any("enum" in x.get("items", {}) for x in schemas)
    assert any(x["type"] == "object" and "properties" in x for x in schemas)
    assert {x.get("format") for x in schemas} >= {"date", "time", "email"}
    assert any(not p.required and p.default is not None for s in signatures for p in s.params)
    assert all(any(p.required for p in s.params) for s in signatures)


def test_generation_is_deterministic_by_seed():
    first = generate_broad(300, 1, contamination=False).examples
    again = generate_broad(300, 1, contamination=False).examples
    other = generate_broad(300, 2, contamination=False).examples
    dump = lambda examples: [e.to_dict() for rows in examples.values() for e in rows]  # noqa: E731
    assert dump(first) == dump(again)
    assert dump(first) != dump(other)


def test_every_kind_and_every_negative_is_generated_with_the_right_shape():
    examples = _all_examples()
    assert {e.kind for e in examples} == set(KINDS) - {"multi_turn"}
    assert {e.meta.get("negative") for e in examples} == {None, *NEGATIVES}
    flags = Counter(v for e in examples for c in e.ground_truth for v in c["arguments"].values() if isinstance(v, bool))
    assert flags[True] and flags[False]  # required flags are said both ways
    for e in examples:
        names = {t["name"] for t in e.tools}
        if e.kind == "multiple":
            assert 2 <= len(e.tools) <= 5 and len(e.ground_truth) == 1
        if e.kind == "parallel":
            assert len(e.tools) == 1 and len(e.ground_truth) >= 2
        if e.kind == "parallel_multiple":
            assert len(e.tools) <= 5 and len({c["name"] for c in e.ground_truth}) >= 2
        if e.kind == "irrelevance":
            assert e.ground_truth == []
            assert (e.meta["target"] in names) == (e.meta["negative"] == "irrelevance_missing")
        if e.meta.get("negative") == "irrelevance_near":
            assert {t["name"] for t in e.tools} <= {s.name for s in all_signatures() if s.domain == e.meta["domain"]}


def test_splits_hold_out_whole_signatures():
    data = _data()
    names = {split: {s.name for s in sigs} for split, sigs in data.signatures.items()}
    assert not names["train"] & names["val"] and not names["train"] & names["test"]
    assert not names["val"] & names["test"]
    for split, rows in data.examples.items():
        offered = {t["name"] for e in rows for t in e.tools}
        assert offered <= names[split], split
    assert {len(rows) for rows in data.examples.values()} == {1920, 240}


def test_split_fractions_are_checked_by_name():
    with pytest.raises(ValueError, match="val_fraction"):
        split_signatures(all_signatures(), 0, val_fraction=0.7)
    with pytest.raises(ValueError, match="kind"):
        build_example("parallel_simple", Pool(all_signatures()[:5]), random.Random(0), "x")
    with pytest.raises(ValueError, match="naming style"):
        function_name(["get", "hive"], "kebab", "apiary")
    with pytest.raises(ValueError, match="value kind"):
        item_schema("colour")


def test_every_example_validates_and_its_gold_answer_gets_full_reward():
    adapter = get_adapter("hermes")
    for example in _all_examples()[::2]:
        validate_example(example)
        gold = adapter.render_completion(example.ground_truth) if example.ground_truth else "No tool fits."
        binary = score(gold, example.ground_truth, example.tools, scheme="binary")
        weighted = score(gold, example.ground_truth, example.tools, scheme="weighted", weights={"reasoning": 0})
        assert binary.total == 1.0, (example.id, binary)
        assert weighted.name == weighted.args == 1.0, example.id


def _spoil(value):
    """A value of the same type that is not the same value."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else [_spoil(value[0])]
    return {**value, next(iter(value)): _spoil(next(iter(value.values())))}


def test_a_wrong_answer_does_not_get_full_reward():
    adapter = get_adapter("hermes")
    checked = Counter()
    for example in _all_examples()[1::3]:
        if example.ground_truth:
            calls = json.loads(json.dumps(example.ground_truth))
            argument = next(iter(calls[0]["arguments"]))
            calls[0]["arguments"][argument] = _spoil(calls[0]["arguments"][argument])
        else:  # a no-call example answered with a call
            tool = example.tools[0]
            calls = [{"name": tool["name"], "arguments": {}}]
        result = score(adapter.render_completion(calls), example.ground_truth, example.tools, scheme="binary")
        assert result.total == 0.0, (example.id, calls)
        checked[example.kind] += 1
    assert len(checked) == 5


def test_optional_arguments_may_be_omitted_or_spelled_as_their_default():
    adapter = get_adapter("hermes")
    tried = 0
    for example in _all_examples():
        for call in example.ground_truth[:1]:
            defaults = {k: v[1] for k, v in call["accepted"].items() if v[:1] == [""] and len(v) > 1}
            if not defaults:
                continue
            spelled = [{"name": call["name"], "arguments": {**call["arguments"], **defaults}},
                       *example.ground_truth[1:]]
            assert score(adapter.render_completion(spelled), example.ground_truth, example.tools,
                         scheme="binary").total == 1.0
            tried += 1
    assert tried > 100


@pytest.mark.parametrize("kind", sorted(VALUE_KINDS))
def test_every_phrasing_reads_back_to_an_accepted_canonical_value(kind):
    value_kind = VALUE_KINDS[kind]
    rng = random.Random(kind)
    for _ in range(200):
        value = value_kind.sample(rng)
        for text in value_kind.phrasings(value):
            parsed = value_kind.parse(text)
            assert parsed in value_kind.accepted(value) or parsed == value, (kind, value, text, parsed)


def test_names_compare_across_styles():
    assert len({name_key(function_name(["get", "hive", "log"], s, "apiary")) for s in STYLES}) == 1


def test_the_doctests_of_the_toolset_modules_pass():
    import doctest
    import importlib

    for name in ("naming", "values", "phrasing", "kinds", "splits"):
        module = importlib.import_module(f"toolrl_lib.data.toolset.{name}")
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, name


def test_notebook_views_count_what_was_generated(tmp_path):
    from toolrl_lib.data import explore
    from toolrl_lib.data.toolset import write_broad

    data = generate_broad(200, 4, contamination=False)
    variety = explore.broad_variety(data)
    assert sum(variety["domain"].values()) == sum(variety["kind"].values()) == 200
    assert set(variety["kind"]) == {"simple", "multiple", "parallel", "parallel_multiple", *NEGATIVES}
    assert sum(variety["naming style"].values()) == sum(len(v) for v in data.signatures.values())
    assert variety["parameter type"]["object"] > 0 and variety["parameter type"]["array of string (enum)"] > 0
    assert explore.plot_broad_variety(variety, tmp_path / "v.png").is_file()
    write_broad(data, tmp_path / "broad")
    assert explore.contamination_summary(tmp_path / "broad") == explore.contamination_summary(data)
    with pytest.raises(FileNotFoundError, match="contamination.json"):
        explore.contamination_summary(tmp_path)


def test_a_tiny_pool_still_gives_valid_examples_of_a_simpler_kind():
    pool = Pool(all_signatures()[:1])
    rng = random.Random(0)
    for kind in ("multiple", "parallel_multiple", "irrelevance_near", "irrelevance"):
        example = build_example(kind, pool, rng, "tiny")
        validate_example(example)
        assert example.kind in ("simple", "parallel", "irrelevance")
