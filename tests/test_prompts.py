"""Prompt adapters: rendering, parsing, round trips (hypothesis), family detection."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.templates import QWEN3_STYLE_TEMPLATE
from toolrl_lib.data.example import Example
from toolrl_lib.models import CHATML_TEMPLATE, make_tiny_tokenizer
from toolrl_lib.prompts import (
    FAMILIES,
    NO_CALL_TEXT,
    detect_family,
    get_adapter,
    template_handles_tools,
)

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {"name": "get_time", "description": "Time", "parameters": {"type": "object", "properties": {}}},
]
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
    {"name": "get_time", "arguments": {}},
]

QWEN_LIKE_TEMPLATE = QWEN3_STYLE_TEMPLATE


def make_example(ground_truth=CALLS, messages=None) -> Example:
    messages = messages or [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris for 3 days, and the time?"},
    ]
    return Example(id="t-1", source="test", messages=messages, tools=TOOLS, ground_truth=ground_truth)


@pytest.fixture(scope="module")
def chatml_tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def qwen_tokenizer():
    tokenizer = make_tiny_tokenizer()
    tokenizer.chat_template = QWEN_LIKE_TEMPLATE
    return tokenizer


@pytest.mark.parametrize("family", FAMILIES)
def test_render_completion_parses_back(family):
    adapter = get_adapter(family)
    for reasoning in (None, "The user asks two things, so two calls."):
        text = adapter.render_completion(CALLS, reasoning=reasoning)
        parsed = adapter.parse(text)
        assert parsed.valid, (family, text, parsed.error)
        assert parsed.calls == CALLS
        assert parsed.reasoning == reasoning
        assert "<|im_end|>" not in text


@pytest.mark.parametrize("family", FAMILIES)
def test_no_call_answer_is_valid_and_empty(family):
    adapter = get_adapter(family)
    parsed = adapter.parse(adapter.render_completion([]))
    assert parsed.valid and parsed.calls == [] and parsed.content == NO_CALL_TEXT


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_contains_tools_query_and_generation_prompt(family, chatml_tokenizer):
    prompt = get_adapter(family).render_prompt(make_example(), chatml_tokenizer)
    assert "get_weather" in prompt and "get_time" in prompt
    assert "Weather in Paris for 3 days" in prompt
    assert "Be brief." in prompt
    assert prompt.count("<|im_start|>system") == 1
    assert "<|im_start|>assistant\n" in prompt


def test_qwen3_thinking_switch_without_native_template(chatml_tokenizer):
    adapter = get_adapter("qwen3")
    off = adapter.render_prompt(make_example(), chatml_tokenizer, enable_thinking=False)
    on = adapter.render_prompt(make_example(), chatml_tokenizer, enable_thinking=True)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.endswith("<|im_start|>assistant\n")
    assert "<tools>" in off and "# Tools" in off


def test_qwen3_uses_native_tools_template(qwen_tokenizer):
    assert template_handles_tools(qwen_tokenizer)
    adapter = get_adapter("qwen3")
    off = adapter.render_prompt(make_example(), qwen_tokenizer, enable_thinking=False)
    on = adapter.render_prompt(make_example(), qwen_tokenizer, enable_thinking=True)
    assert off.endswith("<think>\n\n</think>\n\n") and off.count("<think>") == 1
    assert not on.endswith("</think>\n\n")
    # The template (not our block) rendered the tools: its compact header, wrapped entries.
    assert "# Tools\n<tools>" in off
    assert '"type": "function"' in off or '"type":"function"' in off
    assert "Be brief.\n\n# Tools" in off


def test_history_tool_calls_render_as_text(chatml_tokenizer):
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALLS[0]]},
        {"role": "tool", "content": '{"temp": 20}'},
        {"role": "user", "content": "And the time?"},
    ]
    example = make_example(ground_truth=[CALLS[1]], messages=messages)
    for family in FAMILIES:
        adapter = get_adapter(family)
        rendered = adapter.render_messages(example)
        assistant = [m for m in rendered if m["role"] == "assistant"]
        assert adapter.parse(assistant[0]["content"]).calls == [CALLS[0]]
        assert '{"temp": 20}' in adapter.render_prompt(example, chatml_tokenizer)


def test_native_history_renders_with_tool_calls(qwen_tokenizer):
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALLS[0]]},
        {"role": "tool", "content": '{"temp": 20}'},
    ]
    prompt = get_adapter("qwen3").render_prompt(make_example(messages=messages), qwen_tokenizer)
    assert '"city": "Paris"' in prompt or '"city":"Paris"' in prompt


@pytest.mark.parametrize(
    ("template", "family"),
    [
        (CHATML_TEMPLATE, "hermes"),
        (QWEN_LIKE_TEMPLATE, "qwen3"),
        ("{{ '<|start_header_id|>' }}{% if tools %}<|python_tag|>{% endif %}", "llama3"),
        ("{{ '[INST]' }}{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]", "mistral"),
        (None, "hermes"),
    ],
)
def test_detect_family(template, family):
    tokenizer = make_tiny_tokenizer()
    tokenizer.chat_template = template
    assert detect_family(tokenizer) == family


def test_get_adapter_rejects_unknown_family():
    with pytest.raises(ValueError, match="qwen3"):
        get_adapter("gpt")


@pytest.mark.parametrize(
    ("family", "text", "error"),
    [
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {}}', "unterminated"),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call> thanks', "after"),
        ("hermes", 'Sure! <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', "before"),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": NaN}}\n</tool_call>', "NaN"),
        ("hermes", '<tool_call>\n{"name": "f", "name": "g", "arguments": {}}\n</tool_call>', "duplicate"),
        ("hermes", "<tool_call>\n{'name': 'f'}\n</tool_call>", "invalid JSON"),
        ("hermes", '<tool_call>\n{"arguments": {}}\n</tool_call>', "name"),
        ("hermes", "<think>never closed", "unterminated"),
        ("qwen3", '<tool_call>\n["f"]\n</tool_call>', "object"),
        ("llama3", 'Let me call {"name": "f", "parameters": {}}', "before"),
        ("llama3", '{"name": "f", "parameters": {}} done', "after"),
        ("mistral", '[TOOL_CALLS] oops', "not followed"),
        ("mistral", 'ok [TOOL_CALLS][{"name": "f", "arguments": {}}]', "before"),
    ],
)
def test_invalid_formats_are_reported(family, text, error):
    parsed = get_adapter(family).parse(text)
    assert not parsed.valid
    assert error in parsed.error


def test_calls_are_recovered_from_invalid_format():
    parsed = get_adapter("hermes").parse('Sure! <tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>')
    assert not parsed.valid and parsed.calls == [{"name": "f", "arguments": {"x": 1}}]


def test_variants_accepted():
    hermes = get_adapter("hermes")
    # arguments given as a JSON string; trailing end-of-turn token.
    text = '<tool_call>\n{"name": "f", "arguments": "{\\"x\\": 1}"}\n</tool_call><|im_end|>'
    assert hermes.parse(text).calls == [{"name": "f", "arguments": {"x": 1}}]
    llama = get_adapter("llama3")
    for text in (
        '<|python_tag|>{"name": "f", "parameters": {"x": 1}}',
        '[{"name": "f", "arguments": {"x": 1}}]',
        '{"name": "f", "parameters": {"x": 1}}; {"name": "f", "parameters": {"x": 1}}',
    ):
        parsed = llama.parse(text)
        assert parsed.valid and parsed.calls[0] == {"name": "f", "arguments": {"x": 1}}, text
    assert get_adapter("mistral").parse('[TOOL_CALLS] {"name": "f", "arguments": {"x": 1}}</s>').valid
    parsed = get_adapter("mistral").parse('[TOOL_CALLS]f[ARGS]{"x": 1}[TOOL_CALLS]g[ARGS]{}')
    assert parsed.valid and parsed.calls == [{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {}}]
    assert not get_adapter("mistral").parse('[TOOL_CALLS]f[ARGS]{"x": 1} and more').valid
    plain = llama.parse('Your "name" is on the form.')
    assert plain.valid and plain.calls == []
    # A completion that starts inside the reasoning (template opened <think>).
    parsed = hermes.parse('thinking here</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert parsed.valid and parsed.reasoning == "thinking here"
    late = hermes.parse('Sure. <think>a late plan here</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert not late.valid and late.reasoning is None and "not at the start" in late.error


@pytest.mark.parametrize("family", FAMILIES)
def test_parse_never_raises_on_junk(family):
    adapter = get_adapter(family)
    for junk in (None, 42, "", "<tool_call>" * 5000, "[" * 100_000, "\ud800", "<think>" * 3,
                 '<tool_call>\n{"name": "f", "arguments": ' + "[" * 5000 + "]" * 5000 + "}\n</tool_call>",
                 "[TOOL_CALLS]" + "[" * 3000, '{"name": ' + "9" * 10_000 + "}"):
        parsed = adapter.parse(junk)
        assert isinstance(parsed.calls, list)
        assert len(parsed.calls) <= 32


def test_thousands_of_blocks_are_capped():
    block = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
    parsed = get_adapter("hermes").parse(block * 1000)
    assert not parsed.valid and "more than" in parsed.error and len(parsed.calls) == 32


# --- round-trip property per family -------------------------------------------------
_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30
).map(str.strip).filter(bool)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", '"name"', "<tool_call>"])
)
_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
_calls = st.lists(
    st.fixed_dictionaries({"name": _names, "arguments": st.dictionaries(st.text(max_size=12), _values, max_size=5)}),
    min_size=1,
    max_size=5,
)
_reasoning = st.none() | st.text(min_size=1, max_size=80).filter(
    lambda s: s.strip() and "<think>" not in s and "</think>" not in s
).map(str.strip)


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=_calls, reasoning=_reasoning)
def test_round_trip_property(family, calls, reasoning):
    adapter = get_adapter(family)
    text = adapter.render_completion(calls, reasoning=reasoning)
    parsed = adapter.parse(text)
    assert parsed.valid, (text, parsed.error)
    assert json.dumps(parsed.calls, sort_keys=True) == json.dumps(calls, sort_keys=True)
    assert parsed.reasoning == reasoning


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_parse_never_raises_property(family, text):
    parsed = get_adapter(family).parse(text)
    assert parsed.valid in (True, False)
    assert parsed.valid or parsed.error
