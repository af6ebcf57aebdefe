"""Format priming's peak memory and time at several ``fast.priming_mmap_threshold`` settings (issue 26).

Priming runs one row at a time and the rows differ in length, so glibc's heap keeps freed
activation blocks of many sizes resident (its mmap threshold moves up to 32 MiB once such a
block is freed). ``fast.priming_mmap_threshold`` pins the threshold while priming trains, so each
block at least that large is its own mapping, returned when freed
(``toolrl_lib.fast.memory.set_mmap_threshold``). This script primes the smoke config's model on its
first rows once per variant, each in a fresh process (alternating), and records the process's
peak RSS, seconds per row and the losses (which must be identical). A block mapped afresh is
faulted in anew, so the lower the threshold the slower the row: the smoke profile takes 2 MiB.

    python -m benchmarks.history.priming_memory --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = {"glibc default": 0, "blocks >= 2 MiB mapped": 2 * 2**20, "blocks >= 1 MiB mapped": 2**20,
            "blocks >= 256 KiB mapped": 2**18}


def child(variant: str, config_path: str, steps: int, out_dir: str) -> dict[str, Any]:
    """One priming run in this process; ``variant`` picks the allocator setting."""
    from toolrl_lib.models import resolve_model
    from toolrl_lib.train import priming
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples

    setting = f"fast.priming_mmap_threshold={VARIANTS[variant]}"
    # The config's rows in the trainer's own order, cut after ``steps``: the peak is set by the
    # longest row seen, and the smoke priming meets one of its longest in its first 6 steps.
    config = load_run_config(config_path, [f"priming.max_steps={steps}", setting], check=False)
    rows = steps * config.priming.batch_size * config.priming.gradient_accumulation_steps
    examples = load_examples(config.data.train_files, config.data.max_train_examples, seed=config.seed, shuffle=True)
    start = time.perf_counter()
    folder = priming.prime(config, resolve_model(config.model.name), examples, config.model.family,
                           Path(out_dir) / "primed", "cpu")
    seconds = time.perf_counter() - start
    info = json.loads((folder / priming.PRIMING_MARKER).read_text(encoding="utf-8"))
    return {"variant": variant, "rows": rows, "seconds_per_row": round(info["seconds"] / rows, 3),
            "seconds_with_load_and_save": round(seconds, 1), "losses": info["losses"],
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Priming's peak memory and time against its mmap threshold", "",
             f"{result['cpus']} CPU(s) ({result['cpu_model']}); `{result['command']}`; smoke priming's first "
             f"{result['runs'][0]['rows']} rows (its first steps), each run a fresh process, variants alternating.", "",
             "| variant | round | peak RSS GiB | s / row | losses identical to the first run |",
             "| --- | --- | --- | --- | --- |"]
    first = result["runs"][0]["losses"]
    for run in result["runs"]:
        lines.append(f"| {run['variant']} | {run['round']} | {run['peak_rss_gib']} | {run['seconds_per_row']} | "
                     f"{'yes' if run['losses'] == first else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/smoke.yaml")
    parser.add_argument("--steps", type=int, default=6, help="priming steps (rows = steps x 4)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of {list(VARIANTS)}")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(child(args.child, args.config, args.steps, tmp)))
        return 0
    from benchmarks.cpu_floor import cpu_model

    runs = []
    for round_ in range(args.rounds):
        for variant in args.variants.split(","):
            done = subprocess.run([sys.executable, "-m", "benchmarks.history.priming_memory", "--child", variant, "--config", args.config,
                                   "--steps", str(args.steps)], capture_output=True, text=True, check=True)
            runs.append({**json.loads(done.stdout.strip().splitlines()[-1]), "round": round_ + 1})
    result = {"command": "python -m benchmarks.history.priming_memory " + " ".join(argv if argv is not None else sys.argv[1:]),
              "cpus": os.cpu_count(), "cpu_model": cpu_model(), "runs": runs}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "priming_memory.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "priming_memory.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
