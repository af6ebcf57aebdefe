"""Group statistics that decide whether GRPO gets any learning signal.

GRPO samples G completions per prompt and uses the group-relative advantage
``A_i = (r_i − mean(r)) / (std(r) + eps)``. If every completion in a group gets the same
reward (zero variance), all its advantages are 0 and that prompt contributes no policy
gradient — the step is paid for (generation is the expensive part) but teaches nothing.
With G = 1 (the seed's ``num_generations=1``) every group has zero variance by
construction, so the advantage is always 0 and GRPO cannot learn at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def grouped(rewards: Sequence[float], group_size: int) -> list[list[float]]:
    """Split a flat list (prompt-major, as TRL lays out completions) into groups."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    return [list(rewards[i : i + group_size]) for i in range(0, len(rewards), group_size)]


def group_advantages(rewards: Sequence[float], group_size: int, scale: bool = True, eps: float = 1e-4) -> list[float]:
    """GRPO advantages: reward minus its group mean, divided by the group std when ``scale``."""
    out: list[float] = []
    for group in grouped(rewards, group_size):
        mean = sum(group) / len(group)
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / max(len(group) - 1, 1))
        out.extend((r - mean) / (std + eps) if scale else r - mean for r in group)
    return out


def zero_variance_fraction(rewards: Sequence[float], group_size: int, tol: float = 1e-9) -> float:
    """Fraction of groups whose rewards are all equal (no gradient from those prompts)."""
    groups = grouped(rewards, group_size)
    if not groups:
        return float("nan")
    flat = sum(1 for g in groups if max(g) - min(g) <= tol)
    return flat / len(groups)


def kind_metrics(rewards: Sequence[float], kinds: Sequence[str], group_ids: Sequence[str],
                 tol: float = 1e-9) -> dict[str, float]:
    """Per example kind: mean reward and the share of zero-variance groups.

    Which kinds GRPO actually learns from: a kind whose groups all get one reward (every
    no-call prompt answered in text, say) adds nothing to the policy gradient. Groups are the
    runs of consecutive equal ``group_ids`` (TRL lays out a prompt's completions one after
    another); a group split across processes is counted as two. Keys:
    ``reward/kind/<kind>`` and ``frac_reward_zero_std/kind/<kind>``.
    """
    if not len(rewards) == len(kinds) == len(group_ids):
        raise ValueError(f"rewards, kinds and group ids differ in length: "
                         f"{len(rewards)}, {len(kinds)}, {len(group_ids)}")
    sums: dict[str, list[float]] = {}
    flat: dict[str, list[bool]] = {}
    start = 0
    for i in range(1, len(rewards) + 1):
        if i < len(rewards) and group_ids[i] == group_ids[start]:
            continue
        kind, group = str(kinds[start]), rewards[start:i]
        sums.setdefault(kind, []).extend(group)
        flat.setdefault(kind, []).append(max(group) - min(group) <= tol)
        start = i
    out: dict[str, float] = {}
    for kind in sums:
        out[f"reward/kind/{kind}"] = sum(sums[kind]) / len(sums[kind])
        out[f"frac_reward_zero_std/kind/{kind}"] = sum(flat[kind]) / len(flat[kind])
    return out


def group_signal(rewards_by_scheme: dict[str, Sequence[float]], group_size: int) -> dict[str, dict[str, float]]:
    """Per scheme: the share of zero-variance groups at ``group_size``, the largest |advantage|
    with G = 1 (always 0: no signal) and the mean reward. Keys are the table's column names."""
    return {
        f"zero-variance groups (G={group_size})": {
            s: zero_variance_fraction(list(r), group_size) for s, r in rewards_by_scheme.items()},
        "max |advantage| with G=1": {
            s: max(abs(a) for a in group_advantages(list(r), 1)) for s, r in rewards_by_scheme.items()},
        "mean reward": {s: sum(r) / len(r) for s, r in rewards_by_scheme.items()},
    }
