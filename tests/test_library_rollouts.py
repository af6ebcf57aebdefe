"""``fast.rollouts: library``: TRL's rollout contract, sampled by toolrl_lib.generation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from toolrl_lib.fast.library_rollouts import distinct_runs, library_rollout, unsupported_settings


def fake_trainer(model, tokenizer, **args):
    settings = dict(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=12, min_p=None,
                    repetition_penalty=1.0, generation_kwargs=None, use_vllm=False)
    settings.update(args)
    return SimpleNamespace(args=SimpleNamespace(**settings), processing_class=tokenizer, model=model,
                           accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                           eos_token_ids=[tokenizer.eos_token_id])


PROMPTS = ["<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"]


def test_rollout_contract_matches_trl_tokenization_and_truncation():
    from toolrl_lib.models import make_tiny_model

    model, tokenizer = make_tiny_model()
    trainer = fake_trainer(model, tokenizer)
    batch = [PROMPTS[0]] * 3 + [PROMPTS[1]] * 3  # TRL repeats each prompt num_generations times
    out = library_rollout()(batch, trainer)
    assert out["logprobs"] is None
    assert out["prompt_ids"] == tokenizer(text=batch)["input_ids"]  # exactly TRL's own tokenization
    assert len(out["completion_ids"]) == len(batch)
    eos = tokenizer.eos_token_id
    for ids in out["completion_ids"]:
        assert 1 <= len(ids) <= 12
        assert eos not in ids[:-1]  # stops at the first end-of-turn id, which it keeps
        assert ids[-1] == eos or len(ids) == 12


def test_rollout_at_tiny_temperature_is_transformers_greedy():
    import torch

    from toolrl_lib.models import make_tiny_model

    model, tokenizer = make_tiny_model(seed=3)
    out = library_rollout()([PROMPTS[0]] * 2, fake_trainer(model, tokenizer, temperature=1e-4))
    ids = torch.tensor([tokenizer(text=PROMPTS[0])["input_ids"]])
    greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                            max_new_tokens=12, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)[0, ids.shape[1]:].tolist()
    if tokenizer.eos_token_id in greedy:
        greedy = greedy[: greedy.index(tokenizer.eos_token_id) + 1]
    assert out["completion_ids"] == [greedy, greedy]


def test_distinct_runs_and_refused_settings():
    assert distinct_runs(["p", "p", "q"]) == [("p", 2), ("q", 1)]
    assert unsupported_settings(SimpleNamespace(min_p=0.1, repetition_penalty=1.1)) == [
        "min_p=0.1", "repetition_penalty=1.1"]
    with pytest.raises(ValueError, match="string prompts"):
        library_rollout()([[{"role": "user", "content": "hi"}]], SimpleNamespace(args=None))
    from toolrl_lib.models import make_tiny_model

    model, tokenizer = make_tiny_model()
    with pytest.raises(ValueError, match="repetition_penalty=1.2"):
        library_rollout()(PROMPTS, fake_trainer(model, tokenizer, repetition_penalty=1.2))


def test_config_refuses_library_rollouts_with_what_wraps_trls_sampler():
    from toolrl_lib.train.config import load_run_config

    with pytest.raises(ValueError, match="fast.rollouts"):
        load_run_config(None, ["model.name=x", "data.train_files=[a.jsonl]", "fast.rollouts=library",
                               "grpo.loss_type=rlsd"])


@pytest.mark.slow
def test_grpo_trains_with_library_rollouts(tmp_path):
    """A tiny GRPO run sampled by the library: steps complete, completions are capped, it learns."""
    import pandas as pd
    from safetensors.torch import load_file

    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.models import make_tiny_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    config = load_run_config(None, tiny_overrides(tmp_path, **{"fast.rollouts": "library",
                                                              "validation.enabled": "false"}))
    run = train(config, tmp_path / "run", reward_funcs=[length_reward])
    metrics = pd.read_csv(run / "metrics.csv")
    assert list(metrics["step"]) == [1, 2]
    assert (metrics["completions/max_length"] <= 8).all()
    adapter = load_file(run / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in adapter.items() if "lora_B" in k)


@pytest.mark.slow
def test_library_rollouts_with_merged_lora_sample_what_the_lora_path_samples(tmp_path):
    """fast.merged_generation with library rollouts: the rollout runs through W + sBA (adapters
    off), and in fp32 samples the same tokens as the LoRA path after a step has moved the adapter."""
    import pandas as pd

    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.fast import merged_generation
    from toolrl_lib.models import make_tiny_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    merged_calls = []
    real = merged_generation.lora_merged

    def counting(model):
        merged_calls.append(1)
        return real(model)

    completions = {}
    for merged in ("false", "true"):
        if merged == "true":
            merged_generation.lora_merged = counting
        try:
            config = load_run_config(None, tiny_overrides(tmp_path, **{
                "fast.rollouts": "library", "validation.enabled": "false", "fast.merged_generation": merged}))
            run = train(config, tmp_path / f"run-{merged}", reward_funcs=[length_reward])
        finally:
            merged_generation.lora_merged = real
        completions[merged] = pd.read_csv(run / "metrics.csv")
    assert len(merged_calls) == 2  # one merged rollout per step
    for column in ("completions/mean_length", "completions/max_length", "reward", "reward_std"):
        assert completions["false"][column].tolist() == completions["true"][column].tolist(), column
