"""Merged-weight rollouts compute what the LoRA model computes, and leave it as it was."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch


@pytest.fixture()
def lora_model(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"],
                        init_lora_weights=False)  # random B: the adapters change the output
    return get_peft_model(base, config)


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_merged_weights_give_the_lora_output_and_are_undone(lora_model):
    from toolrl_lib.fast.merged_generation import lora_merged

    ids = torch.randint(3, 200, (2, 12))
    with_lora = _logits(lora_model, ids)
    with lora_model.disable_adapter():
        base_only = _logits(lora_model, ids)
    assert not torch.allclose(with_lora, base_only, atol=1e-4)  # the adapters matter here
    weights = {n: p.detach().clone() for n, p in lora_model.named_parameters()}
    with lora_merged(lora_model):
        merged = _logits(lora_model, ids)
        q = lora_model.base_model.model.model.layers[0].self_attn.q_proj
        assert q.disable_adapters  # the LoRA branch is off while merged
    torch.testing.assert_close(merged, with_lora, atol=1e-5, rtol=1e-4)
    assert all(torch.equal(p, weights[n]) for n, p in lora_model.named_parameters())  # exact
    assert not q.disable_adapters
    torch.testing.assert_close(_logits(lora_model, ids), with_lora, atol=0, rtol=0)


def test_weights_come_back_when_generation_fails(lora_model):
    from toolrl_lib.fast.merged_generation import lora_merged

    q = lora_model.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    before, pointer = q.weight.detach().clone(), q.weight.data_ptr()
    with pytest.raises(RuntimeError, match="boom"), lora_merged(lora_model):
        assert q.weight.data_ptr() != pointer and not torch.equal(q.weight, before)  # the copy
        raise RuntimeError("boom")
    assert q.weight.data_ptr() == pointer and torch.equal(q.weight, before)  # the original tensor


def test_a_model_without_lora_is_refused(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from toolrl_lib.fast.merged_generation import lora_merged

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with pytest.raises(ValueError, match="no LoRA layers"), lora_merged(model):
        pass


@pytest.mark.gpu_harness
def test_benchmark_script_writes_its_table(tiny_model_dir, tmp_path):
    import json

    from benchmarks.gpu import merged_generation as bench

    assert bench.main(["--model", str(tiny_model_dir), "--batch", "2", "--new-tokens", "4",
                       "--repeats", "1", "--rank", "4", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "merged_generation_cpu.json").read_text())
    assert [r["way"] for r in result["rows"]] == ["lora", "merged", "base (no adapters)"]
    assert all(r["mean_s"] > 0 for r in result["rows"]) and result["rows"][0]["speedup_vs_lora"] == 1.0
    assert 0.0 <= result["greedy_token_agreement_merged_vs_lora"] <= 1.0
    assert "| merged |" in (tmp_path / "merged_generation_cpu.md").read_text()
    assert bench.main(["--shapes", "tiny", "--batch", "2", "--new-tokens", "4", "--prompt-tokens", "8",
                       "--repeats", "1", "--out", str(tmp_path / "random")]) == 0  # random weights
    result = json.loads((tmp_path / "random" / "merged_generation_cpu.json").read_text())
    assert result["model"] == "random tiny" and result["prompt_tokens"] == 8 and len(result["rows"]) == 3


def test_generation_method_prefers_the_single_turn_call():
    from types import SimpleNamespace

    from toolrl_lib.fast.trl_compat import generation_method

    def single_turn():
        return None

    def whole():
        return None

    assert generation_method(SimpleNamespace(_generate_single_turn=single_turn, _generate=whole)) == (
        "_generate_single_turn", single_turn)
    assert generation_method(SimpleNamespace(_generate=whole)) == ("_generate", whole)
    with pytest.raises(RuntimeError, match="renamed its rollout method"):
        generation_method(SimpleNamespace())


def test_merged_path_check_passes_for_peft_and_restores_the_adapters(lora_model):
    from toolrl_lib.fast.merged_generation import merged_path_check

    before = {k: v.clone() for k, v in lora_model.state_dict().items()}
    lora_model.train()
    ids = torch.tensor([[3, 14, 15, 9, 26, 5]])
    check = merged_path_check(lora_model, ids, new_tokens=4)
    assert check["ok"] and check["base_vs_lora_mean_logit_gap"] > 0
    assert check["merged_vs_lora_max_logit_gap"] < 1e-3 and check["merged_vs_lora_token_agreement"] == 1.0
    assert lora_model.training  # mode restored
    for key, value in lora_model.state_dict().items():
        assert torch.equal(value, before[key]), key  # B and the base weights are back


@contextmanager
def merged_but_adapters_stay_on(model):
    """A backend whose layers ignore the adapter switch: rollouts see W + sBA *and* the LoRA branch."""
    from toolrl_lib.fast import merged_generation

    swapped = []
    with torch.no_grad():
        for layer in merged_generation.lora_layers(model):
            base = layer.get_base_layer()
            swapped.append((base, base.weight.data))
            base.weight.data = base.weight.data + layer.get_delta_weight("default")
    try:
        yield model  # the LoRA branch is still on
    finally:
        for base, weight in swapped:
            base.weight.data = weight


def test_merged_path_check_catches_an_update_applied_twice(lora_model, monkeypatch):
    """merged = W + 2 sBA: the check fails."""
    from toolrl_lib.fast import merged_generation

    monkeypatch.setattr(merged_generation, "lora_merged", merged_but_adapters_stay_on)
    check = merged_generation.merged_path_check(lora_model, torch.tensor([[3, 14, 15, 9, 26, 5]]),
                                                new_tokens=4)
    assert check["base_vs_lora_max_logit_gap"] > 0
    assert not check["ok"] and check["merged_vs_lora_mean_logit_gap"] > 0.5 * check["base_vs_lora_mean_logit_gap"]


def test_require_merged_path_passes_peft_and_refuses_a_layer_that_ignores_the_switch(lora_model, monkeypatch):
    """What a run does under unsloth before its first merged rollout."""
    from transformers import AutoTokenizer

    from toolrl_lib.fast import merged_generation

    tokenizer = AutoTokenizer.from_pretrained(lora_model.base_model.model.config._name_or_path)
    check = merged_generation.require_merged_path(lora_model, tokenizer)
    assert check["ok"] and check["merged_vs_lora_token_agreement"] == 1.0

    monkeypatch.setattr(merged_generation, "lora_merged", merged_but_adapters_stay_on)
    with pytest.raises(RuntimeError, match="do not compute the LoRA path"):
        merged_generation.require_merged_path(lora_model, tokenizer)
