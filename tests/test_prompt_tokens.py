"""fast.prompt_token_cache: TRL's prompt ids, each distinct prompt tokenised once."""

from __future__ import annotations

import doctest
import types

import pytest

from toolrl_lib.fast import prompt_tokens


def _trainer(tiny_model_dir, **extra):
    """A stand-in GRPOTrainer with TRL 1.15's own ``_tokenize_prompts`` bound to it."""
    from trl import GRPOTrainer

    from toolrl_lib.models import load_tokenizer

    trainer = types.SimpleNamespace(processing_class=load_tokenizer(str(tiny_model_dir)), _is_vlm=False,
                                    environment_factories=None, tools=None, chat_template=None,
                                    chat_template_kwargs={}, **extra)
    trainer._tokenize_prompts = types.MethodType(GRPOTrainer._tokenize_prompts, trainer)
    return trainer


def _conversation(text):
    return [{"role": "system", "content": "You call tools."}, {"role": "user", "content": text}]


def test_the_cache_gives_trls_ids_and_tokenises_each_prompt_once(tiny_model_dir):
    trainer = _trainer(tiny_model_dir)
    trls = trainer._tokenize_prompts
    calls = []
    cache = prompt_tokens.PromptTokenCache(trainer)
    texts = ["weather in Paris?", "book a table", "weather in Paris?", "héllo ünïcode", "book a table"]
    batch = [_conversation(t) for t in texts]
    expected = trls([_conversation(t) for t in texts])

    def counting(prompts):  # TRL's method, each call counted
        calls.append(len(prompts))
        return trls(prompts)

    trainer._tokenize_prompts = lambda prompts: cache.tokenize(counting, prompts)  # as install hooks it
    got = trainer._tokenize_prompts(batch)
    assert got == (expected[0], None, {}) and got[0][0] != got[0][1]
    assert calls == [3]  # the three distinct prompts, in one call
    again = trainer._tokenize_prompts([_conversation("book a table")] * 8 + [_conversation("new one")])
    assert again[0] == trls([_conversation("book a table")] * 8 + [_conversation("new one")])[0]
    assert calls == [3, 1]
    assert cache.stats() == {"prompts_kept": 4, "hits": 1 + 1 + 8, "misses": 3 + 1, "batches_passed": 0}
    again[0][0].append(-1)  # a caller changing its ids does not change the cache's
    assert trainer._tokenize_prompts([_conversation("book a table")])[0] == [expected[0][1]]


def test_text_prompts_as_the_course_renders_them_get_trls_ids(tiny_model_dir):
    """The course's GRPO rows hold prompts already rendered to text (``grpo_rows``): TRL tokenises
    them with the tokenizer alone; the cache gives the same ids, each text tokenised once."""
    trainer = _trainer(tiny_model_dir)
    trls = trainer._tokenize_prompts
    texts = ["<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", "plain", "plain"] * 3
    cache = prompt_tokens.install(trainer)
    assert trainer._tokenize_prompts(texts) == (trls(texts)[0], None, {})
    assert trainer._tokenize_prompts(texts[:2]) == (trls(texts[:2])[0], None, {})
    assert cache.stats() == {"prompts_kept": 2, "hits": 7 + 2, "misses": 2, "batches_passed": 0}
    # a text and a conversation never share a key, whatever the text says
    assert prompt_tokens.prompt_key('[{"content": "hi", "role": "user"}]') != prompt_tokens.prompt_key(
        [{"role": "user", "content": "hi"}])


def test_prompts_the_cache_does_not_keep_go_to_trl_untouched(tiny_model_dir):
    with_env = _trainer(tiny_model_dir)
    with_env.environment_factories = [object()]
    seen = []
    cached = prompt_tokens.PromptTokenCache(with_env)
    cached.tokenize(lambda prompts: seen.append(prompts) or ([[1]], None, {}), [_conversation("x")])
    assert seen == [[_conversation("x")]] and cached.passed == 1 and not cached.ids
    parts = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    plain = prompt_tokens.PromptTokenCache(_trainer(tiny_model_dir))
    assert plain.tokenize(lambda prompts: ("trl", prompts), [parts]) == ("trl", [parts])
    assert plain.passed == 1 and not plain.ids
    images = prompt_tokens.PromptTokenCache(_trainer(tiny_model_dir))
    answers = iter([([[1]], [["img"]], {}), ([[1]], [["img"]], {})])
    assert images.tokenize(lambda prompts: next(answers), [_conversation("y")]) == ([[1]], [["img"]], {})
    assert images.passed == 1 and not images.ids


@pytest.mark.parametrize("on", [False, True])
def test_fast_install_hooks_it_when_asked(on, tiny_model_dir):
    from toolrl_lib import fast
    from toolrl_lib.train.config import load_run_config

    config = load_run_config("configs/smoke.yaml", [f"fast.prompt_token_cache={str(on).lower()}",
                                                     "fast.skip_zero_advantage=false", "fast.rollouts=trl",
                                                     "fast.merged_generation=false", "fast.shared_prompt=false",
                                                     "fast.group_batches=false", "fast.loss_mmap_threshold=0"])
    trainer = _trainer(tiny_model_dir)
    done = fast.install(trainer, config)
    assert (done.prompt_tokens is not None) == on
    assert any("fast.prompt_token_cache" in line for line in done) == on


def test_doctests():
    assert doctest.testmod(prompt_tokens).failed == 0
