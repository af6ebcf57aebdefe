"""Abstention-aware adjustments of a scheme's total, and what each variant pays (worked cases).

GRPO with the weighted scheme taught the 135M model to *call*, not to call better: on the
88% of prompts that want a call, any call with the right name beats silence, so the
propensity to call rises everywhere, also where no call is right. ``Shaping`` changes three
payouts of any scheme, for the training reward only (validation and BFCL keep the plain
schemes):

* ``spurious_call``: the total when no call is correct (ground truth empty) but the
  completion calls; None = the scheme's own value.
* ``abstention``: the total for a correct abstention (no call expected, a valid plain-text
  answer); None = the scheme's own value.
* ``args_sharp``: on prompts that want calls, every completion that is not an exact match
  earns at most what a spurious call earns, so "right name, wrong arguments" stops paying
  more than calling when one should not.
* ``strict_format``: a completion that breaks the family format earns the scheme's minimum.
  A deliberate deviation from BFCL, which reads calls out of surrounding text and counts
  text from which no call decodes (prose mentioning ``<tool_call>``, a broken call) as a
  correct abstention: with it, the binary reward stops paying a broken call on a no-call
  prompt, at the price of measuring something stricter than BFCL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from toolrl_lib.rewards.schemes import RANGES, RewardBreakdown


@dataclass(frozen=True)
class Shaping:
    spurious_call: float | None = None
    abstention: float | None = None
    args_sharp: bool = False
    strict_format: bool = False

    @property
    def active(self) -> bool:
        return (self.spurious_call is not None or self.abstention is not None or self.args_sharp
                or self.strict_format)


def check_shaping(shaping: Shaping, scheme: str) -> Shaping:
    """A ValueError naming the field when a value lies outside the scheme's range."""
    lo, hi = RANGES[scheme]
    for name in ("spurious_call", "abstention"):
        value = getattr(shaping, name)
        if value is not None and not lo <= value <= hi:
            raise ValueError(f"reward.{name} = {value} lies outside the {scheme} range [{lo}, {hi}]")
    return shaping


def _exact(result: RewardBreakdown) -> bool:
    """Exact match of the calls, read from the breakdown (name and argument credit both 1 and
    as many calls as gold: binary's criterion; for fine_grained, all keys shared and matched)."""
    return result.n_pred == result.n_gold and result.name == 1.0 and result.args == 1.0


def shape(result: RewardBreakdown, shaping: Shaping, spurious_default: float) -> RewardBreakdown:
    """``result`` with the shaping applied; ``spurious_default`` = the scheme's own total for a
    spurious call (used by ``args_sharp`` when ``spurious_call`` is None)."""
    if not shaping.active or result.error and result.error.startswith("scoring failure"):
        return result
    total = result.total
    if shaping.strict_format and result.format != 1.0:
        return replace(result, total=RANGES[result.scheme][0])
    if result.n_gold == 0:
        if result.n_pred > 0 and shaping.spurious_call is not None:
            total = shaping.spurious_call
        elif result.n_pred == 0 and result.format == 1.0 and shaping.abstention is not None:
            total = shaping.abstention
    elif shaping.args_sharp and not (_exact(result) and result.format == 1.0):
        cap = shaping.spurious_call if shaping.spurious_call is not None else spurious_default
        total = min(total, cap)
    return replace(result, total=total)


def spurious_default(scheme: str, family: str = "hermes") -> float:
    """The scheme's own total for a valid spurious call without reasoning (args_sharp's cap)."""
    from toolrl_lib.rewards.schemes import DEFAULT_WEIGHTS, score_resolved

    text, gold = CASES["spurious call (no call is correct)"]
    return score_resolved(text, gold, [WEATHER, TIME], scheme, family, DEFAULT_WEIGHTS).total


# ---------------------------------------------------------------- worked cases
WEATHER = {"name": "get_weather", "description": "Current weather in a city.",
           "parameters": {"type": "object", "required": ["city"],
                          "properties": {"city": {"type": "string"},
                                         "unit": {"type": "string", "enum": ["c", "f"]}}}}
TIME = {"name": "get_time", "description": "Local time in a city.",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}
GOLD = [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}]


def _call(name: str, arguments: dict[str, Any]) -> str:
    import json

    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


# case -> (completion, ground truth): the prompt wants get_weather(Paris, c) unless gold is []
CASES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "exact call": (_call("get_weather", {"city": "Paris", "unit": "c"}), GOLD),
    "right name, one argument wrong": (_call("get_weather", {"city": "Paris", "unit": "f"}), GOLD),
    "right name, all arguments wrong": (_call("get_weather", {"city": "Rome", "unit": "f"}), GOLD),
    "wrong function": (_call("get_time", {"city": "Paris"}), GOLD),
    "no call where one is due": ("I cannot look that up.", GOLD),
    "spurious call (no call is correct)": (_call("get_weather", {"city": "Paris"}), []),
    "correct abstention": ("None of the functions can answer this.", []),
    "broken format (no call is correct)": ("<tool_call>{not json", []),
    "exact call after stray text": ("Sure! " + _call("get_weather", {"city": "Paris", "unit": "c"}), GOLD),
}


def payout_table(variants: dict[str, tuple[str, Shaping]] | None = None, family: str = "hermes") -> Any:
    """What each reward variant pays for each worked case (rows: cases, columns: variants).

    ``variants``: label -> (scheme, shaping); default: the three plain schemes and the
    shaped variants of ``VARIANTS``."""
    import pandas as pd

    from toolrl_lib.rewards.schemes import DEFAULT_WEIGHTS, score_resolved

    variants = variants or VARIANTS
    table: dict[str, dict[str, float]] = {}
    for label, (scheme, shaping) in variants.items():
        check_shaping(shaping, scheme)
        spurious = spurious_default(scheme, family)
        column = {}
        for case, (text, gold) in CASES.items():
            result = score_resolved(text, gold, [WEATHER, TIME], scheme, family, DEFAULT_WEIGHTS)
            column[case] = shape(result, shaping, spurious).total
        table[label] = column
    return pd.DataFrame(table)


VARIANTS: dict[str, tuple[str, Shaping]] = {
    "weighted": ("weighted", Shaping()),
    "binary (Tool-N1)": ("binary", Shaping()),
    "fine_grained (ToolRL)": ("fine_grained", Shaping()),
    "weighted, spurious call = -1": ("weighted", Shaping(spurious_call=-1.0)),
    "weighted, args-sharp": ("weighted", Shaping(args_sharp=True)),
    "weighted, spurious -1 + args-sharp": ("weighted", Shaping(spurious_call=-1.0, args_sharp=True)),
    "binary, strict format": ("binary", Shaping(strict_format=True)),
}
