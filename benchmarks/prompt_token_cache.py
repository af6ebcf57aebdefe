"""What tokenising a rollout round's prompts costs the trainer's host, with and without ``fast.prompt_token_cache`` (CPU).

TRL tokenises every row of every rollout round (``GRPOTrainer._tokenize_prompts``): a round of
512 completions is 64 prompts x G=8 rows, and with ``fast.overlap_generation`` the next round is
tokenised once more to generate it early. On the GPU host this was ~0.2 s of each round's first
step, on the trainer's main thread (``benchmarks/results/grpo_step_profile_run12.md``). This times
TRL 1.15's own method on rounds drawn from the smoke training set as ``toolrl train`` renders it
(embedded tokenizer), against the same calls through ``toolrl_lib.fast.prompt_tokens``:

- ``trl_ms``: TRL's method on a round (what each round costs, twice with the overlap);
- ``cache_first_ms``: the cache on a round of prompts it has not seen (TRL's method on its 64
  distinct prompts, then the lookups);
- ``cache_seen_ms``: the cache on a round whose prompts it has seen (every later epoch, and the
  overlap's second tokenisation of each round).

Each is checked to give TRL's ids before it is timed.

    python -m benchmarks.prompt_token_cache --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import types
from pathlib import Path
from typing import Any

from benchmarks.result_files import write_result

ROOT = Path(__file__).resolve().parents[1]
TRAIN = "data/processed/smoke/train.jsonl"


def standin_trainer(tokenizer: Any) -> Any:
    """The attributes TRL 1.15's ``_tokenize_prompts`` reads, with that method bound to them."""
    from trl import GRPOTrainer

    trainer = types.SimpleNamespace(processing_class=tokenizer, _is_vlm=False, environment_factories=None,
                                    tools=None, chat_template=None, chat_template_kwargs={})
    trainer._tokenize_prompts = types.MethodType(GRPOTrainer._tokenize_prompts, trainer)
    return trainer


def rounds_of(prompts: list[str], count: int, distinct: int, group: int, seed: int) -> list[list[str]]:
    """``count`` rounds of ``distinct`` prompts x ``group`` rows each, as TRL's sampler repeats them.

    >>> [len(r) for r in rounds_of(["a", "b", "c"], 2, 2, 3, 0)]
    [6, 6]
    """
    rng = random.Random(seed)
    return [[p for p in rng.sample(prompts, distinct) for _ in range(group)] for _ in range(count)]


def median_ms(call: Any, rounds: list[list[str]]) -> float:
    times = []
    for batch in rounds:
        start = time.perf_counter()
        call(batch)
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


def main(argv: list[str] | None = None) -> int:
    from toolrl_lib.fast.prompt_tokens import PromptTokenCache
    from toolrl_lib.models import embedded_model_dir, load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import grpo_rows, load_examples

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=ROOT / TRAIN)
    parser.add_argument("--round-prompts", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if not args.train.is_file():
        raise SystemExit(f"{args.train}: not found (run `toolrl data smoke` first)")
    tokenizer = load_tokenizer(str(embedded_model_dir()))
    prompts = [row["prompt"] for row in grpo_rows(load_examples([str(args.train)]), get_adapter("hermes"),
                                                  tokenizer, 1024)]
    if len(prompts) < args.round_prompts:
        raise SystemExit(f"{args.train}: {len(prompts)} prompts, fewer than a round's {args.round_prompts}")
    trainer = standin_trainer(tokenizer)
    trl = trainer._tokenize_prompts
    rounds = rounds_of(prompts, args.rounds, args.round_prompts, args.group, args.seed)

    def fresh_cache(batch: list[str]) -> Any:  # a cache that has seen nothing: the round's distinct prompts miss
        return PromptTokenCache(trainer).tokenize(trl, batch)

    seen = PromptTokenCache(trainer)
    for batch in rounds:
        expected = trl(batch)[0]
        if fresh_cache(batch)[0] != expected or seen.tokenize(trl, batch)[0] != expected:
            raise SystemExit("the cache's ids differ from TRL's: nothing timed")
    result = {"trl_ms": median_ms(trl, rounds), "cache_first_ms": median_ms(fresh_cache, rounds),
              "cache_seen_ms": median_ms(lambda batch: seen.tokenize(trl, batch), rounds),
              "rows_per_round": args.round_prompts * args.group, "distinct_per_round": args.round_prompts,
              "rounds": args.rounds, "training_prompts": len(prompts),
              "mean_prompt_tokens": round(statistics.mean(len(ids) for ids in trl(prompts)[0]), 1),
              "train": TRAIN if args.train.resolve() == (ROOT / TRAIN).resolve() else str(args.train),
              "command": "python -m benchmarks.prompt_token_cache --out benchmarks/results"}
    print(json.dumps(result))
    table = ["| rows a round (distinct prompts) | TRL's `_tokenize_prompts` (ms) | cache, prompts new (ms) | "
             "cache, prompts seen (ms) |", "| --- | --- | --- | --- |",
             f"| {result['rows_per_round']} ({result['distinct_per_round']}) | {result['trl_ms']} | "
             f"{result['cache_first_ms']} | {result['cache_seen_ms']} |"]
    note = (f"Median over {args.rounds} rounds drawn from the {len(prompts)} prompts of `{result['train']}` as "
            f"`toolrl train` renders them (mean {result['mean_prompt_tokens']} tokens), the embedded tokenizer, one "
            "process on this machine's CPU. TRL 1.15's own method on a stand-in trainer; each path's ids checked "
            "equal to TRL's first. TRL runs this once a round, and `fast.overlap_generation` once more for the "
            "next round; with `fast.prompt_token_cache` the second is always a round of prompts seen.")
    write_result(args.out, "prompt_token_cache", result, table, note, result["command"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
