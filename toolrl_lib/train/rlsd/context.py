"""Put the privileged text into the teacher's prompt (and nowhere else).

The text goes at the end of the last user message, so the teacher reads "request +
reference answer" and then starts its own assistant turn exactly where the student did.
For already-rendered string prompts we find the chat template's "end of user turn +
assistant header" suffix by rendering a probe conversation, and insert before it. This
works for ChatML (Qwen, SmolLM, Hermes), Llama 3 and Mistral templates alike, whatever
the thinking-mode header looks like.
"""

from __future__ import annotations

import warnings
from typing import Any

_PROBE = "\u2063RLSD-PROBE\u2063"
_TEMPLATE_VARIANTS: tuple[dict[str, Any], ...] = (
    {},
    {"enable_thinking": False},
    {"enable_thinking": True},
)


def user_turn_suffixes(tokenizer: Any, extra_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Candidate texts that follow a user message's content up to the generation prompt.

    Longest first, so the most specific suffix (e.g. with an empty ``<think>`` block) wins.
    """
    suffixes = set()
    variants = list(_TEMPLATE_VARIANTS)
    if extra_kwargs:
        variants.insert(0, dict(extra_kwargs))
    for kwargs in variants:
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": _PROBE}],
                add_generation_prompt=True,
                tokenize=False,
                **kwargs,
            )
        except Exception:  # a template may reject a kwarg or have no chat template at all
            continue
        if isinstance(text, str) and _PROBE in text:
            suffixes.add(text.rsplit(_PROBE, 1)[1])
    return sorted((s for s in suffixes if s), key=len, reverse=True)


def insert_privileged(prompt: str, hint: str, suffixes: list[str]) -> str:
    """Insert ``hint`` before the first matching user-turn suffix at the end of ``prompt``.

    With no match (no chat template, or a prompt that does not end in a user turn), the
    hint is appended at the end, as a plain-text continuation of the prompt.
    """
    for suffix in suffixes:
        if prompt.endswith(suffix):
            return prompt[: len(prompt) - len(suffix)] + hint + suffix
    return prompt + hint


def insert_privileged_messages(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """Conversational prompt: append ``hint`` to the last user message (copy; input untouched)."""
    messages = [dict(m) for m in messages]
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        last["content"] = last["content"] + hint
    else:
        messages.append({"role": "user", "content": hint.lstrip()})
    return messages


class PrivilegedPrompter:
    """Builds teacher prompts for a tokenizer; caches the template probe."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.suffixes = user_turn_suffixes(tokenizer, chat_template_kwargs)
        self._warned = False

    def __call__(self, prompt: str | list[dict[str, Any]], hint: str) -> str | list[dict[str, Any]]:
        if isinstance(prompt, list):
            return insert_privileged_messages(prompt, hint)
        if not any(prompt.endswith(s) for s in self.suffixes) and not self._warned:
            self._warned = True
            warnings.warn(
                "RLSD: the prompt does not end with this tokenizer's user-turn + assistant header; "
                "the privileged text is appended at the end of the prompt instead.",
                stacklevel=2,
            )
        return insert_privileged(prompt, hint, self.suffixes)
