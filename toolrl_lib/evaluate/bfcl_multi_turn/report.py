"""Tables of BFCL's multi-turn results: turns passed, force-terminations, inference errors.

BFCL stops checking an entry at its first failing turn; the turn is in its failure record
(``error_message`` "... for turn N", or the length of ``execution_result`` for a state
mismatch), so "turns passed" = that index, or every turn for a correct entry. Entries
that never reached the checker (force-terminated, inference errors such as a prompt over
the model's window) have no turns-passed value and are counted on their own.
``transcript`` prints one episode step by step. (BFCL's Overall, which weighs multi-turn
against the single-turn parts, is ``bfcl_summary.bfcl_overall``.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.data.bfcl import load_possible_answers
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.analysis import failure_error_type

MULTI_TURN_COLUMNS = ["category", "id", "correct", "error_type", "turns", "turns_passed",
                      "force_terminated", "inference_error", "steps", "calls", "refused_calls"]
_TURN = re.compile(r"for turn (\d+)")


def failed_turn(failure: dict[str, Any]) -> int | None:
    """The turn BFCL's checker failed an entry at (None: it never got to check a turn)."""
    error = failure.get("error")
    if not isinstance(error, dict):
        return None
    kind = str(error.get("error_type", ""))
    if kind in ("multi_turn:force_terminated", "multi_turn:inference_error"):
        return None
    match = _TURN.search(str(error.get("error_message", "")))
    if match:
        return int(match.group(1))
    executed = error.get("execution_result")
    if isinstance(executed, list) and executed:
        return len(executed) - 1
    return None


def multi_turn_table(root: str | Path, name: str, categories: list[str], scores: dict[str, Any]) -> pd.DataFrame:
    """One row per multi-turn entry: BFCL's verdict, turns passed, and our loop's counts."""
    rows = []
    for category in categories:
        failures = {str(f["id"]): f for f in scores[category].failures}
        answers = load_possible_answers(category)
        for row in results.read_results(results.result_file(root, name, category)):
            entry_id = str(row["id"])
            failure = failures.get(entry_id)
            turns = len(answers.get(row["id"], []))
            result = row.get("result")
            error_type = "" if failure is None else failure_error_type(failure)
            rows.append({
                "category": category, "id": entry_id, "correct": failure is None,
                "error_type": error_type, "turns": turns,
                "turns_passed": turns if failure is None else failed_turn(failure),
                "force_terminated": error_type == "multi_turn:force_terminated",
                "inference_error": not isinstance(result, list),
                "steps": sum(len(t) for t in result) if isinstance(result, list) else 0,
                "calls": int(row.get("n_calls", 0) or 0),
                "refused_calls": int(row.get("n_refused", 0) or 0),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=MULTI_TURN_COLUMNS)


def multi_turn_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per category: accuracy, mean share of turns passed (checked entries), force-terminated
    and inference-error counts."""
    out = []
    for category, group in table.groupby("category", sort=False):
        checked = group[group["turns_passed"].notna()]
        share = (checked["turns_passed"].astype(float) / checked["turns"].clip(lower=1)).mean()
        out.append({
            "category": category, "n": len(group), "accuracy": float(group["correct"].mean()),
            "turns_passed_share": float(share) if len(checked) else float("nan"),
            "force_terminated": int(group["force_terminated"].sum()),
            "inference_errors": int(group["inference_error"].sum()),
            "calls_per_entry": float(group["calls"].mean()),
        })  # fmt: skip
    return pd.DataFrame(out)


def transcript(eval_dir: str | Path, category: str, entry_id: str | None = None,
               max_chars: int = 400) -> str:
    """One entry's episode, step by step: each turn's user message, every model reply (raw),
    the calls as written for BFCL, and the results fed back (cut to ``max_chars``)."""
    from toolrl_lib.data.bfcl import load_bfcl_entries

    rows = results.read_results(results.generations_file(eval_dir, category))
    if not rows:
        raise FileNotFoundError(f"no multi-turn generations for {category} in {eval_dir}")
    row = next((r for r in rows if str(r["id"]) == entry_id), None) if entry_id else rows[0]
    if row is None:
        raise KeyError(f"{entry_id} not in {results.generations_file(eval_dir, category)}")
    entry = next(e for e in load_bfcl_entries(category) if e["id"] == row["id"])

    def cut(text: Any) -> str:
        text = str(text)
        return text if len(text) <= max_chars else text[:max_chars] + f" ... [{len(text)} chars]"

    lines = [f"# {row['id']}"]
    if not isinstance(row.get("result"), list):
        return "\n".join(lines + [f"inference error: {row.get('result')}"])
    feedback = row.get("tool_results") or []
    for turn, steps in enumerate(row["result"]):
        question = entry["question"][turn] if turn < len(entry["question"]) else []
        asked = " / ".join(str(m.get("content", "")) for m in question) or "(held-out functions revealed)"
        lines.append(f"\n## turn {turn}: {cut(asked)}")
        for step, written in enumerate(steps):
            raw = (row.get("raw") or [[]])[turn][step] if turn < len(row.get("raw") or []) else ""
            lines.append(f"  step {step} reply: {cut(raw)!r}")
            lines.append(f"  step {step} for BFCL: {cut(written) if written else '(no call: turn ends)'}")
            for result in (feedback[turn][step] if turn < len(feedback) and step < len(feedback[turn]) else []):
                lines.append(f"    -> {cut(result)}")
    if row.get("force_terminated"):
        lines.append("\n(force-terminated: more than 20 steps in a turn)")
    return "\n".join(lines)
