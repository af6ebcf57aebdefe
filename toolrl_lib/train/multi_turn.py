"""A multi-turn GRPO run: (priming on gold episodes) -> GRPO through ``rollout_func``.

Same run directory as a single-turn run (``toolrl_lib.run_dir``: config.yaml,
run_info.json, metrics.csv, validation.csv, checkpoints/, primed_model/, best/, last/),
plus ``episodes/<stage>.jsonl``: the validation tasks' outcomes per stage (base, primed,
final; ``step-N`` for the periodic ones), for paired comparisons. Validation is greedy episode
success on the validation split (per kind and app too), every ``validation.every_steps`` optimizer
steps during GRPO (through the colocated vLLM engine when there is one) and after it; best/ is the
adapter with the best validation success. Single process, peft backend. The
trainer is the single-turn run's (``trainer``), fed episode tasks and sampling whole
episodes through ``multi_turn_rollout``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from toolrl_lib import atomic
from toolrl_lib.config import ConfigError
from toolrl_lib.envs import make_tasks, task_key
from toolrl_lib.envs.config import UNSLOTH_REFUSAL
from toolrl_lib.envs.episode import EpisodeSettings
from toolrl_lib.envs.rollout import SamplingSettings
from toolrl_lib.run_dir import RunDir, RunInfo, checkpoint_step, prepare_run_dir, write_run_info
from toolrl_lib.train.config import RunConfig, save_run_config, validate, world_size
from toolrl_lib.train.distributed import Dist
from toolrl_lib.train.trainer import (
    build_trainer,
    resolve_family,
    run_trainer,
    save_adapter,
    save_last,
    trainer_callbacks,
)


def episode_settings(config: RunConfig) -> EpisodeSettings:
    mt = config.multi_turn
    return EpisodeSettings(step_limit=mt.step_limit, max_new_tokens=mt.max_new_tokens,
                           max_episode_tokens=mt.max_episode_tokens)


def sampling_settings(config: RunConfig, greedy: bool = False) -> SamplingSettings:
    return SamplingSettings(do_sample=not greedy, temperature=config.grpo.temperature,
                            top_p=config.grpo.top_p, batch_size=config.multi_turn.rollout_batch_size)


def evaluate_stage(config: RunConfig, model_path: str, adapter_dir: Path | None, tasks: list[Any],
                   family: str, device: str) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Greedy episode success of a model loaded fresh from disk (base, or base + adapter)."""
    from toolrl_lib.envs.evaluate import evaluate_episodes, summarise
    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.train.backend import load_adapter_model
    from toolrl_lib.train.callbacks import forked_rng

    tokenizer = load_tokenizer(model_path)
    if adapter_dir is None:
        model = load_model(model_path, dtype=config.model.dtype, device=device)
    else:
        model = load_adapter_model(model_path, str(adapter_dir), config.model.dtype, device)
    with forked_rng():
        rows, _ = evaluate_episodes(model, tokenizer, tasks, family, episode_settings(config),
                                    sampling_settings(config, greedy=True), seed=config.seed)
    del model
    return summarise(rows), rows


def train_multi_turn(config: RunConfig, out_dir: str | Path, resume: bool = False,
                     callbacks: list[Any] | None = None, reward_funcs: list[Any] | None = None) -> Path:
    """Run priming (optional) and multi-turn GRPO; return the run directory."""
    from toolrl_lib.envs.evaluate import write_rows
    from toolrl_lib.models import load_tokenizer, resolve_model
    from toolrl_lib.paths import resolve
    from toolrl_lib.train import callbacks as cb
    from toolrl_lib.train.backend import load_policy, resolve_device
    from toolrl_lib.train.priming import is_primed

    validate(config)
    if config.backend == "unsloth":
        raise ConfigError(UNSLOTH_REFUSAL)
    if world_size() > 1:
        raise ConfigError("multi-turn runs are single-process for now; launch without --num-gpus")
    paths = RunDir(resolve(out_dir))
    device = resolve_device(config.device)
    checkpoint = prepare_run_dir(paths, resume)
    save_run_config(config, paths.config)
    mt, v = config.multi_turn, config.validation
    start_model = resolve_model(config.model.name)
    family = resolve_family(config, load_tokenizer(start_model))
    train_tasks = make_tasks("train", mt.train_tasks, mt.environments, mt.kinds)
    val_tasks = make_tasks("val", mt.val_tasks, mt.environments, mt.kinds) if v.enabled else []
    resumed_step = checkpoint_step(checkpoint) if checkpoint else 0
    engine: dict[str, Any] = {}  # the trainer once built: periodic validation may play through its vLLM engine

    def periodic(model: Any) -> dict[str, float]:
        scores, rows = validate_in_memory(config, model, val_tasks, family, engine.get("trainer"))
        write_rows(paths.root / "episodes" / f"step-{engine['trainer'].state.global_step}.jsonl", rows)
        return scores

    val_log = cb.ValidationCallback(
        periodic, paths.validation, v.every_steps if val_tasks else 0, "success",
        lambda m, step, scores: save_adapter(m, load_tokenizer(start_model), paths.best),
        cb.trim_rows(paths.validation, resumed_step) if checkpoint else [])
    val_log.best = max([r["success"] for r in val_log.rows if r.get("stage") in ("grpo", "final")
                        and isinstance(r.get("success"), int | float)] or [-math.inf])
    before = bool(val_tasks) and v.before_training and checkpoint is None

    def stage(name: str, model_path: str, adapter: Path | None, step: int) -> None:
        t0 = time.perf_counter()
        scores, rows = evaluate_stage(config, model_path, adapter, val_tasks, family, device)
        val_log.record(step, name, scores, time.perf_counter() - t0)
        write_rows(paths.root / "episodes" / f"{name}.jsonl", rows)
        print(f"  {name}: episode success {scores.get('success', 0):.3f} on {len(rows)} validation tasks")

    base_model = str(paths.primed_model) if config.priming.enabled else start_model
    if before and (mt.eval_base or not config.priming.enabled):
        stage("base", start_model, None, 0)
    if config.priming.enabled and not is_primed(paths.primed_model):
        prime_on_gold(config, start_model, family, train_tasks, paths.primed_model, device)
    if config.priming.enabled and before:
        stage("primed", base_model, None, 0)
    write_run_info(paths.root, RunInfo(
        base_model=base_model, model_name=config.model.name, family=family, backend="peft",
        seed=config.seed, primed=config.priming.enabled, lora=config.lora.enabled, processes=1,
        extra={"multi_turn": True}))
    model, tokenizer = load_policy(config, base_model, "peft", device)
    trainer = _episode_trainer(config, family, model, tokenizer, train_tasks, paths, device,
                               [*(callbacks or []), val_log], reward_funcs, checkpoint)
    engine["trainer"] = trainer
    run_trainer(trainer, checkpoint, paths)
    save_last(trainer, tokenizer, paths.last, Dist())
    step = trainer.state.global_step
    engine.clear()
    del trainer, model
    if val_tasks:
        stage("final", base_model, paths.last, step)
    final = val_log.rows[-1].get("success", -math.inf) if val_tasks else math.inf
    if final >= val_log.best or not paths.best.exists():  # best/: the best validation success seen
        atomic.copy_dir(paths.last, paths.best)
    return paths.root


