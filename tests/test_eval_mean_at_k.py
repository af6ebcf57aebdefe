"""mean@k: per-scheme means over k samples, shared by training validation and notebook 05."""

import pytest

from toolrl_lib.data.example import Example
from toolrl_lib.evaluate.mean_at_k import MeanAtK, mean_at_k, score_example
from toolrl_lib.models import make_tiny_model
from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards import reward_range

TOOLS = [{"name": "get_weather", "description": "Weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]  # fmt: skip


def _examples():
    call = Example("t-0", "test", [{"role": "user", "content": "Weather in Oslo?"}], TOOLS,
                   [{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    none = Example("t-1", "test", [{"role": "user", "content": "Tell me a joke."}], TOOLS, [])
    return [call, none]


def test_score_example_perfect_and_wrong_completions():
    adapter = get_adapter("hermes")
    call, _ = _examples()
    perfect = adapter.render_completion(call.ground_truth)
    wrong = adapter.render_completion([{"name": "get_weather", "arguments": {"city": "Rome"}}])
    row = score_example(call, [perfect, perfect], "hermes", ("binary", "weighted"), adapter)
    assert row["binary"] == reward_range("binary")[1]
    assert row["valid_rate"] == 1.0 and row["call_rate"] == 1.0
    mixed = score_example(call, [perfect, wrong], "hermes", ("binary",), adapter)
    lo, hi = reward_range("binary")
    assert mixed["binary"] == pytest.approx((hi + lo) / 2)


def test_mean_at_k_with_tiny_model():
    model, tok = make_tiny_model(seed=0)
    result = mean_at_k(model, tok, _examples(), "hermes", k=2, max_new_tokens=4, batch_size=4, seed=1)
    assert isinstance(result, MeanAtK)
    assert set(result.scores) == {"binary_mean@2", "weighted_mean@2"}
    assert result.n_examples == 2 and result.k == 2 and len(result.per_example) == 2
    for scheme in ("binary", "weighted"):
        lo, hi = reward_range(scheme)
        assert lo <= result.scores[f"{scheme}_mean@2"] <= hi
        mean = sum(r[scheme] for r in result.per_example) / 2
        assert result.scores[f"{scheme}_mean@2"] == pytest.approx(mean)
    again = mean_at_k(model, tok, _examples(), "hermes", k=2, max_new_tokens=4, batch_size=4, seed=1)
    assert again.scores == result.scores  # seeded sampling is reproducible
    assert result.to_dict()["k"] == 2


def test_mean_at_k_arguments():
    model, tok = make_tiny_model(seed=0)
    with pytest.raises(ValueError):
        mean_at_k(model, tok, [], "hermes")
    with pytest.raises(ValueError):
        mean_at_k(model, tok, _examples(), "hermes", k=0)
    greedy = mean_at_k(model, tok, _examples(), "hermes", k=1, temperature=0, max_new_tokens=3)
    assert greedy.k == 1 and "binary_mean@1" in greedy.scores


def test_a_sampler_replaces_generate_with_the_same_scores(monkeypatch):
    """The same texts score the same whether ``generate`` (on a model) or a sampler (vLLM's, say)
    produced them; each gets the prompts in example order and the sampling settings."""
    from toolrl_lib import generation

    _, tok = make_tiny_model(seed=0)
    adapter = get_adapter("hermes")
    call, none = _examples()
    perfect = adapter.render_completion(call.ground_truth)
    wrong = adapter.render_completion([{"name": "get_weather", "arguments": {"city": "Rome"}}])
    texts = {adapter.render_prompt(call, tok): [perfect, wrong],
             adapter.render_prompt(none, tok): [perfect, perfect]}
    seen = {}

    def fake_generate(model, tokenizer, prompts, **kwargs):
        seen["generate"] = (model, list(prompts), kwargs)
        return [texts[p] for p in prompts]

    def sampler(prompts, k, max_new_tokens, temperature, top_p, seed):
        seen["sampler"] = (list(prompts), k, max_new_tokens, temperature, top_p, seed)
        return [texts[p] for p in prompts]

    monkeypatch.setattr(generation, "generate", fake_generate)
    settings = {"k": 2, "max_new_tokens": 5, "temperature": 0.7, "top_p": 0.9, "seed": 4}
    via_generate = mean_at_k("model", tok, [call, none], "hermes", batch_size=8, **settings)
    via_sampler = mean_at_k(None, tok, [call, none], "hermes", sampler=sampler, **settings)
    assert via_sampler.to_dict() == via_generate.to_dict()
    assert via_sampler.per_example[0]["binary"] != via_sampler.per_example[1]["binary"]
    assert seen["sampler"] == (list(texts), 2, 5, 0.7, 0.9, 4)
    assert seen["generate"] == ("model", list(texts), {
        "max_new_tokens": 5, "do_sample": True, "temperature": 0.7, "top_p": 0.9,
        "num_return_sequences": 2, "batch_size": 8, "seed": 4})
