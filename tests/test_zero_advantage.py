"""Skipping zero-advantage GRPO micro-batches (``toolrl_lib.fast.zero_advantage``) trains the
adapter TRL's own loss trains, and only applies where the skipped loss is exactly zero."""

from types import SimpleNamespace

import pytest
import torch

from toolrl_lib.models import make_tiny_model


def _trainer(**args):
    defaults = {"beta": 0.0, "loss_type": "dapo"}
    return SimpleNamespace(args=SimpleNamespace(**{**defaults, **args}),
                           accelerator=SimpleNamespace(num_processes=1), aux_loss_enabled=False)


@pytest.mark.parametrize(("change", "expected"), [
    ({}, True), ({"beta": 0.04}, False), ({"loss_type": "sapo"}, False), ({"loss_type": "grpo"}, True)])
def test_the_skip_applies_only_where_the_loss_scales_with_the_advantage(change, expected):
    from toolrl_lib.fast.zero_advantage import applies

    assert applies(_trainer(**change)) is expected
    several = _trainer()
    several.accelerator.num_processes = 2
    assert applies(several) is False


def test_skipping_zero_advantage_steps_trains_the_same_adapter(tmp_path, monkeypatch):
    """Two tiny GRPO runs, same seed: steps 1 and 3 score every completion alike (all advantages
    zero, every micro-batch skipped), steps 2 and 4 do not. Adam's moments keep moving the adapter
    on the skipped steps, so a skip that left gradients unset (not zero) would differ."""
    from safetensors.torch import load_file

    from tests.test_train_run import tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.fast import zero_advantage
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    real_install, skipped = zero_advantage.install, []

    def counting_install(trainer):
        name = real_install(trainer)
        inner = trainer.compute_loss

        def compute_loss(model, inputs, *args, **kwargs):
            skipped.append(not bool(inputs["advantages"].any()))
            return inner(model, inputs, *args, **kwargs)

        trainer.compute_loss = compute_loss
        return name

    runs = {}
    for skip in (False, True):
        calls = []

        def alternating_reward(prompts, completions, calls=calls, **kwargs):
            calls.append(1)
            if len(calls) % 2:  # steps 1, 3: every completion alike
                return [1.0] * len(completions)
            return [float(len(c) % 5) for c in completions]

        monkeypatch.setattr(zero_advantage, "install", counting_install if skip else lambda trainer: None)
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "grpo.max_steps": 4, "grpo.gradient_accumulation_steps": 2, "grpo.per_device_train_batch_size": 2,
            "validation.enabled": "false", "checkpoint.save_steps": 4}))
        runs[skip] = train(config, tmp_path / f"run-{skip}", reward_funcs=[alternating_reward])
    assert skipped.count(True) >= 4 and skipped.count(False) >= 1, skipped
    a = load_file(runs[False] / "last" / "adapter_model.safetensors")
    b = load_file(runs[True] / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key


def test_a_skipped_micro_batch_gives_every_parameter_a_zero_gradient():
    from toolrl_lib.fast.zero_advantage import install

    model, _ = make_tiny_model(seed=1)
    trainer = _trainer()
    from collections import defaultdict

    trainer._metrics = {"train": defaultdict(list)}
    trainer.compute_loss = lambda *a, **k: pytest.fail("TRL's loss should not run")
    install(trainer)
    loss = trainer.compute_loss(model, {"advantages": torch.zeros(4)})
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    assert trainer._metrics["train"]["zero_advantage_skipped"] == [1.0]
    assert trainer._metrics["train"]["clip_ratio/region_mean"] == [0.0]
