"""Format priming: a short LoRA SFT on ground-truth completions, merged into a full model.

Weak models (SmolLM2-135M) almost never emit a parseable call, so every GRPO group
scores the same and the advantage is zero. A few dozen supervised steps on the family's
call format fix that cheaply; GRPO then starts from ``<run>/primed_model/``.

TRL 1.15's trainers compute log-probs with a Triton kernel (CUDA only); on CPU we install
the pure-PyTorch stand-in from ``cpu_logprob`` first.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.train.config import RunConfig

PRIMING_MARKER = "priming.json"


def is_primed(folder: str | Path) -> bool:
    return (Path(folder) / PRIMING_MARKER).is_file()


def precision_kwargs(device: str, dtype: str) -> dict[str, Any]:
    """TrainingArguments precision flags: fp32 on CPU; bf16 autocast on capable GPUs."""
    if device == "cpu":
        return {"use_cpu": True, "bf16": False, "fp16": False}
    import torch

    from toolrl_lib.models import resolve_dtype

    return {"bf16": resolve_dtype(dtype, device) == torch.bfloat16, "fp16": False}


def ensure_logprob_kernel() -> None:
    """TRL 1.15 computes SFT/GRPO log-probs with a Triton kernel; CPU wheels lack Triton, so
    install the pure-PyTorch stand-in there (a no-op where the kernel exists)."""
    from toolrl_lib.train.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()


def prime(
    config: RunConfig, base_path: str, examples: list[Example], family: str, out_dir: str | Path,
    device: str,
) -> Path:
    """SFT a LoRA on ``examples`` (rendered for ``family``), merge it, save ``out_dir``."""
    import torch
    from trl import SFTConfig, SFTTrainer

    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.dataset import BuildReport, priming_rows, to_dataset

    p = config.priming
    out_dir = Path(out_dir)
    tokenizer = load_tokenizer(base_path, padding_side="right")
    report = BuildReport()
    rows = priming_rows(examples[: p.num_examples], get_adapter(family), tokenizer, p.max_length,
                        enable_thinking=config.model.enable_thinking, report=report)
    dataset = to_dataset(rows)
    torch.manual_seed(config.seed)
    model = load_model(base_path, dtype=config.model.dtype, device=device)
    work = out_dir.parent / (out_dir.name + ".work")
    args = SFTConfig(
        output_dir=str(work), max_steps=p.max_steps, learning_rate=p.learning_rate,
        per_device_train_batch_size=p.batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps, max_length=p.max_length,
        completion_only_loss=True, logging_steps=max(1, p.max_steps // 8), save_strategy="no",
        report_to=[], seed=config.seed, lr_scheduler_type="constant", warmup_steps=0,
        gradient_checkpointing=False, disable_tqdm=not config.logging.progress_bar,
        **precision_kwargs(device, config.model.dtype),
    )
    ensure_logprob_kernel()
    from peft import get_peft_model

    # Wrap here and keep the reference: Unsloth's patched SFTTrainer exposes the unwrapped model.
    peft_model = get_peft_model(model, peft_lora_config(config.lora, r=p.lora_r, alpha=p.lora_alpha))
    trainer = SFTTrainer(model=peft_model, args=args, train_dataset=dataset, processing_class=tokenizer)
    start = time.perf_counter()
    result = trainer.train()
    merged = peft_model.merge_and_unload()
    staging = out_dir.parent / (out_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    merged.save_pretrained(staging, safe_serialization=True)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(staging)
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    info = {
        "base_model": base_path, "family": family, "steps": trainer.state.global_step,
        "examples": report.to_dict(), "train_loss": result.training_loss, "losses": losses,
        "seconds": round(time.perf_counter() - start, 1),
    }
    (staging / PRIMING_MARKER).write_text(json.dumps(info, indent=2), encoding="utf-8")
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    shutil.rmtree(work, ignore_errors=True)
    return out_dir
