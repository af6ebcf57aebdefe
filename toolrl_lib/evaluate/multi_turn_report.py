"""Multi-turn tables (turns passed, force-terminations, inference errors) and BFCL's Overall.

BFCL stops checking an entry at its first failing turn; the turn is in its failure record
(``error_message`` "... for turn N", or the length of ``execution_result`` for a state
mismatch), so "turns passed" = that index, or every turn for a correct entry. Entries
that never reached the checker (force-terminated, inference errors such as a prompt over
the model's window) have no turns-passed value and are counted on their own.

``bfcl_overall`` computes BFCL v4's Overall with its own weights (10 non-live, 10 live,
10 irrelevance, 30 multi-turn, 40 agentic) over the parts that ran completely, renormalised
by their weights, names the parts and categories that did not run, and also gives the
number BFCL's own CSV shows (missing parts counted as 0).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.data.bfcl import MEMORY, MULTI_TURN, WEB_SEARCH, load_possible_answers
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.analysis import failure_error_type
from toolrl_lib.evaluate.bfcl_summary import (
    IRRELEVANCE,
    LIVE_AST,
    NON_LIVE_OTHER,
    NON_LIVE_SIMPLE,
    OVERALL_WEIGHTS,
)

PART_CATEGORIES: dict[str, tuple[str, ...]] = {
    "non_live": NON_LIVE_SIMPLE + NON_LIVE_OTHER,
    "live": LIVE_AST,
    "irrelevance": IRRELEVANCE,
    "multi_turn": MULTI_TURN,
    "agentic": WEB_SEARCH + MEMORY,
}
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
    from toolrl_lib.evaluate.runner import generations_file

    rows = results.read_results(generations_file(eval_dir, category))
    if not rows:
        raise FileNotFoundError(f"no multi-turn generations for {category} in {eval_dir}")
    row = next((r for r in rows if str(r["id"]) == entry_id), None) if entry_id else rows[0]
    if row is None:
        raise KeyError(f"{entry_id} not in {generations_file(eval_dir, category)}")
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


def bfcl_overall(summary: pd.DataFrame | list[dict[str, Any]], full_categories: bool = True) -> dict[str, Any]:
    """BFCL's Overall over the parts that ran, with the missing parts and categories named.

    Parts as bfcl-eval builds them: non-live = mean(mean of the simple_* three, multiple,
    parallel, parallel_multiple); live = entry-weighted mean of the four live AST
    categories; irrelevance = mean(irrelevance, live_irrelevance); multi-turn = mean of its
    four categories; agentic (web search, memory) never runs here. A part counts only when
    all its categories were scored.
    """
    frame = pd.DataFrame(summary)
    acc = dict(zip(frame["category"], frame["accuracy"], strict=True)) if len(frame) else {}
    n = dict(zip(frame["category"], frame["n"], strict=True)) if len(frame) else {}
    values: dict[str, float | None] = {}
    for part, categories in PART_CATEGORIES.items():
        if not all(c in acc for c in categories):
            values[part] = None
        elif part == "non_live":
            simple = sum(acc[c] for c in NON_LIVE_SIMPLE) / len(NON_LIVE_SIMPLE)
            values[part] = (simple + sum(acc[c] for c in NON_LIVE_OTHER)) / 4
        elif part == "live":
            values[part] = sum(acc[c] * n[c] for c in categories) / sum(n[c] for c in categories)
        else:
            values[part] = sum(acc[c] for c in categories) / len(categories)
    ran = [p for p, v in values.items() if v is not None]
    weight = sum(OVERALL_WEIGHTS[p] for p in ran)
    overall = sum(OVERALL_WEIGHTS[p] * values[p] for p in ran) / weight if ran else None  # type: ignore[operator]
    return {
        "parts": values,
        "parts_run": ran,
        "parts_missing": [p for p in PART_CATEGORIES if p not in ran],
        "categories_missing": [c for p in PART_CATEGORIES for c in PART_CATEGORIES[p] if c not in acc],
        "weights": {p: OVERALL_WEIGHTS[p] for p in PART_CATEGORIES},
        "overall_over_parts_run": overall,
        "weight_share_run": weight / sum(OVERALL_WEIGHTS.values()),
        "bfcl_overall_missing_as_zero": sum(OVERALL_WEIGHTS[p] * values[p] for p in ran)  # type: ignore[operator]
        / sum(OVERALL_WEIGHTS.values()),
        "partial": not full_categories,
    }


def overall_note(overall: dict[str, Any]) -> str:
    """One honest sentence for a report."""
    if overall["overall_over_parts_run"] is None:
        return "BFCL Overall: no part of it ran completely."
    missing = ", ".join(overall["categories_missing"]) or "none"
    return (
        f"BFCL Overall over the parts that ran ({', '.join(overall['parts_run'])}; "
        f"{overall['weight_share_run']:.0%} of BFCL's weight): {overall['overall_over_parts_run']:.4f}. "
        f"Not run: {missing}. BFCL's own Overall (missing = 0): "
        f"{overall['bfcl_overall_missing_as_zero']:.4f}."
        + (" Subset (--limit) estimate." if overall.get("partial") else "")
    )
