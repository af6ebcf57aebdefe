"""Supervised fine-tuning on ground-truth calls: the SFT warm start (``toolrl sft``), and the parts
format priming (``priming.py``) shares with it.

Both train with TRL's ``SFTTrainer`` on prompt/completion rows (``dataset.priming_rows``) with
``completion_only_loss``: the loss (and the eval loss) counts the assistant's tokens only, never
the prompt's. Priming is a few dozen LoRA steps inside ``toolrl train``; the SFT stage is its grown-up
form (the ``sft`` section of the run config): whole epochs over the training set, LoRA or full
fine-tuning, evaluated on ``data.val_files`` every ``sft.eval_steps`` steps, the checkpoint with the
lowest eval loss kept, and a time budget after which it saves and stops, so that a run longer
than one call continues with ``--resume``. Its output folder:

    checkpoints/   resumable HF Trainer checkpoints (optimizer, scheduler, RNG, data position)
    model/         the finished model: a full folder (LoRA merged), for load_model / model.name
    sft.json       steps, epochs, loss and eval-loss history, best step, seconds, finished
    config.yaml    the resolved run config
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolrl_lib import atomic
from toolrl_lib.atomic import staged_dir
from toolrl_lib.data.example import Example
from toolrl_lib.run_dir import checkpoint_step, latest_checkpoint
from toolrl_lib.train.config import RunConfig, save_run_config, validate_sft

SFT_INFO = "sft.json"
MODEL = "model"
CHECKPOINTS = "checkpoints"


# --- shared with format priming -------------------------------------------------------------

def sft_arguments(config: RunConfig, device: str, output_dir: str | Path, **kwargs: Any) -> Any:
    """TRL ``SFTConfig`` with what every SFT of ours has: loss on completion tokens only, the
    run's seed, precision for ``device``, no reporting, one GPU per process; ``kwargs`` the rest."""
    from trl import SFTConfig

    from toolrl_lib.train.backend import one_gpu_per_process, precision_kwargs, use_tf32

    use_tf32(config.model.tf32, device)
    args = SFTConfig(
        output_dir=str(output_dir), completion_only_loss=True, report_to=[], seed=config.seed,
        disable_tqdm=not config.logging.progress_bar, **kwargs,
        **precision_kwargs(device, config.model.dtype, config.model.tf32),
    )
    return one_gpu_per_process(args)


def lora_wrap(config: RunConfig, model: Any, r: int, alpha: int, top: int = 0) -> Any:
    """``model`` with a fresh PEFT LoRA adapter (rank ``r``, ``alpha``; ``top`` > 0: top layers only).
    Callers keep this reference: Unsloth's patched SFTTrainer exposes the unwrapped model."""
    from peft import get_peft_model

    from toolrl_lib.train.backend import peft_lora_config, top_layers

    return get_peft_model(model, peft_lora_config(config.lora, r=r, alpha=alpha,
                                                  layers=top_layers(model, top)))


def save_model_folder(model: Any, tokenizer: Any, out_dir: Path, marker: str | None = None,
                      info: Callable[[], dict[str, Any]] | None = None) -> Path:
    """A full model folder (``model`` merged already), tokenizer padding left for generation,
    saved atomically; ``marker`` (a JSON file of ``info()``) is written last inside it."""
    with staged_dir(out_dir) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.padding_side = "left"
        tokenizer.save_pretrained(staging)
        if marker is not None and info is not None:
            (staging / marker).write_text(json.dumps(info(), indent=2), encoding="utf-8")
    return out_dir


def sft_rows(examples: list[Example], family: str, tokenizer: Any, max_length: int,
             enable_thinking: bool, report: Any) -> list[dict[str, str]]:
    """Prompt/completion rows in ``family``'s format (too-long rows dropped into ``report``)."""
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import priming_rows

    return priming_rows(examples, get_adapter(family), tokenizer, max_length,
                        enable_thinking=enable_thinking, report=report)


# --- the SFT stage ---------------------------------------------------------------------------

