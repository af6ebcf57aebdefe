"""Abstention-aware reward shaping, the payout table, and per-kind GRPO metrics."""

import json

import pytest

from toolrl_lib.rewards import make_reward_funcs
from toolrl_lib.rewards.groups import kind_metrics
from toolrl_lib.rewards.shaping import CASES, TIME, WEATHER, Shaping, check_shaping, payout_table

SPURIOUS, ABSTAIN = "spurious call (no call is correct)", "correct abstention"
WRONG_ARGS, EXACT = "right name, all arguments wrong", "exact call"


def test_payout_table_plain_schemes():
    table = payout_table()
    weighted, binary, fine = table["weighted"], table["binary (Tool-N1)"], table["fine_grained (ToolRL)"]
    # the weighted scheme pays a wrong-argument call more than a spurious call or silence
    assert weighted[WRONG_ARGS] == pytest.approx(-0.2) and weighted[SPURIOUS] == pytest.approx(-0.6)
    assert weighted["no call where one is due"] == pytest.approx(-0.6)
    assert weighted[EXACT] == weighted[ABSTAIN] == pytest.approx(0.6)  # no <think>: reasoning 0
    assert binary[EXACT] == binary[ABSTAIN] == 1.0 and binary[WRONG_ARGS] == binary[SPURIOUS] == 0.0
    assert fine[EXACT] == 4.0 and fine[ABSTAIN] == 4.0 and fine[WRONG_ARGS] > fine[SPURIOUS]


def test_payout_table_shaped_variants():
    table = payout_table()
    sharp = table["weighted, args-sharp"]
    assert sharp[WRONG_ARGS] == sharp["right name, one argument wrong"] == pytest.approx(-0.6)
    assert sharp[EXACT] == pytest.approx(0.6) and sharp[SPURIOUS] == pytest.approx(-0.6)
    both = table["weighted, spurious -1 + args-sharp"]
    assert both[SPURIOUS] == -1.0 and both[WRONG_ARGS] == -1.0 and both[ABSTAIN] == pytest.approx(0.6)
    assert both["wrong function"] == -1.0
    # shaping never touches the cases it is not about
    assert table["weighted, spurious call = -1"][WRONG_ARGS] == pytest.approx(-0.2)


def test_strict_format_is_the_deliberate_deviation():
    table = payout_table()
    bfcl_rule, strict = table["binary (Tool-N1)"], table["binary, strict format"]
    broken, stray = "broken format (no call is correct)", "exact call after stray text"
    assert bfcl_rule[broken] == bfcl_rule[stray] == 1.0  # what BFCL counts as right
    assert strict[broken] == strict[stray] == 0.0 and strict[EXACT] == strict[ABSTAIN] == 1.0


def test_shaping_range_is_checked():
    with pytest.raises(ValueError, match="spurious_call"):
        check_shaping(Shaping(spurious_call=-2.0), "weighted")
    with pytest.raises(ValueError, match="abstention"):
        check_shaping(Shaping(abstention=2.0), "binary")


def test_trl_wrapper_applies_shaping_and_logs_kinds():
    (plain,) = make_reward_funcs("weighted", "hermes")
    (shaped,) = make_reward_funcs("weighted", "hermes", shaping=Shaping(spurious_call=-1.0, abstention=1.0))
    cases = [CASES[SPURIOUS], CASES[ABSTAIN], CASES[EXACT], CASES[EXACT]]
    logged = {}
    kwargs = dict(prompts=["p"] * 4, completions=[c for c, _ in cases],
                  ground_truth=[json.dumps(g) for _, g in cases], tools=[json.dumps([WEATHER, TIME])] * 4,
                  example_id=["n", "n", "c", "c"], kind=["irrelevance", "irrelevance", "simple", "simple"])
    assert plain(**kwargs) == pytest.approx([-0.6, 0.6, 0.6, 0.6])
    assert shaped(**kwargs, log_metric=logged.__setitem__) == pytest.approx([-1.0, 1.0, 0.6, 0.6])
    assert logged["reward/kind/irrelevance"] == pytest.approx(0.0)
    assert logged["frac_reward_zero_std/kind/irrelevance"] == 0.0
    assert logged["frac_reward_zero_std/kind/simple"] == 1.0


def test_kind_metrics_groups_by_consecutive_ids():
    out = kind_metrics([1, 1, 0, 1, 0.5, 0.5], ["a", "a", "a", "a", "b", "b"], ["x", "x", "y", "y", "z", "z"])
    assert out["reward/kind/a"] == pytest.approx(0.75) and out["reward/kind/b"] == 0.5
    assert out["frac_reward_zero_std/kind/a"] == 0.5 and out["frac_reward_zero_std/kind/b"] == 1.0
    with pytest.raises(ValueError, match="length"):
        kind_metrics([1.0], ["a", "b"], ["x"])


def test_run_config_reward_shaping_fields():
    from toolrl_lib.config import ConfigError
    from toolrl_lib.train.config import best_validation_key, load_run_config

    config = load_run_config("configs/embedded_gpu.yaml", [
        "reward.spurious_call=-1.0", "reward.args_sharp=true", "validation.best_metric=summary",
        "lora.enabled=false", "grpo.beta=0.04", "grpo.learning_rate=5e-6"])
    assert config.reward.spurious_call == -1.0 and config.reward.args_sharp is True
    assert best_validation_key(config.validation) == "binary_summary@16"
    with pytest.raises(ConfigError, match="reward.spurious_call"):
        load_run_config("configs/embedded_gpu.yaml", ["reward.scheme=binary", "reward.spurious_call=-1"])
