"""Issue 20: multi-turn GRPO in our environments, then primed vs GRPO on held-out tasks and BFCL.

Two phases:

    run     (GPU, one command, sized for <= 8 minutes) prime the embedded model on gold episodes
            and run multi-turn GRPO (configs/multi_turn_embedded_gpu.yaml; the run's validation
            split picks nothing but is logged: there is one variant, so selection is trivially
            on validation); greedy episode success of primed and GRPO on our *test* split; BFCL's
            four multi-turn categories generated for both (no scoring: the scorer's venv lives on
            the CPU box); everything packed into --out/rl_multi_turn.tar.gz
    report  (CPU box) score the BFCL generations with BFCL's checker (``toolrl eval score``),
            paired bootstrap 95% CIs of GRPO - primed per category and on our own tasks ->
            benchmarks/results/rl_multi_turn.{md,json} (the shape of rl_single_turn.json)

    python benchmarks/gpu/rl_multi_turn_gpu.py run --work /tmp/mt --out $OUT
    python benchmarks/gpu/rl_multi_turn_gpu.py report --archive rl_multi_turn.tar.gz --work runs/rl_multi_turn

``--tiny DIR`` (with ``--device cpu``) runs the same chain on a tiny random model at toy sizes:
the CPU test of the plumbing (``tests/test_multi_turn_gpu_script.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "configs/multi_turn_embedded_gpu.yaml"
CATEGORIES = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
PAIR = ("primed", "grpo")
TINY = ["multi_turn.train_tasks=4", "multi_turn.val_tasks=2", "multi_turn.priming_episodes=4",
        "multi_turn.max_new_tokens=6", "multi_turn.max_episode_tokens=1024", "multi_turn.rollout_batch_size=8",
        "priming.max_steps=1", "priming.batch_size=2", "priming.max_length=4096", "grpo.num_generations=2",
        "grpo.per_device_train_batch_size=4", "grpo.gradient_accumulation_steps=1", "grpo.max_steps=1",
        "model.dtype=fp32", "lora.r=4", "lora.alpha=8", "checkpoint.save_steps=1",
        "multi_turn.environments=[bank]"]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(args: argparse.Namespace) -> int:
    from toolrl_lib.envs import make_tasks
    from toolrl_lib.envs.evaluate import write_rows
    from toolrl_lib.envs.train import evaluate_stage
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    work = Path(args.work)
    overrides = [f"device={args.device}", *args.set]
    if args.tiny:
        overrides = [f"model.name={args.tiny}", *TINY, *overrides]
    config = load_run_config(ROOT / CONFIG, overrides)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    run_dir = work / "run"
    if not (run_dir / "last").is_dir():
        train(config, run_dir, resume=(run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir()))
    timings["train_s"] = time.perf_counter() - t0
    log(f"trained in {timings['train_s']:.0f} s")
    tasks = make_tasks("test", args.own_tasks, config.multi_turn.environments, config.multi_turn.kinds)
    family = json.loads((run_dir / "run_info.json").read_text())["family"]
    primed = str(run_dir / "primed_model")
    own: dict[str, Any] = {}
    for label, adapter in (("primed", None), ("grpo", run_dir / "last")):
        t1 = time.perf_counter()
        scores, rows = evaluate_stage(config, primed, adapter, tasks, family, config.device)
        write_rows(work / "own" / f"{label}.jsonl", rows)
        own[label] = scores
        timings[f"own_{label}_s"] = time.perf_counter() - t1
        log(f"own test tasks, {label}: success {scores['success']:.3f} ({len(rows)} tasks)")
    for label, model in (("primed", primed), ("grpo", str(run_dir / "last"))):
        t1 = time.perf_counter()
        cmd = [sys.executable, "-m", "toolrl_lib.cli", "eval", "bfcl", "--model", model, "--label", label,
               "--format", family, "--categories", ",".join(CATEGORIES), "--limit", str(args.bfcl_limit),
               "--out", str(work / "bfcl" / label), "--no-score", "--compact-docs",
               "--multi-turn-max-new-tokens", str(args.bfcl_max_new_tokens),
               "--batch-size", str(args.bfcl_batch_size), "--dtype", config.model.dtype]
        log(" ".join(cmd))
        if subprocess.run(cmd, cwd=ROOT, check=False).returncode != 0:
            raise SystemExit(f"BFCL multi-turn generation for {label} failed (its log is above)")
        timings[f"bfcl_{label}_s"] = time.perf_counter() - t1
    timings["total_s"] = time.perf_counter() - t0
    (work / "gpu_run.json").write_text(json.dumps({"timings": timings, "own": own, "overrides": overrides,
                                                   "bfcl_limit": args.bfcl_limit, "own_tasks": args.own_tasks,
                                                   "command": " ".join(sys.argv)}, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "rl_multi_turn.tar.gz", "w:gz") as tar:
        for name in ("gpu_run.json", "own", "bfcl"):
            tar.add(work / name, arcname=name)
        for name in ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "episodes"):
            if (run_dir / name).exists():
                tar.add(run_dir / name, arcname=f"run/{name}")
    log(f"packed {out / 'rl_multi_turn.tar.gz'}; timings {json.dumps({k: round(v) for k, v in timings.items()})}")
    return 0


def report(args: argparse.Namespace) -> int:
    from toolrl_lib.envs.evaluate import read_rows
    from toolrl_lib.evaluate.analysis import compare_dirs, load_entries
    from toolrl_lib.evaluate.stats import paired_bootstrap

    work = Path(args.work)
    if args.archive:
        work.mkdir(parents=True, exist_ok=True)
        with tarfile.open(args.archive) as tar:
            tar.extractall(work, filter="data")
    for label in PAIR:
        folder = work / "bfcl" / label
        if not (folder / "entries.csv").is_file():
            subprocess.run([sys.executable, "-m", "toolrl_lib.cli", "eval", "score", str(folder)], cwd=ROOT,
                           check=True)
    info = json.loads((work / "gpu_run.json").read_text())
    models: dict[str, dict[str, Any]] = {}
    entries = {label: load_entries(work / "bfcl" / label) for label in PAIR}
    own = {label: {r["task_id"]: r for r in read_rows(work / "own" / f"{label}.jsonl")} for label in PAIR}
    for label in PAIR:
        frame = entries[label]
        models[label] = {f"bfcl_{c}": float(frame[frame["category"] == c]["correct"].mean()) for c in CATEGORIES
                         if (frame["category"] == c).any()}
        models[label]["own_task_success"] = sum(bool(r["success"]) for r in own[label].values()) / len(own[label])
        models[label]["own_tasks"] = len(own[label])
    table = compare_dirs(work / "bfcl" / "primed", work / "bfcl" / "grpo")
    comparisons = []
    for _, row in table[table["category"].isin(CATEGORIES)].iterrows():
        comparisons.append({"a": "primed", "b": "grpo", "metric": f"bfcl_{row['category']}", "n": int(row["n"]),
                            "diff": float(row["diff"]), "ci_low": float(row["ci_low"]),
                            "ci_high": float(row["ci_high"])})
    ids = sorted(set(own["primed"]) & set(own["grpo"]))
    diff = paired_bootstrap([float(own["primed"][i]["success"]) for i in ids],
                            [float(own["grpo"][i]["success"]) for i in ids])
    comparisons.append({"a": "primed", "b": "grpo", "metric": "own_task_success", "n": diff.n, "diff": diff.diff,
                        "ci_low": diff.ci_low, "ci_high": diff.ci_high})
    result = {"selected_on": "validation", "selection": {"note": "one GRPO variant: nothing to select"},
              "models": models, "comparisons": comparisons, "timings": info["timings"],
              "commands": {"gpu": info["command"], "report": " ".join(sys.argv)}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_multi_turn.json").write_text(json.dumps(result, indent=2))
    lines = ["# Multi-turn GRPO (issue 20): GRPO - primed", "",
             f"Embedded SmolLM2-135M, {CONFIG}; BFCL: first {info['bfcl_limit']} entries per multi-turn "
             f"category (compact docs), our test split: {info['own_tasks']} tasks. Paired bootstrap 95% CIs.", "",
             "| metric | n | primed | GRPO | GRPO - primed | 95% CI |", "| --- | --- | --- | --- | --- | --- |"]
    for c in comparisons:
        lines.append(f"| {c['metric']} | {c['n']} | {models['primed'].get(c['metric'], float('nan')):.3f} | "
                     f"{models['grpo'].get(c['metric'], float('nan')):.3f} | {c['diff']:+.3f} | "
                     f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] |")
    lines += ["", f"GPU timings (s): {json.dumps({k: round(v) for k, v in info['timings'].items()})}", "",
              f"Commands: `{info['command']}`; `{' '.join(sys.argv)}`"]
    (out / "rl_multi_turn.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="phase", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--device", default="cuda")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--own-tasks", type=int, default=96)
    r.add_argument("--bfcl-limit", type=int, default=15, help="first N entries of each multi-turn category")
    r.add_argument("--bfcl-max-new-tokens", type=int, default=64)
    r.add_argument("--bfcl-batch-size", type=int, default=128)
    r.add_argument("--tiny", default=None, help="a tiny model folder: CPU test of the chain")
    p = sub.add_parser("report")
    p.add_argument("--archive", default=None)
    p.add_argument("--work", required=True)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    return run(args) if args.phase == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
