"""Each distinct prompt tokenised once per run, not once per row and round (``fast.prompt_token_cache``).

TRL renders and tokenises a round's prompts every round, once per row: a round of 512 completions
is 64 prompts x 8 rows, each put through the chat template and the tokenizer again, and the
overlap (``overlap.py``) tokenises the next round's once more to generate it early. Run 12's
profile put the two at ~0.2 s of each round's first step (``benchmarks/results/
grpo_step_profile_run12.md``: prompt tokenisation ~0.11 s, the next round's prompts ~0.09 s), host
time on the trainer's main thread.

Here TRL's own ``_tokenize_prompts`` still tokenises every prompt the run has not seen, in one
call per batch, and the ids are kept under the prompt's content (a text prompt's text, as the
course's rows are rendered; a conversation's JSON), so a prompt seen before costs a dictionary
lookup. The ids are TRL's: its batched call tokenises each text, or renders and tokenises each
conversation, on its own, without padding (tested against TRL's method). Anything else (images,
content parts, multimodal fields, per-environment tools, a VLM processor) goes to TRL's method
untouched. Ids are stored as 32-bit arrays, ~4 bytes a token.
"""

from __future__ import annotations

import json
from array import array
from typing import Any

from toolrl_lib.fast import trl_compat


def prompt_key(prompt: Any) -> str | None:
    """The cache key of one prompt: the text of a text prompt, the JSON of a text conversation,
    each marked with its kind; None for anything else (images, content parts).

    >>> prompt_key("<|im_start|>user hi"), prompt_key([{"role": "user", "content": "hi"}])
    ('text:<|im_start|>user hi', 'chat:[{"content": "hi", "role": "user"}]')
    >>> prompt_key([{"role": "user", "content": [{"type": "image", "image": object()}]}]), prompt_key(7)
    (None, None)
    """
    if isinstance(prompt, str):
        return "text:" + prompt
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str | None)
                                               for m in prompt):
        return None
    try:
        return "chat:" + json.dumps(prompt, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):  # something JSON cannot hold: not cached
        return None


class PromptTokenCache:
    """``GRPOTrainer._tokenize_prompts`` with each distinct prompt tokenised once (``install``).

    ``hits``/``misses``: prompts answered from the cache / tokenised by TRL; ``passed``: batches
    handed to TRL whole (not text conversations, or TRL returned images or multimodal fields)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.ids: dict[str, array] = {}
        self.hits = self.misses = self.passed = 0

    def tokenize(self, call: Any, prompts: list[Any], *args: Any, **kwargs: Any) -> Any:
        trainer = self.trainer
        keys = [prompt_key(p) for p in prompts]
        if (args or kwargs or not prompts or None in keys or getattr(trainer, "_is_vlm", False)
                or getattr(trainer, "environment_factories", None) is not None):
            self.passed += 1
            return call(prompts, *args, **kwargs)
        missing: dict[str, Any] = {}
        for key, prompt in zip(keys, prompts, strict=True):
            if key not in self.ids and key not in missing:
                missing[key] = prompt
        if missing:
            prompt_ids, images, multimodal_fields = call(list(missing.values()))
            if images is not None or multimodal_fields:  # not text after all: TRL's answer for the whole batch
                self.passed += 1
                return call(prompts)
            for key, ids in zip(missing, prompt_ids, strict=True):
                self.ids[key] = array("i", ids)
        self.misses += len(missing)
        self.hits += len(prompts) - len(missing)
        return [self.ids[key].tolist() for key in keys], None, {}

    def stats(self) -> dict[str, int]:
        """What the run records (run_info's ``prompt_token_cache``)."""
        return {"prompts_kept": len(self.ids), "hits": self.hits, "misses": self.misses, "batches_passed": self.passed}


def install(trainer: Any) -> PromptTokenCache:
    """Hook ``trainer._tokenize_prompts`` (TRL's rollouts, the overlap's next round, RLSD's teacher
    prompts all call it); returns the cache (its counts)."""
    cache = PromptTokenCache(trainer)
    trl_compat.hook(trainer, "_tokenize_prompts", cache.tokenize)
    return cache


__all__ = ["PromptTokenCache", "install", "prompt_key"]
