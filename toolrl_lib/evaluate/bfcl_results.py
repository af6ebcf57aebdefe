"""Our generations -> BFCL result files, in the format of the handler we register.

The scorer decodes results with BFCL's ``QwenFCHandler``: ``<tool_call>\\n{json}\\n</tool_call>``
blocks. Models of other families answer in their own format, so every completion is first
parsed with its family's adapter and the calls are re-rendered in that one format; scoring
is then format-agnostic and a format problem shows up as "no call" rather than as a
parser quirk. The raw text and our parse verdict travel along in extra fields (BFCL
ignores them) for call-rate and format-validity statistics.

Also here, because both the single-turn and the multi-turn runner need them: the file
names of an evaluation folder (``generations_file``, ``result_file``, ``score_file``) and
the cutting of length-sorted prompts into generation batches (``plan_chunks``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import LIVE, MULTI_TURN, NON_LIVE, PREFIX

# Version of our result-line format (bump when to_result_entry changes meaning).
RESULT_FORMAT = 1

# BFCL result dirs map "_" back to "/", so registered names use neither.
_NAME_OK = re.compile(r"[^A-Za-z0-9.-]+")


def bfcl_model_name(label: str) -> str:
    """A label (path or hub id) -> a name BFCL accepts: letters, digits, '.', '-'."""
    name = _NAME_OK.sub("-", label).strip("-.")
    if not name:
        raise ValueError(f"cannot make a BFCL model name from {label!r}")
    return name[:80]


def category_group(category: str) -> str:
    """BFCL's folder for a category (its ``get_general_grouping``)."""
    if category in NON_LIVE:
        return "non_live"
    if category in LIVE:
        return "live"
    if category in MULTI_TURN:
        return "multi_turn"
    return "agentic"


def result_file(root: str | Path, model_name: str, category: str) -> Path:
    return Path(root) / "result" / model_name / category_group(category) / (
        f"{PREFIX}_{category}_result.json"
    )


def score_file(root: str | Path, model_name: str, category: str) -> Path:
    return Path(root) / "score" / model_name / category_group(category) / (
        f"{PREFIX}_{category}_score.json"
    )


def generations_file(out_dir: str | Path, category: str) -> Path:
    """Every completion made so far for ``category`` (the resume cache of an evaluation)."""
    return Path(out_dir) / "generations" / f"{category}.jsonl"


def render_calls(calls: list[dict[str, Any]]) -> str:
    """Calls in the registered handler's format (its regex needs these exact newlines)."""
    blocks = []
    for call in calls:
        payload = {"name": call["name"], "arguments": call.get("arguments") or {}}
        blocks.append(f"<tool_call>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_call>")
    return "\n".join(blocks)


def to_result_entry(entry_id: str, text: str, family: str) -> dict[str, Any]:
    """One completion -> one result-file line: ``result`` for BFCL plus our own fields."""
    from toolrl_lib.prompts import get_adapter

    parsed = get_adapter(family).parse(text)
    calls = [c for c in parsed.calls if isinstance(c.get("arguments", {}), dict)]
    return {
        "id": entry_id,
        "result": render_calls(calls),
        "raw": text,
        "format_valid": bool(parsed.valid),
        "n_calls": len(calls),
        "parse_error": parsed.error,
    }


def calls_entry(entry_id: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A result line from calls directly (ground-truth replay, known-wrong outputs)."""
    return {
        "id": entry_id,
        "result": render_calls(calls),
        "raw": None,
        "format_valid": True,
        "n_calls": len(calls),
        "parse_error": None,
    }


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Lines of a result file; a truncated last line (interrupted run) is ignored."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: corrupt result line: {error}") from error
    return rows


def done_ids(path: str | Path) -> set[str]:
    """Ids already generated (to resume an interrupted evaluation)."""
    return {str(row["id"]) for row in read_results(path)}


def append_results(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Append lines (flushed per batch, so an interrupted run keeps what it finished)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_partial_last_line(path)
    count = 0
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def _drop_partial_last_line(path: Path) -> None:
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def write_results(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Replace a result file with ``rows``."""
    path = Path(path)
    if path.exists():
        path.unlink()
    return append_results(path, rows)


def check_batch_limits(max_prompts: int, max_batch_tokens: int | None) -> None:
    """Refuse a generation batch of < 1 prompt or a token budget < 1 (None = no cap)."""
    if max_prompts < 1:
        raise ValueError(f"the batch size must be >= 1 prompt, got {max_prompts}")
    if max_batch_tokens is not None and max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1 token (or None: no cap), got {max_batch_tokens}")


def plan_chunks(
    prompt_tokens: list[int], max_prompts: int, max_batch_tokens: int | None, max_new_tokens: int
) -> list[tuple[int, int]]:
    """Cut prompts sorted by length into ``(start, stop)`` spans of at most ``max_prompts``
    whose padded size, count x (longest + ``max_new_tokens``), stays within ``max_batch_tokens``
    (no token cap when it is None).

    A prompt too long for the budget on its own still gets a span of one (generation may
    then run out of memory, but the entry is not skipped silently)."""
    check_batch_limits(max_prompts, max_batch_tokens)
    budget = max_batch_tokens if max_batch_tokens is not None else float("inf")
    if any(b < a for a, b in zip(prompt_tokens, prompt_tokens[1:], strict=False)):
        raise ValueError("plan_chunks needs prompt lengths sorted ascending")
    spans, start = [], 0
    while start < len(prompt_tokens):
        stop = start + 1
        while (stop < len(prompt_tokens) and stop - start < max_prompts
               and (stop + 1 - start) * (prompt_tokens[stop] + max_new_tokens) <= budget):
            stop += 1
        spans.append((start, stop))
        start = stop
    return spans
