"""Format priming with and without the backward through the prompt, side by side in one run.

The smoke profile's priming (configs/smoke.yaml: 128 rows, 32 steps of 4) is run twice from the
same seed, ``priming.prompt_gradient`` true (TRL's SFT loss) and false
(``toolrl_lib/train/prompt_detached.py``); each primed model is then scored on the same
validation prompts (the smoke set, more samples than the workbook takes: ``--k``). Records wall
and CPU seconds of each priming, peak RSS, final losses, mean@k per scheme, valid/call rates,
and the paired difference (detached - full) over the prompts with a bootstrap 95% CI.

    .venv/bin/python -m benchmarks.priming_detached            # ~15 min on 2 cores
    .venv/bin/python -m benchmarks.priming_detached --k 2 --rows 16 --steps 4   # a quick look

Writes benchmarks/results/priming_detached.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def paired_ci(a: list[float], b: list[float]) -> dict[str, float]:
    """Mean of b - a over paired prompts, with a percentile bootstrap 95% CI of the differences."""
    from toolrl_lib.evaluate.stats import bootstrap_ci

    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    low, high = bootstrap_ci(diff)
    return {"diff": float(diff.mean()), "ci_low": low, "ci_high": high, "n": len(diff)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "smoke.yaml"))
    parser.add_argument("--k", type=int, default=4, help="samples per validation prompt")
    parser.add_argument("--rows", type=int, default=None, help="priming rows (default: the config's)")
    parser.add_argument("--steps", type=int, default=None, help="priming steps (default: the config's)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "priming_detached"))
    args = parser.parse_args(argv)

    from toolrl_lib.models import load_model, load_tokenizer, resolve_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples
    from toolrl_lib.train.mix import validation_set
    from toolrl_lib.train.priming import prime
    from toolrl_lib.train.run_validation import validation_result
    from toolrl_lib.train.trainer import resolve_family

    overrides = [f"validation.k={args.k}"]
    if args.rows:
        overrides.append(f"priming.num_examples={args.rows}")
    if args.steps:
        overrides.append(f"priming.max_steps={args.steps}")
    variants: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, gradient in (("full", "true"), ("detached", "false")):
            config = load_run_config(args.config, [*overrides, f"priming.prompt_gradient={gradient}"])
            start = resolve_model(config.model.name)
            family = resolve_family(config, load_tokenizer(start))
            examples = load_examples(config.data.train_files, config.data.max_train_examples,
                                     seed=config.seed, shuffle=True)
            t0, c0 = time.perf_counter(), cpu_seconds()
            primed = prime(config, start, examples, family, Path(tmp) / name, "cpu")
            seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            info = json.loads((primed / "priming.json").read_text())
            val = validation_set(config)
            model = load_model(str(primed), dtype=config.model.dtype, device="cpu").eval()
            measured = validation_result(config, model, load_tokenizer(str(primed)), val, family)
            del model
            scores = {**measured.scores, **measured.rates(), "per_example": measured.per_example}
            variants[name] = {
                "prompt_gradient": gradient == "true", "priming_seconds": round(seconds, 1),
                "priming_cpu_seconds": round(cpu, 1), "losses": info["losses"],
                "scores": {k: v for k, v in scores.items() if k != "per_example"},
                "per_example": scores["per_example"],
            }
            print(name, variants[name]["priming_seconds"], "s", variants[name]["scores"], flush=True)
    schemes = config.validation.schemes
    comparisons = {
        metric: paired_ci([row[metric] for row in variants["full"]["per_example"]],
                          [row[metric] for row in variants["detached"]["per_example"]])
        for metric in [*schemes, "valid_rate", "call_rate"]
    }
    result = {
        "config": args.config, "k": args.k, "n_validation": len(val), "overrides": overrides,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "variants": variants, "detached_minus_full": comparisons,
        "command": "python -m benchmarks.priming_detached " + " ".join(argv or sys.argv[1:]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    lines = ["# Priming with and without the backward through the prompt", "",
             f"`{result['command']}` — {len(val)} validation prompts x k={args.k}, one run, same seed.", "",
             "| variant | priming s | priming CPU-s | last loss | " + " | ".join(
                 f"{s} mean@{args.k}" for s in schemes) + " | valid rate | call rate |",
             "| --- " * (6 + len(schemes)) + "|"]
    for name, v in variants.items():
        s = v["scores"]
        lines.append(f"| {name} | {v['priming_seconds']:.0f} | {v['priming_cpu_seconds']:.0f} | "
                     f"{v['losses'][-1]:.3f} | " + " | ".join(f"{s[f'{m}_mean@{args.k}']:.3f}" for m in schemes)
                     + f" | {s['valid_rate']:.3f} | {s['call_rate']:.3f} |")
    lines += ["", "| detached - full | diff | 95% CI |", "| --- | --- | --- |"]
    lines += [f"| {m} | {c['diff']:+.3f} | [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] |" for m, c in comparisons.items()]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
