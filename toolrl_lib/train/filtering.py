"""Prompt difficulty filtering: drop prompts the start model always or never solves.

A GRPO group whose k completions all get the same reward has zero advantage everywhere,
so it costs a full generation round and teaches nothing. We estimate each prompt's pass
rate with k samples of the start model (binary reward) and keep the mixed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolrl_lib.data.example import Example


@dataclass
class FilterReport:
    total: int
    kept: int
    always_solved: int
    never_solved: int
    dropped_always: int
    dropped_never: int
    pass_rates: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total, "kept": self.kept, "always_solved": self.always_solved,
            "never_solved": self.never_solved, "dropped_always": self.dropped_always,
            "dropped_never": self.dropped_never, "pass_rates": dict(self.pass_rates),
        }

    def summary(self) -> str:
        return (f"difficulty filter: kept {self.kept}/{self.total} prompts; dropped "
                f"{self.dropped_always} always-solved and {self.dropped_never} never-solved")


def split_by_pass_rate(
    examples: list[Example], rates: dict[str, float], *, drop_always: bool = True,
    drop_never: bool = True,
) -> tuple[list[Example], FilterReport]:
    """Keep examples whose pass rate is strictly between 0 and 1 (per the drop switches)."""
    kept, always, never, drop_a, drop_n = [], 0, 0, 0, 0
    for example in examples:
        rate = rates[example.id]
        if rate >= 1.0:
            always += 1
            if drop_always:
                drop_a += 1
                continue
        elif rate <= 0.0:
            never += 1
            if drop_never:
                drop_n += 1
                continue
        kept.append(example)
    report = FilterReport(len(examples), len(kept), always, never, drop_a, drop_n, dict(rates))
    return kept, report


def pass_rates(
    model: Any, tokenizer: Any, examples: list[Example], family: str, *, k: int,
    max_new_tokens: int, temperature: float = 1.0, batch_size: int = 16, seed: int = 0,
    threshold: float = 1.0, progress: bool = False,
) -> dict[str, float]:
    """Share of k sampled completions per example whose binary reward reaches ``threshold``."""
    from toolrl_lib.generation import generate
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.rewards import score

    adapter = get_adapter(family)
    prompts = [adapter.render_prompt(example, tokenizer) for example in examples]
    samples = generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, do_sample=True,
        temperature=temperature, num_return_sequences=k, batch_size=batch_size, seed=seed,
        progress=progress,
    )
    rates = {}
    for example, texts in zip(examples, samples, strict=True):
        solved = [
            score(t, example.ground_truth, example.tools, scheme="binary", family=family).total
            >= threshold
            for t in texts
        ]
        rates[example.id] = sum(solved) / len(solved)
    return rates
