"""The one GRPO trainer assembly behind both runs: single-turn (``run``) and multi-turn (``multi_turn``).

Each run prepares its own data (prompts, or episode tasks) and rewards; the rest is shared:
the ``GRPOConfig`` arguments from the run config (``grpo_args``), the callbacks every run has
(``trainer_callbacks``: metrics.csv, NaN stop, TensorBoard), the trainer itself
(``build_trainer``: TRL's ``GRPOTrainer``, or ``RLSDGRPOTrainer`` for ``loss_type: rlsd``),
running it with a clear message when it stops early (``run_trainer``: out of memory, NaN loss)
and saving ``last/`` (``save_last``). Heavy imports (torch, TRL) happen inside the functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolrl_lib import atomic
from toolrl_lib.run_dir import RunDir, checkpoint_step, latest_checkpoint
from toolrl_lib.train.config import RunConfig
from toolrl_lib.train.distributed import Dist


class TrainingStopped(RuntimeError):
    """The run stopped early (OOM, NaN loss); the message says why and how to go on."""


def resolve_family(config: RunConfig, tokenizer: Any) -> str:
    """The prompt family the run trains with: ``model.family``, or detected from the tokenizer."""
    if config.model.family != "auto":
        return config.model.family
    from toolrl_lib.prompts import detect_family

    return detect_family(tokenizer)


def grpo_loss_kwargs(config: RunConfig) -> dict[str, Any]:
    """Map our loss names to GRPOConfig fields (GSPO = sequence-level importance sampling)."""
    g = config.grpo
    if g.loss_type == "gspo":
        return {"loss_type": "grpo", "importance_sampling_level": "sequence"}
    if g.loss_type == "rlsd":
        return {"loss_type": config.rlsd.base_loss_type, "importance_sampling_level": "token"}
    return {"loss_type": g.loss_type, "importance_sampling_level": "token"}


def grpo_vllm_kwargs(config: RunConfig, backend: str = "peft") -> dict[str, Any]:
    """``GRPOConfig`` fields for ``grpo.vllm`` (TRL 1.15's names), given only where they apply.

    Off: none (TRL's default ``use_vllm=False``). Unsloth: none either: its engine is built by
    ``FastLanguageModel.from_pretrained(fast_inference=True)`` (``backend.unsloth_vllm_kwargs``)
    and Unsloth's patched trainer switches ``use_vllm`` on, colocated, when the model carries
    one. Null fields fall back to TRL's defaults; ``max_model_len`` null is derived."""
    from toolrl_lib.train.config import VLLM_GPU_MEMORY_DEFAULT, vllm_max_model_len

    v = config.grpo.vllm
    if not v.on or backend == "unsloth":
        return {}
    sampling = {} if v.detokenize else {"generation_kwargs": {"detokenize": False}}  # vLLM SamplingParams
    if not v.importance_sampling_correction:
        sampling["vllm_importance_sampling_correction"] = False
    if v.mode == "server":
        kwargs: dict[str, Any] = {"use_vllm": True, "vllm_mode": "server", **sampling}
        for ours, trl_name in (("server_host", "vllm_server_host"), ("server_port", "vllm_server_port"),
                               ("server_timeout", "vllm_server_timeout")):
            if getattr(v, ours) is not None:
                kwargs[trl_name] = getattr(v, ours)
        return kwargs
    return {
        "use_vllm": True, "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": v.gpu_memory_utilization or VLLM_GPU_MEMORY_DEFAULT,
        "vllm_max_model_length": vllm_max_model_len(config),
        "vllm_enable_sleep_mode": v.enable_sleep_mode,
        "vllm_tensor_parallel_size": v.tensor_parallel_size or 1, **sampling,
    }


def grpo_args(config: RunConfig, paths: RunDir, device: str, processes: int = 1,
              backend: str = "peft") -> Any:
    """TRL's ``GRPOConfig`` for this run: the ``grpo`` (``grpo.vllm`` included, for
    ``backend``), ``logging`` and ``checkpoint`` sections."""
    from trl import GRPOConfig

    from toolrl_lib.train.backend import precision_kwargs

    g, log = config.grpo, config.logging
    report_to = []
    if log.wandb == "auto" and os.environ.get("WANDB_API_KEY"):
        import importlib.util

        if importlib.util.find_spec("wandb") is not None:
            report_to.append("wandb")
            os.environ.setdefault("WANDB_PROJECT", log.wandb_project)
        else:
            print("WANDB_API_KEY is set but wandb is not installed: W&B logging skipped")
    extra = {} if g.generation_batch_size is None else {"generation_batch_size": g.generation_batch_size}
    extra["shuffle_dataset"] = not config.data.balance_kinds  # balanced: our kind order, kept
    if processes > 1:
        # Every LoRA/full-model parameter takes part in each forward: skip DDP's unused-parameter
        # search (it also breaks with gradient checkpointing).
        extra["ddp_find_unused_parameters"] = False
    extra.update(grpo_vllm_kwargs(config, backend))
    return GRPOConfig(
        output_dir=str(paths.checkpoints), run_name=config.name, seed=config.seed,
        per_device_train_batch_size=g.per_device_train_batch_size,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        num_generations=g.num_generations, max_completion_length=g.max_completion_length,
        temperature=g.temperature, top_p=g.top_p, beta=g.beta, epsilon=g.epsilon,
        epsilon_high=g.epsilon_high, scale_rewards=g.scale_rewards,
        num_iterations=g.num_iterations, mask_truncated_completions=g.mask_truncated_completions,
        learning_rate=g.learning_rate, lr_scheduler_type=g.lr_scheduler_type,
        warmup_steps=g.warmup_steps, weight_decay=g.weight_decay, max_grad_norm=g.max_grad_norm,
        max_steps=g.max_steps, num_train_epochs=g.num_train_epochs,
        gradient_checkpointing=g.gradient_checkpointing,
        logging_steps=log.logging_steps, save_strategy="steps",
        save_steps=config.checkpoint.save_steps, save_total_limit=config.checkpoint.save_total_limit,
        report_to=report_to, disable_tqdm=not log.progress_bar, log_completions=log.log_completions,
        **grpo_loss_kwargs(config), **extra, **precision_kwargs(device, config.model.dtype, config.model.tf32),
    )


def tensorboard_callback(folder: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    folder.mkdir(parents=True, exist_ok=True)
    return TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(folder)))


def trainer_callbacks(config: RunConfig, paths: RunDir, checkpoint: Path | None, extra: list[Any],
                      main: bool = True) -> list[Any]:
    """metrics.csv (its rows up to the resumed step kept), NaN stop, ``extra``, TensorBoard.

    The NaN stop is on every rank (all of them must stop at the same step); the files are
    rank 0's (``main``)."""
    from toolrl_lib.train import callbacks as cb

    callbacks: list[Any] = [cb.NaNStopCallback(), *extra]
    if main:
        rows = cb.trim_rows(paths.metrics, checkpoint_step(checkpoint)) if checkpoint else []
        callbacks.insert(0, cb.MetricsCSVCallback(paths.metrics, rows))
        if config.logging.tensorboard:
            callbacks.append(tensorboard_callback(paths.tensorboard))
    return callbacks


def build_trainer(config: RunConfig, paths: RunDir, device: str, model: Any, tokenizer: Any,
                  dataset: Any, reward_funcs: list[Any], callbacks: list[Any], processes: int = 1,
                  rollout_func: Any = None, backend: str = "peft") -> Any:
    """The GRPO trainer of a run; ``rollout_func`` replaces TRL's own sampling when given."""
    from toolrl_lib.train.backend import ensure_logprob_kernel, one_gpu_per_process, use_tf32

    ensure_logprob_kernel()
    args = one_gpu_per_process(grpo_args(config, paths, device, processes, backend))
    use_tf32(config.model.tf32, device)  # before the colocated engine is built: it shares the process
    kwargs = dict(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                  processing_class=tokenizer, callbacks=callbacks)
    if rollout_func is not None:
        kwargs["rollout_func"] = rollout_func
    from toolrl_lib.fast.vllm_engine import colocated_engine

    # TRL builds its colocated engine inside the trainer's constructor
    v = config.grpo.vllm
    if config.fast.generation_process:
        from toolrl_lib.fast.engine_process import EngineOptions

        process = EngineOptions.from_config(config.fast)
    else:
        process = None
    engine = (colocated_engine(v.kv_cache_gib, v.dtype, process=process,
                               max_num_batched_tokens=v.max_num_batched_tokens)
              if v.mode == "colocate" and backend != "unsloth" else colocated_engine())
    if config.grpo.loss_type == "rlsd":
        from toolrl_lib.train.rlsd import RLSDGRPOTrainer

        with engine:
            trainer = RLSDGRPOTrainer(rlsd=config.rlsd, **kwargs)
    else:
        import warnings

        from trl import GRPOTrainer

        with warnings.catch_warnings(), engine:  # rollout_func: public in TRL 1.15, flagged "experimental"
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
            trainer = GRPOTrainer(**kwargs)
    if v.on and backend != "unsloth":  # TRL's engine: its weight sync without the bf16 merge/unmerge round trip
        from toolrl_lib.fast.weight_sync import install as exact_weight_sync

        changed = exact_weight_sync(trainer)
        if changed:
            print(changed, flush=True)
    if config.model.tf32 and device != "cpu":  # run 6: torch's compiler reported TF32 off as the engine compiled
        import torch

        # reported, not set again: a run resumed across sessions keeps the numerics it started with
        print(f"model.tf32: matmul float32 precision {getattr(torch.backends.cuda.matmul, 'fp32_precision', '?')!r} "
              "once the trainer and its colocated engine were built", flush=True)
    return trainer


def run_trainer(trainer: Any, checkpoint: Path | None, paths: RunDir) -> None:
    """``trainer.train()`` (resuming from ``checkpoint``); raise ``TrainingStopped`` with what
    to change when it ran out of GPU memory or its loss became NaN/inf."""
    import torch

    from toolrl_lib.train.callbacks import NaNStopCallback

    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except torch.cuda.OutOfMemoryError as error:
        raise TrainingStopped(
            f"CUDA out of memory at step {trainer.state.global_step}: lower "
            f"grpo.per_device_train_batch_size (raise gradient_accumulation_steps to keep the "
            f"effective batch), grpo.num_generations or grpo.max_completion_length, or turn on "
            f"grpo.gradient_checkpointing; then --resume from "
            f"{latest_checkpoint(paths.checkpoints) or 'the start'}"
        ) from error
    nan_stop = next((c for c in trainer.callback_handler.callbacks if isinstance(c, NaNStopCallback)),
                    None)
    if nan_stop is not None and nan_stop.bad_step is not None:
        raise TrainingStopped(
            f"loss became NaN/inf at step {nan_stop.bad_step}; training stopped without saving that "
            f"step. Lower grpo.learning_rate or max_grad_norm, then --resume from "
            f"{latest_checkpoint(paths.checkpoints) or 'the start'}"
        )


def save_adapter(model: Any, tokenizer: Any, folder: Path) -> Path:
    """Save the policy (PEFT adapter, or full model) + tokenizer atomically."""
    from toolrl_lib.train.backend import save_policy

    return save_policy(model, tokenizer, folder)


def save_last(trainer: Any, tokenizer: Any, folder: Path, dist: Dist) -> None:
    """Save the trained policy to ``folder`` (all ranks call this).

    Sharded weights (ZeRO-3, FSDP) are gathered by ``trainer.save_model``, a collective;
    otherwise rank 0 holds everything and saves alone."""
    if dist.sharded:
        staging = atomic.staging_path(folder) if dist.main else folder.parent / (folder.name + ".tmp")
        dist.barrier()
        trainer.save_model(str(staging))
        if dist.main:
            tokenizer.save_pretrained(str(staging))
            atomic.replace_dir(staging, folder)
    elif dist.main:
        save_adapter(trainer.accelerator.unwrap_model(trainer.model), tokenizer, folder)
    dist.barrier()
