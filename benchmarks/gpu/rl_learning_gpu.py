"""Does GRPO teach the embedded model tool calling beyond format priming? (issues 7 and 8)

One experiment, in phases that each fit a 10-minute GPU command (files under ``--work``
survive between commands while the GPU host stays warm):

    prime   format-prime the embedded model once (LoRA SFT, merged) and score base and
            primed with validation mean@16 on our own validation split
    train   GRPO variants from that one primed model, spread over the GPUs (CUDA time-slices
            processes: five on one H200 made each rollout ~3x slower), same seed and data
            order: two reward schemes, two loss types (grpo, dapo), two learning rates, and
            RLSD-TR. Each call stops at --train-seconds with a checkpoint; calling `train`
            again resumes every variant from it (hundreds of steps need several calls)
    bfcl    pick the GRPO variant with the best validation mean@16 (never BFCL), then
            generate BFCL v4 single-turn answers for base, primed, that variant, RLSD-TR and
            any ``--also`` variants, one model per GPU at a time (resumable: call again to
            finish; models already generated are skipped; ``--only base,primed`` runs while
            the variants still train); pack run logs + generations into ``--out``/rl_learning.tar.gz
    report  (on the CPU box) score the generations with BFCL's own scorer, paired bootstrap
            CIs, tables in benchmarks/results/rl_learning_gpu.{md,json,csv} and figures

    python -m benchmarks.gpu.rl_learning_gpu prime  --work /tmp/rl
    python -m benchmarks.gpu.rl_learning_gpu train  --work /tmp/rl --gpus 0,1 --train-seconds 380
    python -m benchmarks.gpu.rl_learning_gpu bfcl   --work /tmp/rl --gpus 0,1 --out $OUT
    python -m benchmarks.gpu.rl_learning_gpu report --archive rl_learning.tar.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path

from benchmarks.gpu.lanes import Job, Outcome, run_lanes

CONFIG = "configs/embedded_gpu.yaml"
FAMILY = "hermes"

I18 = ["grpo.loss_type=dapo", "data.oversample_kinds.irrelevance=3", "validation.best_metric=summary",
       "validation.every_steps=25"]
I18_LORA = ["fast.merged_generation=true", "grpo.generation_batch_size=512"]
I18_HARD = ["data.oversample_kinds.irrelevance=1", "data.hard_negatives=276"]  # 138 easy + 276 hard = 3 x 138
# name -> overrides of configs/embedded_gpu.yaml (all start from the same primed model)
VARIANTS: dict[str, list[str]] = {
    "grpo-weighted": [],
    "grpo-weighted-lr5e-5": ["grpo.learning_rate=5e-5"],
    "grpo-binary": ["reward.scheme=binary"],
    "dapo-weighted": ["grpo.loss_type=dapo"],
    # no-call prompts 12% -> ~29% of the GRPO mix (the irrelevance regression's suspected cause)
    "dapo-weighted-nocall3": ["grpo.loss_type=dapo", "data.oversample_kinds.irrelevance=3"],
    # issue 18: abstention-aware levers, all from the nocall3 mix (the previous winner), DAPO, and
    # merged rollouts in rounds of 512 (the long run's layout); the full-FT twin rolls out unmerged
    "i18-weighted": [*I18, *I18_LORA],
    "i18-binary": [*I18, *I18_LORA, "reward.scheme=binary"],
    "i18-spurious": [*I18, *I18_LORA, "reward.spurious_call=-1.0"],
    "i18-sharp": [*I18, *I18_LORA, "reward.spurious_call=-1.0", "reward.args_sharp=true"],
    "i18-fine": [*I18, *I18_LORA, "reward.scheme=fine_grained"],
    "i18-sharp-fullft": [*I18, "reward.spurious_call=-1.0", "reward.args_sharp=true", "lora.enabled=false",
                         "grpo.learning_rate=5e-6"],
    # issue 18, second session: the selected lever (binary) under the reward fixed to judge as BFCL
    # does, its longer run, and the data levers side by side (same no-call share: hard negatives
    # replace two of the three copies of each easy no-call prompt). Validate all of them on the
    # same set with hard negatives: --set=validation.hard_negatives=12 for every phase (I18_SET).
    "i18f-binary": [*I18, *I18_LORA, "reward.scheme=binary"],
    "i18f-hardneg": [*I18, *I18_LORA, "reward.scheme=binary", *I18_HARD],
    "i18f-hardneg-bal": [*I18, *I18_LORA, "reward.scheme=binary", *I18_HARD, "data.balance_kinds=true"],
    # optional fourth: the deliberate deviation (a broken format earns 0, also on no-call prompts)
    "i18f-strict": [*I18, *I18_LORA, "reward.scheme=binary", "reward.strict_format=true"],
    "rlsd-weighted": ["grpo.loss_type=rlsd", "rlsd.base_loss_type=grpo"],
    "rlsd-dapo-weighted": ["grpo.loss_type=rlsd", "rlsd.base_loss_type=dapo"],
}
# RLSD-TR variant -> its GRPO twin (same everything but the token weights): the issue-8 pair
RLSD_TWINS = {"rlsd-weighted": "grpo-weighted", "rlsd-dapo-weighted": "dapo-weighted"}


EXTRA: list[str] = []  # --set overrides for every phase (e.g. a tiny CPU dry run)
DEVICE = "cuda"


def load_config(overrides: list[str]):
    from toolrl_lib.train.config import load_run_config

    # its committed results (issues 7, 8, 18) were made with TRL's transformers generate, the config's
    # default then; vLLM is the config's default now (issue 37)
    return load_run_config(CONFIG, ["grpo.vllm.mode=off", *overrides, *EXTRA, f"device={DEVICE}"])


def validation_examples(config):
    from toolrl_lib.train.mix import validation_set

    return validation_set(config)  # the one train() validates on (hard negatives included)


# ---------------------------------------------------------------- phase: prime
def phase_prime(work: Path) -> None:
    from toolrl_lib.models import prepare_embedded_model, resolve_model
    from toolrl_lib.train.dataset import load_examples
    from toolrl_lib.train.priming import prime
    from toolrl_lib.train.validation import evaluate_saved

    prepare_embedded_model()
    config = load_config([])
    start = resolve_model("embedded")
    primed = work / "primed_model"
    examples = load_examples(config.data.train_files, config.data.max_train_examples,
                             seed=config.seed, shuffle=True)  # the order train() uses
    t0 = time.perf_counter()
    prime(config, start, examples, FAMILY, primed, DEVICE)
    prime_s = time.perf_counter() - t0
    val = validation_examples(config)
    scores = {}
    for stage, path in (("base", start), ("primed", str(primed))):
        t0 = time.perf_counter()
        scores[stage] = evaluate_saved(config, path, None, val, FAMILY, DEVICE)
        scores[stage]["seconds"] = round(time.perf_counter() - t0, 1)
        print(stage, scores[stage], flush=True)
    out = {"prime_seconds": round(prime_s, 1), "n_val": len(val), "validation": scores}
    (work / "start_validation.json").write_text(json.dumps(out, indent=2))


# ---------------------------------------------------------------- phase: train
def phase_train(work: Path, gpus: list[str], train_seconds: float, variants: list[str],
                deadline_s: float) -> None:
    """Every variant at once, spread round-robin over ``gpus``; killed at ``deadline_s``."""
    jobs = [Job(name, [sys.executable, "-m", "benchmarks.gpu.rl_learning_gpu", "worker", "--work", str(work), "--variant", name,
                       "--train-seconds", str(train_seconds), "--device", DEVICE,
                       *[f"--set={item}" for item in EXTRA]],
                log=work / f"train-{name}.log", append_log=True,  # a resumed call appends
                env={"OMP_NUM_THREADS": "4", "PYTHONUNBUFFERED": "1"}) for name in variants]
    lanes = [gpus[i % len(gpus)] for i in range(len(jobs))]
    for outcome in run_lanes(jobs, lanes, time.time() + deadline_s, say=None):
        tail = outcome.job.log.read_text(errors="replace").splitlines()[-3:]
        print(f"{outcome.job.name}: {outcome.describe()}; " + " | ".join(tail), flush=True)


def worker(work: Path, name: str, train_seconds: float) -> None:
    from benchmarks.gpu.time_limit import time_limit
    from toolrl_lib.run_dir import latest_checkpoint
    from toolrl_lib.train.run import train

    run_dir = work / "runs" / name
    config = load_config(VARIANTS[name] + [
        f"model.name={work / 'primed_model'}", "priming.enabled=false",
        "validation.before_training=false", f"name={name}",
    ])
    # A 10-minute command cannot hold hundreds of steps: the next `train` call continues.
    resume = latest_checkpoint(run_dir / "checkpoints") is not None
    train(config, run_dir, resume=resume, callbacks=[time_limit(train_seconds, {})])


# ---------------------------------------------------------------- phase: bfcl
def best_validation(run_dir: Path, key: str) -> tuple[float, int]:
    """(best score, its step) over a run's periodic and final validation rows."""
    import pandas as pd

    path = run_dir / "validation.csv"
    if not path.is_file():
        return float("-inf"), -1
    rows = pd.read_csv(path)
    rows = rows[rows["stage"].isin(["grpo", "final"])]
    if rows.empty or key not in rows:
        return float("-inf"), -1
    best = rows.loc[rows[key].idxmax()]
    return float(best[key]), int(best["step"])


