"""Worked examples and reward-hacking probes: labelled completions to score side by side.

``worked_cases`` covers each rule of the schemes once (correct call, wrong value, wrong
function, extra/missing call, no call expected, malformed JSON, reasoning on/off).
``hacking_probes`` builds, for a real example, the cheap strategies a policy could
discover to collect reward without solving the task; ``score_table`` scores any case
list under every scheme, so a notebook can show which scheme each strategy fools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards.schemes import SCHEMES, score

WORKED_TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer", "description": "Forecast length", "default": 1},
                "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
            },
            "required": ["city"],
        },
    },
    {
        "name": "convert_currency",
        "description": "Convert an amount between currencies.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "source": {"type": "string"},
                "target": {"type": "string"},
            },
            "required": ["amount", "source", "target"],
        },
    },
]
WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
CONVERT = {"name": "convert_currency", "arguments": {"amount": 20, "source": "USD", "target": "EUR"}}
REASONING = "The user asks for a three-day forecast for Paris, so get_weather fits."


@dataclass
class Case:
    """A labelled completion with the ground truth it is scored against."""

    label: str
    completion: str
    ground_truth: list[dict[str, Any]]


def worked_cases(family: str = "hermes") -> list[Case]:
    adapter = get_adapter(family)

    def render(calls: list[dict[str, Any]], reasoning: str | None = REASONING) -> str:
        return adapter.render_completion(calls, reasoning=reasoning)

    gold = [WEATHER]
    return [
        Case("correct call + reasoning", render(gold), gold),
        Case("correct call, no reasoning", render(gold, None), gold),
        Case("case/space differ ('paris ')", render([{"name": "get_weather", "arguments": {"city": "paris ", "days": 3}}]), gold),
        Case("float for an integer (3.0)", render([{"name": "get_weather", "arguments": {"city": "Paris", "days": 3.0}}]), gold),
        Case("omitted arg = schema default", render([{"name": "get_weather", "arguments": {"city": "Paris"}}]), [{"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}]),
        Case("wrong value (days 4)", render([{"name": "get_weather", "arguments": {"city": "Paris", "days": 4}}]), gold),
        Case("wrong type ('3' for integer)", render([{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}]), gold),
        Case("wrong function", render([CONVERT]), gold),
        Case("extra call", render([WEATHER, CONVERT]), gold),
        Case("missing call (1 of 2)", render([WEATHER]), [WEATHER, CONVERT]),
        Case("parallel calls, swapped order", render([CONVERT, WEATHER]), [WEATHER, CONVERT]),
        Case("no call expected, plain answer", render([], REASONING), []),
        Case("no call expected, but calls", render(gold), []),
        Case("call expected, plain answer", render([], REASONING), gold),
        Case("malformed JSON", "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>", gold),
        Case("prose around a correct call", "Sure! " + render(gold, None) + " Done.", gold),
        Case("unterminated <think>", "<think>\nLet me think about Paris weather", gold),
    ]


def hacking_probes(example: Example, family: str = "hermes", prompt: str | None = None) -> list[Case]:
    """Degenerate strategies for one example (they should not score like a real answer)."""
    adapter = get_adapter(family)
    gold = example.ground_truth
    every_tool = [{"name": t["name"], "arguments": {}} for t in example.tools]
    filler = "Let me think step by step about which function to call. " * 3
    probes = [
        Case("reference answer", adapter.render_completion(gold, reasoning=filler.strip()), gold),
        Case("call every tool, no args", adapter.render_completion(every_tool), gold),
        Case("empty reasoning <think></think>", "<think></think>\n" + adapter.render_completion(gold), gold),
        Case("generic filler reasoning only", f"<think>\n{filler}\n</think>", gold),
        Case("copy the query as reasoning", adapter.render_completion(gold, reasoning=example.query), gold),
        Case("echo the tool schemas", json.dumps(example.tools), gold),
        Case("schema as a call", adapter.render_completion([{"name": t["name"], "arguments": t.get("parameters", {})} for t in example.tools[:1]]), gold),
        Case("right call repeated 50x", adapter.render_completion(gold * 50 if gold else every_tool * 50), gold),
        Case("huge output (60k chars)", adapter.render_completion(gold) + "\n" + "ok " * 20_000, gold),
        Case("refuse (plain text)", "I cannot help with that.", gold),
    ]
    if prompt is not None:
        probes.append(Case("copy the whole prompt as reasoning",
                           adapter.render_completion(gold, reasoning=prompt[-2000:]), gold))
    return probes


def score_table(cases: list[Case], tools: list[dict[str, Any]], family: str = "hermes",
                context: str | None = None, schemes: tuple[str, ...] = SCHEMES) -> Any:
    """A pandas DataFrame: one row per case, weighted components + each scheme's total."""
    import pandas as pd

    rows = []
    for case in cases:
        row: dict[str, Any] = {"case": case.label}
        for scheme in schemes:
            result = score(case.completion, case.ground_truth, tools, scheme=scheme,
                           family=family, context=context)
            if scheme == "weighted":
                row.update({c: getattr(result, c) for c in ("format", "name", "args", "reasoning")})
            row[scheme] = round(result.total, 3)
        rows.append(row)
    return pd.DataFrame(rows).set_index("case")


def pick_by_kind(examples: list[Example], n: int) -> list[Example]:
    """Up to ``n`` examples taken round-robin across kinds (first occurrences first), so a
    handful of prompts still shows single, parallel and no-call cases side by side."""
    by_kind: dict[str, list[Example]] = {}
    for example in examples:
        by_kind.setdefault(example.kind, []).append(example)
    queues = list(by_kind.values())
    picked: list[Example] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    return picked


def score_samples(examples: list[Example], prompts: list[str], completions: list[list[str]],
                  family: str, schemes: tuple[str, ...] = SCHEMES) -> Any:
    """A pandas DataFrame of sampled completions: one row per (example, sample) with format
    validity, call count, each scheme's total and the weighted scheme's components (``w_*``)."""
    import pandas as pd

    from toolrl_lib.rewards.schemes import COMPONENTS

    adapter = get_adapter(family)
    rows = []
    for example, prompt, group in zip(examples, prompts, completions, strict=True):
        for k, text in enumerate(group):
            parsed = adapter.parse(text)
            row: dict[str, Any] = {"example": example.id, "kind": example.kind, "sample": k,
                                   "valid": parsed.valid, "n_calls": len(parsed.calls),
                                   "completion": text}
            for scheme in schemes:
                result = score(text, example.ground_truth, example.tools, scheme=scheme,
                               family=family, context=prompt)
                row[scheme] = result.total
                if scheme == "weighted":
                    row.update({f"w_{c}": getattr(result, c) for c in COMPONENTS})
            rows.append(row)
    return pd.DataFrame(rows)
