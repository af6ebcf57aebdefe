"""The smoke GRPO steps' peak RSS and time at several ``fast.loss_mmap_threshold`` settings.

Each variant is ``toolrl train --config configs/smoke.yaml`` from the same primed model (priming
and validation off, so only the policy load and the GRPO steps run) in its own process, sampled
for RSS (``workbook_profile.RssSampler``); the variants alternate within each round, so a box
that changes speed during the run touches them all. Records the process's peak RSS, wall
seconds, the steps' seconds (``metrics.csv``) and their losses (the setting must not change them).

    python -m benchmarks.history.grpo_memory --model runs/<workbook>/grpo/primed_model   # ~8 min on 2 cores

Writes benchmarks/results/grpo_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.workbook_profile import GIB, RssSampler, machine

ROOT = Path(__file__).resolve().parents[2]

THRESHOLDS = {"default": 0, "1 MiB": 2**20, "256 KiB": 2**18}


def run_variant(model: str, threshold: int, steps: int, out: Path) -> dict:
    command = [sys.executable, "-m", "toolrl_lib.cli", "train", "--config", str(ROOT / "configs" / "smoke.yaml"),
               "--out", str(out), "--set", f"model.name={model}", "--set", "priming.enabled=false",
               "--set", "validation.enabled=false", "--set", "logging.tensorboard=false",
               "--set", f"grpo.max_steps={steps}", "--set", f"fast.loss_mmap_threshold={threshold}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.time()
    with open(out.with_suffix(".log"), "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        sampler = RssSampler(proc.pid, 0.2)
        sampler.start()
        code = proc.wait()
        sampler.done.set()
        sampler.join()
    metrics_file = out / "metrics.csv"
    metrics = list(csv.DictReader(metrics_file.read_text(encoding="utf-8").splitlines())) if metrics_file.is_file() else []
    return {"returncode": code, "wall_s": round(time.time() - start, 1),
            "peak_rss_gib": round(max((s[1] for s in sampler.samples), default=0) / GIB, 3),
            "step_s": [round(float(r["step_time"]), 1) for r in metrics],
            "loss": [float(r["loss"]) for r in metrics]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a primed model folder (notebook 03's <run>/primed_model)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default=",".join(THRESHOLDS), help=f"of {list(THRESHOLDS)}")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_memory"))
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in names:
                out = Path(tmp) / f"{name.replace(' ', '')}-{round_}"
                runs[name].append(run_variant(args.model, THRESHOLDS[name], args.steps, out))
                print(name, runs[name][-1], flush=True)
                shutil.rmtree(out, ignore_errors=True)
    result = {"model": args.model, "steps": args.steps, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
              "command": "python -m benchmarks.history.grpo_memory " + " ".join(sys.argv[1:] if argv is None else argv),
              "variants": {name: {"threshold_bytes": THRESHOLDS[name], "runs": r} for name, r in runs.items()}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = ["# GRPO steps: peak RSS against the loss's mmap threshold", "",
             f"`{result['command']}` — {args.steps} smoke GRPO steps from a primed model, each variant its own "
             f"process, {args.rounds} round(s) alternating; {result['machine']['cpus']} CPUs, {result['date']}.", "",
             "| loss_mmap_threshold | peak RSS GiB | wall s | steps s (sum) | losses identical to default |",
             "| --- | --- | --- | --- | --- |"]
    reference = runs[names[0]][0]["loss"]
    for name, r in runs.items():
        peaks = ", ".join(f"{x['peak_rss_gib']:.2f}" for x in r)
        walls = ", ".join(f"{x['wall_s']:.0f}" for x in r)
        steps = ", ".join(f"{sum(x['step_s']):.0f}" for x in r)
        same = all(x["loss"] == reference for x in r)
        lines.append(f"| {name} | {peaks} | {walls} | {steps} | {'yes' if same else 'no'} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if all(x["returncode"] == 0 for r in runs.values() for x in r) else 1


if __name__ == "__main__":
    raise SystemExit(main())
