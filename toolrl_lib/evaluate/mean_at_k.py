"""mean@k: the average reward of k sampled completions per example, averaged over examples.

One function for training validation (the training loop calls it on the held-out split)
and for notebook 05, so in-distribution numbers sit next to BFCL's with the same meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.generation import generate


@dataclass
class MeanAtK:
    """Result of ``mean_at_k``.

    Attributes:
        scores: ``"<scheme>_mean@<k>" -> mean total reward`` over examples and samples.
        n_examples: how many examples were scored.
        k: samples per example.
        per_example: one row per example: ``id``, ``kind``, per scheme the mean total over
            the k samples, ``valid_rate`` (format-valid share) and ``call_rate`` (share of
            samples that made at least one call).
    """

    scores: dict[str, float]
    n_examples: int
    k: int
    per_example: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_key(scheme: str, k: int) -> str:
    return f"{scheme}_mean@{k}"


def mean_at_k(
    model: Any,
    tokenizer: Any,
    examples: list[Example],
    family: str,
    *,
    k: int = 16,
    schemes: tuple[str, ...] = ("binary", "weighted"),
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 16,
    seed: int = 0,
) -> MeanAtK:
    """Sample k completions per example and average each reward scheme's total.

    ``temperature == 0`` means greedy decoding (then ``k`` must be 1).
    """
    from toolrl_lib.prompts import get_adapter

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not examples:
        raise ValueError("mean_at_k needs at least one example")
    adapter = get_adapter(family)
    prompts = [adapter.render_prompt(example, tokenizer) for example in examples]
    sampling = temperature > 0
    completions = generate(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens,
        do_sample=sampling,
        temperature=temperature if sampling else 1.0,
        top_p=top_p,
        num_return_sequences=k,
        batch_size=batch_size,
        seed=seed,
    )
    rows = [
        score_example(example, samples, family, schemes, adapter)
        for example, samples in zip(examples, completions, strict=True)
    ]
    scores = {
        score_key(scheme, k): sum(row[scheme] for row in rows) / len(rows) for scheme in schemes
    }
    return MeanAtK(scores=scores, n_examples=len(rows), k=k, per_example=rows)


def score_example(
    example: Example, samples: list[str], family: str, schemes: tuple[str, ...], adapter: Any
) -> dict[str, Any]:
    """Mean reward per scheme over one example's samples, plus validity and call rates."""
    from toolrl_lib.rewards import score

    row: dict[str, Any] = {"id": example.id, "kind": example.kind}
    for scheme in schemes:
        totals = [
            score(text, example.ground_truth, example.tools, scheme=scheme, family=family).total
            for text in samples
        ]
        row[scheme] = sum(totals) / len(totals)
    parsed = [adapter.parse(text) for text in samples]
    row["valid_rate"] = sum(p.valid for p in parsed) / len(parsed)
    row["call_rate"] = sum(bool(p.calls) for p in parsed) / len(parsed)
    return row
