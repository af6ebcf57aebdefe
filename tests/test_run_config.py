"""RunConfig: strict YAML loading and every validation rule, before any model loads."""

from __future__ import annotations

import pytest

from toolrl_lib.config import ConfigError
from toolrl_lib.paths import project_root
from toolrl_lib.train.config import (
    LORA_MAX_RANK,
    RunConfig,
    generation_batch_size,
    load_run_config,
    save_run_config,
    validate,
)

CONFIGS = ["configs/smoke.yaml", "configs/qwen3_8b_h100.yaml"]


def invalid(*overrides: str) -> str:
    """Load defaults + overrides, expect a ConfigError, return its message."""
    with pytest.raises(ConfigError) as info:
        load_run_config(None, list(overrides))
    return str(info.value)


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_load_and_validate(name):
    config = load_run_config(project_root() / name)
    assert isinstance(config, RunConfig)
    assert config.grpo.num_generations >= 2


def test_full_config_matches_the_issue():
    c = load_run_config(project_root() / "configs/qwen3_8b_h100.yaml")
    assert c.model.name == "Qwen/Qwen3-8B" and c.backend == "unsloth"
    assert (c.lora.r, c.lora.alpha) == (16, 32)
    assert set(c.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                           "up_proj", "down_proj"}
    assert c.model.max_seq_length == 4096
    effective = c.grpo.per_device_train_batch_size * c.grpo.gradient_accumulation_steps
    assert effective == 32 and c.grpo.num_generations >= 4


def test_round_trip_through_yaml(tmp_path):
    config = load_run_config(None, ["grpo.loss_type=gspo", "lora.r=8", "seed=3"])
    path = save_run_config(config, tmp_path / "config.yaml")
    again = load_run_config(path)
    assert again == config


def test_overrides_parse_yaml_values():
    c = load_run_config(None, ["grpo.beta=0.04", "data.train_files=[a.jsonl, b.jsonl]",
                               "priming.enabled=true"])
    assert c.grpo.beta == pytest.approx(0.04)
    assert c.data.train_files == ["a.jsonl", "b.jsonl"]
    assert c.priming.enabled is True


def test_unknown_key_is_named():
    message = invalid("grpo.num_generatons=4")
    assert "grpo.num_generatons" in message


def test_wrong_type_is_named():
    assert "grpo.num_generations" in invalid("grpo.num_generations=four")


def test_num_generations_below_two():
    message = invalid("grpo.num_generations=1")
    assert "grpo.num_generations" in message and ">= 2" in message


def test_generation_batch_not_divisible_by_num_generations():
    message = invalid("grpo.num_generations=3", "grpo.per_device_train_batch_size=8",
                      "grpo.gradient_accumulation_steps=1")
    assert "grpo.generation_batch_size" in message and "divisible" in message


def test_explicit_generation_batch_must_hold_whole_groups_and_global_batches():
    message = invalid("grpo.generation_batch_size=12", "grpo.per_device_train_batch_size=8")
    assert "global batch" in message


def test_generation_batch_uses_world_size():
    config = load_run_config(None, ["grpo.num_generations=16", "grpo.per_device_train_batch_size=4",
                                    "grpo.gradient_accumulation_steps=2"], check=False)
    assert generation_batch_size(config.grpo, processes=2) == 16
    validate(config, processes=2)  # 4 x 2 x 2 = 16: fine on two GPUs
    with pytest.raises(ConfigError, match="grpo.generation_batch_size"):
        validate(config, processes=1)  # 8 is not a multiple of 16


def test_unknown_loss_type():
    message = invalid("grpo.loss_type=ppo")
    assert "grpo.loss_type" in message and "dapo" in message


