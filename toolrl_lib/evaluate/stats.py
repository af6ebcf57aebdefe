"""Paired statistics for "model B vs model A on the same entries" (0/1 correctness).

BFCL categories are small (16 entries in live_parallel), so a point difference alone says
little: ``paired_bootstrap`` gives a 95% interval for the accuracy difference resampling
entries jointly, and ``mcnemar_exact`` tests whether the discordant entries lean one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import comb

import numpy as np


@dataclass
class PairedDiff:
    """Accuracy of A and B on the same n entries, B - A and its bootstrap interval."""

    n: int
    acc_a: float
    acc_b: float
    diff: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _as_pair(a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired outcomes must be two 1-D arrays of equal length; got {x.shape} and {y.shape}")
    if not np.isin(x, (0.0, 1.0)).all() or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("paired outcomes must be 0/1 (or booleans)")
    return x, y


def paired_bootstrap(
    a: object, b: object, n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> PairedDiff:
    """Percentile bootstrap CI of mean(b) - mean(a), resampling entry indices jointly."""
    x, y = _as_pair(a, b)
    n = len(x)
    if n == 0:
        nan = float("nan")
        return PairedDiff(0, nan, nan, nan, nan, nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    diffs = (y[idx] - x[idx]).mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(diffs, [tail, 1 - tail])
    return PairedDiff(n, float(x.mean()), float(y.mean()), float(y.mean() - x.mean()), float(lo), float(hi))


def bootstrap_ci(
    outcomes: object, n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of one model's accuracy."""
    x = np.asarray(outcomes, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return float(lo), float(hi)


@dataclass
class McNemar:
    """Discordant counts (A right & B wrong = ``a_only``; the reverse = ``b_only``) and the
    exact two-sided p-value (binomial test of ``b_only`` ~ Bin(a_only + b_only, 1/2))."""

    a_only: int
    b_only: int
    p_value: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def mcnemar_exact(a: object, b: object) -> McNemar:
    """Exact McNemar test on paired 0/1 outcomes (no continuity correction needed)."""
    x, y = _as_pair(a, b)
    a_only = int(((x == 1) & (y == 0)).sum())
    b_only = int(((x == 0) & (y == 1)).sum())
    return McNemar(a_only, b_only, mcnemar_p(a_only, b_only))


def mcnemar_p(a_only: int, b_only: int) -> float:
    """Two-sided exact p: 2 * P(X <= min) for X ~ Bin(n, 1/2), capped at 1; 1 when n = 0."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return float(min(1.0, 2 * tail))
