"""The GRPO prompt mix and the validation set, with issue 18's two data levers.

* Hard negatives (``data.hard_negatives``, ``validation.hard_negatives``): generated no-call
  prompts from ``toolrl_lib.data.synthetic.HARD_NEGATIVES`` (same-domain near misses with the
  needed function absent; the right function offered but its required values left out of the
  query), half each. Our split's own no-call rows offer functions from other domains, easier
  than BFCL's irrelevance. Generated with their own seeds, their texts never equal a
  validation (or, for validation, a training) prompt; data, not test tuning: BFCL never selects.
* Kind-balanced rollouts (``data.balance_kinds``): the prompts in a systematic kind order, so
  every window of consecutive prompts (a rollout round) holds each kind in its overall share
  instead of a shuffle's chance mix; TRL's own shuffle is then switched off (``grpo_args``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from toolrl_lib.data.example import Example

HARD_NEGATIVE_SEED = {"train": 18_001, "validation": 18_002}


def hard_negatives(n: int, seed: int, exclude: Sequence[Example] = ()) -> list[Example]:
    """``n`` generated hard no-call examples whose user text appears in none of ``exclude``."""
    from toolrl_lib.data.synthetic import HARD_NEGATIVES, generate_examples

    if n <= 0:
        return []
    taken = {_text(e) for e in exclude}
    out: list[Example] = []
    batch = 0
    while len(out) < n and batch < 20:  # texts repeat rarely; a bounded number of redraws
        for example in generate_examples(2 * n, seed=seed + batch, kinds=HARD_NEGATIVES, prefix="hardneg"):
            if _text(example) not in taken and len(out) < n:
                taken.add(_text(example))
                out.append(example)
        batch += 1
    return out


def _text(example: Example) -> str:
    return " ".join(m.get("content", "") for m in example.messages if m.get("role") == "user")


def balance_kinds(examples: Sequence[Example], seed: int = 0) -> list[Example]:
    """A seeded order in which the i-th example of a kind with n examples sits near position
    (i + u) / n of the whole list (u uniform per kind): kinds spread evenly over every window."""
    rng = random.Random(seed)
    by_kind: dict[str, list[Example]] = {}
    for example in examples:
        by_kind.setdefault(example.kind, []).append(example)
    keyed = []
    for kind in sorted(by_kind):
        group = by_kind[kind]
        rng.shuffle(group)
        offset = rng.random()
        keyed += [((i + offset) / len(group), kind, i, example) for i, example in enumerate(group)]
    return [example for *_, example in sorted(keyed, key=lambda item: item[:3])]


def grpo_mix(examples: Sequence[Example], config: Any, val_examples: Sequence[Example] = ()) -> list[Example]:
    """The GRPO prompts: ``oversample_kinds``, then the hard negatives, then the kind order."""
    from toolrl_lib.train.dataset import oversample_kinds

    d = config.data
    mixed = oversample_kinds(examples, d.oversample_kinds, config.seed)
    if d.hard_negatives:
        mixed += hard_negatives(d.hard_negatives, HARD_NEGATIVE_SEED["train"] + config.seed, val_examples)
        random.Random(config.seed).shuffle(mixed)
    return balance_kinds(mixed, config.seed) if d.balance_kinds else mixed


def validation_set(config: Any) -> list[Example]:
    """The validation examples (``validation_subset`` of the val files) plus the configured
    hard negatives (none of them a training prompt)."""
    from toolrl_lib.train.dataset import load_examples, validation_subset

    v = config.validation
    if not v.enabled:
        return []
    chosen = validation_subset(load_examples(config.data.val_files), v.num_examples, v.selection)
    if v.hard_negatives:
        train = load_examples(config.data.train_files)
        chosen += hard_negatives(v.hard_negatives, HARD_NEGATIVE_SEED["validation"] + config.seed, [*chosen, *train])
    return chosen
