"""fast/weight_sync.py against TRL's own ``VLLMGeneration._iter_named_params`` on a tiny bf16 PEFT model:
the same names and the same merged weights at the first sync, and base weights that stay bit for bit
where TRL's merge and unmerge round trip moves them."""

from __future__ import annotations

import contextlib
import types

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")


def tiny_peft_model(seed: int = 0, dora: bool = False, lora_bias: bool = False):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    model = get_peft_model(LlamaForCausalLM(config).to(torch.bfloat16),
                           LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"],
                                      use_dora=dora, lora_bias=lora_bias))
    with torch.no_grad():  # a trained adapter: B away from its zero start
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02)
    return model


def stand_in_generation(model):
    """What TRL's ``_iter_named_params`` reads of its ``VLLMGeneration``, without vLLM."""
    from trl.generation.vllm_generation import VLLMGeneration

    generation = types.SimpleNamespace(
        model=model, _dist=types.SimpleNamespace(is_fsdp=False, gather_params=lambda params: contextlib.nullcontext()))
    generation._fix_param_name_to_vllm = types.MethodType(VLLMGeneration._fix_param_name_to_vllm, generation)
    generation.trl_iter = types.MethodType(VLLMGeneration._iter_named_params, generation)
    return generation


def base_weights(model) -> dict[str, torch.Tensor]:
    return {name: param.detach().clone() for name, param in model.named_parameters() if "lora_" not in name}


def test_trls_merge_and_unmerge_moves_bf16_base_weights_and_ours_does_not():
    trl_model, our_model = tiny_peft_model(), tiny_peft_model()
    before = base_weights(trl_model)
    assert all(torch.equal(before[n], w) for n, w in base_weights(our_model).items())
    trl_generation, our_generation = stand_in_generation(trl_model), stand_in_generation(our_model)
    from toolrl_lib.fast.weight_sync import merged_named_params

    first_trl = {n: t.clone() for n, t in trl_generation.trl_iter()}
    first_ours = {n: t.clone() for n, t in merged_named_params(our_generation)}
    assert list(first_ours) == list(first_trl) and len(first_ours) > 6
    assert all(torch.equal(first_ours[n], first_trl[n]) for n in first_trl)  # bit for bit at the first sync
    for _ in range(19):
        list(trl_generation.trl_iter())
        list(merged_named_params(our_generation))
    moved = [n for n, w in base_weights(trl_model).items() if not torch.equal(w, before[n])]
    assert moved and all(".base_layer." in n for n in moved)  # TRL's round trips moved adapted weights
    assert all(torch.equal(w, before[n]) for n, w in base_weights(our_model).items())  # ours moved none
    again = dict(merged_named_params(our_generation))
    assert all(torch.equal(again[n], first_ours[n]) for n in first_ours)  # and syncs the same weights


def test_install_replaces_the_iterator_that_every_trl_sync_path_reads():
    from toolrl_lib.fast.weight_sync import install

    model = tiny_peft_model()
    generation = stand_in_generation(model)
    trainer = types.SimpleNamespace(vllm_generation=generation)
    message = install(trainer)
    assert message.startswith("VLLMGeneration._iter_named_params: 6 adapted weights")
    names = [n for n, _ in generation._iter_named_params()]
    assert names == [n for n, _ in generation.trl_iter()]
    assert install(types.SimpleNamespace()) is None  # no TRL engine (vLLM off, or Unsloth's)


def test_what_cannot_be_merged_exactly_keeps_trls_own_sync():
    from toolrl_lib.fast.weight_sync import adapted_layers, install

    dora = stand_in_generation(tiny_peft_model(dora=True))
    original = dora._iter_named_params if hasattr(dora, "_iter_named_params") else None
    message = install(types.SimpleNamespace(vllm_generation=dora))
    assert "TRL's own merge and unmerge" in message and "DoRA=True" in message
    assert getattr(dora, "_iter_named_params", None) is original
    with pytest.raises(ValueError, match="lora_bias=True"):
        adapted_layers(tiny_peft_model(lora_bias=True))
    merged = tiny_peft_model()
    merged.merge_adapter()
    with pytest.raises(ValueError, match="merged=True"):
        adapted_layers(merged)
    sharded = stand_in_generation(tiny_peft_model())
    sharded._dist.is_fsdp = True
    assert "FSDP" in install(types.SimpleNamespace(vllm_generation=sharded))


def test_build_trainer_installs_it_when_trls_engine_is_on(monkeypatch):
    """Colocate with the peft backend: the built trainer's engine reads the exact sync; vLLM off: untouched."""
    import trl

    from toolrl_lib.fast import vllm_engine
    from toolrl_lib.train import trainer as trainer_module
    from toolrl_lib.train.config import load_run_config

    monkeypatch.setattr(vllm_engine, "colocated_engine", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(trainer_module, "grpo_args", lambda *a, **k: types.SimpleNamespace(world_size=1, n_gpu=0))
    generations = []

    def built(**kwargs):
        generations.append(stand_in_generation(tiny_peft_model()))
        return types.SimpleNamespace(vllm_generation=generations[-1])

    monkeypatch.setattr(trl, "GRPOTrainer", built)
    from toolrl_lib.fast import trl_compat

    monkeypatch.setattr(trl_compat, "require_trl", lambda *args: None)  # GRPOTrainer is a stand-in here
    gpu = ["device=cuda", "backend=peft"]
    for overrides in ([*gpu, "grpo.vllm.mode=colocate"], gpu):
        trainer_module.build_trainer(load_run_config(None, overrides), None, "cuda", "m", "tok", [], [], [])
    on, off = generations
    assert not hasattr(off, "_iter_named_params")  # nothing installed: TRL's method is the class's
    before = base_weights(on.model)
    for _ in range(20):
        names = [n for n, _ in on._iter_named_params()]
    assert all(torch.equal(w, before[n]) for n, w in base_weights(on.model).items())
    assert names == [n for n, _ in on.trl_iter()]
