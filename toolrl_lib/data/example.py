"""The one record every data source is turned into.

An ``Example`` is a single decision point for the model: given the conversation so far
(``messages``) and the tools on offer (``tools``, JSON Schema), which calls should it make
(``ground_truth``)? An empty ``ground_truth`` means "no call is correct" (irrelevance).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ToolCall = dict[str, Any]  # {"name": str, "arguments": dict}
ToolSchema = dict[str, Any]  # {"name", "description", "parameters": JSON Schema object}

# BFCL-like kinds of example, used for stratified statistics and the synthetic generator.
KINDS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "multi_turn")


@dataclass
class Example:
    """One training/evaluation example in the unified format.

    Attributes:
        id: stable, unique identifier (``<source>-<row>[-<step>]``).
        source: where it came from (``xlam``, ``toolace``, ``bfcl``, ``synthetic``, ``parquet``).
        messages: the conversation before the model's turn, as chat messages
            ``{"role": "system"|"user"|"assistant"|"tool", "content": str}``; assistant
            turns that made calls carry ``"tool_calls": [ToolCall, ...]``. No tool list
            here: tools are rendered by the prompt adapter of the model family.
        tools: functions on offer, each ``{"name", "description", "parameters"}`` where
            ``parameters`` is a JSON Schema object (``type``/``properties``/``required``).
        ground_truth: the correct calls ``[{"name": str, "arguments": dict}]``;
            ``[]`` means the correct answer makes no call.
        kind: one of ``KINDS`` (derived from the calls when not given).
        meta: free-form provenance (original row index, dataset split, ...).
    """

    id: str
    source: str
    messages: list[dict[str, Any]]
    tools: list[ToolSchema]
    ground_truth: list[ToolCall]
    kind: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = infer_kind(self.ground_truth, self.tools)

    @property
    def query(self) -> str:
        """The last user message (what the model must answer)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return str(message.get("content", ""))
        return ""

    def to_dict(self) -> dict[str, Any]:
        # Shallow on purpose: asdict() deep-copies every nested argument (slow on 70k rows).
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Example:
        missing = [k for k in ("id", "source", "messages", "tools", "ground_truth") if k not in row]
        if missing:
            raise ValueError(f"Example row is missing field(s) {missing}; got keys {sorted(row)}")
        return cls(
            id=str(row["id"]),
            source=str(row["source"]),
            messages=list(row["messages"]),
            tools=list(row["tools"]),
            ground_truth=list(row["ground_truth"]),
            kind=str(row.get("kind", "")),
            meta=dict(row.get("meta") or {}),
        )


def infer_kind(ground_truth: list[ToolCall], tools: list[ToolSchema]) -> str:
    """BFCL's taxonomy: how many calls, and whether several functions were on offer."""
    if not ground_truth:
        return "irrelevance"
    several_tools = len(tools) > 1
    if len(ground_truth) == 1:
        return "multiple" if several_tools else "simple"
    distinct = {call.get("name") for call in ground_truth}
    return "parallel_multiple" if len(distinct) > 1 else "parallel"


def write_jsonl(examples: Iterable[Example], path: str | Path) -> int:
    """Write examples as JSON lines (atomically); returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for example in examples:
            handle.write(json.dumps(example.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_jsonl(path: str | Path) -> Iterator[Example]:
    """Read examples written by ``write_jsonl``; a bad line is an error naming file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Example.from_dict(json.loads(line))
            except (json.JSONDecodeError, ValueError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a valid Example record: {error}") from error