def select_grpo(work: Path, key: str) -> str:
    """The non-RLSD variant with the highest validation mean@k (the only selection made)."""
    scored = {name: best_validation(work / "runs" / name, key)[0]
              for name in VARIANTS if name not in RLSD_TWINS and (work / "runs" / name).is_dir()}
    if not scored:
        raise SystemExit(f"no GRPO variant has run under {work / 'runs'}: run the train phase first")
    chosen = max(scored, key=scored.get)
    rlsd = pick_rlsd(work, chosen)
    (work / "selection.json").write_text(json.dumps(
        {"key": key, "scores": scored, "chosen": chosen, "rlsd": rlsd,
         "rlsd_twin": RLSD_TWINS.get(rlsd or "")}, indent=2))
    return chosen


def pick_rlsd(work: Path, chosen: str) -> str | None:
    """The RLSD-TR run to evaluate: the twin of the chosen GRPO variant if it ran, else any."""
    ran = [name for name in RLSD_TWINS if (work / "runs" / name).is_dir()]
    twins = [name for name in ran if RLSD_TWINS[name] == chosen]
    return (twins or ran or [None])[0]


def bfcl_models(work: Path, key: str, also: list[str], only: list[str] | None) -> dict[str, str]:
    """BFCL label -> model: base, primed, the variant selected on validation ("grpo"), RLSD-TR,
    and every variant named in ``also`` under its own name. ``only``: just these labels (base
    and primed need no trained variant, so they can run while the variants still train)."""
    models = {"base": "embedded", "primed": str(work / "primed_model")}
    if only is None or set(only) - set(models):
        chosen = select_grpo(work, key)
        print(f"selected on validation {key}: {chosen}", flush=True)
        models["grpo"] = str(work / "runs" / chosen / "best")
        rlsd = pick_rlsd(work, chosen)
        if rlsd:
            models["rlsd"] = str(work / "runs" / rlsd / "best")
            if RLSD_TWINS[rlsd] != chosen:  # RLSD-TR's GRPO twin, so that pair is compared on BFCL too
                models["pair"] = str(work / "runs" / RLSD_TWINS[rlsd] / "best")
        for name in also:
            if name not in VARIANTS:
                raise SystemExit(f"--also {name}: not a variant; expected one of {list(VARIANTS)}")
            if name != chosen:
                models[name] = str(work / "runs" / name / "best")
    if only is not None:
        unknown = set(only) - set(models)
        if unknown:
            raise SystemExit(f"--only {sorted(unknown)}: expected labels among {list(models)}")
        models = {label: model for label, model in models.items() if label in only}
    return models


