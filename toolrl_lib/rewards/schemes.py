"""The three reward schemes, as pure functions of (completion, ground truth, tools).

Each scheme is one ``Scheme`` (name, range of its total, rule) registered by name in
``REGISTRY`` (``register_scheme``); ``score``, the TRL wrapper and the run config look it up there.

Notation: the completion is parsed by the family adapter into ``p`` predicted calls; the
ground truth has ``g`` calls; ``M`` is the set of (predicted, gold) pairs chosen by
``matching.assign`` (same name, best summed argument credit); ``n = max(p, g)``.
``credit(i, j)`` = matched argument values / |union of argument keys| (schema defaults
filled in, type-aware matching; see ``matching``). Every component is in [0, 1].

``weighted`` (the seed's scheme; weights from config, default 0.2/0.2/0.4/0.2)
    format    = 1 if the completion follows the family format exactly (``ParseResult.valid``)
    name      = |M| / n                     (1 when g = p = 0)
    args      = Σ_{(i,j)∈M} credit(i, j) / n (1 when g = p = 0)
    reasoning = 1 if a closed leading ``<think>`` block holds ≥ ``MIN_REASONING_WORDS``
                words and is not copied from the prompt (``context``), else 0
    total     = 2 · Σ_c w_c·c / Σ_c w_c − 1  ∈ [−1, 1]
    Dividing by n = max(p, g) is what penalises both missing calls (g > p) and extra
    calls (p > g): each costs 1/n of the name and argument credit. When no call is
    expected (g = 0), any call gives name = args = 0; answering in plain text gives 1.
    Name/argument credit does not require a valid format (format has its own weight).

A completion the parser refuses to read (``ParseResult.refused``: not a string, or longer
than ``parsing.MAX_CHARS``) gets every component 0 and the scheme's minimum total, whatever
the ground truth: otherwise an over-long ramble on a no-call example would earn name and
argument credit for calls it "did not make".

``binary`` (Tool-N1's reward, judged as BFCL's AST checker judges)
    total = 1 if the *decoded* calls equal the ground truth as a multiset (p = g, every
    gold call paired with a predicted call of the same name whose arguments all match,
    no extra keys) else 0  ∈ [0, 1]. Like BFCL, the verdict reads the calls the parser
    decodes, whatever text surrounds them; on a no-call example, text from which no call
    decodes (prose, or a broken call) is an abstention, as in BFCL's irrelevance checker.
    ``reward.strict_format`` (``shaping``) is the deliberate deviation that pays a broken
    format nothing. A gold call with ``accepted`` lists accepts any of BFCL's values.
    Reported components: format; name = 1 if the name multisets are equal; args = 1 if
    every pair's arguments match exactly and p = g; reasoning (measured, not used).

``fine_grained`` (ToolRL)
    r_name  = |N_G ∩ N_P| / |N_G ∪ N_P| over the multisets of names (1 when both empty)
    r_param = Σ_{(i,j)∈M} |keys_i ∩ keys_j| / |keys_i ∪ keys_j|
    r_value = Σ_{(i,j)∈M} #(gold keys of j whose value matches in i)
    S_max   = 1 + g + Σ_j |keys_j|          (the largest possible r_name + r_param + r_value)
    correctness = 6 · (r_name + r_param + r_value) / S_max − 3  ∈ [−3, 3]
    total   = format + correctness          ∈ [−3, 4]
    Reported components: format; name = r_name; args = (r_param + r_value) / (g + Σ_j |keys_j|)
    (for g = 0: 1 if p = 0 else 0); reasoning (measured, not used).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards.matching import argument_stats, assign, tool_properties

COMPONENTS = ("format", "name", "args", "reasoning")
DEFAULT_WEIGHTS = {"format": 0.2, "name": 0.2, "args": 0.4, "reasoning": 0.2}
MIN_REASONING_WORDS = 3
MIN_COPY_CHARS = 20  # reasoning this long that appears verbatim in the prompt is "copied"


@dataclass
class RewardBreakdown:
    """One completion's reward: the four components (each in [0, 1]) and the total."""

    format: float
    name: float
    args: float
    reasoning: float
    total: float
    scheme: str = "weighted"
    n_pred: int = 0
    n_gold: int = 0
    error: str | None = None  # why the format is invalid (or why the input was unusable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reward_range(scheme: str) -> tuple[float, float]:
    """``(lowest, highest)`` total a scheme can give."""
    if scheme not in REGISTRY:
        raise ValueError(f"unknown reward scheme {scheme!r}; expected one of {tuple(REGISTRY)}")
    return RANGES[scheme]


