"""How much padding the round's no-grad log-prob forward computes under ``fast.shared_prompt`` (CPU, no model run).

TRL scores each rollout round with one no-grad forward over its rows (512 completions of the
embedded model: 64 prompts x G=8) before the round's optimizer steps. Under ``fast.shared_prompt``
that forward runs in chunks of whole groups (``fast.round_logprob_rows`` rows): each chunk's
prompts in one left-padded forward, as wide as the chunk's longest prompt, then all its
completions over those keys and values. On an H100 this forward took ~0.9-1.0 s of every
round's first step and was bound by the GPU (``benchmarks/results/grpo_step_profile_run6.md``),
so the padded positions it computes are time.

This counts them for real prompts (the smoke training set through the embedded tokenizer, as
``toolrl train`` renders them) over random rounds. It compares the library's chunking
(``shared_prompt.chunk_groups``: shortest prompts first) with chunks in arrival order (what
the library did before). It counts two things:

- ``prompt_positions``: positions of the prompt forward (chunk prompts x chunk width), against
  the prompts' real tokens;
- ``completion_keys``: the keys each completion row attends over (chunk width + its own
  completion), against its own prompt plus completion. The keys and values are copied out to
  every row and expanded for grouped-query attention, so copies scale with this too.

Positions are a proxy: the seconds come from a GPU run (``fast.round_logprob_rows``).

    python -m benchmarks.round_logprob_padding
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRAIN = "data/processed/smoke/train.jsonl"


def positions(chunks: list[list[tuple[list[int], list[int]]]], completion: int) -> tuple[int, int]:
    """(prompt-forward positions, completion keys) of a chunked round. A prompt's forward leaves
    out its last token (it leads its completions), and each completion row attends over the
    chunk's width plus ``completion`` + 1 tokens.

    >>> positions([[([1, 2, 3], [0, 1]), ([4, 5], [2])]], completion=4)
    (4, 21)
    """
    prompt = keys = 0
    for chunk in chunks:
        width = max(len(p) for p, _ in chunk) - 1
        prompt += len(chunk) * width
        keys += sum(len(rows) for _, rows in chunk) * (width + completion + 1)
    return prompt, keys


def simulate(lengths: list[int], *, prompts: int, group: int, completion: int, chunk_rows: list[int],
             rounds: int, seed: int) -> list[dict[str, Any]]:
    """Mean padded/real ratios over ``rounds`` random rounds, per chunk size, arrival and sorted."""
    from toolrl_lib.fast.shared_prompt import chunk_groups

    rng = random.Random(seed)
    totals: dict[tuple[int, str], list[int]] = {}
    real_prompt = real_keys = 0
    for _ in range(rounds):
        drawn = rng.sample(lengths, prompts) if len(lengths) >= prompts else rng.choices(lengths, k=prompts)
        groups = [([0] * n, list(range(i * group, (i + 1) * group))) for i, n in enumerate(drawn)]
        real_prompt += sum(n - 1 for n in drawn)
        real_keys += sum(group * (n - 1 + completion + 1) for n in drawn)
        for rows in chunk_rows:
            for order, chunks in (("arrival", chunk_groups(groups, rows, by_length=False)),
                                  ("sorted", chunk_groups(groups, rows))):
                p, k = positions(chunks, completion)
                total = totals.setdefault((rows, order), [0, 0, 0])
                total[0] += p
                total[1] += k
                total[2] += len(chunks)
    return [{"chunk_rows": rows, "order": order, "chunks_per_round": round(t[2] / rounds, 2),
             "prompt_positions_ratio": round(t[0] / real_prompt, 3),
             "completion_keys_ratio": round(t[1] / real_keys, 3)}
            for (rows, order), t in sorted(totals.items())]


def prompt_lengths(train: Path) -> list[int]:
    """The training prompts' token counts as ``toolrl train`` renders them (embedded tokenizer)."""
    from toolrl_lib.models import embedded_model_dir, load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import grpo_rows, load_examples

    tokenizer = load_tokenizer(str(embedded_model_dir()))
    rows = grpo_rows(load_examples([str(train)]), get_adapter("hermes"), tokenizer, 1024)
    return [len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]) for row in rows]


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["| chunk rows | chunks a round | order | prompt-forward positions / real | completion keys / real |",
             "| --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        lines.append(f"| {r['chunk_rows']} | {r['chunks_per_round']} | {r['order']} | {r['prompt_positions_ratio']} | "
                     f"{r['completion_keys_ratio']} |")
    p = result["prompts"]
    lines += ["", f"{result['rounds']} random rounds of {result['round_prompts']} prompts x {result['group']} "
              f"completions of {result['completion']} tokens; {p['count']} training prompts of {p['min']}-{p['max']} "
              f"tokens (median {p['median']}) from `{result['train']}`. 'arrival': chunks of whole groups in the "
              "round's order (the library before); 'sorted': `shared_prompt.chunk_groups`, shortest prompts "
              "first. fast.round_logprob_rows=512 is one chunk a round whatever the order.",
              "", "```bash", result["command"], "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=ROOT / TRAIN)
    parser.add_argument("--round-prompts", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--completion", type=int, default=128)
    parser.add_argument("--chunk-rows", default="64,128,256,512")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    lengths = prompt_lengths(args.train)
    if not lengths:
        raise SystemExit(f"{args.train}: no training prompts (run `toolrl data smoke` first)")
    rows = simulate(lengths, prompts=args.round_prompts, group=args.group, completion=args.completion,
                    chunk_rows=[int(x) for x in args.chunk_rows.split(",")], rounds=args.rounds, seed=args.seed)
    train = args.train.resolve()
    result = {"rows": rows, "rounds": args.rounds, "round_prompts": args.round_prompts, "group": args.group,
              "completion": args.completion,
              "train": str(train.relative_to(ROOT)) if train.is_relative_to(ROOT) else str(train),
              "prompts": {"count": len(lengths), "min": min(lengths), "median": statistics.median(lengths),
                          "max": max(lengths)},
              "command": "python -m benchmarks.round_logprob_padding"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "round_logprob_padding.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "round_logprob_padding.md").write_text(to_markdown(result))
    print(to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
