"""Benchmark: seconds per smoke GRPO step with TRL's sampler vs the library's (``fast.rollouts``).

Both variants train the smoke profile's GRPO (configs/smoke.yaml: 2 prompts x 4 completions a
step, LoRA, CPU) from the same model, seed and data order, priming and validation off. The
variants alternate (trl, library, trl, library, ...) so that a busy machine slows both alike.
Per run: the step times from its metrics.csv and the mean completion length (the two samplers
draw different tokens, so lengths differ a little; the per-token figure corrects for that).

    python benchmarks/smoke_rollouts.py --model runs/<workdir>/grpo/primed_model --steps 3 --repeats 2
    python benchmarks/smoke_rollouts.py --table        # rewrite the markdown from the JSON

Writes benchmarks/results/smoke_rollouts.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def run_variant(rollouts: str, model: str, steps: int, out: Path) -> dict:
    import pandas as pd

    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config(ROOT / "configs" / "smoke.yaml", [
        f"model.name={model}", f"fast.rollouts={rollouts}", f"grpo.max_steps={steps}",
        "priming.enabled=false", "validation.enabled=false", f"checkpoint.save_steps={steps}",
        "logging.tensorboard=false", "logging.progress_bar=false", "logging.wandb=false"])
    start = time.perf_counter()
    run = train(config, out)
    wall = time.perf_counter() - start
    m = pd.read_csv(run / "metrics.csv")
    lengths = m["completions/mean_length"].tolist()
    times = m["step_time"].tolist()
    return {"rollouts": rollouts, "steps": steps, "wall_s": round(wall, 1),
            "step_time_s": [round(t, 2) for t in times], "mean_length": lengths,
            "s_per_completion_token": round(sum(times) / (8 * sum(lengths)), 4)}


def table(rows: list[dict], meta: dict) -> str:
    lines = ["# Smoke GRPO step: TRL's sampler vs the library's", "",
             f"{meta['machine']}, {meta['cpus']} CPUs, {meta['date']}, model `{meta['model']}`; "
             "variants alternated in one run.", "",
             "| rollouts | runs | median s/step | mean completion tokens | s per completion token |",
             "| --- | --- | --- | --- | --- |"]
    for name in ("trl", "library"):
        mine = [r for r in rows if r["rollouts"] == name]
        if not mine:
            continue
        steps = [t for r in mine for t in r["step_time_s"]]
        lengths = [x for r in mine for x in r["mean_length"]]
        per_token = statistics.median(r["s_per_completion_token"] for r in mine)
        lines.append(f"| {name} | {len(mine)} | {statistics.median(steps):.1f} | "
                     f"{statistics.mean(lengths):.1f} | {per_token:.4f} |")
    lines += ["", f"Command: `{meta['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    import sys

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="embedded", help="start model (a primed model is the smoke case)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2, help="runs per variant, alternated")
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "smoke-rollouts")
    p.add_argument("--results", type=Path, default=RESULTS / "smoke_rollouts.json")
    p.add_argument("--table", action="store_true", help="only rewrite the markdown from the JSON")
    a = p.parse_args()
    if a.table:
        saved = json.loads(a.results.read_text())
        a.results.with_suffix(".md").write_text(table(saved["runs"], saved["meta"]))
        return
    import os

    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M"), "model": a.model,
            "command": "python benchmarks/smoke_rollouts.py " + " ".join(sys.argv[1:])}
    rows = []
    for i in range(a.repeats):
        for name in ("trl", "library"):
            rows.append(run_variant(name, a.model, a.steps, a.workdir / f"{name}-{i}"))
            print(json.dumps(rows[-1]), flush=True)
    a.results.parent.mkdir(parents=True, exist_ok=True)
    a.results.write_text(json.dumps({"meta": meta, "runs": rows}, indent=2))
    a.results.with_suffix(".md").write_text(table(rows, meta))
    print(table(rows, meta))


if __name__ == "__main__":
    main()
