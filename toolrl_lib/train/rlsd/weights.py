"""RLSD token weights as tiny pure tensor functions (formulas: the ``toolrl_lib.train.rlsd`` package docstring)."""

from __future__ import annotations

import torch


def token_deltas(teacher_logps: torch.Tensor, student_logps: torch.Tensor) -> torch.Tensor:
    """Δ_t = log π_T − log π_S, detached; non-finite differences (−inf − −inf) become 0."""
    delta = (teacher_logps - student_logps).detach().float()
    return torch.nan_to_num(delta, nan=0.0, posinf=0.0, neginf=0.0)


def _column(advantages: torch.Tensor) -> torch.Tensor:
    """Sequence advantages as (B, 1) so they broadcast over tokens."""
    return advantages.unsqueeze(1) if advantages.dim() == 1 else advantages


def raw_token_weights(delta: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """exp(sign(A) · Δ_t) before clipping; 1 wherever A = 0."""
    exponent = (torch.sign(_column(advantages)) * delta).clamp(-30.0, 30.0)
    return torch.exp(exponent)


def token_weights(delta: torch.Tensor, advantages: torch.Tensor, eps_w: float) -> torch.Tensor:
    """w_t = clip(exp(sign(A) · Δ_t), 1 − ε_w, 1 + ε_w)."""
    return raw_token_weights(delta, advantages).clamp(1.0 - eps_w, 1.0 + eps_w)


def reweight_advantages(advantages: torch.Tensor, weights: torch.Tensor, lam: float) -> torch.Tensor:
    """Â_t = A · ((1 − λ) + λ · w_t), shape (B, T); λ = 0 gives A broadcast exactly."""
    column = _column(advantages)
    if lam == 0.0:
        return column.expand_as(weights).clone()
    return column * ((1.0 - lam) + lam * weights.to(column.dtype))


def weight_stats(
    delta: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_w: float
) -> dict[str, torch.Tensor]:
    """Sums/extremes for logging: reduce these across processes, then ``finish_stats``.

    Weight statistics cover tokens of completions with A ≠ 0 ("active"); Δ and the KL
    estimate cover every completion token.
    """
    mask = mask.bool()
    active = mask & (_column(advantages) != 0)
    raw = raw_token_weights(delta, advantages)
    weights = raw.clamp(1.0 - eps_w, 1.0 + eps_w)
    clipped = (raw < 1.0 - eps_w) | (raw > 1.0 + eps_w)
    kl = torch.expm1(delta.clamp(max=30.0)) - delta  # k3: r − 1 − log r with r = π_T / π_S
    inf = torch.tensor(float("inf"), device=delta.device)
    return {
        "weight_sum": (weights * active).sum(),
        "clipped_sum": (clipped & active).sum().float(),
        "active_count": active.sum().float(),
        "weight_min": torch.where(active, weights, inf).min() if active.any() else inf,
        "weight_max": torch.where(active, weights, -inf).max() if active.any() else -inf,
        "delta_sum": (delta * mask).sum(),
        "kl_sum": (kl * mask).sum(),
        "token_count": mask.sum().float(),
    }


def finish_stats(stats: dict[str, torch.Tensor]) -> dict[str, float]:
    """Turn (reduced) sums into the logged means; NaN where nothing was counted."""
    nan = float("nan")
    active = float(stats["active_count"])
    tokens = float(stats["token_count"])
    has_active = active > 0
    return {
        "weight_mean": float(stats["weight_sum"]) / active if has_active else nan,
        "weight_min": float(stats["weight_min"]) if has_active else nan,
        "weight_max": float(stats["weight_max"]) if has_active else nan,
        "clip_frac": float(stats["clipped_sum"]) / active if has_active else nan,
        "delta_mean": float(stats["delta_sum"]) / tokens if tokens > 0 else nan,
        "teacher_kl": float(stats["kl_sum"]) / tokens if tokens > 0 else nan,
    }
