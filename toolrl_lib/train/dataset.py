"""Example JSONL -> the datasets GRPO and priming train on.

GRPO rows carry the rendered prompt plus what the reward functions need per row
(``ground_truth``/``tools`` as JSON strings, since every row has its own tool list) and
``example_id``; the RLSD trainer also gets ``privileged``, the ground-truth calls
rendered in the family's own format. Prompts longer than the budget are dropped and
counted, never truncated (a cut-off tool list would teach the wrong thing).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrl_lib.data.example import Example, read_jsonl
from toolrl_lib.paths import resolve


@dataclass
class BuildReport:
    """What happened to the examples on their way into a training dataset."""

    dropped: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)  # kept rows per example kind
    tokens: int = 0  # prompt + completion tokens of the kept rows, where the builder counts them (priming)

    @property
    def kept(self) -> int:
        return sum(self.kinds.values())

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def keep(self, kind: str, tokens: int = 0) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.tokens += tokens

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "dropped": dict(self.dropped), "kinds": dict(sorted(self.kinds.items()))}


def load_examples(
    files: Sequence[str | Path], limit: int | None = None, seed: int = 0, shuffle: bool = False
) -> list[Example]:
    """Read Example JSONL files (paths relative to the project root); optionally shuffle and cap."""
    examples: list[Example] = []
    for name in files:
        path = resolve(name)
        if not path.is_file():
            raise FileNotFoundError(
                f"training data {path} not found: run notebooks/01_data_exploration.ipynb (or `toolrl data "
                f"prepare`) first, or point data.train_files/val_files at Example JSONL files"
            )
        examples.extend(read_jsonl(path))
    if shuffle:
        random.Random(seed).shuffle(examples)
    return examples[:limit] if limit is not None else examples


def ensure_split(data: Path, profile: str, prepare_if_missing: bool = False) -> Path:
    """Check that ``data`` holds ``train.jsonl`` (notebook 01's output); with
    ``prepare_if_missing`` in the smoke profile, write notebook 01's smoke set there instead of
    failing (notebook 03 on its own), the same files ``toolrl data smoke`` writes."""
    data = Path(data)
    if (data / "train.jsonl").is_file():
        return data
    if prepare_if_missing and profile == "smoke":
        from toolrl_lib.data.explore import prepare_smoke

        print(prepare_smoke(data))
        return data
    raise FileNotFoundError(
        f"{data}/train.jsonl not found: run notebooks/01_data_exploration.ipynb (profile {profile!r}) "
        "or `toolrl data smoke` first, or set prepare_if_missing=True to write the smoke set here")


def validation_subset(examples: Sequence[Example], n: int, selection: str = "stratified") -> list[Example]:
    """``n`` validation examples: the first ``n``, or round-robin over kinds.

    Split files are often grouped by kind, so "the first 12" can be all parallel calls;
    round-robin (kinds in order of first appearance, file order within a kind) keeps
    simple, multiple, parallel and no-call examples all represented, deterministically.
    """
    if selection == "first":
        return list(examples[:n])
    if selection != "stratified":
        raise ValueError(f"validation selection must be 'stratified' or 'first', got {selection!r}")
    by_kind: dict[str, list[Example]] = {}
    for example in examples:
        by_kind.setdefault(example.kind, []).append(example)
    queues = list(by_kind.values())
    chosen: list[Example] = []
    depth = 0
    while len(chosen) < n and any(depth < len(q) for q in queues):
        chosen += [q[depth] for q in queues if depth < len(q)][: n - len(chosen)]
        depth += 1
    return chosen


def oversample_kinds(
    examples: Sequence[Example], factors: dict[str, float] | None, seed: int = 0
) -> list[Example]:
    """Repeat the examples of some kinds: factor 3 -> three copies of each, 2.5 -> two copies
    plus a third for a seeded half of them. The result is shuffled (seeded) so that copies do
    not meet in one batch more often than chance; without factors the input comes back as is."""
    if not factors:
        return list(examples)
    rng = random.Random(seed)
    by_kind: dict[str, list[Example]] = {}
    for example in examples:
        by_kind.setdefault(example.kind, []).append(example)
    mixed: list[Example] = []
    for kind, group in by_kind.items():
        factor = factors.get(kind, 1.0)
        if factor < 1:
            raise ValueError(f"oversample factor for kind {kind!r} must be >= 1, got {factor}")
        whole = int(factor)
        extra = rng.sample(group, round((factor - whole) * len(group)))
        mixed += group * whole + extra
    rng.shuffle(mixed)
    return mixed


def prompt_length(tokenizer: Any, prompt: str) -> int:
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def grpo_rows(
    examples: Iterable[Example],
    adapter: Any,
    tokenizer: Any,
    max_prompt_tokens: int,
    *,
    enable_thinking: bool = False,
    privileged: bool = False,
    report: BuildReport | None = None,
) -> list[dict[str, str]]:
    """One GRPO row per example: ``prompt``, ``ground_truth``, ``tools``, ``example_id``,
    ``kind`` (and ``privileged`` for RLSD)."""
    report = report if report is not None else BuildReport()
    rows = []
    for example in examples:
        prompt = adapter.render_prompt(example, tokenizer, enable_thinking=enable_thinking)
        if prompt_length(tokenizer, prompt) > max_prompt_tokens:
            report.drop("prompt_too_long")
            continue
        row = {
            "prompt": prompt,
            "ground_truth": json.dumps(example.ground_truth, ensure_ascii=False),
            "tools": json.dumps(example.tools, ensure_ascii=False),
            "example_id": example.id,
            "kind": example.kind,  # per-kind reward / zero-variance metrics
        }
        if privileged:
            row["privileged"] = adapter.render_completion(example.ground_truth)
        rows.append(row)
        report.keep(example.kind)
    return rows


def priming_rows(
    examples: Iterable[Example], adapter: Any, tokenizer: Any, max_length: int,
    *, enable_thinking: bool = False, report: BuildReport | None = None,
) -> list[dict[str, str]]:
    """Prompt/completion pairs for format-priming SFT: the ground truth in the family's format.

    The end-of-turn token is added by TRL's SFTTrainer (it appends ``eos_token``)."""
    report = report if report is not None else BuildReport()
    rows = []
    for example in examples:
        prompt = adapter.render_prompt(example, tokenizer, enable_thinking=enable_thinking)
        completion = adapter.render_completion(example.ground_truth)
        tokens = prompt_length(tokenizer, prompt + completion)
        if tokens + 1 > max_length:
            report.drop("too_long")
            continue
        rows.append({"prompt": prompt, "completion": completion})
        report.keep(example.kind, tokens)
    return rows


def shortest_examples(
    examples: Sequence[Example], n: int, adapter: Any, tokenizer: Any, *, enable_thinking: bool = False,
) -> list[Example]:
    """The ``n`` examples whose priming row (prompt + completion) has the fewest tokens, in their
    original order (ties: the earlier one). Priming's compute grows with its tokens."""
    def tokens(example: Example) -> int:
        prompt = adapter.render_prompt(example, tokenizer, enable_thinking=enable_thinking)
        return prompt_length(tokenizer, prompt + adapter.render_completion(example.ground_truth))

    lengths = [tokens(e) for e in examples]
    keep = sorted(sorted(range(len(examples)), key=lambda i: lengths[i])[:n])
    return [examples[i] for i in keep]


def to_dataset(rows: list[dict[str, str]]) -> Any:
    """Rows -> ``datasets.Dataset`` (an empty list is an error: nothing to train on)."""
    from datasets import Dataset

    if not rows:
        raise ValueError("no training rows left (all examples were dropped or none were given)")
    return Dataset.from_list(rows)
