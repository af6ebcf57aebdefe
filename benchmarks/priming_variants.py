"""Cheaper format primings against the smoke default, over several seeds, on the validation set.

Priming is a third of the smoke workbook's time on a 2-core CPU and compute-bound (128 rows of
~520 tokens forward and back). Three ways to spend less: fewer rows (the step count stays, each
step averages fewer rows), the shortest rows of a larger pool (fewer tokens a row) and LoRA on
the top layers only (the backward stops at the lowest adapted layer). Whether the primed model
stays as good is measured here, not assumed: each variant x seed primes from the embedded
model and scores the primed model on the validation prompts (more of them and more samples than
the workbook takes). A seed changes the priming
rows (the training set's shuffle), the LoRA initialisation and the sampling, so the spread over
seeds is the run-to-run noise a choice has to beat.

A variant is ``rows<N>`` with an optional ``-of<P>`` (the N shortest of the first P shuffled
examples, ``priming.shortest_of``) and ``-top<L>`` (e.g. ``rows128-of256``, ``rows64-top15``); its
priming keeps the config's steps and learning rate and sets ``gradient_accumulation_steps = N /
steps`` (batch 1: no padding). Jobs run as subprocesses over ``--jobs`` lanes (``benchmarks/gpu/lanes.py``;
on one GPU several small jobs share it), each writing ``<work>/<variant>-s<seed>.json``; a
finished job is not run again, so a second call continues where a deadline stopped the first.

    python -m benchmarks.priming_variants --device cuda --jobs 4 --work $OUT/pv   # GPU host
    python -m benchmarks.priming_variants --report --work <folder with the job files>

``--report`` writes benchmarks/results/priming_variants.{json,md}: per variant the mean over
seeds of mean@k per scheme, valid and call rates, the priming's relative compute on a CPU, and
the difference from the reference variant (same seed, same prompts) with a 95% t interval over
the seeds' mean differences.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]

# Student t 0.975 quantiles for 1..10 degrees of freedom (more seeds: the 10-df value, slightly wide)
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
VARIANT = re.compile(r"^rows(?P<rows>\d+)(?:-of(?P<pool>\d+))?(?:-top(?P<top>\d+))?$")


class Variant(NamedTuple):
    rows: int
    pool: int  # the rows are the shortest of this many examples (0: the first rows)
    top: int   # LoRA on the top this many layers (0: all)


def parse_variant(name: str) -> Variant:
    """A variant's rows, pool and top layers.

    >>> parse_variant("rows64-top15")
    Variant(rows=64, pool=0, top=15)
    >>> parse_variant("rows128-of256")
    Variant(rows=128, pool=256, top=0)
    """
    match = VARIANT.match(name)
    if match is None:
        raise ValueError(f"variant {name!r}: expected rows<N>[-of<P>][-top<L>], e.g. rows64-top15")
    variant = Variant(int(match["rows"]), int(match["pool"] or 0), int(match["top"] or 0))
    if variant.pool and variant.pool < variant.rows:
        raise ValueError(f"variant {name!r}: a pool of {variant.pool} cannot give {variant.rows} rows")
    return variant


def variant_overrides(name: str, steps: int) -> list[str]:
    """Config overrides of a variant at ``steps`` priming steps (batch 1, N/steps accumulated).

    >>> variant_overrides("rows64-top15", 32)
    ['priming.num_examples=64', 'priming.max_steps=32', 'priming.batch_size=1', 'priming.gradient_accumulation_steps=2', 'priming.top_layers=15', 'priming.shortest_of=0']
    """
    rows, pool, top = parse_variant(name)
    if rows % steps:
        raise ValueError(f"variant {name!r}: {rows} rows do not split into {steps} steps")
    return [f"priming.num_examples={rows}", f"priming.max_steps={steps}", "priming.batch_size=1",
            f"priming.gradient_accumulation_steps={rows // steps}", f"priming.top_layers={top}",
            f"priming.shortest_of={pool}"]


def relative_compute(name: str, layers: int, tokens: float | None = None, reference_tokens: float | None = None) -> float:
    """Priming compute relative to the reference (forward 1, backward 2 a layer): by the tokens
    primed on when both are known, else by rows out of 128.

    >>> round(relative_compute("rows64-top15", 30), 3)
    0.333
    >>> round(relative_compute("rows128-of256", 30, 43_000, 58_000), 3)
    0.741
    """
    rows, _, top = parse_variant(name)
    top = top or layers
    share = tokens / reference_tokens if tokens and reference_tokens else rows / 128
    return share * (layers + 2 * top) / (3 * layers)


def run_one(args: argparse.Namespace) -> int:
    """Prime one variant at one seed, score the primed model, write its job file."""
    import tempfile

    from toolrl_lib.models import load_model, load_tokenizer, resolve_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples
    from toolrl_lib.train.mix import validation_set
    from toolrl_lib.train.priming import prime
    from toolrl_lib.train.trainer import resolve_family
    from toolrl_lib.train.validation import validation_result

    base = load_run_config(args.config)
    overrides = [f"seed={args.seed}", f"validation.k={args.k}",
                 f"validation.num_examples={args.val_examples}",
                 *variant_overrides(args.one, base.priming.max_steps)]
    config = load_run_config(args.config, overrides)
    start = resolve_model(config.model.name)
    family = resolve_family(config, load_tokenizer(start))
    examples = load_examples(config.data.train_files, config.data.max_train_examples,
                             seed=config.seed, shuffle=True)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        primed = prime(config, start, examples, family, Path(tmp) / "primed", args.device)
        seconds = time.perf_counter() - t0
        info = json.loads((primed / "priming.json").read_text(encoding="utf-8"))
        model = load_model(str(primed), dtype=config.model.dtype, device=args.device).eval()
        val = validation_set(config)
        t0 = time.perf_counter()
        measured = validation_result(config, model, load_tokenizer(str(primed)), val, family)
        val_seconds = time.perf_counter() - t0
        layers = int(model.config.num_hidden_layers)
    result = {
        "variant": args.one, "seed": args.seed, "device": args.device, "overrides": overrides,
        "priming_seconds": round(seconds, 1), "validation_seconds": round(val_seconds, 1),
        "layers": layers, "losses": info["losses"], "tokens": info["tokens"], "k": args.k, "n_validation": len(val),
        "scores": {**measured.scores, **measured.rates()},
        "per_example": measured.per_example,
    }
    out = Path(args.work) / f"{args.one}-s{args.seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result), encoding="utf-8")
    print(args.one, args.seed, result["priming_seconds"], "s", result["scores"], flush=True)
    return 0


def run_all(args: argparse.Namespace) -> int:
    """Every variant x seed not already in ``--work``, as subprocesses over ``--jobs`` lanes."""
    from benchmarks.gpu.lanes import Job, run_lanes

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    jobs = []
    for seed in args.seeds:
        for variant in args.variants:
            parse_variant(variant)
            if (work / f"{variant}-s{seed}.json").is_file():
                continue
            command = [sys.executable, "-m", "benchmarks.priming_variants", "--one", variant, "--seed", str(seed), "--work", str(work),
                       "--device", args.device, "--k", str(args.k), "--val-examples", str(args.val_examples),
                       "--config", args.config]
            jobs.append(Job(name=f"{variant}-s{seed}", command=command, log=work / f"{variant}-s{seed}.log"))
    outcomes = run_lanes(jobs, [None] * args.jobs, time.time() + args.time_budget_s,
                         min_start_s=args.min_start_s)
    return 0 if all(o.ok for o in outcomes) else 1


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t interval of ``values`` (the interval is nan with fewer than two).

    >>> [round(x, 3) for x in t_interval([1.0, 2.0, 3.0])]
    [2.0, -0.484, 4.484]
    """
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T975[min(n - 1, len(T975)) - 1] * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def report(args: argparse.Namespace) -> int:
    """Aggregate the job files of ``--work`` into benchmarks/results/priming_variants.{json,md}."""
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(args.work).glob("*-s*.json"))]
    if not runs:
        raise SystemExit(f"no job files (<variant>-s<seed>.json) in {args.work}")
    k = runs[0]["k"]
    metrics = ["binary", "weighted", "valid_rate", "call_rate"]
    by = {(r["variant"], r["seed"]): r for r in runs}
    variants = sorted({r["variant"] for r in runs}, key=lambda v: (-parse_variant(v).rows, parse_variant(v)[1:]))
    reference = args.reference

    def mean_tokens(variant: str) -> float | None:  # job files from before tokens were recorded: None
        tokens = [r.get("tokens") for (v, _), r in by.items() if v == variant]
        return sum(tokens) / len(tokens) if tokens and all(tokens) else None
    rows, lines = [], []
    for variant in variants:
        seeds = sorted(s for v, s in by if v == variant)
        mine = [by[(variant, s)] for s in seeds]
        entry: dict[str, Any] = {
            "variant": variant, "seeds": seeds,
            "relative_cpu_compute": round(relative_compute(variant, mine[0]["layers"], mean_tokens(variant),
                                                           mean_tokens(reference)), 3),
            "priming_seconds": round(sum(r["priming_seconds"] for r in mine) / len(mine), 1),
            "last_loss": round(sum(r["losses"][-1] for r in mine) / len(mine), 4),
        }
        for m in metrics:
            key = f"{m}_mean@{k}" if m in ("binary", "weighted") else m
            entry[m] = round(sum(r["scores"][key] for r in mine) / len(mine), 4)
            entry[f"{m}_by_seed"] = [round(r["scores"][key], 4) for r in mine]
            paired = [s for s in seeds if (reference, s) in by]
            if variant != reference and paired:  # same seed, same prompts: a paired difference
                diffs = [by[(variant, s)]["scores"][key] - by[(reference, s)]["scores"][key] for s in paired]
                mean, low, high = t_interval(diffs)
                entry[f"{m}_minus_reference"] = {"diff": round(mean, 4), "ci_low": round(low, 4),
                                                 "ci_high": round(high, 4), "seeds": paired}
        rows.append(entry)
    result = {"k": k, "n_validation": runs[0]["n_validation"], "device": runs[0]["device"],
              "reference": reference, "variants": rows,
              "command": "python -m benchmarks.priming_variants " + " ".join(args.argv)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    lines = ["# Cheaper format primings against the smoke default", "",
             f"{result['n_validation']} validation prompts x k={k}, device {result['device']}; means over "
             f"seeds; the differences are paired with `{reference}` (same seed, same prompts), 95% t "
             "interval over the seeds' mean differences. Relative CPU compute: tokens primed on (rows where "
             "not recorded) x (forward over every layer + backward over the adapted ones), 1.0 = the "
             "reference.", "",
             "| variant | seeds | rel. CPU compute | last loss | binary | weighted | valid rate | call rate "
             "| binary - ref | weighted - ref | valid - ref |", "| --- " * 11 + "|"]
    for e in rows:
        def diff(m: str, e: dict[str, Any] = e) -> str:
            d = e.get(f"{m}_minus_reference")
            return "–" if d is None else f"{d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        lines.append(f"| {e['variant']} | {len(e['seeds'])} | {e['relative_cpu_compute']:.2f} | {e['last_loss']:.3f} | "
                     f"{e['binary']:.3f} | {e['weighted']:.3f} | {e['valid_rate']:.3f} | {e['call_rate']:.3f} | "
                     f"{diff('binary')} | {diff('weighted')} | {diff('valid_rate')} |")
    lines += ["", f"Reproduce: `{result['command']}` (the job files come from a run without `--report`)."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "smoke.yaml"))
    parser.add_argument("--variants", type=lambda s: s.split(","),
                        default=["rows128", "rows96", "rows64", "rows128-top15", "rows64-top15"])
    parser.add_argument("--reference", default="rows128", help="the variant the others are compared with")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3, 4])
    parser.add_argument("--k", type=int, default=4, help="samples per validation prompt")
    parser.add_argument("--val-examples", type=int, default=120, help="validation prompts (stratified)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--jobs", type=int, default=1, help="jobs side by side")
    parser.add_argument("--time-budget-s", type=float, default=540)
    parser.add_argument("--min-start-s", type=float, default=60, help="start no job with less time left")
    parser.add_argument("--work", default=str(ROOT / "runs" / "priming_variants"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "priming_variants"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="aggregate the job files in --work")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.one:
        return run_one(args)
    return report(args) if args.report else run_all(args)


if __name__ == "__main__":
    raise SystemExit(main())
