"""Reward schemes, value matching, call assignment and the TRL wrapper."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrl_lib.prompts import FAMILIES, get_adapter
from toolrl_lib.rewards import (
    SCHEMES,
    argument_credit,
    assign,
    make_reward_funcs,
    resolve_weights,
    reward_range,
    score,
    values_match,
)

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "default": 1},
                "unit": {"type": "string", "enum": ["C", "F"]},
            },
            "required": ["city"],
        },
    },
    {
        "name": "convert",
        "description": "Currency",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
        },
    },
]
GT = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
REASON = "The user wants a forecast for Paris, so I call get_weather."


def hermes(calls, reasoning=None):
    return get_adapter("hermes").render_completion(calls, reasoning=reasoning)


# --- value matching ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pred", "gold", "schema", "expected"),
    [
        (5, 5, {"type": "integer"}, True),
        (5.0, 5, {"type": "integer"}, False),  # BFCL's type check: an int parameter wants an int
        (5.0, 5.0, {"type": "integer"}, True),  # unless the gold value is itself a float
        ("5", 5, {"type": "integer"}, False),
        (5.5, 5, {"type": "integer"}, False),
        (True, 1, {"type": "integer"}, False),
        (0.1 + 0.2, 0.3, {"type": "number"}, True),
        (3, 3.0, {"type": "number"}, True),
        (float("inf"), float("inf"), {"type": "number"}, False),
        (True, True, {"type": "boolean"}, True),
        ("true", True, {"type": "boolean"}, False),
        ("  New   York ", "new york", {"type": "string"}, True),
        ("c", "C", {"type": "string", "enum": ["C", "F"]}, False),
        (" C ", "C", {"type": "string", "enum": ["C", "F"]}, True),
        ("paris", "Paris", None, False),
        ("Paris ", "Paris", None, True),
        ([1, 2.0], [1, 2], {"type": "array", "items": {"type": "integer"}}, False),  # 2.0 is no int
        ([2, 1], [1, 2], {"type": "array"}, False),
        ({"a": "X"}, {"a": "x"}, {"type": "object", "properties": {"a": {"type": "string"}}}, True),
        ({"a": 1, "b": 2}, {"a": 1}, {"type": "object"}, False),
        (None, None, {"type": ["string", "null"]}, True),
        ("x", None, {"type": ["string", "null"]}, False),
        (1, "1", None, False),
    ],
)
def test_values_match(pred, gold, schema, expected):
    assert values_match(pred, gold, schema) is expected


def test_values_match_deep_nesting_is_bounded():
    deep = current = []
    for _ in range(500):
        current.append([])
        current = current[0]
    assert values_match(deep, deep) is False  # deeper than MAX_DEPTH never matches


def test_argument_credit_partial_and_defaults():
    props = TOOLS[0]["parameters"]["properties"]
    assert argument_credit({"city": "Paris", "days": 3}, {"city": "Paris", "days": 3}, props) == 1.0
    assert argument_credit({"city": "Paris", "days": 2}, {"city": "Paris", "days": 3}, props) == 0.5
    # omitted optional argument whose default is the gold value
    assert argument_credit({"city": "Paris"}, {"city": "Paris", "days": 1}, props) == 1.0
    # extra key the gold does not have and with no default: counts in the union
    assert argument_credit({"city": "Paris", "unit": "C"}, {"city": "Paris"}, props) == 0.5
    assert argument_credit({}, {}, props) == 1.0


def test_assign_is_order_insensitive_and_optimal():
    gold = [{"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}}]
    pred = [{"name": "f", "arguments": {"x": 2}}, {"name": "f", "arguments": {"x": 1}}]
    pairs = assign(pred, gold, {})
    assert sorted((i, j) for i, j, _ in pairs) == [(0, 1), (1, 0)]
    assert all(credit == 1.0 for *_, credit in pairs)
    # greedy by order would pair pred 0 with gold 0 (credit 0.5) and lose the perfect pairing
    gold = [{"name": "f", "arguments": {"x": 1, "y": 1}}, {"name": "f", "arguments": {"x": 1, "y": 2}}]
    pred = [{"name": "f", "arguments": {"x": 1, "y": 2}}]
    (pair,) = assign(pred, gold, {})
    assert pair[:2] == (0, 1) and pair[2] == 1.0


# --- the schemes on worked examples ---------------------------------------------------
def test_weighted_components_exactly():
    perfect = score(hermes(GT, REASON), GT, TOOLS)
    assert (perfect.format, perfect.name, perfect.args, perfect.reasoning, perfect.total) == (1, 1, 1, 1, 1)
    no_reason = score(hermes(GT), GT, TOOLS)
    assert no_reason.reasoning == 0 and math.isclose(no_reason.total, 2 * 0.8 - 1)
    wrong_value = score(hermes([{"name": "get_weather", "arguments": {"city": "Paris", "days": 4}}]), GT, TOOLS)
    assert wrong_value.args == 0.5 and math.isclose(wrong_value.total, 2 * (0.2 + 0.2 + 0.2) - 1)
    wrong_fn = score(hermes([{"name": "convert", "arguments": {"amount": 1}}]), GT, TOOLS)
    assert wrong_fn.name == 0 and wrong_fn.args == 0 and math.isclose(wrong_fn.total, 2 * 0.2 - 1)
    extra = score(hermes(GT + [{"name": "convert", "arguments": {"amount": 1}}]), GT, TOOLS)
    assert extra.name == 0.5 and extra.args == 0.5
    missing = score(hermes(GT), GT + [{"name": "convert", "arguments": {"amount": 1, "to": "EUR"}}], TOOLS)
    assert missing.name == 0.5 and missing.args == 0.5
    malformed = score("<tool_call>\n{'name': 'get_weather'}\n</tool_call>", GT, TOOLS)
    assert malformed.format == 0 and malformed.total == -1 and malformed.error


def test_no_call_expected():
    for scheme in SCHEMES:
        lo, hi = reward_range(scheme)
        plain = score("I cannot help with that using these tools.", [], TOOLS, scheme=scheme)
        called = score(hermes(GT), [], TOOLS, scheme=scheme)
        assert plain.name == 1 and plain.args == 1
        assert called.name == 0 and called.args == 0
        assert plain.total > called.total
    assert score("No tool fits.", [], TOOLS, scheme="binary").total == 1
    assert score("No tool fits.", [], TOOLS, scheme="fine_grained").total == 4
    assert score(hermes(GT), [], TOOLS, scheme="fine_grained").total == 1 - 3


def test_binary_requires_exact_multiset_of_decoded_calls():
    two = GT + [{"name": "convert", "arguments": {"amount": 10.0, "to": "EUR"}}]
    swapped = list(reversed(two))
    assert score(hermes(swapped), two, TOOLS, scheme="binary").total == 1
    assert score(hermes(GT), two, TOOLS, scheme="binary").total == 0
    assert score(hermes(two + GT), two, TOOLS, scheme="binary").total == 0
    near = [{"name": "get_weather", "arguments": {"city": "paris ", "days": 3}}]
    assert score(hermes(near), GT, TOOLS, scheme="binary").total == 1  # trim/case aware
    as_float = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3.0}}]
    assert score(hermes(as_float), GT, TOOLS, scheme="binary").total == 0  # BFCL: 3.0 is no int


def test_binary_judges_decoded_calls_like_bfcl():
    """BFCL reads calls out of surrounding text, and text from which no call decodes is an
    abstention; the format component still reports the broken wrapping."""
    two = GT + [{"name": "convert", "arguments": {"amount": 10.0, "to": "EUR"}}]
    stray = score("Sure: " + hermes(two), two, TOOLS, scheme="binary")
    assert stray.total == 1 and stray.format == 0
    for garbage in ("<tool_call>{not json", "The answer uses <tool_call> tags, one per call.",
                    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "a", "city": "b"}}\n</tool_call>'):
        result = score(garbage, [], TOOLS, scheme="binary")
        assert result.total == 1 and result.format == 0 and result.n_pred == 0
        assert score(garbage, GT, TOOLS, scheme="binary").total == 0
    unterminated = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert score(unterminated, [], TOOLS, scheme="binary").total == 0  # a call decodes: spurious


def test_accepted_lists_take_any_bfcl_value():
    gold = [{"name": "get_weather", "arguments": {"city": "Paris"},
             "accepted": {"city": ["Paris", "Paris, France"], "days": ["", 3]}}]
    def total(args):
        return score(hermes([{"name": "get_weather", "arguments": args}]), gold, TOOLS, scheme="binary").total
    assert total({"city": "Paris"}) == total({"city": "paris, france", "days": 3}) == 1
    assert total({"city": "Lyon"}) == total({"city": "Paris", "days": 4}) == 0
    assert total({"city": "Paris", "unit": "c"}) == 0  # not an accepted key
    required = [{**gold[0], "accepted": {"city": ["Paris"], "days": [3]}}]  # "" absent: must be given
    assert score(hermes([{"name": "get_weather", "arguments": {"city": "Paris"}}]), required, TOOLS,
                 scheme="binary").total == 0
    weighted = score(hermes([{"name": "get_weather", "arguments": {"city": "Lyon", "days": 3}}]), gold, TOOLS)
    assert weighted.args == pytest.approx(0.5)  # partial credit: one of two keys accepted


def test_accepted_nested_dicts_and_lists_of_dicts():
    from toolrl_lib.rewards.matching import accepted_credit

    accepted = {"point": [{"x": [1, 2], "y": ["", 0]}], "rows": [[{"k": ["a", "A"]}, {"k": ["b"]}]]}
    assert accepted_credit({"point": {"x": 2}, "rows": [{"k": "a"}, {"k": "b"}]}, accepted, {}) == 1
    assert accepted_credit({"point": {"x": 3}, "rows": [{"k": "a"}, {"k": "b"}]}, accepted, {}) == 0.5
    assert accepted_credit({"point": {"x": 1, "z": 0}, "rows": [{"k": "b"}]}, accepted, {}) == 0


def test_fine_grained_matches_toolrl_formula():
    # pred: right name, keys {city, days}, one value right -> r_name 1, r_param 1, r_value 1
    pred = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 4}}]
    result = score(hermes(pred), GT, TOOLS, scheme="fine_grained")
    s_max = 1 + 1 + 2
    assert math.isclose(result.total, 1 + 6 * (1 + 1 + 1) / s_max - 3)
    assert result.name == 1 and math.isclose(result.args, (1 + 1) / (1 + 2))
    # extra call of another name: r_name = 1/2
    extra = score(hermes(GT + [{"name": "convert", "arguments": {}}]), GT, TOOLS, scheme="fine_grained")
    assert math.isclose(extra.total, 1 + 6 * (0.5 + 1 + 2) / s_max - 3)


def test_reasoning_rules():
    copied = "Weather in Paris for three days please, thank you"
    prompt = f"<|im_start|>user\n{copied}<|im_end|>"
    assert score(hermes(GT, copied), GT, TOOLS, context=prompt).reasoning == 0
    assert score(hermes(GT, copied), GT, TOOLS).reasoning == 1
    assert score(hermes(GT, "ok"), GT, TOOLS).reasoning == 0  # too short
    assert score("<think>a b c d</think>", GT, TOOLS).reasoning == 1


def test_weights_from_config():
    only_args = {"format": 0, "name": 0, "args": 1, "reasoning": 0}
    wrong_value = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 4}}]
    assert score(hermes(wrong_value), GT, TOOLS, weights=only_args).total == 0.0
    with pytest.raises(ValueError, match="unknown reward weight"):
        resolve_weights({"style": 1})
    with pytest.raises(ValueError):
        resolve_weights({"format": 0, "name": 0, "args": 0, "reasoning": 0})
    with pytest.raises(ValueError):
        score("", [], [], scheme="nope")


@pytest.mark.parametrize("family", FAMILIES)
def test_all_families_score_their_own_format(family):
    text = get_adapter(family).render_completion(GT, reasoning=REASON)
    for scheme in SCHEMES:
        assert score(text, GT, TOOLS, scheme=scheme, family=family).total == reward_range(scheme)[1]


def test_json_string_inputs_and_bad_ground_truth():
    assert score(hermes(GT, REASON), json.dumps(GT), json.dumps(TOOLS)).total == 1
    for bad_gt in ("not json", [1, None, {"name": 5}], {"name": "get_weather", "arguments": "x"}):
        result = score(hermes(GT), bad_gt, "{{{")
        assert -1 <= result.total <= 1


# --- robustness ----------------------------------------------------------------------
HOSTILE = [
    "<tool_call>\n" + '{"name": "f", "arguments": ' + "[" * 50_000,
    "x" * 2_000_000,
    "<tool_call>" * 20_000,
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": NaN}}\n</tool_call>',
    '<tool_call>\n{"name": "get_weather", "arguments": {"days": 1e999}}\n</tool_call>',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "\\ud800"}}\n</tool_call>',
    "\udcff\ud800<think>",
    None,
]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_hostile_inputs_score_in_range(scheme):
    lo, hi = reward_range(scheme)
    for text in HOSTILE:
        result = score(text, GT, TOOLS, scheme=scheme)
        assert lo <= result.total <= hi
        assert result.total < hi


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=10,
)
_pieces = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", "<|python_tag|>", "\n", "{", "}",
     '"name": "get_weather"', '"arguments": {', '"city": "Paris"', ",", "[", "]", "NaN", "1e999"]
)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(_pieces | st.text(max_size=10), max_size=30),
    gold=st.lists(st.fixed_dictionaries({"name": st.text(max_size=8), "arguments": st.dictionaries(st.text(max_size=5), _json_values, max_size=3)}), max_size=3),
    scheme=st.sampled_from(SCHEMES),
    family=st.sampled_from(FAMILIES),
)
def test_rewards_never_raise_and_stay_in_range(pieces, gold, scheme, family):
    result = score("".join(pieces), gold, TOOLS, scheme=scheme, family=family)
    lo, hi = reward_range(scheme)
    assert lo <= result.total <= hi
    for component in ("format", "name", "args", "reasoning"):
        assert 0.0 <= getattr(result, component) <= 1.0


@settings(max_examples=100, deadline=None)
@given(gold=st.lists(st.fixed_dictionaries({"name": st.sampled_from(["get_weather", "convert"]), "arguments": st.dictionaries(st.sampled_from(["city", "days", "amount", "to"]), _json_values, max_size=3)}), min_size=0, max_size=3), scheme=st.sampled_from(SCHEMES))
def test_rendered_ground_truth_gets_the_maximum(gold, scheme):
    """Property: the gold calls, rendered in the family's format, earn the top score."""
    gold = json.loads(json.dumps(gold, allow_nan=True).replace("NaN", "0").replace("Infinity", "1"))
    result = score(hermes(gold, REASON), gold, TOOLS, scheme=scheme)
    assert result.total == reward_range(scheme)[1], result


# --- TRL wrapper ---------------------------------------------------------------------
def test_trl_wrapper_signature_and_logging():
    (func,) = make_reward_funcs("weighted", "hermes")
    assert func.__name__ == "reward_weighted"
    logged = {}
    completions = [hermes(GT, REASON), "garbage", [{"role": "assistant", "content": hermes(GT)}]]
    rewards = func(
        prompts=["p1", "p2", "p3"],
        completions=completions,
        completion_ids=[[1], [2], [3]],
        ground_truth=[json.dumps(GT)] * 3,
        tools=[json.dumps(TOOLS), TOOLS, json.dumps(TOOLS)],
        example_id=["a", "b", "c"],
        trainer_state=None,
        log_extra=lambda *a: None,
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert rewards[0] == 1.0 and rewards[1] < 0 and math.isclose(rewards[2], 0.6)
    assert set(logged) == {"reward/format", "reward/name", "reward/args", "reward/reasoning"}
    assert math.isclose(logged["reward/reasoning"], 1 / 3)
    with pytest.raises(ValueError):
        make_reward_funcs("weighted", "gpt5")
