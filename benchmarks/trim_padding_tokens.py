"""How many token positions ``fast.trim_padding`` saves the multi-turn trainer (CPU, no model run).

A GPU step of issue 39's run is mostly the trainer's forwards (a round's log-prob pass over its
128 episodes, then each optimizer step's forward and backward over 32), and TRL runs every one
at the round's width: its longest prompt plus its longest episode. This counts the positions
those forwards hold, TRL's layout against trim_padding's (rows in length order, each chunk or
micro-batch as wide as its own longest prompt plus longest episode), over simulated rounds of
the config's shapes: real task prompts (the embedded tokenizer, ``configs/multi_turn_embedded_gpu.yaml``'s
kinds and apps) and episode lengths either from the gold episodes (deterministic, always
available) or from a run's episode rows (``--episodes``: e.g. run 6's validation episodes,
``model_tokens + injected_tokens``), each row's episode drawn from its kind's observed lengths.
Positions are a proxy for the forwards' cost (attention grows faster); the GPU seconds come
from a run of a ``*-trim`` variant.

    python -m benchmarks.trim_padding_tokens
    python -m benchmarks.trim_padding_tokens --episodes runs/rl_multi_turn_run6/runs/shaped-g16-fp32-gen128-tf32/episodes/step-200.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/multi_turn_embedded_gpu.yaml"


def width(rows: list[tuple[int, int]]) -> int:
    """A padded chunk's width: its longest prompt (left-padded) plus its longest episode."""
    return max(p for p, _ in rows) + max(c for _, c in rows)


def round_positions(rows: list[tuple[int, int]], micro: int, accumulation: int) -> dict[str, int]:
    """Positions of one round's log-prob pass and its optimizer steps' forwards, TRL's layout and trimmed.

    >>> round_positions([(10, 1), (2, 1), (10, 1), (2, 1)], micro=2, accumulation=1)
    {'real': 56, 'trl': 88, 'trimmed': 72}
    """
    trl = 2 * len(rows) * width(rows)  # both passes at the round's width
    ordered = sorted(rows, key=sum)
    logprob = sum(len(c) * width(c) for c in (ordered[i:i + micro] for i in range(0, len(rows), micro)))
    step_rows = micro * accumulation
    loss = 0
    for start in range(0, len(rows), step_rows):  # TRL's shuffle picks a step's rows; sorted within it
        step = sorted(rows[start:start + step_rows], key=sum)
        loss += sum(len(c) * width(c) for c in (step[i:i + micro] for i in range(0, len(step), micro)))
    return {"real": 2 * sum(map(sum, rows)), "trl": trl, "trimmed": logprob + loss}


def task_shapes(config: Any, n: int, episodes: Path | None) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Prompt lengths of ``n`` train tasks and episode lengths, each by kind."""
    from toolrl_lib.envs import get_env, make_tasks
    from toolrl_lib.envs.episode import Episode, play_gold
    from toolrl_lib.models import load_tokenizer, prepare_embedded_model
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.multi_turn import episode_settings

    tokenizer, adapter = load_tokenizer(str(prepare_embedded_model())), get_adapter(config.model.family or "hermes")
    mt, settings = config.multi_turn, episode_settings(config)
    prompts, lengths = defaultdict(list), defaultdict(list)
    for task in make_tasks("train", n, mt.environments, mt.kinds):
        episode = Episode(get_env(task.env), task, adapter, tokenizer, settings)
        prompts[task.kind].append(len(episode.prompt_ids))
        if episodes is None:
            lengths[task.kind].append(len(play_gold(episode).completion_ids))
    if episodes is not None:
        for line in episodes.read_text().splitlines():
            row = json.loads(line)
            lengths[row["kind"]].append(int(row["model_tokens"]) + int(row["injected_tokens"]))
    return prompts, lengths


def simulate(prompts: dict[str, list[int]], lengths: dict[str, list[int]], group: int, round_size: int,
             micro: int, accumulation: int, rounds: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    kinds = sorted(k for k in prompts if lengths.get(k))
    totals: dict[str, list[int]] = defaultdict(list)
    for _ in range(rounds):
        rows = []
        for _ in range(round_size // group):
            kind = rng.choice(kinds)
            prompt = rng.choice(prompts[kind])
            rows += [(prompt, rng.choice(lengths[kind])) for _ in range(group)]
        rng.shuffle(rows)  # TRL's row shuffle before the split into steps
        for key, value in round_positions(rows, micro, accumulation).items():
            totals[key].append(value)
    mean = {key: statistics.fmean(values) for key, values in totals.items()}
    return {"group": group, "rounds": rounds, "real_positions": round(mean["real"]),
            "trl_positions": round(mean["trl"]), "trimmed_positions": round(mean["trimmed"]),
            "trl_padding_share": round(1 - mean["real"] / mean["trl"], 3),
            "trimmed_padding_share": round(1 - mean["real"] / mean["trimmed"], 3),
            "positions_ratio": round(mean["trl"] / mean["trimmed"], 2)}


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["| episodes | G | positions a round: real | TRL | trimmed | TRL / trimmed | padding: TRL | trimmed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in result["rows"]:
        lines.append(f"| {row['source']} | {row['group']} | {row['real_positions']:,} | {row['trl_positions']:,} | "
                     f"{row['trimmed_positions']:,} | {row['positions_ratio']} | {row['trl_padding_share']:.0%} | "
                     f"{row['trimmed_padding_share']:.0%} |")
    lines += ["", result["what"], "", "```bash", *result["commands"], "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from toolrl_lib.train.config import load_run_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=Path, action="append", default=[],
                        help="a run's episode rows (jsonl with kind, model_tokens, injected_tokens); repeat")
    parser.add_argument("--groups", default="8,16")
    parser.add_argument("--round-size", type=int, default=128)
    parser.add_argument("--micro", type=int, default=8, help="per_device_train_batch_size (an H100's)")
    parser.add_argument("--accumulation", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    config = load_run_config(ROOT / CONFIG, ["device=cpu", "grpo.vllm.mode=off"])
    rows = []
    for source in [None, *args.episodes]:
        prompts, lengths = task_shapes(config, args.tasks, source)
        for group in (int(g) for g in args.groups.split(",")):
            row = simulate(prompts, lengths, group, args.round_size, args.micro, args.accumulation, args.rounds,
                           args.seed)
            rows.append({"source": "gold" if source is None else str(source), **row})
            print(json.dumps(rows[-1]))
    result = {
        "what": (f"Token positions of one round's trainer forwards (the log-prob pass over its {args.round_size} "
                 f"episodes and its optimizer steps' forwards, micro-batches of {args.micro} x {args.accumulation}), "
                 f"mean of {args.rounds} simulated rounds: rows of {CONFIG}'s train tasks (embedded tokenizer), "
                 "each episode's length drawn from its kind's gold episodes or from a run's episode rows. TRL "
                 "pads every forward to the round's longest prompt plus longest episode; fast.trim_padding "
                 "sorts rows by length and cuts each chunk to its own. Positions, not seconds: a proxy. The gold "
                 "rows need nothing but the repository; the others read the named episode files (a run's "
                 "archive, e.g. run 6's rl_multi_turn.tar.gz unpacked by its report, not committed)."),
        "rows": rows,
        "commands": [f"python -m benchmarks.trim_padding_tokens {' '.join(sys.argv[1:] if argv is None else argv)}".strip()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trim_padding_tokens.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "trim_padding_tokens.md").write_text(to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
