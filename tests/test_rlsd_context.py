"""Where the privileged text goes in the teacher prompt."""

from __future__ import annotations

import pytest

from toolrl_lib.models import make_tiny_tokenizer
from toolrl_lib.train.rlsd.context import (
    PrivilegedPrompter,
    insert_privileged,
    insert_privileged_messages,
    user_turn_suffixes,
)

LLAMA3_LIKE = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
THINKING_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def _render(tok, content: str, **kwargs) -> str:
    messages = [{"role": "system", "content": "Tools: f"}, {"role": "user", "content": content}]
    return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)


def test_chatml_hint_lands_at_end_of_user_message() -> None:
    tok = make_tiny_tokenizer()
    prompter = PrivilegedPrompter(tok)
    out = prompter(_render(tok, "call f"), " HINT")
    assert out == _render(tok, "call f HINT")


@pytest.mark.parametrize("template", [LLAMA3_LIKE, THINKING_LIKE])
def test_other_templates(template: str) -> None:
    tok = make_tiny_tokenizer()
    tok.chat_template = template
    prompter = PrivilegedPrompter(tok)
    for kwargs in ({}, {"enable_thinking": False}):
        assert prompter(_render(tok, "q", **kwargs), " HINT") == _render(tok, "q HINT", **kwargs)


def test_longest_suffix_wins() -> None:
    tok = make_tiny_tokenizer()
    tok.chat_template = THINKING_LIKE
    suffixes = user_turn_suffixes(tok)
    assert len(suffixes) == 2 and suffixes[0].endswith("</think>\n\n")


def test_unmatched_prompt_falls_back_to_append_and_warns() -> None:
    tok = make_tiny_tokenizer()
    prompter = PrivilegedPrompter(tok)
    with pytest.warns(UserWarning, match="appended"):
        assert prompter("plain text prompt", " HINT") == "plain text prompt HINT"
    assert insert_privileged("abc", "X", []) == "abcX"


def test_conversational_prompts_are_copied_not_mutated() -> None:
    messages = [{"role": "user", "content": "q"}]
    out = insert_privileged_messages(messages, " HINT")
    assert out == [{"role": "user", "content": "q HINT"}]
    assert messages == [{"role": "user", "content": "q"}]
    tool_last = [{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}]
    assert insert_privileged_messages(tool_last, "\n\nHINT")[-1] == {"role": "user", "content": "HINT"}
