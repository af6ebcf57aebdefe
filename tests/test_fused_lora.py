"""fast.fused_lora: one autograd node per LoRA projection, against PEFT's own forward and backward."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from toolrl_lib.fast import fused_lora  # noqa: E402
from toolrl_lib.fast.fused_lora import LoraProjection, fuse_lora_layers  # noqa: E402
from toolrl_lib.models import make_tiny_model  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _peft_model(dtype: Any = torch.float32, dropout: float = 0.0, **lora: Any) -> Any:
    model, _ = make_tiny_model(seed=0, hidden_size=32, num_layers=2)
    torch.manual_seed(1)
    wrapped = peft.get_peft_model(model.to(dtype), peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout,
                                                                   target_modules=TARGETS, **lora))
    for name, param in wrapped.named_parameters():  # B starts at zero in PEFT: give the adapter an effect
        if "lora_B" in name:
            param.data.normal_(0, 0.1)
    return wrapped


def _loss_and_grads(model: Any, ids: Any, autocast: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(input_ids=ids).logits
        loss = logits.float().logsumexp(-1).mean()
    loss.backward()
    return logits.float().detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                                                   if p.grad is not None}


def _count_fused_calls(monkeypatch: Any) -> dict[str, int]:
    calls = {"n": 0}
    apply = LoraProjection.apply

    def counted(*args: Any) -> Any:
        calls["n"] += 1
        return apply(*args)

    monkeypatch.setattr(LoraProjection, "apply", counted)
    return calls


@pytest.fixture
def ids() -> Any:
    return torch.randint(3, 60, (3, 11), generator=torch.Generator().manual_seed(0))


def test_float32_logits_and_gradients_match_peft(ids, monkeypatch):
    plain = _peft_model()
    fused = copy.deepcopy(plain)
    assert fuse_lora_layers(fused) == 2 * len(TARGETS)
    calls = _count_fused_calls(monkeypatch)
    logits, loss, grads = _loss_and_grads(plain, ids)
    assert calls["n"] == 0
    f_logits, f_loss, f_grads = _loss_and_grads(fused, ids)
    assert calls["n"] == 2 * len(TARGETS)  # every projection took the fused path
    torch.testing.assert_close(f_logits, logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(f_loss, loss, rtol=1e-6, atol=1e-6)
    assert set(f_grads) == set(grads) and len(grads) == 4 * len(TARGETS)  # A and B of each, nothing else
    for name, grad in grads.items():
        torch.testing.assert_close(f_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_bf16_autocast_matches_peft_to_bf16_rounding(ids):
    """The GPU recipe's dtypes: bf16 weights, float32 adapters, bf16 autocast."""
    plain = _peft_model(torch.bfloat16)
    assert plain.base_model.model.model.layers[0].self_attn.q_proj.lora_A["default"].weight.dtype == torch.float32
    fused = copy.deepcopy(plain)
    fuse_lora_layers(fused)
    logits, _, grads = _loss_and_grads(plain, ids, autocast=True)
    f_logits, _, f_grads = _loss_and_grads(fused, ids, autocast=True)
    assert (f_logits - logits).abs().max() <= 0.02 * logits.abs().max()
    for name, grad in grads.items():
        assert f_grads[name].dtype == torch.float32  # the adapter's own dtype, as PEFT's
        cos = torch.nn.functional.cosine_similarity(f_grads[name].flatten(), grad.flatten(), dim=0)
        assert cos > 0.999, name


