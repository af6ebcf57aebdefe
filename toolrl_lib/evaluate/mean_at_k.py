"""mean@k: the average reward of k sampled completions per example, averaged over examples.

One function for training validation (the training loop calls it on the held-out split)
and for notebook 05, so in-distribution numbers sit next to BFCL's with the same meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.evaluate.backends import Sampler, hf_sampler


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

    def rates(self) -> dict[str, float]:
        """Mean ``valid_rate`` and ``call_rate`` over the examples (the one place they are
        averaged: training validation and notebook 05 both read them here)."""
        out = {}
        for name in ("valid_rate", "call_rate"):
            values = [row[name] for row in self.per_example if name in row]
            if values:
                out[name] = sum(values) / len(values)
        return out


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
    sampler: Sampler | None = None,
    count_solved: bool = False,
) -> MeanAtK:
    """Sample k completions per example and average each reward scheme's total.

    ``temperature == 0`` means greedy decoding (then ``k`` must be 1). ``sampler`` (from
    ``evaluate.backends.load_sampler``, e.g. vLLM) draws the samples instead of
    ``generation.generate`` on ``model`` (which may then be None; ``batch_size`` is the
    sampler's own). ``count_solved``: each per-example row also carries ``solved`` (samples
    the binary scheme scores 1) and ``samples``, what ``pass_at_k.pass_at_k_curves`` reads.
    """
    from toolrl_lib.prompts import get_adapter

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not examples:
        raise ValueError("mean_at_k needs at least one example")
    adapter = get_adapter(family)
    prompts = [adapter.render_prompt(example, tokenizer) for example in examples]
    sample = sampler or hf_sampler(model, tokenizer, batch_size)
    completions = sample(prompts, k, max_new_tokens, temperature, top_p, seed)
    rows = [
        score_example(example, samples, family, schemes, adapter, count_solved)
        for example, samples in zip(examples, completions, strict=True)
    ]
    scores = {
        score_key(scheme, k): sum(row[scheme] for row in rows) / len(rows) for scheme in schemes
    }
    return MeanAtK(scores=scores, n_examples=len(rows), k=k, per_example=rows)


def score_example(
    example: Example, samples: list[str], family: str, schemes: tuple[str, ...], adapter: Any,
    count_solved: bool = False,
) -> dict[str, Any]:
    """Mean reward per scheme over one example's samples, plus validity and call rates (and,
    with ``count_solved``, how many samples the binary scheme scores 1)."""
    from toolrl_lib.rewards import score

    row: dict[str, Any] = {"id": example.id, "kind": example.kind}
    wanted = (*schemes, "binary") if count_solved and "binary" not in schemes else schemes
    for scheme in wanted:
        totals = [
            score(text, example.ground_truth, example.tools, scheme=scheme, family=family).total
            for text in samples
        ]
        if scheme in schemes:
            row[scheme] = sum(totals) / len(totals)
        if count_solved and scheme == "binary":
            row["solved"], row["samples"] = sum(total >= 1.0 for total in totals), len(totals)
    parsed = [adapter.parse(text) for text in samples]
    row["valid_rate"] = sum(p.valid for p in parsed) / len(parsed)
    row["call_rate"] = sum(bool(p.calls) for p in parsed) / len(parsed)
    return row


NO_CALL_KINDS = ("irrelevance",)
# BFCL's single-turn summary weighs its two AST parts (non-live, live) 10 + 10 against 10 for
# irrelevance: call kinds get 2/3 of the validation summary, no-call kinds 1/3.
CALL_WEIGHT, NO_CALL_WEIGHT = 20, 10


def summary_key(scheme: str, k: int) -> str:
    return f"{scheme}_summary@{k}"


def kind_key(kind: str, name: str) -> str:
    """Per-kind validation column, e.g. ``kind/irrelevance/binary@16`` (kept out of the
    ``*_mean@*`` columns that plots and selection read)."""
    return f"kind/{kind}/{name}"


def kind_scores(per_example: list[dict[str, Any]], schemes: tuple[str, ...], k: int) -> dict[str, float]:
    """Per-kind means of each scheme (and the call rate), and the BFCL-like summary per scheme.

    ``<scheme>_summary@<k>`` mirrors BFCL's single-turn summary on our own split: the call
    kinds (simple, multiple, parallel, parallel_multiple, ...) are averaged unweighted (as
    BFCL averages its AST categories), then weighted 2 : 1 against the no-call kind
    (irrelevance), as BFCL weighs AST (non-live + live) against irrelevance. With only one
    of the two sides present the summary is that side's mean.
    """
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in per_example:
        by_kind.setdefault(str(row["kind"]), []).append(row)
    out: dict[str, float] = {}
    for kind, rows in by_kind.items():
        for name in (*schemes, "call_rate"):
            if all(name in r for r in rows):
                out[kind_key(kind, f"{name}@{k}" if name in schemes else name)] = (
                    sum(r[name] for r in rows) / len(rows))
    for scheme in schemes:
        calls = [out[kind_key(c, f"{scheme}@{k}")] for c in by_kind
                 if c not in NO_CALL_KINDS and kind_key(c, f"{scheme}@{k}") in out]
        silent = [out[kind_key(c, f"{scheme}@{k}")] for c in by_kind
                  if c in NO_CALL_KINDS and kind_key(c, f"{scheme}@{k}") in out]
        parts = [(CALL_WEIGHT, sum(calls) / len(calls))] if calls else []
        parts += [(NO_CALL_WEIGHT, sum(silent) / len(silent))] if silent else []
        if parts:
            out[summary_key(scheme, k)] = sum(w * v for w, v in parts) / sum(w for w, _ in parts)
    return out