def read_sft_info(out_dir: str | Path) -> dict[str, Any] | None:
    """``<out_dir>/sft.json``, or None before the first call has finished a part."""
    path = Path(out_dir) / SFT_INFO
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _where_to_start(out: Path, resume: bool) -> Path | None:
    """The checkpoint to resume from (None: a fresh start); refuses to overwrite a run."""
    checkpoint = latest_checkpoint(out / CHECKPOINTS)
    if resume:
        if checkpoint is None:
            raise FileNotFoundError(f"--resume: no complete checkpoint under {out / CHECKPOINTS}; "
                                    "start without --resume")
        return checkpoint
    if checkpoint is not None or (out / MODEL).exists():
        raise ValueError(f"{out} already holds an SFT run (checkpoints or model/); pass --resume to "
                         "continue it or choose another --out")
    return None


def time_budget(start: float, seconds: float) -> Any:
    """A TrainerCallback: once ``seconds`` (> 0) have passed since ``start`` (``perf_counter``),
    save a checkpoint after the current optimizer step and stop; ``.stopped`` says it did."""
    from transformers import TrainerCallback

    class TimeBudget(TrainerCallback):
        stopped = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if seconds > 0 and not control.should_training_stop and time.perf_counter() - start >= seconds:
                control.should_save = control.should_training_stop = True
                self.stopped = True
            return control

    return TimeBudget()


def build_sft_trainer(config: RunConfig, out_dir: str | Path, device: str, start: float | None = None) -> Any:
    """The SFTTrainer of an SFT run (model, rows, arguments, callbacks), untrained; its
    ``build_reports`` attribute holds what happened to the training and validation rows."""
    import torch
    from trl import SFTTrainer

    from toolrl_lib.models import load_model, load_tokenizer, resolve_model
    from toolrl_lib.train.backend import ensure_logprob_kernel
    from toolrl_lib.train.dataset import BuildReport, load_examples, to_dataset
    from toolrl_lib.train.trainer import resolve_family

    s, out = config.sft, Path(out_dir)
    start_model = resolve_model(config.model.name)
    tokenizer = load_tokenizer(start_model, padding_side="right")
    family = resolve_family(config, tokenizer)
    train_examples = load_examples(config.data.train_files, s.num_examples or None, seed=config.seed,
                                   shuffle=True)
    val_examples = load_examples(config.data.val_files, s.eval_examples or None)
    reports = {"train": BuildReport(), "validation": BuildReport()}
    thinking = config.model.enable_thinking
    train_rows = sft_rows(train_examples, family, tokenizer, s.max_length, thinking, reports["train"])
    val_rows = sft_rows(val_examples, family, tokenizer, s.max_length, thinking, reports["validation"])
    if not val_rows:
        raise ValueError(f"data.val_files {config.data.val_files}: no validation rows within "
                         f"sft.max_length ({s.max_length}) ({reports['validation'].to_dict()}); SFT needs "
                         "some to evaluate on")
    torch.manual_seed(config.seed)  # LoRA init is random: same seed, same adapter
    if s.method == "full":
        # fp32 master weights: a small update vanishes in bf16 weights (8 mantissa bits);
        # the trainer's bf16 autocast still computes in bf16 on GPU.
        model = load_model(start_model, dtype="fp32", device=device)
        model.requires_grad_(True)
    else:
        model = lora_wrap(config, load_model(start_model, dtype=config.model.dtype, device=device),
                          s.lora_r, s.lora_alpha)
    # With load_best_model_at_end and a limit of 1, transformers deletes the last checkpoint at
    # the end of train() when it is not the best one, so a run stopped by its time budget resumed
    # from the best step and redid the steps after it (seen on the GPU: 346 -> 300, 475 -> 400).
    keep = 2 if s.load_best and s.save_total_limit == 1 else s.save_total_limit
    args = sft_arguments(
        config, device, out / CHECKPOINTS, num_train_epochs=s.epochs, max_steps=s.max_steps,
        learning_rate=s.learning_rate, lr_scheduler_type=s.lr_scheduler_type,
        warmup_steps=s.warmup_steps, weight_decay=s.weight_decay, max_grad_norm=s.max_grad_norm,
        per_device_train_batch_size=s.batch_size, per_device_eval_batch_size=s.eval_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps, max_length=s.max_length,
        logging_steps=config.logging.logging_steps, eval_strategy="steps", eval_steps=s.eval_steps,
        save_strategy="steps", save_steps=s.save_steps, save_total_limit=keep,
        load_best_model_at_end=s.load_best, metric_for_best_model="eval_loss", greater_is_better=False,
        gradient_checkpointing=s.gradient_checkpointing, dataset_num_proc=s.dataset_num_proc,
    )
    ensure_logprob_kernel()
    budget = time_budget(time.perf_counter() if start is None else start, s.time_budget_s)
    trainer = SFTTrainer(model=model, args=args, train_dataset=to_dataset(train_rows),
                         eval_dataset=to_dataset(val_rows), processing_class=tokenizer,
                         callbacks=[budget])
    trainer.sft_model = model  # the PEFT wrapper itself (see lora_wrap)
    trainer.time_budget = budget
    trainer.build_reports = reports
    trainer.sft_family, trainer.sft_start_model = family, start_model
    return trainer


