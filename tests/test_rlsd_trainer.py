"""RLSDGRPOTrainer on the tiny random model: exactness, isolation, teacher, metrics."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from peft import LoraConfig  # noqa: E402
from transformers import set_seed  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback  # noqa: E402
from toolrl_lib.models import make_tiny_model  # noqa: E402
from toolrl_lib.train.rlsd import RLSDConfig, RLSDGRPOTrainer  # noqa: E402
from toolrl_lib.train.rlsd.teacher import TEACHER_ADAPTER, AdapterTeacher, ema_update_  # noqa: E402

MARKER = "<<PRIV-7f3a>>"
METRICS = ("rlsd/weight_mean", "rlsd/weight_min", "rlsd/weight_max", "rlsd/clip_frac",
           "rlsd/delta_mean", "rlsd/teacher_kl", "rlsd/lambda")


def _dataset(tok: Any, n: int = 4) -> Dataset:
    rows = []
    for i in range(n):
        prompt = tok.apply_chat_template(
            [{"role": "user", "content": f"call tool number {i}"}], add_generation_prompt=True, tokenize=False
        )
        rows.append({"prompt": prompt, "privileged": f'{MARKER}{{"name": "f{i}"}}'})
    return Dataset.from_list(rows)


def _reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    return [float(len(c) % 3) + 0.1 * c.count("a") for c in completions]


def _args(tmp_path: Any, **overrides: Any) -> GRPOConfig:
    values = dict(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=6, max_steps=2, logging_steps=1, report_to=[],
        learning_rate=5e-2, gradient_checkpointing=False, save_strategy="no", seed=0,
        disable_tqdm=True, loss_type="dapo",
    )
    values.update(overrides)
    return GRPOConfig(**values)


def _lora() -> LoraConfig:
    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


def _trainer(tmp_path: Any, rlsd: RLSDConfig | None, peft: bool = True, **arg_overrides: Any) -> Any:
    set_seed(0)
    model, tok = make_tiny_model(seed=0)
    cls, extra = (GRPOTrainer, {}) if rlsd is None else (RLSDGRPOTrainer, {"rlsd": rlsd})
    return cls(model=model, reward_funcs=_reward, args=_args(tmp_path, **arg_overrides),
               train_dataset=_dataset(tok), processing_class=tok,
               peft_config=_lora() if peft else None, **extra)


def _adapter(trainer: Any, name: str = "default") -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.named_parameters() if f".{name}." in k}


@pytest.fixture(autouse=True)
def _cpu_kernel() -> None:
    install_cpu_logprob_fallback()


def test_lambda_zero_reproduces_plain_grpo_exactly(tmp_path: Any) -> None:
    plain = _trainer(tmp_path / "plain", None)
    plain.train()
    rlsd = _trainer(tmp_path / "rlsd", RLSDConfig(lam=0.0), loss_type="rlsd")
    rlsd.train()
    losses = lambda t: [h["loss"] for h in t.state.log_history if "loss" in h]  # noqa: E731
    assert losses(plain) == losses(rlsd) and len(losses(plain)) == 2
    a, b = _adapter(plain), _adapter(rlsd)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_lambda_zero_same_batch_same_loss(tmp_path: Any) -> None:
    plain = _trainer(tmp_path / "p", None)
    rlsd = _trainer(tmp_path / "r", RLSDConfig(lam=0.0))
    rows = [dict(r) for r in _dataset(plain.processing_class) for _ in range(4)][:4]

    def loss(trainer: Any) -> torch.Tensor:
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # normally set by Trainer.train()
        set_seed(1)
        batch = trainer._generate_and_score_completions([dict(r) for r in rows])
        return trainer._compute_loss(trainer.model, batch)

    reference = loss(plain)
    assert torch.equal(reference, loss(rlsd))
    rlsd.rlsd.lam, rlsd.rlsd.eps_w = 1.0, 0.5  # same batch with λ > 0: the check above can fail
    assert not torch.equal(reference, loss(rlsd))


def test_privileged_text_only_reaches_the_teacher(tmp_path: Any) -> None:
    trainer = _trainer(tmp_path, RLSDConfig(teacher="trust_region"), max_steps=1)
    tok = trainer.processing_class
    marker_ids = tok(MARKER, add_special_tokens=False)["input_ids"]
    state = {"teacher": False}
    seen: list[tuple[bool, bool]] = []  # (inside teacher context, input holds the marker)

    def contains(ids: torch.Tensor) -> bool:
        n = len(marker_ids)
        return any(row[i : i + n] == marker_ids for row in ids.tolist() for i in range(len(row) - n + 1))

    def hook(module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            seen.append((state["teacher"], contains(ids)))

    base = trainer.model.get_base_model()
    handle = base.model.register_forward_pre_hook(hook, with_kwargs=True)
    original = trainer.rlsd_teacher.active

    def flagged(model: Any) -> Any:
        import contextlib

        @contextlib.contextmanager
        def ctx() -> Any:
            state["teacher"] = True
            with original(model) as m:
                yield m
            state["teacher"] = False

        return ctx()

    trainer.rlsd_teacher.active = flagged
    try:
        trainer.train()
    finally:
        handle.remove()
    assert any(t for t, _ in seen) and any(not t for t, _ in seen)
    assert all(has == in_teacher for in_teacher, has in seen), seen


def test_rate_zero_keeps_teacher_at_the_reference(tmp_path: Any) -> None:
    trainer = _trainer(tmp_path, RLSDConfig(teacher="trust_region", teacher_update_rate=0.0))
    start_policy = _adapter(trainer)
    start_teacher = _adapter(trainer, TEACHER_ADAPTER)
    trainer.train()
    end_teacher = _adapter(trainer, TEACHER_ADAPTER)
    assert all(torch.equal(start_teacher[k], end_teacher[k]) for k in start_teacher)
    assert any(not torch.equal(start_policy[k], v) for k, v in _adapter(trainer).items())
    # the teacher computes exactly what the reference (adapter disabled = base) computes
    model = trainer.model
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        with trainer.rlsd_teacher.active(model):
            teacher_logits = model(input_ids=ids).logits
        with model.disable_adapter():
            reference_logits = model(input_ids=ids).logits
        policy_logits = model(input_ids=ids).logits
    assert torch.equal(teacher_logits, reference_logits)
    assert not torch.allclose(policy_logits, reference_logits)
    assert all(p.requires_grad == (".default." in n) for n, p in model.named_parameters() if "lora_" in n)


def test_ema_update_math() -> None:
    t, s = torch.zeros(3), torch.tensor([1.0, 2.0, -4.0])
    ema_update_([(t, s)], 0.1)
    torch.testing.assert_close(t, torch.tensor([0.1, 0.2, -0.4]))
    ema_update_([(t, s)], 0.0)
    torch.testing.assert_close(t, torch.tensor([0.1, 0.2, -0.4]))


def test_two_step_run_logs_rlsd_metrics(tmp_path: Any) -> None:
    trainer = _trainer(tmp_path, RLSDConfig(decay_steps=4), loss_type="rlsd")
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    for h in logs:
        for key in METRICS:
            assert key in h and math.isfinite(h[key]), (key, h)
        assert 0.8 <= h["rlsd/weight_min"] <= h["rlsd/weight_mean"] <= h["rlsd/weight_max"] <= 1.2
        assert 0.0 <= h["rlsd/clip_frac"] <= 1.0 and h["rlsd/teacher_kl"] >= 0
    assert [h["rlsd/lambda"] for h in logs] == [0.5, 0.375]
    assert trainer.loss_type == "dapo"


def test_full_finetuning_copy_teacher(tmp_path: Any) -> None:
    trainer = _trainer(tmp_path, RLSDConfig(teacher_update_rate=0.0), peft=False, max_steps=1,
                       save_strategy="steps", save_steps=1)
    start = {k: v.detach().clone() for k, v in trainer.rlsd_teacher.model.named_parameters()}
    trainer.train()
    assert all(torch.equal(v, start[k]) for k, v in trainer.rlsd_teacher.model.named_parameters())
    assert (tmp_path / "checkpoint-1" / "rlsd_teacher.safetensors").is_file()
    assert any("rlsd/weight_mean" in h for h in trainer.state.log_history)


def test_rate_one_teacher_follows_policy_and_is_checkpointed(tmp_path: Any) -> None:
    trainer = _trainer(tmp_path, RLSDConfig(teacher_update_rate=1.0), max_steps=1,
                       save_strategy="steps", save_steps=1)
    trainer.train()
    policy, teacher_now = _adapter(trainer), _adapter(trainer, TEACHER_ADAPTER)
    assert all(torch.equal(v, teacher_now[k.replace(".default.", f".{TEACHER_ADAPTER}.")])
               for k, v in policy.items())
    saved = tmp_path / "checkpoint-1" / "rlsd_teacher.safetensors"
    assert saved.is_file()
    teacher: AdapterTeacher = trainer.rlsd_teacher
    before = teacher.state_dict()
    with torch.no_grad():
        for t, _ in teacher.pairs.values():
            t.zero_()
    trainer._load_from_checkpoint(str(saved.parent))  # what --resume runs
    after = teacher.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_missing_privileged_column_fails_at_construction(tmp_path: Any) -> None:
    set_seed(0)
    model, tok = make_tiny_model(seed=0)
    data = _dataset(tok).remove_columns(["privileged"])
    with pytest.raises(ValueError, match="privileged"):
        RLSDGRPOTrainer(model=model, reward_funcs=_reward, args=_args(tmp_path), train_dataset=data,
                        processing_class=tok, peft_config=_lora(), rlsd=RLSDConfig())
