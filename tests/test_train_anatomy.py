"""One GRPO step by hand (toolrl_lib.train.anatomy) against TRL 1.15's own loss, tiny model."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from peft import LoraConfig, get_peft_model  # noqa: E402

from toolrl_lib.models import make_tiny_model  # noqa: E402
from toolrl_lib.train import anatomy  # noqa: E402

SETTINGS = dict(max_completion_length=20, epsilon_high=0.28, update_lr=1e-2, beta=0.04)


def _policy() -> tuple[Any, Any]:
    """Tiny Llama + LoRA whose adapter is already non-zero (so old != reference) and whose
    end-of-turn logit is scaled up (so completions end at different lengths)."""
    model, tok = make_tiny_model(seed=0)
    with torch.no_grad():
        model.lm_head.weight[tok.eos_token_id] *= 60
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                             task_type="CAUSAL_LM"))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05)
    return model, tok


def _rows(tok: Any, n: int = 3) -> list[dict[str, Any]]:
    return [{"prompt": tok.apply_chat_template([{"role": "user", "content": f"call tool {i}"}],
                                               add_generation_prompt=True, tokenize=False)}
            for i in range(n)]


def _scorer(rows: list[dict[str, Any]], texts: list[str]) -> list[dict[str, float]]:
    """A deterministic reward with two components that varies within groups."""
    return [{"odd": float(len(t) % 2), "a": 0.1 * t.count("a"), "total": float(len(t) % 3) + 0.1 * t.count("a")}
            for t in texts]


@pytest.fixture(scope="module")
def dissected() -> tuple[anatomy.Step, Any, Any]:
    model, tok = _policy()
    step = anatomy.dissect(model, tok, _rows(tok), anatomy.StepSettings(**SETTINGS), _scorer)
    return step, model, tok


@pytest.fixture(scope="module")
def against_trl(dissected: tuple[anatomy.Step, Any, Any]) -> Any:
    step, model, tok = dissected
    return anatomy.compare_with_trl(model, tok, step).set_index(["loss", "beta"])


@pytest.mark.parametrize("beta", [0.0, 0.04], ids=["no_kl", "kl"])
@pytest.mark.parametrize("loss", anatomy.LOSS_TYPES)
def test_anatomy_hand_loss_equals_trl(against_trl: Any, loss: str, beta: float) -> None:
    row = against_trl.loc[(loss, beta)]
    assert abs(row["hand"] - row["trl"]) <= 1e-5, f"{loss} beta={beta}: hand {row['hand']} vs TRL {row['trl']}"


def test_anatomy_batch_exercises_every_term(dissected: tuple[anatomy.Step, Any, Any], against_trl: Any) -> None:
    """The equality above is only informative if ratios, clipping, lengths and KL all vary."""
    step, _, _ = dissected
    tokens = step.tokens
    assert (tokens["ratio"] - 1).abs().max() > SETTINGS["epsilon_high"]
    assert tokens["clip_low"].any() or tokens["clip_high"].any()
    assert step.rewards["length"].nunique() > 2  # so grpo, dapo and dr_grpo weigh tokens differently
    assert (tokens["logp_old"] - tokens["logp_ref"]).abs().max() > 1e-3
    assert tokens["kl"].abs().max() > 1e-4
    assert against_trl["hand"].round(7).nunique() == len(against_trl)  # eight different numbers


def test_anatomy_leaves_the_model_as_it_was(dissected: tuple[anatomy.Step, Any, Any], against_trl: Any) -> None:
    _, model, _ = dissected
    assert set(model.peft_config) == {"default"}  # TRL's "ref" adapter copy is gone
    assert "forward" not in model.get_base_model().__dict__  # TRL's fused-head patch is gone


@pytest.mark.parametrize("scale", anatomy.SCALE_REWARDS)
def test_anatomy_advantages_equal_trl(tmp_path: Any, scale: str) -> None:
    """Our advantage table on TRL's own rewards gives TRL's own advantages."""
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()
    model, tok = _policy()
    rows = _rows(tok, 2)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=8, report_to=[], save_strategy="no",
                      gradient_checkpointing=False, disable_tqdm=True, scale_rewards=scale)
    reward = lambda completions, **kw: [r["total"] for r in _scorer([], completions)]  # noqa: E731
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok)
    set_seed(0)
    output = trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(4)])
    totals = list(trainer._logs["rewards"]["<lambda>"])
    table = anatomy.advantage_table(anatomy.pd.DataFrame(
        {"group": [i // 4 for i in range(8)], "sample": [i % 4 for i in range(8)], "total": totals}))
    assert table["reward"].std() > 0
    assert torch.allclose(torch.tensor(table[f"adv_{scale}"].to_numpy(), dtype=torch.float32),
                          output["advantages"], atol=1e-5)


def test_anatomy_loss_names_match_the_run_config() -> None:
    from toolrl_lib.train.config import RunConfig
    from toolrl_lib.train.trainer import grpo_loss_kwargs

    for loss, (trl_type, level) in anatomy.TRL_LOSS.items():
        config = RunConfig()
        config.grpo.loss_type = loss
        assert grpo_loss_kwargs(config) == {"loss_type": trl_type, "importance_sampling_level": level}


def test_anatomy_length_weighting_on_policy() -> None:
    """With no update step (ratio 1 everywhere) the measured pushes follow each aggregation:
    grpo/gspo give every completion |A| / B in total, dapo every token |A| / N, dr_grpo every
    token |A| / (B x max_completion_length)."""
    model, tok = _policy()
    step = anatomy.dissect(model, tok, _rows(tok), anatomy.StepSettings(**{**SETTINGS, "update_lr": 0.0}), _scorer)
    assert torch.equal(step.logps, step.old_logps)
    table = anatomy.length_weighting(step)
    B, N = len(table), int(table["length"].sum())
    adv = table["advantage"].abs()
    assert torch.allclose(torch.tensor(table["grpo_total"].to_numpy()), torch.tensor((adv / B).to_numpy()), atol=1e-6)
    assert torch.allclose(torch.tensor(table["gspo_total"].to_numpy()), torch.tensor((adv / B).to_numpy()), atol=1e-6)
    assert torch.allclose(torch.tensor(table["dapo_per_token"].to_numpy()), torch.tensor((adv / N).to_numpy()), atol=1e-6)
    dr = adv / (B * SETTINGS["max_completion_length"])
    assert torch.allclose(torch.tensor(table["dr_grpo_per_token"].to_numpy()), torch.tensor(dr.to_numpy()), atol=1e-6)


def test_anatomy_zero_variance_group_gets_no_push(dissected: tuple[anatomy.Step, Any, Any]) -> None:
    step, _, _ = dissected
    flat = anatomy.flattened(step, 0)
    assert torch.all(flat[:4] == 0) and torch.any(flat[4:] != 0)
    shares = anatomy.group_shares(step, flat)
    for loss in anatomy.LOSS_TYPES:
        assert shares.loc[0, f"{loss}_share"] == 0.0
        assert shares[f"{loss}_share"].sum() == pytest.approx(1.0)


def test_anatomy_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="num_generations"):
        anatomy.StepSettings(num_generations=1)
    with pytest.raises(ValueError, match="scale_rewards"):
        anatomy.StepSettings(scale_rewards="max")
    with pytest.raises(ValueError, match="update_loss"):
        anatomy.StepSettings(update_loss="rlsd")
