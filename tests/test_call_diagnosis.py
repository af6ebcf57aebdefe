"""Issue 18's diagnosis of accuracy when called, and the figures drawn from results JSON."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks.history import call_diagnosis as cd
from toolrl_lib.evaluate import single_turn_figures as figs


def _entries(outcomes: dict[str, str], category: str = "simple_python") -> pd.DataFrame:
    rows = [{"id": i, "category": category, "called": o != "no call", "correct": o == "correct call",
             "error_type": "value_error:string" if o == "wrong call" else ("" if o == "correct call" else
                                                                          "simple_function_checker:wrong_count")}
            for i, o in outcomes.items()]
    return pd.DataFrame(rows)


A = {"e1": "correct call", "e2": "wrong call", "e3": "wrong call", "e4": "no call", "e5": "correct call"}
B = {"e1": "correct call", "e2": "correct call", "e3": "no call", "e4": "wrong call", "e5": "no call"}


def test_transitions_and_when_called_account_for_every_entry():
    table = cd.transitions(_entries(A), _entries(B))
    assert table.to_numpy().sum() == 5
    assert table.loc["wrong call", "correct call"] == 1 and table.loc["correct call", "no call"] == 1
    moved = cd.when_called(table)
    assert moved["a_accuracy_when_called"] == pytest.approx(2 / 4)  # e1, e5 right of 4 calls
    assert moved["b_accuracy_when_called"] == pytest.approx(2 / 3)  # e1, e2 right of 3 calls
    assert moved["fixed (wrong -> correct)"] == 1 and moved["wrong calls given up (wrong -> no call)"] == 1
    assert moved["new wrong calls (no call -> wrong)"] == 1
    other = _entries({"x": "correct call"}, category="irrelevance")
    assert cd.transitions(pd.concat([_entries(A), other]), _entries(B)).to_numpy().sum() == 5  # AST only


def test_called_errors_are_shares_of_the_calls():
    errors = cd.called_errors({"a": _entries(A), "b": _entries(B)})
    assert errors.loc["value_error:string", "a"] == pytest.approx(2 / 4)
    assert errors.loc["value_error:string", "b"] == pytest.approx(1 / 3, abs=1e-4)  # rounded to 4 places


def test_signal_by_kind_reads_metrics(tmp_path):
    path = tmp_path / "metrics.csv"
    pd.DataFrame({"step": [1, 2, 3, 4], "frac_reward_zero_std/kind/simple": [1.0, 0.5, 0.5, 0.0],
                  "reward/kind/simple": [0.0, 0.2, 0.4, 0.6]}).to_csv(path, index=False)
    signal = cd.signal_by_kind(path, window=2)
    assert signal.loc["simple", "frac_reward_zero_std"] == pytest.approx(0.5)
    assert signal.loc["simple", "reward_first"] == pytest.approx(0.1)
    assert signal.loc["simple", "reward_last"] == pytest.approx(0.5)


def test_figures_from_results_json(tmp_path):
    result = {"selection": {"chosen": "v"}, "comparisons": [
        {"a": "primed", "b": "grpo", "metric": m, "n": 10, "diff": d, "ci_low": d - 0.01, "ci_high": d + 0.01}
        for m, d in (("bfcl_single_turn_summary", 0.02), ("irrelevance", -0.05))]}
    (tmp_path / "r.json").write_text(json.dumps(result))
    table = figs.comparison_table(result)
    assert list(table["category"]) == ["bfcl_single_turn_summary", "irrelevance"]
    with pytest.raises(ValueError, match="no comparison base -> grpo"):
        figs.comparison_table(result, "base", "grpo")
    assert figs.plot_comparisons(tmp_path / "r.json", tmp_path / "c.png").stat().st_size > 0
    table3 = cd.transitions(_entries(A), _entries(B))
    metrics = tmp_path / "m.csv"
    pd.DataFrame({"frac_reward_zero_std/kind/simple": [0.5], "reward/kind/simple": [0.1]}).to_csv(metrics)
    diagnosis = cd.diagnosis({"primed": _entries(A), "grpo": _entries(B)}, {"run": metrics})
    (tmp_path / "d.json").write_text(json.dumps(diagnosis, default=float))
    assert diagnosis["transitions"] == table3.to_dict()
    assert figs.plot_transitions(tmp_path / "d.json", tmp_path / "t.png").stat().st_size > 0
    assert figs.plot_signal_by_kind(tmp_path / "d.json", tmp_path / "s.png").stat().st_size > 0
    with pytest.raises(FileNotFoundError, match="benchmark"):
        figs.load_result(tmp_path / "missing.json")
