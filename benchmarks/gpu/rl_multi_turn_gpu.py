"""Issue 20: multi-turn GRPO in our environments, then primed vs GRPO on held-out tasks and BFCL.

Phases (besides carry and restore, for a run across sessions; ``run --continue-later`` pauses an
unfinished GRPO at the final reserve instead of ending it, so a later session resumes it):

    run     (GPU; resumable: repeat the same command on the warm host until it says "done") prime the
            embedded model on gold episodes once, then the GRPO variants (--variants: reward shaping,
            group size) side by side from it, each in its own process, stopped in time with a
            checkpoint and resumed by the next call (configs/multi_turn_embedded_gpu.yaml plus --set);
            the variant with the best validation success is "grpo"; BFCL's four multi-turn categories (all 800 entries unless --bfcl-limit) for the
            primed model start as soon as priming is done, side by side with GRPO on the GPU (resumed after
            GRPO when its engine could not start beside the trainer), and for the GRPO model once it is
            trained (generation only, through benchmarks/gpu/bfcl_multi_turn.py's resumable ``phase_generate``: the scorer's venv lives on the CPU box); greedy episode success
            of primed and GRPO on our *test* split. Every call stops by --budget-s and packs what exists
            (state, own-task rows, BFCL generations so far, the run's logs) into
            --out/rl_multi_turn.tar.gz (split into .partN when over 15 MiB)
    report  (CPU box) score the BFCL generations with BFCL's checker (sanitiser first), paired bootstrap
            95% CIs of GRPO - primed per category and on our own tasks ->
            benchmarks/results/rl_multi_turn.{md,json} (the shape of rl_single_turn.json; --tag T:
            rl_multi_turn_T.*); --partial: a model whose BFCL the deadline cut is scored on the
            categories it finished, and the BFCL comparison covers the categories both finished
    progress (CPU box) a run carried to the next session before its evaluation: the primed model's
            test tasks and BFCL, each variant's validation start against its last (paired, 95% CI;
            validation only: no GRPO - primed claim) and seconds per step -> rl_multi_turn_TAG.*

    python -m benchmarks.gpu.rl_multi_turn_gpu run --work /tmp/mtrl --out $OUT --set grpo.max_steps=12
    python -m benchmarks.gpu.rl_multi_turn_gpu report --archive rl_multi_turn.tar.gz --work runs/rl_multi_turn

Selection: each variant validates on our validation split every ``validation.every_steps`` steps and
at its end (greedy episode success, per kind too; ``best/`` = its best adapter); the variant with the
best validation success is evaluated as "grpo" (its ``best/``). Neither BFCL nor our test split is ever
looked at to choose anything.

``--tiny DIR`` (with ``--device cpu``) runs the same chain on a tiny random model at toy sizes:
the CPU test of the plumbing (``tests/test_multi_turn_gpu_script.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu import bfcl_multi_turn as bmt
from benchmarks.gpu import time_limit
from benchmarks.gpu.lanes import Job, run_lanes
from toolrl_lib.evaluate.backends import VLLM_KV_CACHE_ENV, VLLM_MEMORY_ENV

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "configs/multi_turn_embedded_gpu.yaml"
CATEGORIES = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
PAIR = ("primed", "grpo")
TINY = ["multi_turn.train_tasks=4", "multi_turn.val_tasks=2", "multi_turn.priming_episodes=4",
        "multi_turn.max_new_tokens=6", "multi_turn.max_episode_tokens=1024", "multi_turn.rollout_batch_size=8",
        "priming.max_steps=1", "priming.batch_size=2", "priming.max_length=4096", "grpo.num_generations=2",
        "grpo.per_device_train_batch_size=4", "grpo.gradient_accumulation_steps=1", "grpo.max_steps=1",
        "model.dtype=fp32", "lora.r=4", "lora.alpha=8", "checkpoint.save_steps=1",
        "multi_turn.environments=[bank]", "grpo.vllm.mode=off", "validation.every_steps=1"]
ARCHIVE_SUFFIXES = (".json", ".jsonl", ".log", ".csv", ".yaml")  # what rl_multi_turn.tar.gz keeps of keep/
RUN_LOGS = ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "episodes", "worker.json")
# the episodes sampled by a float32 engine fed by an exact float32 merge: every LoRA update reaches
# the sampler (a bf16 engine rounds W + BA; benchmarks/results/bf16_weight_sync.md)
FP32 = ["model.dtype=fp32", "grpo.vllm.dtype=float32"]
# name -> overrides of the config (all from the one primed model): the issue's levers side by side
VARIANTS: dict[str, list[str]] = {
    "shaped-g8": [],
    "success-g8": ["multi_turn.reward_calls=0", "multi_turn.reward_turns=0"],
    "shaped-g16": ["grpo.num_generations=16"],
    "shaped-g8-fp32": [*FP32],  # run 3 ran it
    # and a charge for refused calls (toolrl_lib/envs/rewards.py): run 3's GRPO model bought call credit on
    # report tasks with failing calls (0.42 -> 0.50 credit, 0 -> 1.8 refused, no success); at 0.1 that trade
    # (+0.02 of reward) costs ~0.05. Not yet run on a GPU
    "shaped-g8-fp32-charge": [*FP32, "multi_turn.reward_refused=0.1"],
    # rounds of 128 episodes, each feeding 4 optimizer steps of 32 (TRL's steps_per_generation; PPO's clip
    # bounds the later steps' drift): run 3's step was 4.3 s, ~2/3 of it a round of 32 episodes whose time
    # is set by its longest episode, not by how many there are, so 4 steps share one round's wait
    "shaped-g8-fp32-gen128": [*FP32, "grpo.generation_batch_size=128"],
    # the same with TF32 matmuls in the trainer and its colocated engine (model.tf32): run 4's reuse steps
    # (forward/backward alone) took 2.3 s in plain float32, its rounds' first steps 8-9 s; our test tasks and
    # BFCL run in other processes, in full float32
    "shaped-g8-fp32-gen128-tf32": [*FP32, "grpo.generation_batch_size=128", "model.tf32=true"],
    # the group-size lever at the same episodes a step (16 tasks x 8 -> 8 tasks x 16)
    "shaped-g16-fp32-gen128-tf32": [*FP32, "grpo.generation_batch_size=128", "model.tf32=true",
                                    "grpo.num_generations=16"],
    # the same recipes with the trainer's log-prob forwards cut to their rows' length (fast.trim_padding):
    # TRL runs every forward at the round's widest prompt plus episode: ~40% of the positions are padding, 1.4x
    # more than cut (benchmarks/results/trim_padding_tokens.md); the same gradient up to float rounding, so its
    # twin's curve is the comparison. Not yet run on a GPU
    "shaped-g8-fp32-gen128-tf32-trim": [*FP32, "grpo.generation_batch_size=128", "model.tf32=true",
                                        "fast.trim_padding=true"],
    "shaped-g16-fp32-gen128-tf32-trim": [*FP32, "grpo.generation_batch_size=128", "model.tf32=true",
                                         "grpo.num_generations=16", "fast.trim_padding=true"],
}


def module_command(argv: list[str]) -> str:
    """This call as the command that reproduces it (``python -m``, not the script's path on the host)."""
    return " ".join(["python -m benchmarks.gpu.rl_multi_turn_gpu", *argv[1:]])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def bfcl_settings(args: argparse.Namespace, family: str, dtype: str) -> argparse.Namespace:
    """The arguments ``bfcl_multi_turn.generate_command`` reads (issue 19's settings by default)."""
    return argparse.Namespace(family=family, categories=CATEGORIES, batch_size=args.bfcl_batch_size,
                              backend="auto", dtype=dtype, max_new_tokens=args.bfcl_max_new_tokens,
                              limit=args.bfcl_limit, max_batch_tokens=2**20, window=None,
                              compact_docs=args.bfcl_compact_docs, max_live=args.bfcl_max_live,
                              max_live_tokens=args.bfcl_max_live_tokens, pack=None)


def generate(models: list[tuple[str, str]], folder: Path, settings: argparse.Namespace, deadline: float) -> None:
    """BFCL generation of ``models`` until ``deadline`` (``time.time()``); resumes what exists."""
    left = deadline - time.time()
    if left < 30:
        log(f"BFCL {[m[0] for m in models]}: {left:.0f} s left, not started")
        return
    bmt.phase_generate(models, folder, argparse.Namespace(**vars(settings), deadline_s=left))


def release_gpu_memory() -> None:
    """Hand this process's cached CUDA blocks back: on the first H200 call the GRPO model's BFCL
    process ran out of memory at start (the trainer's process still held 56 GB of cache)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def base_overrides(args: argparse.Namespace) -> list[str]:
    overrides = [f"device={args.device}", *args.set]
    return [f"model.name={args.tiny}", *TINY, *overrides] if args.tiny else overrides


def priming_mix_override(spec: str) -> str:
    """``--priming-mix default*4,hard`` as the config override it stands for (``benchmarks/priming_mix.py``'s
    syntax), so that every phase, the workers and the report's command line see the same priming kinds.

    >>> priming_mix_override("facts*2,recover")
    'multi_turn.priming_kinds=["facts","facts","recover"]'
    """
    from benchmarks.priming_mix import mix_kinds

    return "multi_turn.priming_kinds=" + json.dumps(mix_kinds(spec), separators=(",", ":"))


def adopt_primed(source: Path, primed: Path, kinds: list[str]) -> dict[str, Any]:
    """``--primed-from``: a mix folder of ``benchmarks/priming_mix.py`` (``primed_model/`` and its
    ``result.json``) becomes this run's primed model, so that the mix chosen on validation is not primed
    a second time. Its priming kinds must be this run's own (``--priming-mix`` with the same mix)."""
    from toolrl_lib.train.priming import is_primed

    result_file, model = source / "result.json", source / "primed_model"
    if not (is_primed(model) and result_file.is_file()):
        raise SystemExit(f"--primed-from {source}: expected a priming_mix folder holding primed_model/ "
                         "(with its priming.json) and result.json")
    result = json.loads(result_file.read_text())
    if list(result.get("priming_kinds", [])) != list(kinds):
        raise SystemExit(f"--primed-from {source}: its model was primed on mix {result.get('mix')!r} "
                         f"({result.get('priming_kinds')}), this run's multi_turn.priming_kinds are {kinds}; "
                         "pass --priming-mix with that mix")
    shutil.copytree(model, primed)
    return {"folder": str(source), "mix": result.get("mix"), "prime_s": result.get("prime_s"),
            "val_success": result.get("scores", {}).get("success")}


def variant_config(args: argparse.Namespace, variant: str, primed: Path) -> Any:
    """A variant: the config plus its overrides (then --set), from the primed model (no second priming;
    its first call validates the primed model: the curves' step 0)."""
    from toolrl_lib.train.config import load_run_config

    return load_run_config(ROOT / CONFIG, [*(TINY if args.tiny else []), *VARIANTS[variant], f"device={args.device}",
                                           *args.set, f"model.name={primed}", "priming.enabled=false",
                                           f"name={variant}"])


def worker(args: argparse.Namespace) -> int:
    """One variant until its max_steps or --train-seconds (then a checkpoint the next call resumes)."""
    from toolrl_lib.run_dir import latest_checkpoint
    from toolrl_lib.train import train

    time.sleep(args.start_delay_s)
    work = Path(args.work)
    folder = work / "runs" / args.variant
    seen: dict[str, int] = {}
    config = variant_config(args, args.variant, work / "primed_model")
    t0 = time.time()
    train(config, folder, resume=latest_checkpoint(folder / "checkpoints") is not None,
          callbacks=[time_limit.time_limit(args.train_seconds, seen)])
    time_limit.record_call(folder, seen, time.time() - t0)
    return 0


def merge_best(run: Path, merged: Path, keep: Path, state: dict[str, Any], dtype: str) -> Path | None:
    """The selected variant's best/ adapter merged into a full model in ``dtype`` (verified; once): vLLM,
    BFCL's fast path, takes full models only. None (and merge.log says why) when the merge was refused:
    in bf16 it was on the H200 (2026-12-05: a LoRA delta of 8e-4 of the weights mostly rounds away)."""
    if (merged / "config.json").is_file():
        return merged
    t0 = time.time()
    command = [sys.executable, "-m", "toolrl_lib.cli", "merge", "--run", str(run), "--checkpoint", "best",
               "--out", str(merged), "--dtype", dtype]
    with (keep / "merge.log").open("a") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        log(f"merge of {run.name}/best refused or failed (exit {done.returncode}; merge.log says why): "
            "its BFCL runs from the adapter")
        return None
    state["timings"]["merge_s"] = round(time.time() - t0, 1)
    log(f"merged {run.name}/best in {state['timings']['merge_s']:.0f} s")
    return merged


def select_variant(work: Path, variants: list[str]) -> dict[str, Any]:
    """The variant with the best validation success (GRPO steps and final; never BFCL or test)."""
    import pandas as pd

    scores = {}
    for variant in variants:
        path = work / "runs" / variant / "validation.csv"
        rows = pd.read_csv(path) if path.is_file() else pd.DataFrame()
        rows = rows[rows["stage"].isin(["grpo", "final"])] if not rows.empty else rows
        scores[variant] = float(rows["success"].max()) if not rows.empty else float("-inf")
    chosen = max(scores, key=scores.get)
    return {"key": "success", "scores": scores, "chosen": chosen, "selected_on": "validation"}


def run(args: argparse.Namespace) -> int:
    from toolrl_lib.envs import make_tasks
    from toolrl_lib.envs.evaluate import write_rows
    from toolrl_lib.models import resolve_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.multi_turn import evaluate_stage, prime_on_gold
    from toolrl_lib.train.priming import is_primed

    t0 = time.time()
    deadline = t0 + args.budget_s
    work = Path(args.work)
    keep = work / "keep"  # what comes back; the run directories (weights) stay on the host
    keep.mkdir(parents=True, exist_ok=True)
    state_file = keep / "gpu_run.json"
    state = json.loads(state_file.read_text()) if state_file.is_file() else {"timings": {}, "own": {}, "calls": []}
    overrides = base_overrides(args)
    config = load_run_config(ROOT / CONFIG, overrides)
    family = config.model.family or "hermes"
    settings = bfcl_settings(args, family, args.bfcl_dtype)
    bfcl, primed = keep / "bfcl", work / "primed_model"
    kinds = list(config.multi_turn.priming_kinds or [])
    if state.setdefault("priming_kinds", kinds) != kinds:
        raise SystemExit(f"this run was primed on {state['priming_kinds']}, this call's multi_turn.priming_kinds "
                         f"are {kinds}: pass the first call's --priming-mix (or --set) again")
    if args.priming_mix:
        state["priming_mix"] = args.priming_mix
    if not is_primed(primed) and args.primed_from:
        state["primed_from"] = adopt_primed(Path(args.primed_from), primed, kinds)
        log(f"primed model from {args.primed_from} (mix {state['primed_from']['mix']}, "
            f"validation success {state['primed_from']['val_success']})")
    if not is_primed(primed):
        t1 = time.time()
        prime_on_gold(config, str(resolve_model(config.model.name)), family,
                      make_tasks("train", config.multi_turn.train_tasks, config.multi_turn.environments,
                                 config.multi_turn.kinds), primed, config.device)
        state["timings"]["prime_s"] = round(time.time() - t1, 1)
        log(f"primed in {state['timings']['prime_s']:.0f} s")
    release_gpu_memory()
    # once a variant is selected (all finished, or ended by the final reserve) GRPO is over
    todo = [] if (keep / "selection.json").is_file() else [
        v for v in args.variants if not time_limit.worker_state(work / "runs" / v).get("finished")]
    # vLLM engines sharing one GPU: each takes a share, and they start apart (each profiles free memory);
    # BFCL's engines get a fixed KV cache: vLLM's profiling beside growing trainers can come out negative
    os.environ.setdefault(VLLM_MEMORY_ENV, str(args.eval_memory))
    if args.eval_kv_gib:
        os.environ.setdefault(VLLM_KV_CACHE_ENV, str(args.eval_kv_gib))

    tasks = make_tasks("test", args.own_tasks, config.multi_turn.environments, config.multi_turn.kinds)

    def own_tasks(label: str, adapter: Path | None) -> None:
        """Greedy episode success of ``label`` on our test split (once: a later call keeps it)."""
        if label in state["own"]:
            return
        t1 = time.time()
        scores, rows = evaluate_stage(config, str(primed), adapter, tasks, family, config.device)
        write_rows(keep / "own" / f"{label}.jsonl", rows)
        state["own"][label] = scores
        state["timings"][f"own_{label}_s"] = round(time.time() - t1, 1)
        log(f"own test tasks, {label}: success {scores['success']:.3f} ({len(rows)} tasks)")

    # the engines that start once training is over take a larger KV cache (a full one preempts and
    # recomputes episodes)
    final_settings = argparse.Namespace(**vars(settings), env={VLLM_KV_CACHE_ENV: str(args.final_eval_kv_gib),
                                                                VLLM_MEMORY_ENV: str(args.final_eval_memory)})
    training_over = threading.Event()

    def primed_side() -> None:
        """The primed model never changes: its test tasks run beside GRPO, after every variant's vLLM engine
        has started (their start-up profiling must not see this process free memory); its BFCL too, or with
        --primed-bfcl after once training is over, beside the GRPO model's (run 4: beside the trainer it
        slowed every step ~2.4x for its 749 s)."""
        time.sleep(len(todo) * args.stagger_s)
        if time.time() < deadline - 60:
            own_tasks("primed", None)
            release_gpu_memory()
        if args.primed_bfcl == "after":
            training_over.wait()
        if not (bfcl / "primed" / "timing.json").is_file():
            state["timings"]["primed_bfcl_start_s"] = round(time.time() - t0, 1)  # into this call
        generate([("primed", str(primed))], bfcl, final_settings if args.primed_bfcl == "after" else settings,
                 deadline - 20)

    side = threading.Thread(target=primed_side, daemon=True)
    side.start()  # BFCL of the primed model while the variants train
    # --final-reserve-s: GRPO ends that long before the deadline, however far it got, so that the
    # selection, our test tasks and the GRPO model's BFCL run in the same call (no weights carried)
    train_deadline = deadline - (args.final_reserve_s or 0)
    if todo and train_deadline - time.time() > args.stop_margin_s + 30:
        t1 = time.time()
        train_seconds = max(30, int(train_deadline - time.time() - args.stop_margin_s))
        jobs = [Job(f"grpo-{v}", [sys.executable, "-m", "benchmarks.gpu.rl_multi_turn_gpu", "worker", "--work", str(work),
                                  "--variant", v, "--train-seconds", str(train_seconds - i * args.stagger_s),
                                  "--start-delay-s", str(i * args.stagger_s), "--device", args.device,
                                  *(["--tiny", args.tiny] if args.tiny else []), *[f"--set={x}" for x in args.set]],
                    # each its own torch.distributed port: TRL's colocated vLLM of a second variant met
                    # EADDRINUSE on 29500 on the H200 (2026-12-04)
                    log=keep / f"grpo-{v}.log", append_log=True,
                    env={"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "4", "MASTER_PORT": str(29510 + i)})
                for i, v in enumerate(todo)]
        # killed by then at the latest (a worker stops --stop-margin-s before it, with a checkpoint)
        run_lanes(jobs, [None] * len(jobs), train_deadline - (0 if args.final_reserve_s else 25), say=log)
        state["timings"]["train_s"] = round(state["timings"].get("train_s", 0) + time.time() - t1, 1)
        log(f"trained: {json.dumps({v: time_limit.worker_state(work / 'runs' / v).get('step') for v in args.variants})}")
    state["timings"]["train_end_s"] = round(time.time() - t0, 1)  # into this call
    training_over.set()
    finished = all(time_limit.worker_state(work / "runs" / v).get("finished") for v in args.variants)
    # --continue-later: an unfinished GRPO is paused, not ended; it resumes in a later session (carry, restore),
    # so nothing is selected now and the reserve serves the primed model's test tasks and BFCL
    paused = bool(args.continue_later and not finished)
    if paused:
        state.setdefault("grpo_paused_at", []).append(
            {v: time_limit.worker_state(work / "runs" / v).get("step") for v in args.variants})
        log(f"GRPO paused at steps {json.dumps(state['grpo_paused_at'][-1])}: it goes on in a later session")
    if not finished and not paused and args.final_reserve_s and "grpo_stopped_by_time" not in state:
        state["grpo_stopped_by_time"] = {v: time_limit.worker_state(work / "runs" / v).get("step") for v in args.variants}
        log(f"GRPO stopped by --final-reserve-s at steps {json.dumps(state['grpo_stopped_by_time'])}")
    scored = any(math.isfinite(v) for v in select_variant(work, args.variants)["scores"].values())
    ends = finished or (args.final_reserve_s and not paused)
    if not scored and ends:
        log("no variant reached a validation score (see keep/grpo-*.log): nothing to select or evaluate")
    elif ends and not (keep / "selection.json").is_file():
        selection = select_variant(work, args.variants)
        (keep / "selection.json").write_text(json.dumps(selection, indent=2))
        log(f"selected on validation success: {selection['chosen']} ({json.dumps(selection['scores'])})")
    final = None
    if (keep / "selection.json").is_file():
        chosen = work / "runs" / json.loads((keep / "selection.json").read_text())["chosen"]
        # merged: BFCL through vLLM; a merge refused (e.g. a no-op adapter) leaves the adapter to transformers
        model = merge_best(chosen, work / "grpo_model", keep, state, args.bfcl_dtype) or chosen / "best"
        # the GRPO model's BFCL in its own process while this one plays our test tasks
        final = threading.Thread(target=generate, args=([("grpo", str(model))], bfcl, final_settings, deadline - 20),
                                 daemon=True)
        final.start()
        own_tasks("grpo", chosen / "best")
    side.join()
    if (keep / "selection.json").is_file():
        own_tasks("primed", None)  # when the side thread had no time for it
        release_gpu_memory()
        if not (bfcl / "primed" / "timing.json").is_file() and time.time() < deadline - 90:
            # beside training its engine may not have started (on an H100 on 2026-12-05 the trainer left
            # 8 of 79 GiB free): it resumes now, beside the GRPO model's, with training over
            log("the primed model's BFCL did not finish beside GRPO: resumed beside the GRPO model's")
            generate([("primed", str(primed))], bfcl, final_settings, deadline - 20)
    if final is not None:
        final.join()
    done = all((bfcl / label / "timing.json").is_file() for label in PAIR) and set(state["own"]) == set(PAIR)
    state["calls"].append({"command": module_command(sys.argv), "seconds": round(time.time() - t0, 1), "done": done})
    state.update(overrides=overrides, variants=args.variants, own_tasks=args.own_tasks, bfcl_limit=args.bfcl_limit,
                 primed_bfcl=args.primed_bfcl,
                 bfcl_settings={k: v for k, v in vars(settings).items() if k != "pack"},
                 final_bfcl_engine={"kv_cache_gib": args.final_eval_kv_gib, "memory_share": args.final_eval_memory})
    state_file.write_text(json.dumps(state, indent=2))
    for variant_dir in sorted((work / "runs").glob("*")):
        for name in RUN_LOGS:
            source, target = variant_dir / name, keep / "runs" / variant_dir.name / name
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    bmt.pack(keep, Path(args.out) / "rl_multi_turn.tar.gz", ARCHIVE_SUFFIXES)
    log("done: every model generated" if done else "not done: run the same command again (it resumes)")
    return 0


def weights_sha256(folder: Path) -> str:
    """One digest of a model folder's weights (its ``*.safetensors``, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def carry_out(args: argparse.Namespace) -> int:
    """What a later session resumes this run from, spread over folders ``--to``/stage1, stage2, ...
    (one device call brings one back: at most 8 files, under 64 MiB; ``carry.py``): the primed model
    as its priming LoRA (``priming_adapter/``, ~20 MB, instead of the merged folder's ~270 MB) with
    its marker and weights digest, and each variant's newest checkpoint with ``best/``. The run's
    archive (``rl_multi_turn.tar.gz``: state, own-task rows, BFCL generations, logs) comes back with
    every ``run`` call and travels beside them."""
    from benchmarks.gpu import carry
    from toolrl_lib.run_dir import latest_checkpoint
    from toolrl_lib.train.priming import PRIMING_ADAPTER, PRIMING_MARKER

    work, to = Path(args.work), Path(args.to)
    primed, packed = work / "primed_model", to / "packed"
    if not (primed / PRIMING_ADAPTER).is_dir():
        raise SystemExit(f"{primed / PRIMING_ADAPTER} not found: this primed model cannot be rebuilt elsewhere")
    whole = {"max_parts": 10**6, "part_mib": carry.PART_MIB}  # every part now; ``stage`` spreads them over calls
    carry.pack(primed / PRIMING_ADAPTER, packed, "primed", folder=True, **whole)  # float32, as trained
    (packed / "primed.json").write_text(json.dumps(
        {"marker": json.loads((primed / PRIMING_MARKER).read_text()), "sha256": weights_sha256(primed)}, indent=1))
    for variant in args.variants:
        if latest_checkpoint(work / "runs" / variant / "checkpoints"):
            carry.pack(work / "runs" / variant, packed, variant, **whole)
    folders = carry.stage(sorted(packed.glob("*")), to, mib=carry.CALL_MIB, max_files=carry.CALL_FILES)
    log(f"{len(folders)} calls bring it back: " + ", ".join(f"{f.name} ({len(list(f.iterdir()))} files)"
                                                          for f in folders))
    return 0


def restore(args: argparse.Namespace) -> int:
    """A fresh host from what ``carry`` brought back (``--parts``: its files and the last
    ``rl_multi_turn.tar.gz`` or its parts): keep/ from the archive, the primed model merged again from
    its LoRA into the base (its weights digest checked against the original's), each variant's
    checkpoint and ``best/``. The next ``run`` resumes training from there. ``--extend``: a run that
    was already selected and evaluated goes on training (raise ``grpo.max_steps`` if it finished): the
    GRPO model's selection, test-task rows and BFCL are dropped (the primed model's are kept) and
    redone at the new end."""
    from benchmarks.gpu import carry
    from toolrl_lib.models import resolve_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.priming import PRIMING_ADAPTER, rebuild_primed

    work, parts = Path(args.work), Path(args.parts)
    keep = work / "keep"
    bmt.unpack(parts / "rl_multi_turn.tar.gz", keep)
    state_file = keep / "gpu_run.json"
    state = json.loads(state_file.read_text())
    config = load_run_config(ROOT / CONFIG, base_overrides(args))
    primed = work / "primed_model"
    original = json.loads((parts / "primed.json").read_text())  # carry_out's marker and weights digest
    carry.unpack(parts, "primed", primed / PRIMING_ADAPTER)
    t0 = time.time()
    rebuild_primed(str(resolve_model(config.model.name)), primed, config.model.dtype, config.device,
                   info=original["marker"])
    same = weights_sha256(primed) == original["sha256"]
    state.setdefault("restored", []).append({"primed_identical": same, "rebuild_s": round(time.time() - t0, 1)})
    log(f"primed model rebuilt from its LoRA in {time.time() - t0:.0f} s: weights "
        + ("bit-identical to the original" if same else "DIFFER from the original (another device kind?)"))
    for variant in args.variants:
        if (parts / f"{variant}.manifest.json").is_file():
            log(f"{variant}: {carry.unpack(parts, variant, work / 'runs' / variant)}")
        for name in ("worker.json", "episodes"):
            source, target = keep / "runs" / variant / name, work / "runs" / variant / name
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif source.is_file():
                shutil.copy2(source, target)
    if args.extend:
        for path in (keep / "selection.json", keep / "own" / "grpo.jsonl", keep / "merge.log"):
            path.unlink(missing_ok=True)
        shutil.rmtree(keep / "bfcl" / "grpo", ignore_errors=True)
        state["own"].pop("grpo", None)
        for key in ("own_grpo_s", "merge_s"):
            state["timings"].pop(key, None)
        ended = state.pop("grpo_stopped_by_time", None)
        for variant in args.variants:  # a variant that reached max_steps trains on up to the new one
            worker_file = work / "runs" / variant / "worker.json"
            if worker_file.is_file():
                worker_file.write_text(json.dumps({**time_limit.worker_state(work / "runs" / variant),
                                                   "finished": False}, indent=2))
        state["restored"][-1]["extended_from"] = ended
        log(f"extending: GRPO goes on from steps {json.dumps(ended)}; the GRPO model's evaluation is redone at the end")
    state_file.write_text(json.dumps(state, indent=2))
    return 0


def report(args: argparse.Namespace) -> int:
    from toolrl_lib.envs.evaluate import read_rows, success_groups
    from toolrl_lib.envs.report import common_refusals
    from toolrl_lib.evaluate.analysis import compare_dirs
    from toolrl_lib.evaluate.stats import paired_bootstrap

    work = Path(args.work)
    if args.archive:
        bmt.unpack(Path(args.archive), work)
    info = json.loads((work / "gpu_run.json").read_text())
    missing = [label for label in PAIR if not (work / "bfcl" / label / "timing.json").is_file()]
    if missing and not args.partial:
        raise SystemExit(f"BFCL generation of {missing} is not finished: run the GPU phase again (or --partial)")
    # a model whose BFCL generation did not finish (--partial) is scored on the categories it finished;
    # the BFCL comparison then covers the categories both models finished (whole categories, never a prefix)
    partial = {label: bmt.write_complete_results(label, work / "bfcl" / label, info["bfcl_settings"].get("limit"))
               for label in missing if (work / "bfcl" / label).is_dir()}
    rows = {label: bmt.category_rows(label, work / "bfcl" / label)[0]
            if label not in missing or partial.get(label) else [] for label in PAIR}
    own = {label: {r["task_id"]: r for r in read_rows(work / "own" / f"{label}.jsonl")} for label in PAIR}
    models = {label: model_scores(rows[label], list(own[label].values())) for label in PAIR}
    finished = {label: partial.get(label, []) if label in missing else CATEGORIES for label in PAIR}
    compared = [c for c in CATEGORIES if all(c in finished[label] for label in PAIR)]
    comparisons = []
    if compared:
        table = compare_dirs(work / "bfcl" / "primed", work / "bfcl" / "grpo")
        comparisons = [{"a": "primed", "b": "grpo", "metric": f"bfcl_{r['category']}", "n": int(r["n"]),
                        "diff": float(r["diff"]), "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"]),
                        "mcnemar_p": float(r["mcnemar_p"]) if r.get("mcnemar_p") is not None else None}
                       for _, r in table[table["category"].isin(compared)].iterrows()]
    ids = sorted(set(own["primed"]) & set(own["grpo"]))
    diff = paired_bootstrap([float(own["primed"][i]["success"]) for i in ids],
                            [float(own["grpo"][i]["success"]) for i in ids])
    comparisons.append({"a": "primed", "b": "grpo", "metric": "own_task_success", "n": diff.n, "diff": diff.diff,
                        "ci_low": diff.ci_low, "ci_high": diff.ci_high})
    # our test tasks by kind and by app (a task across two apps counts for both): where GRPO moved
    by_group: dict[str, dict[str, dict[str, float]]] = {}
    for field in ("kind", "app"):
        groups = {label: success_groups([own[label][i] for i in ids], field) for label in PAIR}
        by_group[field] = {name: {"n": len(values), **{label: round(sum(groups[label][name]) / len(values), 4)
                                                       for label in PAIR}}
                           for name, values in sorted(groups["primed"].items())}
    refusals = {label: common_refusals(list(own[label].values())) for label in PAIR}
    selection = json.loads((work / "selection.json").read_text())
    chosen_csv = work / "runs" / selection["chosen"] / "validation.csv"
    validation = chosen_csv.read_text() if chosen_csv.is_file() else ""
    variant_validation = {v: (work / "runs" / v / "validation.csv").read_text() for v in info.get("variants", [])
                          if (work / "runs" / v / "validation.csv").is_file()}
    result = {"selected_on": "validation",
              "selection": {**selection, "validation_csv": validation,
                            "note": "the variant with the best validation success (never BFCL or our test split)"},
              "models": models, "comparisons": comparisons, "own_by_kind": by_group["kind"],
              "own_by_app": by_group["app"], "own_refusals": refusals, "grpo_stopped_by_time": info.get("grpo_stopped_by_time"),
              "variant_validation": variant_validation,
              "bfcl_rows": rows["primed"] + rows["grpo"],
              "timings": info["timings"], "gpu_calls": info["calls"], "overrides": info["overrides"],
              "variants": {v: json.loads((work / "runs" / v / "worker.json").read_text())
                           for v in info.get("variants", []) if (work / "runs" / v / "worker.json").is_file()},
              "bfcl_settings": info["bfcl_settings"], "incomplete": missing,
              "partial_categories": {label: cats for label, cats in partial.items() if cats},
              "commands": {"gpu": [c["command"] for c in info["calls"]], "report": report_command(sys.argv)},
              "notes": args.note}
    write_result(result, to_markdown(result, info), Path(args.out) / f"rl_multi_turn{'_' + args.tag if args.tag else ''}",
                 args.figure, selection["chosen"], sorted(result["own_by_kind"]))
    return 0


def model_scores(bfcl_rows: list[dict[str, Any]], own_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One model's figures in a result file: BFCL accuracy and turns passed per category, and its
    episode success on our test tasks."""
    scores: dict[str, Any] = {f"bfcl_{r['category']}": r["accuracy"] for r in bfcl_rows}
    scores.update({f"bfcl_{r['category']}_turns_passed": r["turns_passed_share"] for r in bfcl_rows})
    scores["own_task_success"] = sum(bool(r["success"]) for r in own_rows) / max(1, len(own_rows))
    scores["own_tasks"] = len(own_rows)
    return scores


def write_result(result: dict[str, Any], markdown: str, stem: Path, figure: str | None, chosen: str,
                 kinds: list[str]) -> None:
    """``stem``.json and .md (printed too) and, asked for, every variant's validation curve as a figure."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    (stem.parent / f"{stem.name}.json").write_text(json.dumps(result, indent=2, default=str))
    (stem.parent / f"{stem.name}.md").write_text(markdown)
    if figure:
        from toolrl_lib.envs.report import plot_validation_curves, validation_curves

        curves = validation_curves(result)
        if not curves.empty:
            plot_validation_curves(curves, chosen, kinds, figure)
    print(markdown)


def progress(args: argparse.Namespace) -> int:
    """A run carried between sessions and not yet evaluated: what is known so far. The primed model's
    test tasks and BFCL (they ran beside GRPO), and each variant's validation so far, its last
    validation against its start paired per task. Validation is the selection's set, not a test:
    the GRPO - primed comparison on our test tasks comes from ``report`` once the run is evaluated."""
    from toolrl_lib.envs.evaluate import read_rows
    from toolrl_lib.evaluate.stats import paired_bootstrap

    work = Path(args.work)
    if args.archive:
        bmt.unpack(Path(args.archive), work)
    info = json.loads((work / "gpu_run.json").read_text())
    if (work / "own" / "grpo.jsonl").is_file():
        raise SystemExit(f"{work}: the GRPO model was evaluated; use `report` for this run")
    primed = read_rows(work / "own" / "primed.jsonl")
    bfcl_done = (work / "bfcl" / "primed" / "timing.json").is_file()
    bfcl_rows = bmt.category_rows("primed", work / "bfcl" / "primed")[0] if bfcl_done else []
    variants: dict[str, dict[str, Any]] = {}
    for variant in info.get("variants", []):
        folder = work / "runs" / variant
        if not (folder / "validation.csv").is_file():
            continue
        episodes = {path.stem: path for path in (folder / "episodes").glob("*.jsonl")}
        trained = sorted((stem for stem in episodes if stem.startswith("step-")), key=lambda s: int(s[5:]))
        last = "final" if "final" in episodes else (trained[-1] if trained else None)
        start = {r["task_id"]: r for r in read_rows(episodes["base"])} if "base" in episodes else {}
        latest = {r["task_id"]: r for r in read_rows(episodes[last])} if last else {}
        ids = sorted(set(start) & set(latest))
        diff = paired_bootstrap([float(start[i]["success"]) for i in ids], [float(latest[i]["success"]) for i in ids])
        worker_state = json.loads((folder / "worker.json").read_text()) if (folder / "worker.json").is_file() else {}
        variants[variant] = {
            "steps": worker_state.get("step"), "max_steps": worker_state.get("max_steps"),
            "validation_csv": (folder / "validation.csv").read_text(),
            "validation_start_vs_last": {"last": last, "n": diff.n, "start": diff.acc_a, "last_success": diff.acc_b,
                                         "diff": diff.diff, "ci_low": diff.ci_low, "ci_high": diff.ci_high},
            "step_seconds": step_seconds(folder / "metrics.csv")}
    result = {
        "status": "in progress: GRPO not finished, the GRPO model not yet evaluated (no test or BFCL comparison)",
        "priming_mix": info.get("priming_mix"), "primed_from": info.get("primed_from"),
        "models": {"primed": model_scores(bfcl_rows, primed)},
        "bfcl_rows": bfcl_rows, "variants": variants,
        "variant_validation": {v: d["validation_csv"] for v, d in variants.items()},
        "timings": info["timings"], "gpu_calls": info["calls"], "overrides": info["overrides"],
        "commands": {"gpu": [c["command"] for c in info["calls"]], "report": report_command(sys.argv)},
        "notes": args.note}
    chosen = max(variants, key=lambda v: variants[v]["validation_start_vs_last"]["last_success"], default="")
    write_result(result, progress_markdown(result, info), Path(args.out) / f"rl_multi_turn_{args.tag or 'progress'}",
                 args.figure, chosen, sorted({str(r["kind"]) for r in primed if r.get("kind")}))
    return 0


def step_seconds(metrics_csv: Path) -> dict[str, float]:
    """Seconds per optimizer step from a run's metrics.csv: all steps, the steps that began a
    generation round (TRL logs completion lengths only on those) and the steps that reused it."""
    import pandas as pd

    if not metrics_csv.is_file():
        return {}
    table = pd.read_csv(metrics_csv)
    if "step_time" not in table.columns:
        return {}
    rollout = table["completions/mean_length"].notna() if "completions/mean_length" in table.columns else None
    out = {"steps": int(table["step_time"].notna().sum()), "mean": round(float(table["step_time"].mean()), 3)}
    if rollout is not None and rollout.any() and (~rollout).any():
        out["median_rollout_step"] = round(float(table.loc[rollout, "step_time"].median()), 3)
        out["median_reuse_step"] = round(float(table.loc[~rollout, "step_time"].median()), 3)
    return out


def progress_markdown(result: dict[str, Any], info: dict[str, Any]) -> str:
    primed = result["models"]["primed"]
    lines = ["# Multi-turn GRPO in our environments: a run in progress", "",
             f"**{result['status']}.** Embedded SmolLM2-135M, {CONFIG} with `{' '.join(info['overrides'])}`.", ""]
    if result.get("priming_mix"):
        source = result.get("primed_from") or {}
        lines += [f"Primed on the mix `{result['priming_mix']}` (`benchmarks/priming_mix.py`"
                  + (f"; mix {source['mix']}, validation success {source['val_success']:.3f}" if source else "")
                  + ").", ""]
    lines += [f"Primed model on our test split: episode success **{primed['own_task_success']:.3f}** "
              f"({primed['own_tasks']} tasks).", "",
              "Validation (our val split, greedy episodes; the selection's set, not a test), start against the "
              "last validation, paired per task with a bootstrap 95% CI:", "",
              "| variant | steps | of max | start | last (stage) | last - start | 95% CI | s/step (mean; round start, reuse) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, v in result["variants"].items():
        c, t = v["validation_start_vs_last"], v["step_seconds"]
        timing = (f"{t['mean']:.2f}; {t.get('median_rollout_step', float('nan')):.2f}, "
                  f"{t.get('median_reuse_step', float('nan')):.2f}" if t else "—")
        lines.append(f"| {name} | {v['steps']} | {v['max_steps']} | {c['start']:.3f} | {c['last_success']:.3f} "
                     f"({c['last']}) | {c['diff']:+.3f} | [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] | {timing} |")
    if result["bfcl_rows"]:
        lines += ["", "Primed model, BFCL v4 multi-turn (BFCL's checker; turns passed: mean share of an entry's "
                  "turns before the checker failed it):", "",
                  "| category | n | accuracy | turns passed | force-terminated |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['category']} | {r['n']} | {bmt._f(r['accuracy'])} | {bmt._f(r['turns_passed_share'])} | "
                  f"{r['force_terminated']} |" for r in result["bfcl_rows"]]
    for name, v in result["variants"].items():
        lines += ["", f"Validation of {name}:", "", "```", v["validation_csv"].strip(), "```"]
    lines += ["", f"GPU timings (s): {json.dumps(info['timings'])}; device calls: "
              f"{json.dumps([c['seconds'] for c in info['calls']])} s", "", "Commands, in order:", ""]
    lines += [f"- GPU: `{c}`" for c in result["commands"]["gpu"]] + [f"- here: `{result['commands']['report']}`"]
    if result.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def report_command(argv: list[str]) -> str:
    """The report's command line without its --note texts (they are printed as notes)."""
    kept, skip = ["python -m benchmarks.gpu.rl_multi_turn_gpu"], False
    for arg in argv[1:]:
        if not skip and arg != "--note":
            kept.append(arg)
        skip = arg == "--note" and not skip
    return " ".join(kept) + (" --note ... (the notes below)" if "--note" in argv else "")


def to_markdown(result: dict[str, Any], info: dict[str, Any]) -> str:
    models, b = result["models"], info["bfcl_settings"]
    n_bfcl = {c["metric"]: c["n"] for c in result["comparisons"]}
    scope = "all entries" if info["bfcl_limit"] is None else f"first {info['bfcl_limit']} entries"
    stopped = result.get("grpo_stopped_by_time")
    lines = ["# Multi-turn GRPO in our environments: GRPO - primed", "",
             f"Embedded SmolLM2-135M, {CONFIG} with `{' '.join(info['overrides'])}`; BFCL v4 multi-turn: {scope} "
             f"of each category (BFCL's official checker, our loop; step budget {b['max_new_tokens']} new tokens, "
             f"compact docs {b['compact_docs']}); our test split: {info['own_tasks']} tasks. Paired bootstrap 95% "
             f"CIs. Selection on validation success (never BFCL or test): **{result['selection']['chosen']}** of "
             f"{json.dumps(result['selection']['scores'])}; steps per variant: "
             f"{json.dumps({v: w.get('step') for v, w in result.get('variants', {}).items()})}.", "",
             *([f"Primed on the mix `{info['priming_mix']}` (`benchmarks/priming_mix.py`)"
                + (f", the model primed by that script (validation success {info['primed_from']['val_success']:.3f})"
                   if info.get("primed_from") else "") + ".", ""] if info.get("priming_mix") else []),
             *([f"GRPO ended by the call's final reserve (--final-reserve-s) at steps {json.dumps(stopped)}, "
                "before max_steps; the selection and the evaluations ran in the same call.", ""] if stopped else []),
             "| metric | n | primed | GRPO | GRPO - primed | 95% CI |", "| --- | --- | --- | --- | --- | --- |"]
    for c in result["comparisons"]:
        lines.append(f"| {c['metric']} | {n_bfcl[c['metric']]} | {models['primed'].get(c['metric'], float('nan')):.3f} | "
                     f"{models['grpo'].get(c['metric'], float('nan')):.3f} | {c['diff']:+.3f} | "
                     f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] |")
    for field in ("kind", "app"):
        groups = result[f"own_by_{field}"]
        lines += ["", f"Our test tasks by {field} (episode success share):", "",
                  f"| {field} | n | primed | GRPO | GRPO - primed |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {name} | {g['n']} | {g['primed']:.3f} | {g['grpo']:.3f} | {g['grpo'] - g['primed']:+.3f} |"
                  for name, g in groups.items()]
    lines += refusal_lines(result)
    lines += ["", "BFCL detail (turns passed: mean share of an entry's turns before the checker failed it):", "",
              "| model | category | n | accuracy | turns passed | over window | force-terminated | steps/entry |",
              "|" + " --- |" * 8]
    for r in result["bfcl_rows"]:
        lines.append(f"| {r['model']} | {r['category']} | {r['n']} | {bmt._f(r['accuracy'])} | "
                     f"{bmt._f(r['turns_passed_share'])} | {bmt._f(r['over_window_share'])} | "
                     f"{r['force_terminated']} | {bmt._f(r['steps_per_entry'], 2)} |")
    if result["incomplete"]:
        scored = result.get("partial_categories") or {}
        compared = [c["metric"].removeprefix("bfcl_") for c in result["comparisons"] if c["metric"].startswith("bfcl_")]
        lines += ["", f"**Incomplete**: BFCL generation of {result['incomplete']} did not finish in the call, so "
                  + (f"the BFCL comparison covers only the categories both models finished, {compared}"
                     if compared else "there is no BFCL comparison")
                  + (f"; the categories each finished are scored: {json.dumps(scored)}" if scored else "") + "."]
    lines += variant_table(result)
    lines += ["", "Validation of the selected variant (our val split; success is episode success, per kind too):", "", "```",
              result["selection"]["validation_csv"].strip(), "```", "",
              f"GPU timings (s): {json.dumps(info['timings'])}; device calls: "
              f"{json.dumps([c['seconds'] for c in info['calls']])} s", "", "Commands, in order:", ""]
    lines += [f"- GPU: `{c['command']}`" for c in info["calls"]] + [f"- here: `{result['commands']['report']}`"]
    if result.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def refusal_lines(result: dict[str, Any]) -> list[str]:
    """Markdown lines: calls our environments refused on the test tasks, per kind, with the commonest
    refusals (rows from before evaluation rows kept them: the counts only)."""
    refusals = result.get("own_refusals") or {}
    if not refusals:
        return []
    lines = ["", "Refused calls on our test tasks (per episode; the commonest refusals, digits as N):", "",
             "| kind | primed | GRPO | GRPO's commonest refusals |", "| --- | --- | --- | --- |"]
    for kind, grpo in refusals.get("grpo", {}).items():
        primed = refusals.get("primed", {}).get(kind, {})
        top = "; ".join(f"{text.replace('|', '/')} ({n})" for text, n in grpo["top"]) or "—"
        lines.append(f"| {kind} | {primed.get('refused_per_episode', float('nan')):.2f} | "
                     f"{grpo['refused_per_episode']:.2f} | {top} |")
    return lines


def variant_table(result: dict[str, Any]) -> list[str]:
    """Markdown lines: each variant's validation success at its start, its best (and where), its last."""
    from toolrl_lib.envs.report import validation_curves

    curves = validation_curves(result)
    if curves.empty:
        return []
    lines = ["", "Validation success of every variant (our val split; the selection's only input):", "",
             "| variant | steps | start | best | best at step | last |", "| --- | --- | --- | --- | --- | --- |"]
    for variant, rows in curves.groupby("variant", sort=True):
        trained = rows[rows["stage"].isin(["grpo", "final"])]
        start = rows[~rows["stage"].isin(["grpo", "final"])]["success"]
        best = trained.loc[trained["success"].idxmax()] if not trained.empty else None
        lines.append(f"| {variant} | {int(rows['step'].max())} | {start.iloc[0] if len(start) else float('nan'):.3f} | "
                     + (f"{best['success']:.3f} | {int(best['step'])} | {trained['success'].iloc[-1]:.3f} |"
                        if best is not None else "— | — | — |"))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="phase", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--device", default="cuda")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--own-tasks", type=int, default=96)
    r.add_argument("--priming-mix", default=None, metavar="PARTS",
                   help="priming kinds as a benchmarks/priming_mix.py mix, e.g. default*4,hard (a --set before the others)")
    r.add_argument("--primed-from", default=None, metavar="DIR",
                   help="a benchmarks/priming_mix.py mix folder primed on the same mix: its model, not a second priming")
    r.add_argument("--budget-s", type=float, default=560, help="this call packs and ends by then (device call <= 600 s)")
    r.add_argument("--bfcl-limit", type=int, default=None, help="first N entries of each category (default: all)")
    r.add_argument("--bfcl-max-new-tokens", type=int, default=128, help="step budget (issue 19's)")
    r.add_argument("--bfcl-batch-size", type=int, default=256)
    r.add_argument("--bfcl-max-live", type=int, default=200, help="episodes in flight per model")
    r.add_argument("--bfcl-max-live-tokens", default=None, metavar="N|kv",
                   help="BFCL: admit an episode only while the live transcripts fit N tokens (kv: the engine's "
                        "KV cache); default: --bfcl-max-live alone decides")
    r.add_argument("--bfcl-compact-docs", action="store_true")
    r.add_argument("--bfcl-dtype", default="fp32", choices=["bf16", "fp32"],
                   help="both models' BFCL engines and the GRPO model's merge: fp32 keeps the whole LoRA update (a "
                        "bf16 merge was refused by its own verification on the H200); vLLM runs fp32 through its "
                        "Triton attention (not yet run on a GPU); bf16: runs 1 and 2's setting")
    r.add_argument("--tiny", default=None, help="a tiny model folder: CPU test of the chain")
    r.add_argument("--variants", default="shaped-g8,success-g8", type=lambda text: [v for v in text.split(",") if v],
                   help=f"GRPO variants side by side, among {list(VARIANTS)}")
    r.add_argument("--stagger-s", type=float, default=120,
                   help="the GPU processes of a call start this far apart: vLLM's start-up profiling asserts when "
                        "another process frees GPU memory meanwhile (it did on the H200 at 45 s apart)")
    r.add_argument("--eval-memory", type=float, default=0.15, help="GPU memory share of a BFCL vLLM engine")
    r.add_argument("--eval-kv-gib", type=float, default=12,
                   help="fixed KV cache (GiB) of a BFCL vLLM engine (0: vLLM profiles free memory)")
    r.add_argument("--final-eval-kv-gib", type=float, default=32,
                   help="KV cache (GiB) of the GRPO model's BFCL engine, which starts once training is over")
    r.add_argument("--final-eval-memory", type=float, default=0.3,
                   help="GPU memory share of that engine (it must be free when the engine starts)")
    r.add_argument("--primed-bfcl", default="beside", choices=["beside", "after"],
                   help="when the primed model's BFCL runs: beside GRPO (it shares the GPU with the trainers), or "
                        "after it, beside the GRPO model's (give --final-reserve-s room for both)")
    r.add_argument("--final-reserve-s", type=float, default=None,
                   help="end GRPO this many seconds before the budget (checkpoints kept) and go on to the "
                        "selection, our test tasks and the GRPO model's BFCL in the same call, whatever "
                        "max_steps says")
    r.add_argument("--continue-later", action="store_true",
                   help="with --final-reserve-s: GRPO that has not reached max_steps by then is paused, not ended "
                        "(no selection): the reserve goes to the primed model's test tasks and BFCL, and the run "
                        "goes on in a later session (carry, restore, then run without this flag)")
    r.add_argument("--stop-margin-s", type=float, default=150,
                   help="variants stop this long before the budget (checkpoint, final validation, own tasks)")
    w = sub.add_parser("worker", help="(internal) one GRPO variant")
    w.add_argument("--work", required=True)
    w.add_argument("--variant", required=True, choices=list(VARIANTS))
    w.add_argument("--train-seconds", type=float, required=True)
    w.add_argument("--device", default="cuda")
    w.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    w.add_argument("--tiny", default=None)
    w.add_argument("--start-delay-s", type=float, default=0)
    c = sub.add_parser("carry", help="the end of a session: pack what the next one resumes from, a folder per call")
    c.add_argument("--work", required=True)
    c.add_argument("--to", required=True)
    c.add_argument("--variants", default="shaped-g8", type=lambda text: [v for v in text.split(",") if v])
    s = sub.add_parser("restore", help="a new session's host from what carry brought back")
    s.add_argument("--work", required=True)
    s.add_argument("--parts", required=True, help="carry's files and the last rl_multi_turn.tar.gz (or its parts)")
    s.add_argument("--variants", default="shaped-g8", type=lambda text: [v for v in text.split(",") if v])
    s.add_argument("--device", default="cuda")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as the run's --set")
    s.add_argument("--tiny", default=None)
    s.add_argument("--extend", action="store_true",
                   help="an evaluated run trains on: drop the GRPO model's selection and evaluation")
    p = sub.add_parser("report")
    p.add_argument("--archive", default=None)
    p.add_argument("--work", required=True)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--note", action="append", default=[], help="a line for the markdown's notes (repeat)")
    p.add_argument("--partial", action="store_true", help="report even if a model's BFCL run was cut short")
    p.add_argument("--figure", default=None, help="also plot every variant's validation curve here (a .png)")
    p.add_argument("--tag", default="", help="write rl_multi_turn_TAG.{json,md} (an earlier run's files stay)")
    q = sub.add_parser("progress", help="a run not yet evaluated (carried to the next session): what is known so far")
    q.add_argument("--archive", default=None)
    q.add_argument("--work", required=True)
    q.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    q.add_argument("--note", action="append", default=[], help="a line for the markdown's notes (repeat)")
    q.add_argument("--figure", default=None, help="also plot every variant's validation curve here (a .png)")
    q.add_argument("--tag", default="", help="write rl_multi_turn_TAG.{json,md} (default rl_multi_turn_progress)")
    args = parser.parse_args(argv)
    unknown = [v for v in getattr(args, "variants", []) if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants {unknown}: expected among {list(VARIANTS)}")
    if getattr(args, "priming_mix", None):
        try:
            args.set.insert(0, priming_mix_override(args.priming_mix))
        except ValueError as error:
            parser.error(f"--priming-mix {args.priming_mix!r}: {error}")
    return {"run": run, "worker": worker, "report": report, "progress": progress, "carry": carry_out,
            "restore": restore}[args.phase](args)


if __name__ == "__main__":
    sys.exit(main())