def resolve_weights(weights: dict[str, float] | None) -> dict[str, float]:
    """Default weights updated by ``weights``; unknown keys or a non-positive sum are errors."""
    merged = dict(DEFAULT_WEIGHTS)
    for key, value in (weights or {}).items():
        if key not in DEFAULT_WEIGHTS:
            raise ValueError(f"unknown reward weight {key!r}; expected keys {COMPONENTS}")
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 or value != value:
            raise ValueError(f"reward weight {key!r} must be a number ≥ 0, got {value!r}")
        merged[key] = float(value)
    if sum(merged.values()) <= 0:
        raise ValueError("reward weights must not all be zero")
    return merged


def normalize_calls(calls: Any) -> list[dict[str, Any]]:
    """Ground truth as ``[{"name": str, "arguments": dict}]`` (JSON string accepted);
    entries without a string name are dropped, non-dict arguments become ``{}``."""
    if isinstance(calls, str):
        try:
            calls = json.loads(calls)
        except ValueError:
            return []
    if isinstance(calls, dict):
        calls = [calls]
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        call = call.get("function", call) if isinstance(call.get("function"), dict) else call
        name = call.get("name")
        arguments = call.get("arguments", call.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {}
        if isinstance(name, str):
            out.append({"name": name.strip(), "arguments": arguments if isinstance(arguments, dict) else {}})
            if isinstance(call.get("accepted"), dict):  # BFCL's accepted-value lists (matching.accepted_credit)
                out[-1]["accepted"] = call["accepted"]
    return out


def reasoning_score(reasoning: str | None, context: str | None = None) -> float:
    """1 for real reasoning: ≥ MIN_REASONING_WORDS words, not a verbatim copy of the prompt."""
    if not reasoning:
        return 0.0
    words = reasoning.split()
    if len(words) < MIN_REASONING_WORDS:
        return 0.0
    if context:
        flat = " ".join(words)
        if len(flat) >= MIN_COPY_CHARS and flat in " ".join(context.split()):
            return 0.0
    return 1.0


@dataclass
class Scored:
    """What every scheme's rule reads: the parsed completion against the ground truth."""

    pred: list[dict[str, Any]]
    gold: list[dict[str, Any]]
    props: dict[str, Any]
    pairs: list[tuple[int, int, float]]
    fmt: float
    reasoning: float
    weights: dict[str, float]
    common: dict[str, Any]


@dataclass(frozen=True)
class Scheme:
    """A reward scheme: its name, the range of its total and its rule (``Scored`` -> breakdown)."""

    name: str
    range: tuple[float, float]
    rule: Callable[[Scored], RewardBreakdown]


REGISTRY: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> Scheme:
    """Add a scheme under its name (``score``, the TRL wrapper and the config accept it)."""
    REGISTRY[scheme.name] = scheme
    RANGES[scheme.name] = scheme.range
    return scheme


def _score(completion, ground_truth, tools, scheme, family, weights, context) -> RewardBreakdown:
    parsed = get_adapter(family).parse(completion)
    if parsed.refused:  # over the length cap / not text: the scheme's minimum, never credit
        lo, _ = RANGES[scheme]
        return RewardBreakdown(0.0, 0.0, 0.0, 0.0, lo, scheme=scheme, error=parsed.error)
    gold = normalize_calls(ground_truth)
    pred = parsed.calls
    props = tool_properties(tools) if gold and pred else {}
    pairs = assign(pred, gold, props) if gold and pred else []
    fmt = 1.0 if parsed.valid else 0.0
    reasoning = reasoning_score(parsed.reasoning, context)
    common = dict(scheme=scheme, n_pred=len(pred), n_gold=len(gold), error=parsed.error)
    return REGISTRY[scheme].rule(Scored(pred, gold, props, pairs, fmt, reasoning, weights, common))


def _weighted(s: Scored) -> RewardBreakdown:
    p, g = len(s.pred), len(s.gold)
    n = max(p, g)
    name = len(s.pairs) / n if n else 1.0
    args = sum(credit for _, _, credit in s.pairs) / n if n else 1.0
    w = s.weights
    raw = w["format"] * s.fmt + w["name"] * name + w["args"] * args + w["reasoning"] * s.reasoning
    total = 2.0 * raw / sum(w.values()) - 1.0
    return RewardBreakdown(s.fmt, name, args, s.reasoning, _clip(total, "weighted"), **s.common)


def _binary(s: Scored) -> RewardBreakdown:
    p, g = len(s.pred), len(s.gold)
    names_equal = Counter(c["name"] for c in s.pred) == Counter(c["name"] for c in s.gold)
    exact = p == g and len(s.pairs) == g and all(credit == 1.0 for _, _, credit in s.pairs)
    total = 1.0 if exact else 0.0  # BFCL's verdict: the decoded calls, not the wrapping
    return RewardBreakdown(s.fmt, float(names_equal), float(exact), s.reasoning, total, **s.common)


def _fine_grained(s: Scored) -> RewardBreakdown:
    pred, gold = s.pred, s.gold
    p, g = len(pred), len(gold)
    pred_names, gold_names = Counter(c["name"] for c in pred), Counter(c["name"] for c in gold)
    union = sum((pred_names | gold_names).values())
    r_name = sum((pred_names & gold_names).values()) / union if union else 1.0
    r_param = r_value = 0.0
    for i, j, _ in s.pairs:
        name = gold[j]["name"]
        matched, key_union, shared, _ = argument_stats(pred[i]["arguments"], gold[j]["arguments"], s.props.get(name, {}))
        r_param += shared / key_union if key_union else 1.0
        r_value += matched
    gold_keys = sum(len(call["arguments"]) for call in gold)
    s_max = 1 + g + gold_keys
    correctness = 6.0 * (r_name + r_param + r_value) / s_max - 3.0
    if g + gold_keys:
        args = (r_param + r_value) / (g + gold_keys)
    else:
        args = 1.0 if p == 0 else 0.0
    return RewardBreakdown(s.fmt, r_name, args, s.reasoning, _clip(s.fmt + correctness, "fine_grained"),
                           **s.common)


RANGES: dict[str, tuple[float, float]] = {}
register_scheme(Scheme("weighted", (-1.0, 1.0), _weighted))
register_scheme(Scheme("binary", (0.0, 1.0), _binary))
register_scheme(Scheme("fine_grained", (-3.0, 4.0), _fine_grained))
SCHEMES = tuple(REGISTRY)  # the built-in schemes, in the order tables show them


def _clip(total: float, scheme: str) -> float:
    lo, hi = RANGES[scheme]
    return min(hi, max(lo, round(total, 9)))  # round: 0.6, not 0.6000000000000001


def score(
    completion: str,
    ground_truth: list[dict[str, Any]] | str,
    tools: list[dict[str, Any]] | str,
    scheme: str = "weighted",
    family: str = "hermes",
    weights: dict[str, float] | None = None,
    context: str | None = None,
) -> RewardBreakdown:
    """Score one completion. Never raises on any completion/ground truth/tools content
    (an unknown ``scheme``/``family`` or invalid ``weights`` is a ValueError: a config bug).

    ``context`` (e.g. the prompt) is used only to detect reasoning copied from it.
    """
    if scheme not in REGISTRY:
        raise ValueError(f"unknown reward scheme {scheme!r}; expected one of {tuple(REGISTRY)}")
    get_adapter(family)
    resolved = DEFAULT_WEIGHTS if weights is None or scheme != "weighted" else resolve_weights(weights)
    return score_resolved(completion, ground_truth, tools, scheme, family, resolved, context)


def score_resolved(completion: Any, ground_truth: Any, tools: Any, scheme: str, family: str,
                   weights: dict[str, float], context: str | None = None) -> RewardBreakdown:
    """``score`` with scheme/family/weights already validated (the TRL wrapper's hot path)."""
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            tools = []
    try:
        return _score(completion, ground_truth, tools, scheme, family, weights, context)
    except Exception as error:  # noqa: BLE001 - never let a reward crash training
        lo, _ = RANGES[scheme]
        return RewardBreakdown(0.0, 0.0, 0.0, 0.0, lo, scheme=scheme, error=f"scoring failure: {type(error).__name__}")