def prime_on_gold(config: RunConfig, start_model: str, family: str, train_tasks: list[Any], out: Path,
                  device: str) -> None:
    """Format priming (LoRA SFT, merged into ``out``) on gold transcripts of
    ``multi_turn.priming_episodes`` tasks of ``multi_turn.priming_kinds``."""
    from toolrl_lib.envs.priming import gold_transcript_rows, priming_tasks
    from toolrl_lib.models import load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.priming import prime

    mt = config.multi_turn
    tasks = priming_tasks(train_tasks, mt.priming_episodes, mt.environments, mt.priming_kinds)
    rows, report = gold_transcript_rows(tasks, get_adapter(family), load_tokenizer(start_model),
                                        episode_settings(config), config.priming.max_length)
    if not rows:
        raise ConfigError(f"priming: no gold episode fits ({report}); raise multi_turn.max_episode_tokens "
                          f"({mt.max_episode_tokens}) or priming.max_length ({config.priming.max_length})")
    print(f"priming: {config.priming.max_steps} SFT steps on {report['kept']} gold episodes ({report})")
    prime(config, start_model, [], family, out, device, rows=rows)


def validate_in_memory(config: RunConfig, model: Any, tasks: list[Any], family: str, trainer: Any = None
                       ) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Greedy episode success of the policy being trained (the periodic validation; per kind and
    per app in ``summarise``), through the trainer's colocated vLLM engine when it has one
    (``validation.vllm``), else the model in memory."""
    from toolrl_lib.envs.evaluate import evaluate_episodes, summarise
    from toolrl_lib.envs.rollout import vllm_step
    from toolrl_lib.train.validation import colocated_llm

    tokenizer = trainer.processing_class if trainer is not None else None
    greedy = sampling_settings(config, greedy=True)
    step = None
    if trainer is not None and config.validation.vllm:
        llm = colocated_llm(trainer)
        if llm is not None:
            step = vllm_step(llm, tokenizer, greedy, top_k=-1)
    rows, _ = evaluate_episodes(model, tokenizer, tasks, family, episode_settings(config), greedy,
                                seed=config.seed, step=step)
    return summarise(rows), rows


def _episode_trainer(config: RunConfig, family: str, model: Any, tokenizer: Any, tasks: list[Any],
                     paths: RunDir, device: str, extra_callbacks: list[Any],
                     reward_funcs: list[Any] | None, checkpoint: Path | None) -> Any:
    """The shared GRPO trainer over episode tasks: the dataset holds task keys, the rollout
    function plays each task's episode, the rewards read its outcome."""
    from datasets import Dataset

    from toolrl_lib.envs.rewards import make_episode_reward_funcs, scheme_of
    from toolrl_lib.train.multi_turn_rollout import make_rollout_func

    mt = config.multi_turn
    if reward_funcs is None:
        reward_funcs = make_episode_reward_funcs(scheme_of(mt))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    dataset = Dataset.from_list([{"prompt": task_key(t), "task_id": t.id} for t in tasks])
    rollout_func = make_rollout_func(family, episode_settings(config), sampling_settings(config),
                                     merge_lora=config.fast.merged_generation)
    trainer = build_trainer(config, paths, device, model, tokenizer, dataset, reward_funcs,
                            trainer_callbacks(config, paths, checkpoint, extra_callbacks),
                            rollout_func=rollout_func)
    from toolrl_lib import fast

    for change in fast.install(trainer, config, device=device, multi_turn=True):
        print(f"fast: {change}")
    return trainer
