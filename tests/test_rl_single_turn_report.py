"""Issue 18 report: rl_single_turn.json in the issue's shape, from finished BFCL folders."""

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import rl_single_turn_report as report
from toolrl_lib.evaluate.bfcl_summary import HEADLINE_METRICS, SUMMARY_CATEGORIES


def _folder(root: Path, label: str, rate: float) -> None:
    rows = []
    for category in (*SUMMARY_CATEGORIES, "live_relevance"):
        for i in range(10):
            right = i < round(rate * 10)
            no_call = "irrelevance" in category
            rows.append({"model": label, "category": category, "id": f"{category}_{i}", "correct": right,
                         "error_type": "" if right else "x", "n_calls": int(not no_call or not right),
                         "called": not no_call or not right, "format_valid": True})
    (root / "bfcl" / label).mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / "bfcl" / label / "entries.csv", index=False)


def test_report_writes_issue_shape(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    for label, rate in (("base", 0.0), ("primed", 0.3), ("grpo", 0.6)):
        _folder(work, label, rate)
    (work / "selection.json").write_text(json.dumps(
        {"key": "binary_summary@16", "scores": {"i18-sharp": 0.3, "i18-weighted": 0.2}, "chosen": "i18-sharp"}))
    (work / "runs" / "i18-sharp").mkdir(parents=True)
    pd.DataFrame([{"step": 25, "stage": "grpo", "binary_summary@16": 0.3, "kind/irrelevance/binary@16": 0.5},
                  {"step": 30, "stage": "final", "binary_summary@16": 0.25}]).to_csv(
        work / "runs" / "i18-sharp" / "validation.csv", index=False)
    result = report.single_turn_report(None, out, work, score=False, n_boot=200, commands=["cmd"])
    saved = json.loads((out / "rl_single_turn.json").read_text())
    assert saved["selected_on"] == "validation" and set(saved["models"]) == {"base", "primed", "grpo"}
    assert saved["models"]["grpo"]["variant"] == "i18-sharp"
    assert saved["validation"]["i18-sharp"]["step"] == 25  # the best row on the selection key
    pairs = {(c["a"], c["b"], c["metric"]) for c in saved["comparisons"]}
    for a in ("primed", "base"):
        assert {(a, "grpo", m) for m in HEADLINE_METRICS} <= pairs
    row = next(c for c in saved["comparisons"] if c["a"] == "primed" and c["metric"] == "bfcl_single_turn_summary")
    assert set(row) == {"a", "b", "metric", "n", "diff", "ci_low", "ci_high"}
    assert row["n"] == 10 * len(SUMMARY_CATEGORIES)  # live_relevance enters no summary
    assert row["diff"] == pytest.approx(0.3) and row["ci_low"] > 0
    assert result["models"]["primed"]["non_live_ast"] == pytest.approx(0.3)
    assert "| primed | grpo | bfcl_single_turn_summary |" in (out / "rl_single_turn.md").read_text()
