"""Does our binary reward measure what BFCL's AST checker measures? A differential check.

For the same completions of BFCL single-turn entries, compare three verdicts:

* ``bfcl``: BFCL's own checker (the ``correct`` column of a scored evaluation);
* ``binary``: our training reward (``rewards.score(..., scheme="binary")``) against the
  ground truth with BFCL's accepted-value lists attached (``rewards.matching``: any accepted
  value per argument, ``""`` = may be omitted), i.e. the reward given the data BFCL has;
* ``binary_first``: the same reward against one accepted value per argument (the ground
  truth our loader derives, as training data has one answer): the check before the fix.

``live_relevance`` (any call is right; it enters no BFCL summary and no training data) is
left out by ``CHECKED_CATEGORIES``. Every disagreement gets a ``reason`` (``explain``), so
that one can tell a measurement artefact from a reward bug or a deliberate deviation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.data.example import Example
from toolrl_lib.rewards.matching import ACCEPTED, assign, tool_properties, with_accepted

CHECKED_CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                      "parallel_multiple", "live_simple", "live_multiple", "live_parallel",
                      "live_parallel_multiple", "irrelevance", "live_irrelevance")


def _accepted_lists(possible_answer: Any) -> list[tuple[str, dict[str, list[Any]]]]:
    """BFCL's possible answer as ``[(name, {arg: [accepted values]})]``."""
    out = []
    for item in possible_answer or []:
        if isinstance(item, dict):
            for name, args in item.items():
                out.append((name, {k: v if isinstance(v, list) else [v] for k, v in (args or {}).items()}))
    return out


def _resolve(value: Any) -> Any:
    """A nested accepted value (``{"x": [1], "y": [2]}``) as its first choice per key."""
    if isinstance(value, dict):
        return {k: _resolve(v[0] if isinstance(v, list) and v else v) for k, v in value.items()
                if not (isinstance(v, list) and v and v[0] == "")}
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    return value


def bfcl_gold(example: Example) -> list[dict[str, Any]]:
    """The entry's ground truth with BFCL's accepted lists attached (what ``binary`` scores against)."""
    return with_accepted(example.ground_truth, example.meta.get("possible_answer"))


def accepts_any(calls: list[dict[str, Any]], possible_answer: Any, tools: list[dict[str, Any]]) -> bool:
    """Do ``calls`` equal BFCL's possible answer with any accepted value per argument
    (order-free, one-to-one)? An empty answer accepts exactly no calls."""
    gold = [{"name": name, "arguments": {}, ACCEPTED: accepted}
            for name, accepted in _accepted_lists(possible_answer)]
    if len(calls) != len(gold):
        return False
    pairs = assign(calls, gold, tool_properties(tools)) if gold else []
    return len(pairs) == len(gold) and all(credit == 1.0 for _, _, credit in pairs)


def verdicts(example: Example, text: str, family: str = "hermes") -> dict[str, Any]:
    """Our two verdicts on one completion of a BFCL entry, plus what the parser saw."""
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.rewards import score

    parsed = get_adapter(family).parse(text)
    category = example.meta.get("category", "")
    first = score(text, example.ground_truth, example.tools, scheme="binary", family=family).total == 1.0
    if example.meta.get("any_call_correct"):  # live_relevance: any decoded call is right
        binary = bool(parsed.calls)
    else:
        binary = score(text, bfcl_gold(example), example.tools, scheme="binary", family=family).total == 1.0
    return {"category": category, "id": example.id, "binary": binary, "binary_first": first,
            "format_valid": parsed.valid, "n_calls": len(parsed.calls), "parse_error": parsed.error}


def _language(category: str) -> str:
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


def explain(row: dict[str, Any]) -> str:
    """Why our binary verdict and BFCL's differ ('' when they agree)."""
    if row["binary"] == row["bfcl"]:
        return ""
    language = _language(row["category"])
    if row["category"] == "live_relevance":
        return "live_relevance: any call is right for BFCL; our loader has no answer there"
    if language != "python":
        side = ("BFCL's type converter accepts a spelling we compare as a string" if row["bfcl"]
                else "our string match accepts what BFCL's converter refuses")
        return f"{language} source literal: {side}"
    if row["bfcl"]:
        return "BFCL's string rule is looser than ours (case and ' ,./-_*^' ignored in every string; see the row)"
    return "our value rules are looser than BFCL's (e.g. ints in a list of floats; see the row)"


