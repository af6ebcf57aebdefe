"""RLSD token weights, advantages, λ schedule and config checks on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from toolrl_lib.config import ConfigError, from_dict
from toolrl_lib.train.rlsd import RLSDConfig, effective_lambda
from toolrl_lib.train.rlsd.weights import (
    finish_stats,
    reweight_advantages,
    token_deltas,
    token_weights,
    weight_stats,
)

LN = math.log
# Δ per token: teacher 1.1x, 2x, 0.5x, 1x as likely as the student
DELTA = torch.tensor([[LN(1.1), LN(2.0), -LN(2.0), 0.0]] * 3)
ADV = torch.tensor([1.5, -0.5, 0.0])


def test_token_weights_hand_computed() -> None:
    w = token_weights(DELTA, ADV, eps_w=0.2)
    expected = torch.tensor(
        [
            [1.1, 1.2, 0.8, 1.0],  # A > 0: exp(+Δ) = 1.1, 2 -> 1.2, 0.5 -> 0.8, 1
            [1 / 1.1, 0.8, 1.2, 1.0],  # A < 0: exp(−Δ) = 0.909, 0.5 -> 0.8, 2 -> 1.2, 1
            [1.0, 1.0, 1.0, 1.0],  # A = 0: sign 0 -> weight 1
        ]
    )
    torch.testing.assert_close(w, expected)


def test_reweighted_advantages_hand_computed() -> None:
    w = token_weights(DELTA, ADV, eps_w=0.2)
    adv = reweight_advantages(ADV, w, lam=0.5)
    # row 0: 1.5 * (0.5 + 0.5 w)
    torch.testing.assert_close(adv[0], torch.tensor([1.5 * 1.05, 1.5 * 1.1, 1.5 * 0.9, 1.5]))
    # row 1: -0.5 * (0.5 + 0.5 w)
    torch.testing.assert_close(adv[1], torch.tensor([-0.5 * (0.5 + 0.5 / 1.1), -0.45, -0.55, -0.5]))
    assert torch.equal(adv[2], torch.zeros(4))
    # sign never flips, magnitude stays within [1 - ε_w, 1 + ε_w] of |A|
    ratio = adv[:2] / ADV[:2, None]
    assert torch.all(ratio >= 0.8 - 1e-6) and torch.all(ratio <= 1.2 + 1e-6)


def test_lambda_zero_is_the_sequence_advantage_exactly() -> None:
    w = token_weights(DELTA, ADV, eps_w=0.2)
    adv = reweight_advantages(ADV, w, lam=0.0)
    assert adv.shape == (3, 4)
    assert torch.equal(adv, ADV[:, None].expand(3, 4))


def test_lambda_one_is_the_weight_times_advantage() -> None:
    w = token_weights(DELTA, ADV, eps_w=0.2)
    torch.testing.assert_close(reweight_advantages(ADV, w, lam=1.0), ADV[:, None] * w)


def test_deltas_are_detached_and_finite() -> None:
    teacher = torch.tensor([[-1.0, -math.inf]], requires_grad=True)
    student = torch.tensor([[-2.0, -math.inf]])
    delta = token_deltas(teacher, student)
    assert not delta.requires_grad
    assert delta.tolist() == [[1.0, 0.0]]


def test_stats_hand_computed() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    stats = finish_stats(weight_stats(DELTA * mask, ADV, mask, eps_w=0.2))
    # active tokens: row 0 -> [1.1, 1.2(clipped), 0.8(clipped)], row 1 -> [1/1.1, 0.8(clipped)]
    active = [1.1, 1.2, 0.8, 1 / 1.1, 0.8]
    assert stats["weight_mean"] == pytest.approx(sum(active) / 5)
    assert stats["weight_min"] == pytest.approx(0.8)
    assert stats["weight_max"] == pytest.approx(1.2)
    assert stats["clip_frac"] == pytest.approx(3 / 5)
    deltas = [LN(1.1), LN(2), -LN(2), LN(1.1), LN(2), LN(1.1), LN(2), -LN(2), 0.0]
    assert stats["delta_mean"] == pytest.approx(sum(deltas) / 9)
    k3 = [math.exp(d) - 1 - d for d in deltas]
    assert stats["teacher_kl"] == pytest.approx(sum(k3) / 9)
    assert stats["teacher_kl"] > 0


def test_stats_without_active_tokens_are_nan_not_errors() -> None:
    mask = torch.ones(1, 4)
    stats = finish_stats(weight_stats(DELTA[:1], torch.zeros(1), mask, eps_w=0.2))
    assert math.isnan(stats["weight_mean"]) and math.isnan(stats["clip_frac"])
    assert math.isfinite(stats["delta_mean"])


def test_lambda_decay() -> None:
    assert effective_lambda(0.5, 0, 1000) == 0.5
    assert effective_lambda(0.5, 100, 0) == 0.5
    assert effective_lambda(0.5, 100, 50) == pytest.approx(0.25)
    assert effective_lambda(0.5, 100, 100) == 0.0
    assert effective_lambda(0.5, 100, 150) == 0.0


def test_config_defaults_are_the_seed_run() -> None:
    cfg = RLSDConfig()
    assert (cfg.lam, cfg.eps_w, cfg.decay_steps, cfg.teacher, cfg.teacher_update_rate) == (
        0.5, 0.2, 0, "trust_region", 0.1)
    assert "X" in cfg.render_privileged("X")


@pytest.mark.parametrize(
    ("field", "value"),
    [("lam", 1.5), ("eps_w", 0.0), ("eps_w", 1.0), ("decay_steps", -1), ("teacher", "ema"),
     ("teacher_update_rate", -0.1), ("privileged_template", "no placeholder"),
     ("base_loss_type", "ppo"), ("teacher_batch_size", 0)],
)
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        from_dict(RLSDConfig, {field: value})


def test_config_loads_from_yaml_mapping() -> None:
    cfg = from_dict(RLSDConfig, {"lam": 1, "teacher": "live", "decay_steps": 10})
    assert cfg.lam == 1.0 and cfg.teacher == "live" and cfg.decay_steps == 10