def test_merged_disabled_and_dropout_layers_keep_peft_forward(ids, monkeypatch):
    fused = _peft_model()
    reference = copy.deepcopy(fused)
    fuse_lora_layers(fused)
    calls = _count_fused_calls(monkeypatch)
    with fused.disable_adapter(), reference.disable_adapter(), torch.no_grad():
        torch.testing.assert_close(fused(input_ids=ids).logits, reference(input_ids=ids).logits)
    assert calls["n"] == 0
    fused.merge_adapter()  # what TRL does before syncing weights into vLLM
    with torch.no_grad():
        merged = fused(input_ids=ids).logits
    assert calls["n"] == 0
    fused.unmerge_adapter()
    with torch.no_grad():
        torch.testing.assert_close(fused(input_ids=ids).logits, merged, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(fused(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=1e-5,
                                   atol=1e-5)
    assert calls["n"] == 2 * 2 * len(TARGETS)
    dropped = _peft_model(dropout=0.1)
    assert fuse_lora_layers(dropped) == 0  # dropout: not covered, PEFT's forward kept


def test_mixed_dtypes_outside_autocast_are_left_to_peft():
    model = _peft_model(torch.bfloat16)  # bf16 base, float32 adapters
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    name, weight, _, lora_a, lora_b, scale = fused_lora.static_parts(layer)
    assert name == "default" and scale == pytest.approx(2.0)
    x = torch.zeros(2, 32, dtype=torch.bfloat16)
    assert fused_lora.compute_dtype(x, weight, lora_a, lora_b) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert fused_lora.compute_dtype(x, weight, lora_a, lora_b) == torch.bfloat16
    fp32 = _peft_model().base_model.model.model.layers[0].self_attn.q_proj
    _, weight, _, lora_a, lora_b, _ = fused_lora.static_parts(fp32)
    assert fused_lora.compute_dtype(x.float(), weight, lora_a, lora_b) == torch.float32


def test_install_refuses_a_model_without_lora():
    model, _ = make_tiny_model(seed=0)

    class Trainer:
        pass

    trainer = Trainer()
    trainer.model = model
    with pytest.raises(ValueError, match="no LoRA linear layer the fused path covers"):
        fused_lora.install(trainer)


def test_config_rules():
    from toolrl_lib.train.config import ConfigError, load_run_config, validate

    config = load_run_config("configs/smoke.yaml", ["fast.fused_lora=true"])
    validate(config)
    with pytest.raises(ConfigError, match="fast.fused_lora"):
        validate(load_run_config("configs/smoke.yaml", ["fast.fused_lora=true", "lora.enabled=false"]))


def test_grpo_run_with_fused_lora_and_round_chunks_trains_as_without(tmp_path, monkeypatch):
    """Tiny library GRPO runs, rounds of 8 (4 prompts x 2) in 2 optimizer steps of 4: the fused
    projections and the round's log-prob forward in one chunk give the same metrics (fp32, CPU)
    and adapter, and the no-grad round forward alone gets the larger chunk."""
    import pandas as pd
    from safetensors.torch import load_file
    from trl import GRPOTrainer

    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.models import make_tiny_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    chunks: list[tuple[bool, Any]] = []
    real = GRPOTrainer._get_per_token_logps_and_entropies

    def recorded(self: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        chunks.append((torch.is_grad_enabled(), kwargs.get("batch_size")))
        return real(self, model, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", recorded)
    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    calls = _count_fused_calls(monkeypatch)
    seen, fused_calls = {}, {}
    for fused in ("false", "true"):
        chunks.clear()
        calls["n"] = 0
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "validation.enabled": "false", "fast.fused_lora": fused,
            "fast.round_logprob_rows": 8 if fused == "true" else 0, "fast.skip_zero_advantage": "false",
            "grpo.generation_batch_size": 8, "grpo.max_steps": 4}))
        train(config, tmp_path / f"run-{fused}", reward_funcs=[length_reward])
        seen[fused], fused_calls[fused] = sorted(set(chunks)), calls["n"]
    assert fused_calls["false"] == 0 and fused_calls["true"] > 0
    assert seen["false"] == [(False, 4), (True, None)]
    assert seen["true"] == [(False, 8), (True, None)]
    a, b = (pd.read_csv(tmp_path / f"run-{f}" / "metrics.csv") for f in ("false", "true"))
    columns = [c for c in a.columns if c != "step_time"]
    pd.testing.assert_frame_equal(a[columns], b[columns], check_exact=False, rtol=1e-4, atol=1e-6)
    first, second = (load_file(tmp_path / f"run-{f}" / "last" / "adapter_model.safetensors") for f in ("false", "true"))
    assert any(float(t.abs().max()) > 0 for k, t in first.items() if "lora_B" in k)  # it learned
    for key in first:
        torch.testing.assert_close(second[key], first[key], rtol=1e-4, atol=1e-6, msg=key)


def test_host_cost_benchmark_counts_fewer_ops_for_the_fused_projections():
    """benchmarks/lora_host_cost.py at a toy size: the op counts it reports (the width does not change them)."""
    from benchmarks.lora_host_cost import measure

    rows = {r["variant"]: r for r in measure(width=18, rows=1, tokens=4, repeats=1, vocab=64)}
    assert set(rows) == {"peft", "peft_bf16_inputs", "fused"}
    assert rows["fused"]["ops_forward_backward"] < rows["peft_bf16_inputs"]["ops_forward_backward"] \
        < rows["peft"]["ops_forward_backward"]
    assert rows["fused"]["ops_forward_no_grad"] < rows["peft"]["ops_forward_no_grad"]


def test_round_chunk_reaches_batch_size_by_keyword_or_position():
    """fast.round_logprob_rows sets TRL's batch_size however it is passed, and only for no-grad
    training-mode calls (the round's forward), never the loss forward or an eval-mode one."""
    from toolrl_lib.fast.round_logprobs import install

    seen = []

    class Trainer:
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               batch_size=None, compute_entropy=False):
            seen.append(batch_size)

    trainer, model = Trainer(), torch.nn.Linear(1, 1)
    install(trainer, 512)
    with torch.no_grad():
        trainer._get_per_token_logps_and_entropies(model, "ids", "mask", 4, batch_size=64)
        trainer._get_per_token_logps_and_entropies(model, "ids", "mask", 4, 64, True)
        model.eval()
        trainer._get_per_token_logps_and_entropies(model, "ids", "mask", 4, batch_size=64)
    model.train()
    trainer._get_per_token_logps_and_entropies(model, "ids", "mask", 4, batch_size=64)
    assert seen == [512, 512, 64, 64]