def phase_bfcl(work: Path, gpus: list[str], out: Path, batch_size: int, deadline_s: float,
               limit: int | None = None, max_new_tokens: int = 256,
               max_batch_tokens: int | None = None, also: list[str] = (),
               only: list[str] | None = None) -> None:
    from toolrl_lib.train.config import best_validation_key

    config = load_config([])
    key = best_validation_key(config.validation)  # e.g. binary_summary@16 with validation.best_metric=summary
    models = bfcl_models(work, key, list(also), only)
    todo = []
    for label, model in models.items():
        if label != "base" and not Path(model).exists():
            print(f"{label}: {model} missing, skipped", flush=True)
            continue
        if (work / "bfcl" / label / "run.json").is_file():  # written when its generation completed
            print(f"{label}: already generated, skipped", flush=True)
            continue
        todo.append((label, [
            sys.executable, "-m", "toolrl_lib.cli", "eval", "bfcl", "--model", model,
            "--format", FAMILY, "--label", f"rl{label}", "--out", str(work / "bfcl" / label),
            "--batch-size", str(batch_size), "--dtype", config.model.dtype, "--no-score",
            "--max-new-tokens", str(max_new_tokens), *(["--limit", str(limit)] if limit else []),
            *(["--max-batch-tokens", str(max_batch_tokens)] if max_batch_tokens else [])]))
    # One model per GPU at a time, and long prompts in smaller batches (max_batch_tokens):
    # three models at batch 512 on one H200 ran out of memory on the long live prompts.
    # Generation is resumable, so a repeated call continues.
    run_queue(todo, gpus, deadline_s, work, "bfcl")
    pack(work, out / "rl_learning.tar.gz")


