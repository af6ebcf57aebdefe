"""BFCL single-turn summary: the formula, the paired bootstrap, and BFCL's own data_overall.csv."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolrl_lib.evaluate import bfcl_summary as bs

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def _entries(spec: dict[str, tuple[int, int, int]], model: str = "m") -> pd.DataFrame:
    """category -> (n, correct, called): the first ``correct`` entries are right (and called
    on AST categories), then ``called - correct`` wrong calls (AST) / spurious calls."""
    rows = []
    for category, (n, correct, called) in spec.items():
        no_call = category in bs.IRRELEVANCE
        for i in range(n):
            right = i < correct
            made = (i >= n - called) if no_call else (i < called)
            rows.append({"model": model, "category": category, "id": f"{category}_{i}",
                         "correct": right, "called": made})
    return pd.DataFrame(rows)


def test_parts_follow_bfcl_weighting():
    acc = {c: 0.0 for c in bs.SUMMARY_CATEGORIES}
    n = {c: 10 for c in bs.SUMMARY_CATEGORIES}
    acc.update(simple_python=0.9, simple_java=0.3, simple_javascript=0.0, multiple=0.4)
    acc.update(live_simple=1.0, live_multiple=0.5, irrelevance=0.8, live_irrelevance=0.4)
    n.update(live_simple=20, live_multiple=60, live_parallel=10, live_parallel_multiple=10)
    p = bs.parts(acc, n)
    assert p["non_live_ast"] == pytest.approx((0.4 + 0.4) / 4)  # simple mean 0.4, then 4 parts
    assert p["live_ast"] == pytest.approx((20 * 1.0 + 60 * 0.5) / 100)  # entry-weighted
    assert p["irrelevance"] == pytest.approx(0.6)
    summary = bs.single_turn_summary(acc, n)
    assert summary == pytest.approx((0.2 + 0.5 + 0.6) / 3)
    assert bs.bfcl_overall_single_turn_only(acc, n) == pytest.approx(0.3 * summary)


def test_missing_category_is_an_error():
    acc = {c: 1.0 for c in bs.SUMMARY_CATEGORIES if c != "live_irrelevance"}
    with pytest.raises(ValueError, match="live_irrelevance"):
        bs.parts(acc, dict.fromkeys(acc, 1))


def test_summary_metrics_matches_committed_gpu_aggregates():
    """The committed per-category table of the long run gives the committed AST aggregates."""
    table = pd.read_csv(RESULTS / "rl_learning_long_bfcl.csv")
    committed = pd.read_json(RESULTS / "rl_learning_long.json", typ="series")["aggregates"]
    for row in committed:
        part = table[table.model == row["b"]]
        acc = dict(zip(part.category, part.accuracy, strict=True))
        n = dict(zip(part.category, part.n, strict=True))
        assert bs.parts(acc, n)[row["aggregate"]] == pytest.approx(row["acc_b"], abs=1e-9)


def test_accuracy_when_called_and_call_rates():
    spec = {c: (10, 2, 5) for c in bs.SUMMARY_CATEGORIES}
    spec["irrelevance"] = (10, 7, 3)  # 3 spurious calls, 7 right abstentions
    metrics = bs.summary_metrics(_entries(spec))
    assert metrics["accuracy_when_called_non_live_ast"] == pytest.approx(0.4)
    assert metrics["call_rate_non_live_ast"] == pytest.approx(0.5)
    assert metrics["call_rate_irrelevance"] == pytest.approx((3 + 5) / 20)


def test_compare_identical_models_has_zero_width_interval():
    spec = {c: (12, 4, 8) for c in bs.SUMMARY_CATEGORIES}
    a = _entries(spec)
    rows = bs.compare_summary(a, a.copy(), n_boot=200)
    assert [r["metric"] for r in rows] == list(bs.HEADLINE_METRICS)
    for row in rows:
        assert row["diff"] == 0 and row["ci_low"] == 0 and row["ci_high"] == 0
    assert {r["metric"]: r["n"] for r in rows}["non_live_ast"] == 6 * 12


def test_compare_detects_a_clear_gain_and_pairs_by_id():
    a = _entries({c: (40, 10, 30) for c in bs.SUMMARY_CATEGORIES})
    b = _entries({c: (40, 30, 30) for c in bs.SUMMARY_CATEGORIES}).sample(frac=1.0, random_state=0)
    rows = {r["metric"]: r for r in bs.compare_summary(a, b, n_boot=500)}
    summary = rows["bfcl_single_turn_summary"]
    assert summary["diff"] == pytest.approx(0.5)
    assert 0 < summary["ci_low"] <= summary["diff"] <= summary["ci_high"]
    assert rows["accuracy_when_called_non_live_ast"]["value_b"] == pytest.approx(1.0)
    # the point values are what summary_metrics gives for each model on its own
    assert summary["value_a"] == pytest.approx(bs.summary_metrics(a)["bfcl_single_turn_summary"])


def test_compare_rejects_unknown_metric_and_missing_category():
    a = _entries({c: (4, 1, 2) for c in bs.SUMMARY_CATEGORIES})
    with pytest.raises(ValueError, match="unknown metric"):
        bs.compare_summary(a, a, metrics=("pooled",))
    with pytest.raises(ValueError, match="parallel_multiple"):
        bs.compare_summary(a, a[a.category != "parallel_multiple"], n_boot=10)


def test_nan_accuracy_when_called_is_handled():
    """A model that never calls has no accuracy-when-called: the value is nan, no crash."""
    a = _entries({c: (6, 0, 0) for c in bs.SUMMARY_CATEGORIES})
    b = _entries({c: (6, 3, 3) for c in bs.SUMMARY_CATEGORIES})
    row = bs.compare_summary(a, b, metrics=("accuracy_when_called_non_live_ast",), n_boot=50)[0]
    assert np.isnan(row["value_a"]) and np.isnan(row["diff"])


@pytest.mark.slow
def test_summary_reproduces_bfcl_data_overall_csv(tmp_path):
    """Real score files: a small mixed result set (right answers, missing calls, spurious
    calls) scored by BFCL's own evaluator; its data_overall.csv equals our formula."""
    from toolrl_lib.data.bfcl import SCORED_SINGLE_TURN
    from toolrl_lib.evaluate import analysis
    from toolrl_lib.evaluate import bfcl_results as results
    from toolrl_lib.evaluate.replay import ground_truth_rows
    from toolrl_lib.evaluate.scorer import score

    limits = {c: 7 for c in SCORED_SINGLE_TURN}
    limits.update(live_parallel=3, live_multiple=11)  # unequal sizes exercise live's entry weights
    for category in SCORED_SINGLE_TURN:
        rows = ground_truth_rows(category, limits[category])
        for i, row in enumerate(rows):
            if i % 3 == 1 and category in bs.IRRELEVANCE:  # a spurious call
                rows[i] = results.calls_entry(row["id"], [{"name": "f", "arguments": {}}])
            elif i % 3 == 1 or (i % 2 and category.startswith("live_m")):  # no call where one is due
                rows[i] = results.calls_entry(row["id"], [])
        results.write_results(results.result_file(tmp_path, "mix", category), rows)
    scores = score(tmp_path, "mix", list(SCORED_SINGLE_TURN))
    entries = analysis.entries_table(tmp_path, "mix", list(scores), scores, label="mix")
    ours = bs.summary_metrics(entries)
    theirs = bs.read_overall_csv(tmp_path, "mix")
    acc = {c: s.accuracy for c, s in scores.items()}
    n = {c: s.total for c, s in scores.items()}
    assert len(set(acc.values())) > 2  # a mix, not all-right or all-wrong
    tol = 5e-5  # the CSV rounds to 0.01%
    assert theirs["non_live_ast"] == pytest.approx(ours["non_live_ast"], abs=tol)
    assert theirs["live_ast"] == pytest.approx(ours["live_ast"], abs=tol)
    assert theirs["irrelevance"] == pytest.approx(ours["irrelevance"], abs=tol)
    assert theirs["overall"] == pytest.approx(bs.bfcl_overall_single_turn_only(acc, n), abs=tol)
    assert theirs["overall"] == pytest.approx(0.3 * ours["bfcl_single_turn_summary"], abs=tol)
