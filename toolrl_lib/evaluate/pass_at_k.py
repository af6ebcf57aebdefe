"""pass@k: how likely at least one of k samples solves an example — the ceiling RL can sharpen.

GRPO raises the probability of completions the model already samples; it rarely finds ones it
never samples. So pass@k of the start model bounds what RL can do: pass@1 is what greedy-ish
use gets now, pass@64 what sharpening could reach at best. From n >= k samples per example of
which c solve it, ``pass_at_k`` is the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al.,
2021, "Evaluating Large Language Models Trained on Code"), averaged over examples.

"Solved" is the binary reward's verdict (``rewards.schemes``: the decoded calls equal the gold
ones, or no call where none is due), the same verdict BFCL's AST checker gives (99.6% agreement,
``benchmarks/results/reward_vs_bfcl.md``).
"""

from __future__ import annotations

from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one example with ``c`` of ``n`` samples correct.

    >>> pass_at_k(4, 1, 1)
    0.25
    >>> pass_at_k(4, 1, 4)
    1.0
    >>> round(pass_at_k(64, 2, 8), 4)
    0.2361
    >>> pass_at_k(8, 0, 8)
    0.0
    """
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    missed = 1.0  # C(n-c, k) / C(n, k) as a product: no huge binomials
    for i in range(n - c + 1, n + 1):
        missed *= 1.0 - k / i
    return 1.0 - missed


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to n (n itself last).

    >>> default_ks(64), default_ks(12)
    ([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 12])
    """
    ks = [1]
    while ks[-1] * 2 < n:
        ks.append(ks[-1] * 2)
    return ks + [n] if ks[-1] != n else ks


def all_or_none_share(rows: list[dict[str, Any]]) -> float:
    """The share of examples whose samples all agree under the binary reward (every one solves it,
    or none does): a GRPO group of those samples has no reward variance, so no gradient.

    >>> all_or_none_share([{"solved": 0, "samples": 8}, {"solved": 8, "samples": 8},
    ...                    {"solved": 3, "samples": 8}, {"solved": 1, "samples": 8}])
    0.5
    """
    if not rows:
        raise ValueError("all_or_none_share needs at least one example row")
    return sum(int(r["solved"]) in (0, int(r["samples"])) for r in rows) / len(rows)


def pass_at_k_curves(rows: list[dict[str, Any]], ks: list[int] | None = None) -> dict[str, Any]:
    """Curves from per-example rows carrying ``solved`` and ``samples`` (``mean_at_k(...,
    count_solved=True)``), over all examples and per ``kind``: ``{"n", "ks", "examples",
    "overall": {k: value}, "by_kind": {kind: {k: value}}, "all_or_none": {"overall": share,
    "by_kind": {kind: share}}}`` (k as a string, for JSON; ``all_or_none_share`` of the n samples:
    the binary reward's zero-variance share of GRPO groups of n)."""
    if not rows:
        raise ValueError("pass_at_k_curves needs at least one example row")
    n = min(int(row["samples"]) for row in rows)
    if any(int(row["samples"]) != n for row in rows):
        raise ValueError("every example needs the same number of samples for one curve")
    ks = ks or default_ks(n)

    def curve(part: list[dict[str, Any]]) -> dict[str, float]:
        return {str(k): round(sum(pass_at_k(n, int(r["solved"]), k) for r in part) / len(part), 6) for k in ks}

    kinds: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        kinds.setdefault(str(row.get("kind")), []).append(row)
    return {"n": n, "ks": ks, "examples": len(rows), "overall": curve(rows),
            "by_kind": {kind: curve(part) for kind, part in sorted(kinds.items())},
            "all_or_none": {"overall": round(all_or_none_share(rows), 6),
                            "by_kind": {kind: round(all_or_none_share(part), 6)
                                        for kind, part in sorted(kinds.items())}}}