def differential_table(examples: dict[str, Example], texts: dict[str, str], bfcl_correct: dict[str, bool],
                       family: str = "hermes") -> pd.DataFrame:
    """One row per entry present in all three maps: our verdicts, BFCL's, agreement, reason."""
    rows = []
    for entry_id, correct in bfcl_correct.items():
        if entry_id not in examples or entry_id not in texts:
            continue
        row = verdicts(examples[entry_id], texts[entry_id] or "", family)
        row["bfcl"] = bool(correct)
        row["agree"] = row["binary"] == row["bfcl"]
        row["agree_first"] = row["binary_first"] == row["bfcl"]
        row["reason"] = explain(row)
        row["completion"] = texts[entry_id]
        rows.append(row)
    return pd.DataFrame(rows)


def agreement_summary(table: pd.DataFrame) -> dict[str, Any]:
    """Agreement rates (overall and per category) and disagreement counts by reason."""
    if table.empty:
        return {"n": 0}
    per_category = table.groupby("category").agg(n=("agree", "size"), agree=("agree", "mean"),
                                                 agree_first=("agree_first", "mean"))
    return {
        "n": len(table), "agreement": float(table["agree"].mean()),
        "agreement_first_value": float(table["agree_first"].mean()),
        "disagreements": int((~table["agree"]).sum()),
        "reasons": table.loc[~table["agree"], "reason"].value_counts().to_dict(),
        "per_category": per_category.reset_index().to_dict(orient="records"),
    }


def load_eval_dir(eval_dir: str | Path) -> tuple[dict[str, str], dict[str, bool], list[str]]:
    """Raw completions and BFCL verdicts of a finished ``toolrl eval bfcl`` folder."""
    from toolrl_lib.evaluate import bfcl_results as results
    from toolrl_lib.evaluate.analysis import load_entries

    eval_dir = Path(eval_dir)
    entries = load_entries(eval_dir)
    texts = {}
    for path in sorted((eval_dir / "generations").glob("*.jsonl")):
        for row in results.read_results(path):
            texts[str(row["id"])] = row.get("raw") or ""
    entries = entries[entries["category"].isin(CHECKED_CATEGORIES)]
    correct = dict(zip(entries["id"].astype(str), entries["correct"], strict=True))
    return texts, correct, sorted(set(entries["category"]))


def bfcl_examples(categories: list[str], limit: int | None = None) -> dict[str, Example]:
    from toolrl_lib.data.bfcl import load_bfcl_examples

    return {e.id: e for c in categories for e in load_bfcl_examples(c, limit=limit)}


# ---------------------------------------------------------------- replay + perturbations
def perturbations(example: Example) -> dict[str, list[dict[str, Any]]]:
    """Deliberately varied answers to one entry: the ground truth, then changes that BFCL
    should (or should not) accept. Only variants that apply to the entry are returned."""
    gold = json.loads(json.dumps(example.ground_truth))
    out: dict[str, list[dict[str, Any]]] = {"exact": gold}
    if not gold:
        if example.tools:
            out["spurious_call"] = [{"name": example.tools[0]["name"], "arguments": {}}]
        return out
    out["no_call"] = []
    out["wrong_name"] = [{**gold[0], "name": gold[0]["name"] + "_x"}, *gold[1:]]
    args = gold[0]["arguments"]
    if args:
        key = sorted(args)[0]
        value = args[key]
        out["drop_first_arg"] = [{**gold[0], "arguments": {k: v for k, v in args.items() if k != key}}, *gold[1:]]
        if isinstance(value, str):
            out["string_upper"] = [{**gold[0], "arguments": {**args, key: value.upper()}}, *gold[1:]]
        if isinstance(value, int) and not isinstance(value, bool):
            out["int_as_float"] = [{**gold[0], "arguments": {**args, key: float(value)}}, *gold[1:]]
            out["int_as_string"] = [{**gold[0], "arguments": {**args, key: str(value)}}, *gold[1:]]
            out["int_plus_one"] = [{**gold[0], "arguments": {**args, key: value + 1}}, *gold[1:]]
    out["extra_arg"] = [{**gold[0], "arguments": {**args, "zz_unknown": 1}}, *gold[1:]]
    alternative = _second_accepted(example)
    if alternative is not None:
        out["other_accepted_value"] = alternative
    if len(gold) > 1:
        out["reversed_order"] = list(reversed(gold))
        out["missing_one_call"] = gold[:-1]
    return out


def _second_accepted(example: Example) -> list[dict[str, Any]] | None:
    """The ground truth with the first argument that has a second accepted value switched to it."""
    gold = json.loads(json.dumps(example.ground_truth))
    for i, (name, accepted) in enumerate(_accepted_lists(example.meta.get("possible_answer"))):
        if i >= len(gold) or gold[i]["name"] != name:
            return None
        for key, values in accepted.items():
            choices = [v for v in values if v != ""]
            if len(choices) > 1 and key in gold[i]["arguments"]:
                gold[i]["arguments"][key] = _resolve(choices[1])
                return gold
    return None
