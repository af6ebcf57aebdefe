"""configs/embedded_gpu.yaml as it ships, run on a GPU: what its run directory says.

`session.sh shipped` trains the shipped config (vLLM colocate by default) for a few GRPO steps
with validation and a checkpoint, and returns the run directory, weights left out, as
``$OUT/shipped.tar.gz``. Here that archive becomes ``embedded_gpu_shipped.{json,md}``:

- the optimizer steps' seconds, grouped into rollout rounds (a round's first step generates it);
- every validation row (stage, step, mean@k summaries, seconds), and which generator each used:
  rows taken inside the trainer (stage ``grpo``) sample through the colocated engine when
  ``validation.vllm`` is on, the others (``base``, ``primed``, ``final``) load the model fresh
  and use transformers' generate.

    python -m benchmarks.gpu.shipped report --archive shipped.tar.gz --out benchmarks/results \\
        --device "one H100 80GB" --command "SSHIP=380 bash benchmarks/gpu/session.sh shipped"
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

SUMMARIES = ("binary_summary@16", "weighted_summary@16", "call_rate", "valid_rate")


def read_run(run_dir: Path) -> dict[str, Any]:
    """Step times, rounds and validation rows of one run directory (metrics.csv, validation.csv,
    config.yaml); a missing file or column is an error naming it."""
    from benchmarks.gpu.grpo_throughput import steps_per_round
    from toolrl_lib.train.callbacks import read_csv_rows
    from toolrl_lib.train.config import load_run_config

    for name in ("metrics.csv", "validation.csv", "config.yaml"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"{run_dir / name} not found: not a run directory of `toolrl train`")
    config = load_run_config(run_dir / "config.yaml", check=False)  # as the run saved it
    grpo, spr = config.grpo, steps_per_round(config)
    step_s = [round(r["step_time"], 3) for r in read_csv_rows(run_dir / "metrics.csv") if r.get("step_time") is not None]
    if not step_s:
        raise ValueError(f"{run_dir / 'metrics.csv'}: no row has a step_time")
    rounds = [round(sum(step_s[i:i + spr]), 2) for i in range(0, len(step_s), spr)]
    # which generator a validation row used, by the rule of toolrl_lib.train.validation.colocated_llm:
    # inside the trainer (stage grpo) the colocated engine, unless it may be asleep; elsewhere transformers
    engine = config.validation.vllm and grpo.vllm.mode == "colocate" and not grpo.vllm.enable_sleep_mode
    validation = []
    for r in read_csv_rows(run_dir / "validation.csv"):
        missing = [k for k in ("step", "stage", "seconds", *SUMMARIES) if k not in r]
        if missing:
            raise ValueError(f"{run_dir / 'validation.csv'}: no column {missing[0]!r}")
        validation.append({"step": int(r["step"]), "stage": r["stage"], "seconds": round(float(r["seconds"]), 1),
                           "generator": "colocated vLLM" if engine and r["stage"] == "grpo" else "transformers",
                           **{k: round(float(r[k]), 4) for k in SUMMARIES}})
    completions = grpo.per_device_train_batch_size * grpo.gradient_accumulation_steps
    return {"vllm_mode": grpo.vllm.mode, "round_completions": grpo.generation_batch_size,
            "steps": len(step_s), "completions_per_step": completions, "step_s": step_s, "round_s": rounds,
            "completions_per_s_after_first_round": round(completions * spr * (len(rounds) - 1)
                                                         / sum(rounds[1:]), 1) if len(rounds) > 1 else None,
            "validation": validation}


def write_report(record: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "embedded_gpu_shipped.json").write_text(json.dumps(record, indent=1))
    lines = [f"# configs/embedded_gpu.yaml as shipped, on {record['device']}", "",
             f"grpo.vllm.mode {record['vllm_mode']}; {record['steps']} optimizer steps of "
             f"{record['completions_per_step']} completions, rounds of {record['round_completions']}.", "",
             "| round | seconds | steps' seconds |", "| --- | --- | --- |"]
    per = len(record["step_s"]) // len(record["round_s"]) if record["round_s"] else 0
    for i, seconds in enumerate(record["round_s"]):
        steps = record["step_s"][i * per:(i + 1) * per]
        lines.append(f"| {i + 1} | {seconds} | {', '.join(f'{s:.2f}' for s in steps)} |")
    lines += ["", f"Completions/s over the rounds after the first: {record['completions_per_s_after_first_round']}.", "",
              "| step | stage | generator | seconds | " + " | ".join(SUMMARIES) + " |",
              "| --- | --- | --- | --- | " + " | ".join("---" for _ in SUMMARIES) + " |"]
    for v in record["validation"]:
        lines.append(f"| {v['step']} | {v['stage']} | {v['generator']} | {v['seconds']} | "
                     + " | ".join(str(v[k]) for k in SUMMARIES) + " |")
    lines += ["", "A transformers row's seconds include loading the model from disk; a colocated-vLLM row's include "
              "syncing the policy's weights into the engine. A few steps measure that the config runs, not what "
              "GRPO learns.", "", "Command:", "", "```", record["command"], "```", ""]
    (out / "embedded_gpu_shipped.md").write_text("\n".join(lines))


def report(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(args.archive) as tar:
        tar.extractall(tmp, filter="data")
        found = sorted(Path(tmp).rglob("metrics.csv"))
        if not found:
            raise SystemExit(f"{args.archive}: no run directory (metrics.csv) inside")
        record = {"device": args.device, "command": args.command, **read_run(found[0].parent)}
    write_report(record, Path(args.out))
    print((Path(args.out) / "embedded_gpu_shipped.md").read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("report")
    p.add_argument("--archive", required=True, help="shipped.tar.gz from `session.sh shipped`")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--device", required=True, help="the GPU it ran on, in words")
    p.add_argument("--command", required=True, help="the device command that made the archive")
    args = parser.parse_args(argv)
    return report(args)


if __name__ == "__main__":
    raise SystemExit(main())