def sft(config: RunConfig, out_dir: str | Path, resume: bool = False) -> dict[str, Any]:
    """Train (or continue) the SFT run in ``out_dir``; return what ``sft.json`` now holds.

    ``finished`` is true once every step has run: ``model/`` then holds the chosen model (the
    lowest eval loss with ``sft.load_best``, else the last step). A call stopped by
    ``sft.time_budget_s`` leaves a checkpoint and ``finished: false``; call again with ``resume``."""
    from toolrl_lib.models import release_memory
    from toolrl_lib.train.backend import resolve_device

    start = time.perf_counter()
    validate_sft(config)
    out = Path(out_dir)
    previous = read_sft_info(out) if resume else None
    if previous and previous.get("finished") and (out / MODEL / "config.json").is_file():
        print(f"{out}: SFT already finished at step {previous['steps']}; nothing to do")
        return previous
    checkpoint = _where_to_start(out, resume)
    out.mkdir(parents=True, exist_ok=True)
    save_run_config(config, out / "config.yaml")
    device = resolve_device(config.device)
    trainer = build_sft_trainer(config, out, device, start)
    result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    state = trainer.state
    finished = state.global_step >= state.max_steps
    if finished:
        model = trainer.sft_model
        if hasattr(model, "merge_and_unload"):
            model = model.merge_and_unload()
        save_model_folder(model, trainer.processing_class, out / MODEL)
    info = _info(config, trainer, result, finished, checkpoint, previous, time.perf_counter() - start)
    atomic.write_text(out / SFT_INFO, json.dumps(info, indent=2))
    del trainer
    release_memory()
    return info


def _info(config: RunConfig, trainer: Any, result: Any, finished: bool, checkpoint: Path | None,
          previous: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    state, s = trainer.state, config.sft
    history = state.log_history
    best = Path(state.best_model_checkpoint) if state.best_model_checkpoint else None
    calls = (previous or {}).get("calls", [])
    calls = [*calls, {"from_step": checkpoint_step(checkpoint) if checkpoint else 0,
                      "to_step": state.global_step, "seconds": round(seconds, 1),
                      "stopped_by_time_budget": bool(trainer.time_budget.stopped)}]
    return {
        "finished": finished, "method": s.method, "base_model": trainer.sft_start_model,
        "family": trainer.sft_family, "steps": state.global_step, "max_steps": state.max_steps,
        "epochs_done": state.epoch, "epochs": s.epochs if s.max_steps <= 0 else None,
        "examples": {k: r.to_dict() for k, r in trainer.build_reports.items()},
        "tokens": trainer.build_reports["train"].tokens,
        "train_loss_history": [{"step": r["step"], "loss": r["loss"]} for r in history if "loss" in r],
        "eval_loss_history": [{"step": r["step"], "eval_loss": r["eval_loss"]}
                              for r in history if "eval_loss" in r],
        "best_step": checkpoint_step(best) if best else None, "best_eval_loss": state.best_metric,
        "model": "model" if finished else None,
        "model_is": ("lowest eval loss" if s.load_best and best else "last step") if finished else None,
        "train_loss": getattr(result, "training_loss", None),
        "seconds": round(sum(c["seconds"] for c in calls), 1), "calls": calls,
    }
