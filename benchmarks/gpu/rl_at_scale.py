"""Issue 38: data, SFT, then long GRPO for the embedded model on the broad tool set of our own.

One resumable chain; every device call runs the same ``run`` command, which does what is left
before ``--budget-s`` and packs what exists (files under ``--work`` survive between calls while
the GPU host stays warm):

    data    the broad set (``toolrl data generate --generator broad --examples 20000 --seed 0``)
    sft     LoRA and full fine-tuning side by side on the GPU (``toolrl sft``, each resumable)
    select  validation mean@k of base and each SFT model on the GRPO config's validation set
            (held-out functions; ``validation.best_metric``), the best SFT model is the start
    grpo    the variants side by side from that start (``configs/embedded_broad_gpu.yaml`` +
            each variant's overrides), each stopped in time with a checkpoint and resumed by the
            next call; beside them, one process per model evaluates base and SFT: BFCL
            single-turn (greedy, generation only), pass@k on validation (our binary reward) and
            pass@k on BFCL non-live AST (samples only: BFCL's scorer runs on the CPU box)
    final   the variant with the best validation score (never BFCL) is merged into a full
            folder (vLLM loads folders) and evaluated the same way
    pack    ``--out``/rl_at_scale.tar.gz (parts when large): state, SFT records, run logs,
            validation and metrics CSVs, BFCL generations, pass@k files; never weights

Across sessions (a later session's host starts bare): at the end of one, ``carry`` packs the SFT
start (or, before the selection, each SFT model or checkpoint) and each variant's checkpoint into
folders of what one call brings back (8 files, 64 MiB); in the next, ``carry.py stage`` spreads them (with
the archive) over carry folders, each call copies one to the host, and ``restore`` puts them
where ``run`` resumes from (``benchmarks/gpu/session.sh``, steps 38carry, stage, 38restore).

    python -m benchmarks.gpu.rl_at_scale run --work /tmp/ras --out $OUT --budget-s 570
    python -m benchmarks.gpu.rl_at_scale report --archive rl_at_scale.tar.gz --work runs/rl_at_scale

``report`` scores here (BFCL's scorer in its venv), compares sft/grpo, base/grpo and base/sft
with paired category-stratified bootstrap CIs and writes benchmarks/results/rl_at_scale.{md,json}
(the shape of rl_single_turn.json plus ``pass_at_k`` curves per model and split).

``--tiny DIR --device cpu`` runs the same chain on a tiny random model at toy sizes (the CPU test
of the plumbing, ``tests/test_rl_at_scale_script.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu import bfcl_multi_turn as bmt
from benchmarks.gpu import time_limit
from benchmarks.gpu.lanes import Job, run_lanes

ROOT = Path(__file__).resolve().parents[2]
GRPO_CONFIG = "configs/embedded_broad_gpu.yaml"
SFT_CONFIG = "configs/sft_embedded_gpu.yaml"
DATA = "data/processed/broad"
EXAMPLES = 20_000
SFT_METHODS: dict[str, list[str]] = {
    "lora": [],
    "full": ["sft.method=full", "sft.learning_rate=5e-5"],
}
# name -> overrides of configs/embedded_broad_gpu.yaml (all start from the selected SFT model)
VARIANTS: dict[str, list[str]] = {
    "g16-weighted": [],
    "g16-binary": ["reward.scheme=binary"],
    "g32-weighted": ["grpo.num_generations=32"],  # 16 prompts x 32 per round of 512
    # full fine-tuning beside LoRA (the model is 135M): no adapter branches, so about half the
    # kernels a step launches; the smaller learning rate of full fine-tuning
    "g16-full": ["lora.enabled=false", "grpo.learning_rate=3e-6", "fast.bf16_lora_inputs=false"],
}
LABELS = ("base", "sft", "grpo")
RUN_LOGS = ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "data_report.json", "worker.json",
            "generation_times.rank0.jsonl")
TINY_DATA = 240
TINY_SFT = ["sft.epochs=1", "sft.batch_size=4", "sft.eval_steps=2", "sft.save_steps=2", "sft.eval_examples=4",
            "sft.eval_batch_size=4", "sft.max_length=4096", "sft.lora_r=4", "sft.lora_alpha=8", "model.dtype=fp32",
            "sft.num_examples=8"]
TINY_GRPO = ["grpo.num_generations=2", "grpo.generation_batch_size=4", "grpo.per_device_train_batch_size=4",
             "grpo.max_completion_length=8", "grpo.max_steps=2", "grpo.vllm.mode=off", "model.dtype=fp32",
             "lora.r=4", "lora.alpha=8", "validation.num_examples=2", "validation.k=2",
             "validation.max_new_tokens=8", "validation.every_steps=1", "validation.batch_size=4",
             "checkpoint.save_steps=1", "fast.bf16_lora_inputs=false", "fast.shared_prompt=false",
             "fast.group_batches=false", "logging.logging_steps=1", "data.max_train_examples=16", "data.max_prompt_tokens=3800", "model.max_seq_length=4096"]


def module_command(argv: list[str]) -> str:
    """This call as the command that reproduces it (``python -m``, not the script's path on the host)."""
    return " ".join(["python -m benchmarks.gpu.rl_at_scale", *argv[1:]])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------- settings shared by every phase
def data_dir(args: argparse.Namespace) -> Path:
    return Path(args.work) / "data" if args.tiny else ROOT / DATA


def data_overrides(args: argparse.Namespace) -> list[str]:
    folder = data_dir(args)
    return [f"data.train_files=[{folder / 'train.jsonl'}]", f"data.val_files=[{folder / 'val.jsonl'}]"]


def grpo_overrides(args: argparse.Namespace, variant: str, start: str) -> list[str]:
    tiny = TINY_GRPO if args.tiny else []
    return [*data_overrides(args), *tiny, *VARIANTS[variant], *args.set, f"model.name={start}",
            f"device={args.device}", f"name={variant}", "validation.before_training=false"]


def grpo_config(args: argparse.Namespace, variant: str, start: str) -> Any:
    from toolrl_lib.train.config import load_run_config

    return load_run_config(ROOT / GRPO_CONFIG, grpo_overrides(args, variant, start))


def eval_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The evaluation sizes (tiny: toy sizes on the transformers backend)."""
    if args.tiny:
        return {"backend": "hf", "n": 2, "val_limit": 2, "bfcl_limit": 1, "max_new_tokens": 8, "batch_size": 8,
                "dtype": "fp32"}
    return {"backend": args.eval_backend, "n": args.n, "val_limit": args.val_limit, "bfcl_limit": args.bfcl_limit,
            "max_new_tokens": 256, "batch_size": 512, "dtype": "bf16"}


def python_module(module: str, *argv: str) -> list[str]:
    return [sys.executable, "-m", module, *argv]


# ---------------------------------------------------------------- phase: data
def ensure_data(args: argparse.Namespace) -> None:
    from toolrl_lib.data.toolset import generate_broad, write_broad

    folder = data_dir(args)
    if (folder / "val.jsonl").is_file():
        return
    t0 = time.time()
    stats = write_broad(generate_broad(TINY_DATA if args.tiny else EXAMPLES, seed=0), folder)
    log(f"broad data in {time.time() - t0:.0f} s: {json.dumps(stats)[:300]}")


# ---------------------------------------------------------------- phase: sft
def sft_dir(work: Path, method: str) -> Path:
    return work / "sft" / method


def sft_finished(work: Path, method: str) -> bool:
    from toolrl_lib.train.sft import read_sft_info

    info = read_sft_info(sft_dir(work, method))
    return bool(info and info.get("finished"))


def run_sft(args: argparse.Namespace, work: Path, deadline: float) -> None:
    """Every unfinished SFT method side by side; each stops itself (its time budget) before the
    deadline with a checkpoint, and the next call resumes it. The base model's evaluation needs
    nothing trained, so it runs beside them (started ``stagger_s`` later)."""
    from toolrl_lib.run_dir import latest_checkpoint

    jobs = []
    budget = max(60, int(deadline - time.time() - 90))  # loading before, evaluation and saving after
    for method in args.sft_methods:
        if sft_finished(work, method):
            continue
        out = sft_dir(work, method)
        sets = [*data_overrides(args), *(TINY_SFT if args.tiny else []), *SFT_METHODS[method], *args.sft_set,
                f"device={args.device}", f"sft.time_budget_s={budget}"]
        if args.tiny:
            sets.append(f"model.name={args.tiny}")
        command = python_module("toolrl_lib.cli", "sft", "--config", str(ROOT / SFT_CONFIG), "--out", str(out),
                                *[f"--set={item}" for item in sets],
                                *(["--resume"] if latest_checkpoint(out / "checkpoints") else []))
        jobs.append(Job(f"sft-{method}", command, log=work / "keep" / f"sft-{method}.log", append_log=True,
                        env={"PYTHONUNBUFFERED": "1"}))
    if jobs and not eval_done(work, "base"):
        jobs.append(eval_job(args, work, "base", args.tiny or "embedded", delay=args.stagger_s))
    if jobs:
        run_lanes(jobs, [args.lane] * len(jobs), deadline, say=log)


# ---------------------------------------------------------------- phase: select the SFT start
def validate_model(args: argparse.Namespace, path: str, out: Path) -> None:
    """Worker: validation mean@k of the full model folder ``path`` on the GRPO config's set."""
    from toolrl_lib.models import resolve_model
    from toolrl_lib.train.mix import validation_set
    from toolrl_lib.train.validation import evaluate_saved

    path = str(resolve_model(path))
    config = grpo_config(args, next(iter(VARIANTS)), path)
    family = config.model.family or "hermes"
    t0 = time.time()
    scores = evaluate_saved(config, path, None, validation_set(config), family, config.device)
    scores["seconds"] = round(time.time() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(scores, indent=2, default=float))


def selection_key(args: argparse.Namespace) -> str:
    from toolrl_lib.train.config import best_validation_key

    return best_validation_key(grpo_config(args, next(iter(VARIANTS)), "embedded").validation)


def select_sft(args: argparse.Namespace, work: Path, deadline: float) -> dict[str, Any] | None:
    """Validate base and every finished SFT model (side by side), keep the best SFT model. With
    one SFT method there is nothing to choose: it is the start, unvalidated here (its pass@k on
    validation comes with its evaluation), and GRPO starts ~90 s sooner."""
    keep = work / "keep"
    path = keep / "sft_selection.json"
    if path.is_file():
        return json.loads(path.read_text())
    if len(args.sft_methods) == 1:
        method = args.sft_methods[0]
        selection = {"key": selection_key(args), "scores": {}, "chosen": method,
                     "model": str((sft_dir(work, method) / "model").relative_to(work)), "validation": {},
                     "selected_on": "validation", "note": "the only SFT method of this run: nothing to select"}
        path.write_text(json.dumps(selection, indent=2))
        log(f"SFT start: {method}, the only method of this run")
        return selection
    base = args.tiny or "embedded"
    candidates = {"base": base, **{m: str(sft_dir(work, m) / "model") for m in args.sft_methods}}
    relative = {m: str((sft_dir(work, m) / "model").relative_to(work)) for m in args.sft_methods}
    jobs = [Job(f"validate-{label}", python_module("benchmarks.gpu.rl_at_scale", "validate", *common_argv(args),
                                                   "--model", model, "--to", str(keep / "validation" / f"{label}.json")),
                log=keep / f"validate-{label}.log", env={"PYTHONUNBUFFERED": "1"})
            for label, model in candidates.items() if not (keep / "validation" / f"{label}.json").is_file()]
    run_lanes(jobs, [args.lane] * max(1, len(jobs)), deadline, say=log)
    key = selection_key(args)
    scores = {}
    for label in candidates:
        file = keep / "validation" / f"{label}.json"
        if not file.is_file():
            log(f"validation of {label} did not finish; selection waits for the next call")
            return None
        scores[label] = json.loads(file.read_text())
    methods = [m for m in args.sft_methods if m in scores]
    chosen = max(methods, key=lambda m: scores[m][key])
    selection = {"key": key, "scores": {m: scores[m][key] for m in candidates}, "chosen": chosen,
                 "model": relative[chosen], "validation": scores, "selected_on": "validation"}
    path.write_text(json.dumps(selection, indent=2, default=float))
    log(f"SFT selected on validation {key}: {chosen} ({json.dumps(selection['scores'])})")
    return selection


# ---------------------------------------------------------------- phase: grpo (+ evaluations beside it)
def run_dir(work: Path, variant: str) -> Path:
    return work / "runs" / variant


def worker_state(work: Path, variant: str) -> dict[str, Any]:
    return time_limit.worker_state(run_dir(work, variant))


def grpo_worker(args: argparse.Namespace) -> None:
    """One variant until its max_steps or ``--train-seconds``; then a checkpoint (resumed by the
    next call) and ``worker.json`` saying how far it got."""
    from toolrl_lib.run_dir import latest_checkpoint
    from toolrl_lib.train.run import train

    time.sleep(args.start_delay_s)
    work = Path(args.work)
    selection = json.loads((work / "keep" / "sft_selection.json").read_text())
    folder = run_dir(work, args.variant)
    seen: dict[str, int] = {}
    config = grpo_config(args, args.variant, str(work / selection["model"]))
    resume = latest_checkpoint(folder / "checkpoints") is not None
    t0 = time.time()
    # tiny: a random model earns a flat reward and would learn nothing (nothing to merge after)
    rewards = [tiny_length_reward] if args.tiny else None
    train(config, folder, resume=resume, callbacks=[time_limit.time_limit(args.train_seconds, seen)],
          reward_funcs=rewards)
    time_limit.record_call(folder, seen, time.time() - t0)


def tiny_length_reward(prompts=None, completions=None, **kwargs) -> list[float]:
    """The tiny chain's reward: varies with the completion's length, so groups carry an advantage."""
    return [float(len(str(c)) % 5) for c in completions or []]


def eval_job(args: argparse.Namespace, work: Path, label: str, model: str, delay: float = 0) -> Job:
    return Job(f"eval-{label}", python_module("benchmarks.gpu.rl_at_scale", "evaluate", *common_argv(args),
                                              "--label", label, "--model", model, "--start-delay-s", str(delay)),
               log=work / "keep" / f"eval-{label}.log", append_log=True,
               env={"PYTHONUNBUFFERED": "1", "TOOLRL_VLLM_GPU_MEMORY_UTILIZATION": str(args.eval_memory),
                    **({"TOOLRL_VLLM_KV_CACHE_GIB": str(args.eval_kv_gib)} if args.eval_kv_gib else {})})


def eval_done(work: Path, label: str) -> bool:
    return (work / "keep" / "eval" / f"{label}.done").is_file()


# what one model's evaluation leaves under keep/ (and in the archive that comes back)
def evaluation_members(label: str) -> tuple[str, ...]:
    return (f"bfcl/{label}/", f"bfcl_pass_at_k/{label}/", f"pass_at_k/{label}-validation.json", f"eval-{label}.log")


def reuse_base_evaluation(archive: Path, keep: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The base model's evaluation from an earlier run's archive instead of a second one: the
    base is the embedded model itself, the same weights in every run, so only the evaluation
    settings must match (the archive's state.json ``eval``; a mismatch stops the run here, before
    anything loads). Its files go where ``evaluate`` would write them, and ``eval/base.done``
    says where they came from."""
    import tarfile

    with tarfile.open(archive) as tar:
        try:
            earlier = json.load(tar.extractfile("state.json"))
        except KeyError:
            raise SystemExit(f"--reuse-base {archive}: no state.json in it (expected an rl_at_scale.tar.gz)") from None
        if earlier.get("eval") != settings:
            raise SystemExit(f"--reuse-base {archive}: its evaluation settings {json.dumps(earlier.get('eval'))} "
                             f"differ from this run's {json.dumps(settings)}; evaluate the base again instead")
        prefixes = evaluation_members("base")
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefixes)]
        if not any(m.name == "bfcl/base/run.json" for m in members):
            raise SystemExit(f"--reuse-base {archive}: the base model's BFCL run (bfcl/base/run.json) is not in it")
        tar.extractall(keep, members=members, filter="data")
    record = {"model": "embedded", "reused_from": archive.name, "files": len(members), "timings": {}}
    done = keep / "eval" / "base.done"
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(record, indent=2))
    log(f"base evaluation reused from {archive.name} ({len(members)} files)")
    return record


def evaluate_worker(args: argparse.Namespace) -> None:
    """BFCL single-turn (greedy), pass@k on validation and on BFCL non-live AST of one model, in
    one process (one vLLM engine); each part resumable or skipped when done."""
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.evaluate.backends import load_sampler
    from toolrl_lib.evaluate.bfcl_pass_at_k import bfcl_pass_at_k
    from toolrl_lib.evaluate.mean_at_k import mean_at_k
    from toolrl_lib.evaluate.pass_at_k import pass_at_k_curves
    from toolrl_lib.evaluate.runner import evaluate_bfcl

    time.sleep(args.start_delay_s)
    work, label, model = Path(args.work), args.label, args.model
    keep, s = work / "keep", eval_settings(args)
    family = "hermes"
    t0 = time.time()
    timings: dict[str, float] = {}
    if not (keep / "bfcl" / label / "run.json").is_file():
        evaluate_bfcl(model, keep / "bfcl" / label, family=family, label=f"ras{label}", backend=s["backend"],
                      dtype=s["dtype"], run_scorer=False, batch_size=s["batch_size"],
                      max_batch_tokens=2**20, max_new_tokens=s["max_new_tokens"],
                      limit=s["bfcl_limit"] if args.tiny else None)
        timings["bfcl_greedy_s"] = round(time.time() - t0, 1)
    val_file = keep / "pass_at_k" / f"{label}-validation.json"
    if not val_file.is_file():
        t1 = time.time()
        loaded = load_sampler(model, backend=s["backend"], dtype=s["dtype"],
                              batch_size=s["batch_size"])
        examples = list(read_jsonl(data_dir(args) / "val.jsonl"))[: s["val_limit"]]
        result = mean_at_k(None, loaded.tokenizer, examples, family, k=s["n"], schemes=("binary",),
                           max_new_tokens=s["max_new_tokens"], temperature=1.0, seed=0, sampler=loaded.sample,
                           count_solved=True)
        val_file.parent.mkdir(parents=True, exist_ok=True)
        val_file.write_text(json.dumps({"model": model, "split": "validation", "backend": loaded.backend,
                                        **pass_at_k_curves(result.per_example)}, indent=2))
        timings["pass_at_k_validation_s"] = round(time.time() - t1, 1)
    t2 = time.time()
    bfcl_pass_at_k(model, keep / "bfcl_pass_at_k" / label, n=s["n"], family=family, limit=s["bfcl_limit"],
                   max_new_tokens=s["max_new_tokens"], backend=s["backend"], dtype=s["dtype"],
                   batch_size=s["batch_size"], score=False)
    timings["bfcl_pass_at_k_s"] = round(time.time() - t2, 1)
    done = keep / "eval" / f"{label}.done"
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps({"model": model, "timings": timings}, indent=2))


def run_grpo(args: argparse.Namespace, work: Path, selection: dict[str, Any], deadline: float) -> None:
    """The unfinished variants side by side, and the start models' evaluations beside them."""
    train_seconds = max(30, int(deadline - time.time() - args.stop_margin_s))
    # Engines that start together on one GPU profile its free memory at the same moment: each
    # process waits its turn (``stagger_s`` apart) before loading anything.
    todo = [v for v in args.variants if not worker_state(work, v).get("finished")]
    jobs = [Job(f"grpo-{v}", python_module("benchmarks.gpu.rl_at_scale", "worker", *common_argv(args),
                                           "--variant", v, "--train-seconds", str(train_seconds - i * args.stagger_s),
                                           "--start-delay-s", str(i * args.stagger_s)),
                log=work / "keep" / f"grpo-{v}.log", append_log=True,
                env={"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "4"})
            for i, v in enumerate(todo)]
    starts = {"base": args.tiny or "embedded", "sft": str(work / selection["model"])}
    jobs += [eval_job(args, work, label, model, delay=len(todo) * args.stagger_s if i == 0 else 0)
             for i, (label, model) in enumerate((label, model) for label, model in starts.items()
                                                if not eval_done(work, label))]
    if jobs:
        lanes = [args.lane] * (len([j for j in jobs if j.name.startswith("grpo-")]) + 1)
        for outcome in run_lanes(jobs, lanes, deadline, say=log, min_start_s=60):
            tail = outcome.job.log.read_text(errors="replace").splitlines()[-2:] if outcome.job.log.is_file() else []
            log(f"{outcome.job.name}: {outcome.describe()} | " + " | ".join(tail))


# ---------------------------------------------------------------- phase: final (select, merge, evaluate)
def select_grpo(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks.gpu.rl_learning_gpu import best_validation

    key = selection_key(args)
    scores = {v: best_validation(run_dir(work, v), key) for v in args.variants}
    chosen = max(scores, key=lambda v: scores[v][0])
    selection = {"key": key, "scores": {v: s for v, (s, _) in scores.items()},
                 "best_steps": {v: step for v, (_, step) in scores.items()}, "chosen": chosen,
                 "selected_on": "validation"}
    (work / "keep" / "grpo_selection.json").write_text(json.dumps(selection, indent=2))
    log(f"GRPO variant selected on validation {key}: {chosen} ({json.dumps(selection['scores'])})")
    return selection


def run_final(args: argparse.Namespace, work: Path, deadline: float) -> None:
    keep = work / "keep"
    if eval_done(work, "grpo"):
        return
    path = keep / "grpo_selection.json"
    selection = json.loads(path.read_text()) if path.is_file() else select_grpo(args, work)
    from toolrl_lib.train.backend import is_full_model

    merged = work / "grpo_model"
    best = run_dir(work, selection["chosen"]) / "best"
    if is_full_model(best):  # a full fine-tuning variant: its best/ is the model folder already
        merged = best
    if not (merged / "config.json").is_file():
        t0 = time.time()
        command = python_module("toolrl_lib.cli", "merge", "--run", str(run_dir(work, selection["chosen"])),
                                "--checkpoint", "best", "--out", str(merged))
        outcome = run_lanes([Job("merge", command, log=keep / "merge.log", env={"PYTHONUNBUFFERED": "1"})],
                            [args.lane], deadline, say=log)[0]
        if not outcome.ok:
            log(f"merge failed ({outcome.describe()}): see merge.log")
            return
        log(f"merged {selection['chosen']} in {time.time() - t0:.0f} s")
    # the start models' evaluations that GRPO's phase left unfinished run beside the GRPO model's
    starts = {"base": args.tiny or "embedded", "sft": str(work / json.loads(
        (keep / "sft_selection.json").read_text())["model"])}
    jobs = [eval_job(args, work, "grpo", str(merged))]
    jobs += [eval_job(args, work, label, model, delay=args.stagger_s * (i + 1))
             for i, (label, model) in enumerate((label, model) for label, model in starts.items()
                                                if not eval_done(work, label))]
    run_lanes(jobs, [args.lane] * len(jobs), deadline, say=log)


# ---------------------------------------------------------------- the call
def common_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--work", str(args.work), "--device", args.device, "--lane", args.lane or "",
            "--variants", ",".join(args.variants), "--sft-methods", ",".join(args.sft_methods),
            "--n", str(args.n), "--val-limit", str(args.val_limit), "--eval-backend", args.eval_backend,
            "--eval-memory", str(args.eval_memory), "--eval-kv-gib", str(args.eval_kv_gib),
            "--stagger-s", str(args.stagger_s)]
    argv += ["--bfcl-limit", str(args.bfcl_limit)] if args.bfcl_limit else []
    argv += ["--tiny", args.tiny] if args.tiny else []
    argv += [f"--set={item}" for item in args.set] + [f"--sft-set={item}" for item in args.sft_set]
    return argv


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    deadline = t0 + args.budget_s - args.pack_margin_s
    work = Path(args.work)
    keep = work / "keep"
    keep.mkdir(parents=True, exist_ok=True)
    state_file = keep / "state.json"
    state = json.loads(state_file.read_text()) if state_file.is_file() else {"calls": []}
    if args.reuse_base and not eval_done(work, "base"):
        state["base_reused_from"] = reuse_base_evaluation(Path(args.reuse_base), keep, eval_settings(args))["reused_from"]
    ensure_data(args)
    selection = None
    if not all(sft_finished(work, m) for m in args.sft_methods):
        run_sft(args, work, deadline)
    if all(sft_finished(work, m) for m in args.sft_methods):
        selection = select_sft(args, work, deadline)
    if selection is not None:
        def grpo_done() -> bool:
            return (all(worker_state(work, v).get("finished") for v in args.variants)
                    or (keep / "grpo_selection.json").is_file())

        if not grpo_done() or not all(eval_done(work, label) for label in ("base", "sft")):
            grpo_deadline = deadline
            if args.final_reserve_s:  # the final phase's share of this call: GRPO ends before it
                grpo_deadline = deadline - args.final_reserve_s
            run_grpo(args, work, selection, grpo_deadline)
            if args.final_reserve_s and not grpo_done():
                state["grpo_stopped_by_time"] = {v: worker_state(work, v).get("step") for v in args.variants}
                log(f"GRPO stopped by --final-reserve-s at steps {json.dumps(state['grpo_stopped_by_time'])}")
                select_grpo(args, work)
        if grpo_done():
            run_final(args, work, deadline)
    done = all(eval_done(work, label) for label in LABELS)
    progress = {v: worker_state(work, v).get("step") for v in args.variants}
    state["calls"].append({"command": module_command(sys.argv), "seconds": round(time.time() - t0, 1), "done": done,
                           "grpo_steps": progress})
    state.update(variants=args.variants, sft_methods=args.sft_methods, overrides=args.set, sft_overrides=args.sft_set,
                 eval=eval_settings(args), tiny=bool(args.tiny))
    state_file.write_text(json.dumps(state, indent=2))
    copy_logs(work)
    bmt.pack(keep, Path(args.out) / "rl_at_scale.tar.gz", (".json", ".jsonl", ".log", ".csv", ".yaml"))
    log(("done: every model trained and evaluated" if done else "not done: run the same command again (it resumes)")
        + f"; GRPO steps {json.dumps(progress)}")
    return 0


def copy_logs(work: Path) -> None:
    """Each run's small files and each SFT record into keep/ (what comes back)."""
    keep = work / "keep"
    for variant_dir in sorted((work / "runs").glob("*")):
        for name in RUN_LOGS:
            if (variant_dir / name).is_file():
                (keep / "runs" / variant_dir.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(variant_dir / name, keep / "runs" / variant_dir.name / name)
    for sft in sorted((work / "sft").glob("*")):
        if (sft / "sft.json").is_file():
            (keep / "sft" / sft.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(sft / "sft.json", keep / "sft" / sft.name / "sft.json")


def sft_carry_name(method: str) -> str:
    """The name an SFT run travels under between sessions (``carry.py`` parts ``sft<method>.*``)."""
    return f"sft{method}"


def carry_out(args: argparse.Namespace) -> int:
    """Everything a later session resumes from, packed by ``carry.py`` and spread over folders
    ``--to``/stage1, stage2, ...: one device call brings one back (at most 8 files, under 64 MiB).
    Before the SFT selection: each finished SFT model (bf16 folder) and each unfinished SFT run's
    checkpoint, with its ``sft.json``; after it: the start model. Then each variant's checkpoint
    (with ``best/``). The archive itself comes back with every ``run`` call."""
    from benchmarks.gpu import carry
    from toolrl_lib.run_dir import latest_checkpoint

    work, to = Path(args.work), Path(args.to)
    packed = to / "packed"
    whole = {"max_parts": 10**6, "part_mib": carry.PART_MIB}  # every part now; ``stage`` spreads them over calls
    selection_file = work / "keep" / "sft_selection.json"
    if selection_file.is_file() and not args.runs_only:
        start = work / json.loads(selection_file.read_text())["model"]
        carry.pack(start, packed, "start", folder=True, bf16=True, **whole)
    for method in [] if args.runs_only or selection_file.is_file() else args.sft_methods:
        folder, name = sft_dir(work, method), sft_carry_name(method)
        if sft_finished(work, method):
            carry.pack(folder / "model", packed, name, folder=True, bf16=True, **whole)
        elif latest_checkpoint(folder / "checkpoints"):
            carry.pack(folder, packed, name, **whole)
        else:
            continue
        shutil.copy2(folder / "sft.json", packed / f"{name}.sft.json")
    for variant in args.variants:
        if latest_checkpoint(run_dir(work, variant) / "checkpoints"):
            carry.pack(run_dir(work, variant), packed, variant, **whole)
    folders = carry.stage(sorted(packed.glob("*")), to, mib=carry.CALL_MIB, max_files=carry.CALL_FILES)
    log(f"{len(folders)} calls bring it back: " + ", ".join(f"{f.name} ({len(list(f.iterdir()))} files)"
                                                          for f in folders))
    return 0


def restore(args: argparse.Namespace) -> int:
    """A new session's host from what an earlier session brought back (``--parts``: the
    rl_at_scale.tar.gz or its parts, ``start.*`` the SFT start model, ``sft<method>.*`` an SFT
    run's model or checkpoint (before the selection), ``<variant>.*`` each variant's checkpoint,
    all packed by ``carry.py``): the next ``run`` then resumes where that session stopped."""
    from benchmarks.gpu import carry

    work, parts = Path(args.work), Path(args.parts)
    keep = work / "keep"
    if any(parts.glob("rl_at_scale.tar.gz*")):
        bmt.unpack(parts / "rl_at_scale.tar.gz", keep)
    for method in args.sft_methods:
        name, folder = sft_carry_name(method), sft_dir(work, method)
        record = parts / f"{name}.sft.json"
        if not record.is_file():
            record = keep / "sft" / method / "sft.json"
        if (parts / f"{name}.manifest.json").is_file():
            is_model = json.loads((parts / f"{name}.manifest.json").read_text())["folder"]
            log(f"SFT {method}: {carry.unpack(parts, name, folder / 'model' if is_model else folder)}")
        if record.is_file():  # finished: nothing left to run; unfinished: --resume goes on from its checkpoint
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(record, folder / "sft.json")
    if (keep / "sft_selection.json").is_file():
        selection = json.loads((keep / "sft_selection.json").read_text())
        log(f"start model: {carry.unpack(parts, 'start', work / selection['model'])}")
    for variant in args.variants:
        if (parts / f"{variant}.manifest.json").is_file():
            log(f"{variant}: {carry.unpack(parts, variant, run_dir(work, variant))}")
        if (keep / "runs" / variant / "worker.json").is_file():
            run_dir(work, variant).mkdir(parents=True, exist_ok=True)
            shutil.copy2(keep / "runs" / variant / "worker.json", run_dir(work, variant) / "worker.json")
    return 0


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lane", default="0", help="the GPU every job runs on (CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--variants", default="g16-weighted,g16-binary",
                        type=lambda text: [v for v in text.split(",") if v])
    parser.add_argument("--sft-methods", default="lora,full", type=lambda text: [m for m in text.split(",") if m])
    parser.add_argument("--n", type=int, default=64, help="pass@k samples per example/entry (the largest k)")
    parser.add_argument("--val-limit", type=int, default=512, help="validation examples for pass@k")
    parser.add_argument("--bfcl-limit", type=int, default=None, help="BFCL pass@k: first N entries per category")
    parser.add_argument("--eval-backend", default="auto", choices=("auto", "hf", "vllm"))
    parser.add_argument("--eval-memory", type=float, default=0.15,
                        help="share of GPU memory an evaluation engine takes (training runs beside it)")
    parser.add_argument("--eval-kv-gib", type=float, default=10,
                        help="an evaluation engine's fixed KV cache (GiB; 0 = vLLM profiles it, which fails "
                             "when trainers beside it grow during the profiling)")
    parser.add_argument("--tiny", default=None, help="a tiny model folder: CPU test of the chain")
    parser.add_argument("--stagger-s", type=float, default=45,
                        help="GPU processes of one call start this far apart (vLLM profiles free memory at start)")
    parser.add_argument("--start-delay-s", type=float, default=0, help="(internal) wait before loading")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="GRPO config overrides")
    parser.add_argument("--sft-set", action="append", default=[], metavar="KEY=VALUE", help="SFT config overrides")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="phase", required=True)
    r = sub.add_parser("run", help="one device call: what is left, until --budget-s")
    add_common(r)
    r.add_argument("--out", required=True)
    r.add_argument("--budget-s", type=float, default=570)
    r.add_argument("--pack-margin-s", type=float, default=25, help="kept for packing at the end")
    r.add_argument("--final-reserve-s", type=float, default=None,
                   help="end GRPO this many seconds before the call's deadline (checkpoints kept) and go on "
                        "to the selection and the final evaluation in the same call, whatever max_steps says")
    r.add_argument("--reuse-base", default=None, metavar="ARCHIVE",
                   help="an earlier run's rl_at_scale.tar.gz: the base model's evaluation from it (same settings "
                        "required) instead of evaluating the unchanged base model again beside SFT")
    r.add_argument("--stop-margin-s", type=float, default=100,
                   help="GRPO workers stop this long before the deadline (checkpoint, final validation)")
    w = sub.add_parser("worker", help="(internal) one GRPO variant")
    add_common(w)
    w.add_argument("--variant", required=True)
    w.add_argument("--train-seconds", type=float, required=True)
    e = sub.add_parser("evaluate", help="(internal) BFCL greedy + pass@k of one model")
    add_common(e)
    e.add_argument("--label", required=True, choices=LABELS)
    e.add_argument("--model", required=True)
    v = sub.add_parser("validate", help="(internal) validation mean@k of one model folder")
    add_common(v)
    v.add_argument("--model", required=True)
    v.add_argument("--to", required=True)
    b = sub.add_parser("restore", help="a new session: unpack what an earlier one carried back, then `run`")
    add_common(b)
    b.add_argument("--parts", required=True,
                   help="folder with rl_at_scale.tar.gz(.partN), start.* or sft<method>.*, <variant>.*")
    c = sub.add_parser("carry", help="the end of a session: pack what the next one resumes from, a folder per call")
    add_common(c)
    c.add_argument("--to", required=True, help="stage1, stage2, ... here: bring back one per device call")
    c.add_argument("--runs-only", action="store_true",
                   help="only the GRPO variants' checkpoints (an earlier session brought the start back already: "
                        "its parts are the same, a copy of sft<method>.manifest.json named start.manifest.json "
                        "restores it)")
    p = sub.add_parser("report", help="(CPU box) score, compare, write benchmarks/results/rl_at_scale.*")
    p.add_argument("--archive", default=None)
    p.add_argument("--work", required=True)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--figures", default=str(ROOT / "figures"))
    p.add_argument("--command", action="append", default=[], help="a GPU command that produced the archive")
    p.add_argument("--n-boot", type=int, default=10_000)
    p.add_argument("--note", default=None, help="a file whose text (the reading of the result) goes into both files")
    args = parser.parse_args(argv)
    if getattr(args, "lane", None) == "":
        args.lane = None
    unknown = [v for v in getattr(args, "variants", []) if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants {unknown}: expected among {list(VARIANTS)}")
    unknown = [m for m in getattr(args, "sft_methods", []) if m not in SFT_METHODS]
    if unknown:
        parser.error(f"--sft-methods {unknown}: expected among {list(SFT_METHODS)}")
    if args.phase == "run":
        return run(args)
    if args.phase == "restore":
        return restore(args)
    if args.phase == "carry":
        return carry_out(args)
    if args.phase == "worker":
        grpo_worker(args)
    elif args.phase == "evaluate":
        evaluate_worker(args)
    elif args.phase == "validate":
        validate_model(args, args.model, Path(args.to))
    else:
        from benchmarks.rl_at_scale_report import report

        report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
