"""A single-turn GRPO run, end to end: config -> (priming) -> (filtering) -> GRPO -> best/ + last/.

The trainer itself is assembled by ``trainer`` (shared with the multi-turn run, ``multi_turn``);
``toolrl_lib.train.train`` picks between the two. The run directory (its layout and
``run_info.json``) is owned by ``toolrl_lib.run_dir``; merge, evaluation and the report read
it through that module.

Under several processes (``toolrl train --num-gpus N``, see ``distributed``) every rank
trains; rank 0 alone primes (in a subprocess), validates, evaluates and writes the files
above, and the other ranks wait at barriers or at the trainer's next collective.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from toolrl_lib import atomic, fast
from toolrl_lib.fast.profiling import stage
from toolrl_lib.fast.vllm_engine import require_for_run
from toolrl_lib.models import release_memory
from toolrl_lib.run_dir import (
    RunDir,
    RunInfo,
    checkpoint_step,
    prepare_run_dir,
    update_run_info,
    write_run_info,
)
from toolrl_lib.train.config import (
    RunConfig,
    best_validation_key,
    check_vllm_backend,
    save_run_config,
    validate,
)
from toolrl_lib.train.distributed import Dist
from toolrl_lib.train.trainer import (
    build_trainer,
    resolve_family,
    run_trainer,
    save_adapter,
    save_last,
    trainer_callbacks,
)
from toolrl_lib.train.validation import colocated_sampler, evaluate_saved, validation_scores


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def leave_zero3_loading() -> None:
    """After a DeepSpeed ZeRO-3 run, load models as plain single-process models again.

    While the trainer's DeepSpeed config is registered, ``from_pretrained`` builds every
    model inside ``deepspeed.zero.Init`` (a collective that partitions weights over all
    ranks). The final validation loads ``last/`` on rank 0 alone, so that load would wait
    forever for the other ranks, already waiting at the closing barrier."""
    try:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config
    except ImportError:  # no deepspeed integration in this transformers: nothing registered
        return
    unset_hf_deepspeed_config()


def train(
    config: RunConfig, out_dir: str | Path, resume: bool = False, callbacks: list[Any] | None = None,
    reward_funcs: list[Any] | None = None,
) -> Path:
    """Run priming (optional), filtering (optional) and single-turn GRPO; return the run directory.

    ``resume=True`` continues from the newest checkpoint in ``<out_dir>/checkpoints``
    (optimizer, scheduler, RNG and data position restored by the HF Trainer).
    ``callbacks`` are extra ``TrainerCallback`` objects (tests use one to pause the run);
    ``reward_funcs`` replace the configured rewards (TRL signature; for experiments/tests).
    """
    from toolrl_lib.paths import resolve
    from toolrl_lib.train import distributed
    from toolrl_lib.train.backend import resolve_backend, resolve_device

    validate(config)
    if config.multi_turn.enabled:
        raise ValueError("multi_turn.enabled: a multi-turn run; train it with toolrl_lib.train.train "
                         "(toolrl_lib.train.multi_turn)")
    paths = RunDir(resolve(out_dir))
    device = resolve_device(config.device)
    require_for_run(config, device)  # vLLM asked for: a GPU and the package, before anything loads
    dist = distributed.init(device)
    distributed.check_supported(config, dist)
    # imports unsloth before trl
    backend = resolve_backend(config.backend, device, dist.world_size, config.lora.enabled)
    fast.check_backend(config, backend)
    check_vllm_backend(config, backend)
    checkpoint = prepare_run_dir(paths, resume, dist.barrier)
    if dist.main:
        save_run_config(config, paths.config)
    dist.barrier()
    return _train(config, paths, device, backend, checkpoint, list(callbacks or []), reward_funcs,
                  dist)


def _train(
    config: RunConfig, paths: RunDir, device: str, backend: str, checkpoint: Path | None,
    extra_callbacks: list[Any], reward_funcs: list[Any] | None = None, dist: Dist | None = None,
) -> Path:
    from toolrl_lib.models import load_tokenizer, resolve_model
    from toolrl_lib.train import callbacks as cb
    from toolrl_lib.train.dataset import (
        BuildReport,
        grpo_rows,
        load_examples,
        to_dataset,
    )
    from toolrl_lib.train.mix import grpo_mix, validation_set
    dist = dist or Dist()
    say = dist.say
    start_model = resolve_model(config.model.name)
    family = resolve_family(config, load_tokenizer(start_model))
    train_examples = load_examples(config.data.train_files, config.data.max_train_examples,
                                   seed=config.seed, shuffle=True)
    v = config.validation
    val_examples = validation_set(config)
    if v.enabled and not val_examples:
        raise ValueError(f"validation is enabled but {config.data.val_files} hold no examples")
    resumed_step = checkpoint_step(checkpoint) if checkpoint else 0
    val_rows = cb.trim_rows(paths.validation, resumed_step) if checkpoint and dist.main else []
    val_log = cb.ValidationCallback(lambda m: {}, paths.validation, 0, "", lambda *a: None, val_rows)
    before = v.enabled and v.before_training and checkpoint is None

    # Rank 0 alone: "before" validation, priming, run_info; the other ranks wait, then load.
    base_model = str(paths.primed_model) if config.priming.enabled else start_model
    if dist.main:
        _before_grpo(config, paths, start_model, base_model, family, backend, device, dist,
                     train_examples, val_examples, val_log, before)
    dist.barrier()
    train_examples, report = _filtered(config, paths, base_model, train_examples, family, device,
                                       resumed=checkpoint is not None, dist=dist)

    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.backend import load_policy

    with stage("load policy"):
        model, tokenizer = load_policy(config, base_model, backend, device)
    build = BuildReport()
    train_examples = grpo_mix(train_examples, config, val_examples)
    rows = grpo_rows(train_examples, get_adapter(family), tokenizer, config.data.max_prompt_tokens,
                     enable_thinking=config.model.enable_thinking,
                     privileged=config.grpo.loss_type == "rlsd", report=build)
    if dist.main:
        write_json(paths.data_report, {"grpo_dataset": build.to_dict(), "filtering": report})
        shares = ", ".join(f"{k} {n / max(build.kept, 1):.0%}" for k, n in sorted(build.kinds.items()))
        say(f"GRPO prompts: {build.kept} ({shares})")
    dataset = to_dataset(rows)

    all_callbacks = trainer_callbacks(config, paths, checkpoint, extra_callbacks, dist.main)
    best_key = best_validation_key(v)
    val_cb = None
    engine: dict[str, Any] = {}  # the trainer once built: validation may sample through its vLLM engine

    def evaluate(model: Any) -> dict[str, float]:
        if v.vllm and "trainer" in engine:
            try:
                sampler = colocated_sampler(engine["trainer"], tokenizer)
                if sampler is not None:
                    return validation_scores(config, model, tokenizer, val_examples, family, sampler)
            except Exception as error:  # noqa: BLE001 - a validation path must not end a long run
                say(f"validation through vLLM failed ({type(error).__name__}: {error}); "
                    "transformers' generate from now on")
            engine.pop("trainer", None)
        return validation_scores(config, model, tokenizer, val_examples, family)

    if v.enabled and dist.main:
        # Under DDP rank 0 generates alone; the others wait at the next collective.
        val_cb = cb.ValidationCallback(
            evaluate=evaluate,
            csv_path=paths.validation, every_steps=v.every_steps, best_key=best_key,
            save_best=lambda m, step, s: save_adapter(m, tokenizer, paths.best),
            start_rows=val_log.rows,
        )
        val_cb.best = max([r[best_key] for r in val_log.rows
                           if r.get("stage") in ("grpo", "final") and best_key in r] or [-math.inf])
        all_callbacks.append(val_cb)

    if reward_funcs is None:
        from toolrl_lib.rewards import make_reward_funcs
        from toolrl_lib.rewards.shaping import Shaping

        r = config.reward
        reward_funcs = make_reward_funcs(r.scheme, family, r.weights,
                                         Shaping(r.spurious_call, r.abstention, r.args_sharp, r.strict_format))
    rollout_func = fast.rollout_func(config)  # None: TRL's own generate samples
    trainer = build_trainer(config, paths, device, model, tokenizer, dataset, reward_funcs,
                            all_callbacks, dist.world_size, rollout_func, backend)
    changes = fast.install(trainer, config, device=device, backend=backend, tokenizer=tokenizer,
                           run_root=paths.root, rank=dist.rank)
    engine["trainer"] = trainer
    for change in changes:
        say(f"fast: {change}")
    if dist.world_size > 1:
        from toolrl_lib.train.distributed import restore_optimizer_on_cpu

        restore_optimizer_on_cpu(trainer)
    g = config.grpo
    processes = trainer.accelerator.num_processes
    global_batch = g.per_device_train_batch_size * processes * g.gradient_accumulation_steps
    if dist.main:
        update_run_info(paths.root, processes=processes, engine=dist.engine,
                        global_batch=global_batch, merged_check=changes.merged_check)
    say(f"GRPO ({g.loss_type}, backend {backend}, {'LoRA' if config.lora.enabled else 'full FT'}, "
        f"{device}): {len(dataset)} prompts; {processes} process(es) ({dist.engine}), global batch "
        f"{global_batch} completions/step = {g.per_device_train_batch_size} per device x "
        f"{processes} x {g.gradient_accumulation_steps} accumulation"
        + (f", resuming from {checkpoint.name}" if checkpoint else ""))
    with stage("GRPO steps"):
        run_trainer(trainer, checkpoint, paths)
    for option, part in (("cuda_graphs", changes.graphs), ("sampler_logps", changes.sampler),
                         ("prompt_token_cache", changes.prompt_tokens), ("generation_process", changes.engine)):
        if part is not None:  # what each option covered, where it fell back, where its time went
            part_stats = part.stats()
            say(f"fast.{option}: {part_stats}")
            if dist.main:
                update_run_info(paths.root, **{option: part_stats})
    save_last(trainer, tokenizer, paths.last, dist)
    step = trainer.state.global_step
    del trainer, model
    release_memory()
    fast.undo(changes)
    leave_zero3_loading()
    if dist.main:
        if v.enabled:
            t0 = time.perf_counter()
            with stage("validation: final"):
                scores = evaluate_saved(config, base_model, paths.last, val_examples, family, device)
            val_cb.record(step, "final", scores, time.perf_counter() - t0)
            say(f"  final (saved last/): {_fmt(scores)}")
            if scores.get(best_key, -math.inf) >= val_cb.best or not paths.best.exists():
                atomic.copy_dir(paths.last, paths.best)
        else:
            atomic.copy_dir(paths.last, paths.best)
    dist.barrier()
    return paths.root


def _before_grpo(config: RunConfig, paths: RunDir, start_model: str, base_model: str, family: str,
                 backend: str, device: str, dist: Dist, train_examples: list[Any],
                 val_examples: list[Any], val_log: Any, before: bool) -> None:
    """Rank 0, before GRPO: validation of the start model, format priming (in a subprocess
    under several processes), validation of the primed model, and ``run_info.json``."""
    from toolrl_lib.train.priming import is_primed, prime, prime_in_subprocess

    say, v = dist.say, config.validation
    if before:
        say(f"validation mean@{v.k} of the start model on {len(val_examples)} examples ...")
        t0 = time.perf_counter()
        with stage("validation: base"):
            scores = evaluate_saved(config, start_model, None, val_examples, family, device)
        val_log.record(0, "base", scores, time.perf_counter() - t0)
        say(f"  base: {_fmt(scores)}")
    if config.priming.enabled and not is_primed(paths.primed_model):
        say(f"format priming: {config.priming.max_steps} SFT steps on "
            f"{min(config.priming.num_examples, len(train_examples))} examples ...")
        if dist.world_size > 1:  # a one-process SFT, outside the launched group
            prime_in_subprocess(paths.config, start_model, family, paths.primed_model, device,
                                dist.local_rank)
        else:
            with stage("priming"):
                prime(config, start_model, train_examples, family, paths.primed_model, device)
    if config.priming.enabled and before:
        t0 = time.perf_counter()
        with stage("validation: primed"):
            scores = evaluate_saved(config, base_model, None, val_examples, family, device)
        val_log.record(0, "primed", scores, time.perf_counter() - t0)
        say(f"  primed: {_fmt(scores)}")
    write_run_info(paths.root, RunInfo(
        base_model=base_model, model_name=config.model.name, family=family, backend=backend,
        seed=config.seed, primed=config.priming.enabled, lora=config.lora.enabled))


def _filtered(
    config: RunConfig, paths: RunDir, model_path: str, examples: list[Any], family: str,
    device: str, resumed: bool, dist: Dist | None = None,
) -> tuple[list[Any], dict[str, Any] | None]:
    """Apply difficulty filtering (reusing the saved decision when resuming).

    With several processes rank 0 decides and saves ``filtering.json``; the others read it."""
    f = config.filtering
    if not f.enabled:
        return examples, None
    from toolrl_lib.train.filtering import pass_rates, split_by_pass_rate

    dist = dist or Dist()
    saved = paths.root / "filtering.json"
    if dist.main:
        if resumed and saved.is_file():
            rates = json.loads(saved.read_text(encoding="utf-8"))["pass_rates"]
        else:
            from toolrl_lib.models import load_model, load_tokenizer
            from toolrl_lib.train.callbacks import forked_rng

            print(f"difficulty filter: {f.k} samples for each of {len(examples)} prompts ...")
            model = load_model(model_path, dtype=config.model.dtype, device=device)
            with forked_rng():
                rates = pass_rates(model, load_tokenizer(model_path), examples, family, k=f.k,
                                   max_new_tokens=f.max_new_tokens, temperature=f.temperature,
                                   batch_size=f.batch_size, seed=config.seed,
                                   threshold=f.solved_threshold,
                                   progress=config.logging.progress_bar)
            del model
        kept, report = split_by_pass_rate(examples, rates, drop_always=f.drop_always_solved,
                                          drop_never=f.drop_never_solved)
        write_json(saved, report.to_dict())
    dist.barrier()  # the other ranks read rank 0's decision
    if not dist.main:
        rates = json.loads(saved.read_text(encoding="utf-8"))["pass_rates"]
        kept, report = split_by_pass_rate(examples, rates, drop_always=f.drop_always_solved,
                                          drop_never=f.drop_never_solved)
    dist.say(report.summary())
    if not kept:
        raise ValueError(f"{report.summary()}: nothing left to train on; disable filtering or "
                         "relax filtering.drop_never_solved / drop_always_solved")
    summary = report.to_dict()
    summary.pop("pass_rates")
    return kept, summary


def _fmt(scores: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in scores.items())