@pytest.mark.parametrize("loss", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_known_loss_types(loss):
    assert load_run_config(None, [f"grpo.loss_type={loss}"]).grpo.loss_type == loss


def test_lora_rank_above_max():
    message = invalid(f"lora.r={LORA_MAX_RANK + 1}")
    assert "lora.r" in message and str(LORA_MAX_RANK) in message
    assert "lora.r" in invalid("lora.r=0")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("grpo.beta=-0.1", "grpo.beta"),
        ("grpo.epsilon_high=0.1", "grpo.epsilon_high"),
        ("grpo.temperature=0", "grpo.temperature"),
        ("grpo.top_p=1.5", "grpo.top_p"),
        ("grpo.learning_rate=0", "grpo.learning_rate"),
        ("grpo.max_completion_length=0", "grpo.max_completion_length"),
        ("lora.dropout=1.0", "lora.dropout"),
        ("model.family=gpt", "model.family"),
        ("model.dtype=int4", "model.dtype"),
        ("reward.scheme=dense", "reward.scheme"),
        ("reward.weights={speed: 1.0}", "reward.weights.speed"),
        ("validation.best_scheme=fine_grained", "validation.best_scheme"),
        ("validation.k=0", "validation.k"),
        ("checkpoint.save_steps=0", "checkpoint.save_steps"),
        ("data.train_files=[]", "data.train_files"),
        ("data.max_prompt_tokens=4000", "data.max_prompt_tokens"),
        ("backend=jax", "backend"),
    ],
)
def test_each_rule_names_its_field(override, field):
    assert field in invalid(override)


def test_priming_and_filtering_rules_only_when_enabled():
    load_run_config(None, ["priming.max_steps=0", "filtering.k=1"])  # disabled: not checked
    assert "priming.max_steps" in invalid("priming.enabled=true", "priming.max_steps=0")
    assert "filtering.k" in invalid("filtering.enabled=true", "filtering.k=1")
    assert "filtering" in invalid("filtering.enabled=true", "filtering.drop_always_solved=false",
                                  "filtering.drop_never_solved=false")


def test_greedy_validation_needs_k_one():
    assert "validation.temperature" in invalid("validation.temperature=0", "validation.k=4")
    load_run_config(None, ["validation.temperature=0", "validation.k=1"])


def test_all_problems_reported_at_once():
    message = invalid("grpo.num_generations=1", "lora.r=1000", "grpo.beta=-1")
    assert all(f in message for f in ("grpo.num_generations", "lora.r", "grpo.beta"))


def test_train_rejects_invalid_config_before_loading_anything(tmp_path, monkeypatch):
    from toolrl_lib.train import run

    def boom(*args, **kwargs):  # would be the first heavy call
        raise AssertionError("model loading reached")

    monkeypatch.setattr(run, "_train", boom)
    config = load_run_config(None, check=False)
    config.grpo.num_generations = 1
    with pytest.raises(ConfigError, match="grpo.num_generations"):
        run.train(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_cli_check_and_error(capsys):
    from toolrl_lib.cli import main

    assert main(["train", "--config", "configs/smoke.yaml", "--check", "--set", "seed=7"]) == 0
    assert "seed: 7" in capsys.readouterr().out
    assert main(["train", "--config", "configs/smoke.yaml", "--set", "grpo.num_generations=1"]) == 2
    assert "grpo.num_generations" in capsys.readouterr().err


def test_train_help_lists_settings_from_field_metadata():
    """Field docs live in the config dataclasses' metadata; ``toolrl train --help`` prints them."""
    import subprocess
    import sys

    from toolrl_lib.train.config import RunConfig, settings_help

    rows = {key: (default, text) for key, default, text in settings_help()}
    assert set(rows) >= set(_leaf_keys(RunConfig().to_dict()))
    assert rows["grpo.num_generations"] == ("8", "completions per prompt (the group); >= 2")
    out = subprocess.run([sys.executable, "-m", "toolrl_lib.cli", "train", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "grpo.num_generations = 8" in out.stdout
    assert "completions per prompt (the group)" in out.stdout


def _leaf_keys(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict) and value and key not in ("weights", "oversample_kinds"):
            yield from _leaf_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"