def run_queue(jobs: list[tuple[str, list[str]]], gpus: list[str], deadline_s: float, work: Path,
              prefix: str) -> list[Outcome]:
    """Run ``jobs`` one per GPU at a time until done or ``deadline_s``; kill what is left
    (generation is resumable: the next call continues)."""
    queue = [Job(f"{prefix} {label}", cmd, log=work / f"{prefix}-{label}.log", append_log=True,
                 env={"PYTHONUNBUFFERED": "1"}) for label, cmd in jobs]
    return run_lanes(queue, gpus, time.time() + deadline_s)


def pack(work: Path, archive: Path) -> None:
    """Logs, CSVs, configs and BFCL generations: everything but weights."""
    keep = {".csv", ".json", ".jsonl", ".yaml", ".log", ".md"}
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            rel = path.relative_to(work)
            if not path.is_file() or path.suffix not in keep:
                continue
            if any(part in {"checkpoints", "primed_model.work"} for part in rel.parts):
                continue
            if path.suffix == ".json" and ("best" in rel.parts or "last" in rel.parts):
                continue  # tokenizer/adapter json: large, not results
            tar.add(path, arcname=str(rel))
    print(f"packed {archive} ({archive.stat().st_size / 1e6:.1f} MB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=("prime", "train", "worker", "bfcl", "report", "single-turn-report"))
    parser.add_argument("--work", default="/tmp/rl")
    parser.add_argument("--command", action="append", default=None,
                        help="single-turn-report: a command that produced the archive (repeat; recorded in the JSON)")
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--variant")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--train-seconds", type=float, default=380)
    parser.add_argument("--deadline-s", type=float, default=540, help="kill workers after this")
    parser.add_argument("--batch-size", type=int, default=512, help="BFCL generation batch")
    parser.add_argument("--max-batch-tokens", type=int, default=2**20,
                        help="BFCL: cap on prompts x (longest prompt + max new tokens) per batch")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--archive", help="report: the tar.gz the bfcl phase packed")
    parser.add_argument("--limit", type=int, help="bfcl: first N entries per category (dry runs)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="bfcl generation limit")
    parser.add_argument("--also", default="", help="bfcl: also evaluate these variants (comma list)")
    parser.add_argument("--only", default=None, help="bfcl: only these labels (e.g. base,primed)")
    parser.add_argument("--tag", default="", help="report: name results rl_learning_<tag>*, figures 07_<tag>_*")
    parser.add_argument("--common-subset", action="store_true",
                        help="report: score only entries generated for every model (interrupted bfcl)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    EXTRA.extend(args.overrides)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    gpus = args.gpus.split(",")
    if args.phase == "prime":
        phase_prime(work)
    elif args.phase == "train":
        phase_train(work, gpus, args.train_seconds, args.variants.split(","), args.deadline_s)
    elif args.phase == "worker":
        worker(work, args.variant, args.train_seconds)
    elif args.phase == "bfcl":
        phase_bfcl(work, gpus, Path(args.out), args.batch_size, args.deadline_s, args.limit,
                   args.max_new_tokens, args.max_batch_tokens,
                   also=[v for v in args.also.split(",") if v],
                   only=args.only.split(",") if args.only else None)
    elif args.phase == "single-turn-report":  # issue 18: rl_single_turn.{md,json}
        from benchmarks.rl_single_turn_report import single_turn_report

        single_turn_report(Path(args.archive), Path(args.out), work, commands=args.command, tag=args.tag)
    else:
        from benchmarks.rl_learning_report import report

        report(Path(args.archive), Path(args.out), work, common_subset=args.common_subset, tag=args.tag)


if __name__ == "__main__":
    main()
