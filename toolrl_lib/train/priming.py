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
from toolrl_lib.fast.memory import mapped_blocks
from toolrl_lib.models import release_memory
from toolrl_lib.train.config import RunConfig

PRIMING_MARKER = "priming.json"
PRIMING_ADAPTER = "priming_adapter"  # the LoRA that was merged, kept inside the primed folder


def is_primed(folder: str | Path) -> bool:
    return (Path(folder) / PRIMING_MARKER).is_file()


def prime(
    config: RunConfig, base_path: str, examples: list[Example], family: str, out_dir: str | Path,
    device: str, rows: list[dict[str, Any]] | None = None,
) -> Path:
    """SFT a LoRA on ``examples`` (rendered for ``family``), merge it, save ``out_dir``.

    ``rows`` replaces the examples with ready SFT rows (multi-turn: pre-tokenised gold
    transcripts, ``input_ids`` + ``completion_mask``; see ``toolrl_lib.envs.priming``)."""
    import torch
    from trl import SFTTrainer

    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.backend import ensure_logprob_kernel
    from toolrl_lib.train.dataset import BuildReport, priming_rows, shortest_examples, to_dataset
    from toolrl_lib.train.sft import lora_wrap, save_model_folder, sft_arguments

    p = config.priming
    out_dir = Path(out_dir)
    tokenizer = load_tokenizer(base_path, padding_side="right")
    report = BuildReport()
    if rows is None:
        adapter, thinking = get_adapter(family), config.model.enable_thinking
        chosen = (shortest_examples(examples[: p.shortest_of], p.num_examples, adapter, tokenizer,
                                    enable_thinking=thinking) if p.shortest_of else examples[: p.num_examples])
        rows = priming_rows(chosen, adapter, tokenizer, p.max_length, enable_thinking=thinking, report=report)
    else:
        for row in rows:
            report.keep("multi_turn", len(row["input_ids"]))
    dataset = to_dataset(rows)
    torch.manual_seed(config.seed)
    model = load_model(base_path, dtype=config.model.dtype, device=device)
    work = out_dir.parent / (out_dir.name + ".work")
    args = sft_arguments(
        config, device, work, max_steps=p.max_steps, learning_rate=p.learning_rate,
        per_device_train_batch_size=p.batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps, max_length=p.max_length,
        logging_steps=max(1, p.max_steps // 8), save_strategy="no",
        lr_scheduler_type="constant", warmup_steps=0, gradient_checkpointing=False,
    )
    ensure_logprob_kernel()
    peft_model = lora_wrap(config, model, p.lora_r, p.lora_alpha, p.top_layers)
    trainer = SFTTrainer(model=peft_model, args=args, train_dataset=dataset, processing_class=tokenizer)
    start = time.perf_counter()
    with mapped_blocks(config.fast.priming_mmap_threshold if device == "cpu" else 0):  # a lower peak RSS (fast/memory.py)
        result = trainer.train()
    # the adapter itself (a few MB) beside the merged model: what a later device call carries to
    # rebuild this primed model from the base (the merged folder is hundreds of MB)
    peft_model.save_pretrained(str(work / PRIMING_ADAPTER))
    merged = peft_model.merge_and_unload()
    state = trainer.state

    def info() -> dict[str, Any]:
        losses = [row["loss"] for row in state.log_history if "loss" in row]
        return {
            "base_model": base_path, "family": family, "steps": state.global_step,
            "examples": report.to_dict(), "tokens": report.tokens,
            "train_loss": result.training_loss, "losses": losses,
            "top_layers": p.top_layers,
            "seconds": round(time.perf_counter() - start, 1),
        }

    save_model_folder(merged, tokenizer, out_dir, PRIMING_MARKER, info)  # the marker last: no marker, no primed model
    shutil.copytree(work / PRIMING_ADAPTER, out_dir / PRIMING_ADAPTER, dirs_exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    del trainer, peft_model, merged, model
    release_memory()
    return out_dir


def rebuild_primed(base_path: str, out_dir: str | Path, dtype: str, device: str, adapter: str | Path | None = None,
                   info: dict[str, Any] | None = None) -> Path:
    """``out_dir``, a primed folder, again from its base and its kept LoRA (``PRIMING_ADAPTER``, or
    ``adapter``), merged as ``prime`` merges it. A fresh GPU machine rebuilds the primed model from a few
    MB instead of receiving its weights; on the same kind of device the weights come out bit-identical.
    ``info``: the marker's content (default: the one already in ``out_dir``)."""
    from peft import PeftModel

    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.train.sft import save_model_folder

    out_dir = Path(out_dir)
    adapter = Path(adapter) if adapter else out_dir / PRIMING_ADAPTER
    if not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{adapter}: no priming LoRA (adapter_config.json) to rebuild the primed model from")
    info = info if info is not None else json.loads((out_dir / PRIMING_MARKER).read_text())
    staged = out_dir.parent / (out_dir.name + ".adapter")
    if adapter.resolve() != staged.resolve():  # save_model_folder replaces out_dir, the adapter's home
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(adapter, staged)
    model = load_model(base_path, dtype=dtype, device=device)
    merged = PeftModel.from_pretrained(model, str(staged)).merge_and_unload()
    save_model_folder(merged, load_tokenizer(base_path, padding_side="right"), out_dir, PRIMING_MARKER,
                      lambda: {**info, "rebuilt_from": {"base": base_path, "adapter": str(adapter)}})
    shutil.copytree(staged, out_dir / PRIMING_ADAPTER, dirs_exist_ok=True)
    shutil.rmtree(staged, ignore_errors=True)
    del merged, model
    release_memory()
    return out_dir


def single_process_env(env: dict[str, str], device: str, local_rank: int) -> dict[str, str]:
    """``env`` minus what makes a process join the launched group (ranks, accelerate engine).

    Priming is a plain one-process SFT: started inside a rank, its trainer would otherwise
    see WORLD_SIZE > 1, wrap the model in DDP and wait for ranks that never come."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    out = {k: v for k, v in env.items()
           if k not in drop and not k.startswith(("ACCELERATE_", "FSDP_", "TORCHELASTIC_"))}
    if device != "cpu":  # this rank's GPU only
        visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        out["CUDA_VISIBLE_DEVICES"] = visible[local_rank] if local_rank < len(visible) else str(local_rank)
    return out


def prime_in_subprocess(
    config_path: str | Path, base_path: str, family: str, out_dir: str | Path, device: str,
    local_rank: int = 0,
) -> Path:
    """``prime`` in a fresh single process (used by rank 0 of a multi-process run).

    The child re-reads the saved run config and the same seeded training examples."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "toolrl_lib.train.priming", str(config_path), base_path, family,
           str(out_dir), device]
    code = subprocess.run(cmd, env=single_process_env(dict(os.environ), device, local_rank),
                          check=False).returncode
    if code != 0 or not is_primed(out_dir):
        raise RuntimeError(f"format priming (subprocess of rank 0) failed with exit code {code}; "
                           f"its log is above")
    return Path(out_dir)


def _main(argv: list[str]) -> None:
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples

    config_path, base_path, family, out_dir, device = argv
    config = load_run_config(config_path, check=False)
    examples = load_examples(config.data.train_files, config.data.max_train_examples,
                             seed=config.seed, shuffle=True)
    prime(config, base_path, examples, family, out_dir, device)


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
