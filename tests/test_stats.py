"""Paired bootstrap and exact McNemar against hand-computed small cases."""

import math

import numpy as np
import pytest

from toolrl_lib.evaluate.stats import bootstrap_ci, mcnemar_exact, mcnemar_p, paired_bootstrap


def test_mcnemar_hand_computed():
    # n = 5 discordant, all favour B: p = 2 * (1/2)^5 = 0.0625
    assert mcnemar_p(0, 5) == pytest.approx(0.0625)
    # n = 5, split 1/4: p = 2 * (C(5,0) + C(5,1)) / 32 = 12/32
    assert mcnemar_p(1, 4) == pytest.approx(0.375)
    assert mcnemar_p(4, 1) == pytest.approx(0.375)
    # n = 10, split 1/9: 2 * (1 + 10) / 1024
    assert mcnemar_p(1, 9) == pytest.approx(22 / 1024)
    # balanced and empty cases: no evidence at all
    assert mcnemar_p(3, 3) == 1.0
    assert mcnemar_p(0, 0) == 1.0


def test_mcnemar_counts_discordant_pairs_only():
    a = [1, 1, 0, 0, 1, 0]
    b = [1, 0, 1, 1, 1, 0]
    test = mcnemar_exact(a, b)
    assert (test.a_only, test.b_only) == (1, 2)
    assert test.p_value == pytest.approx(mcnemar_p(1, 2))  # = 2 * (1 + 3) / 8 -> capped 1
    assert test.p_value == 1.0


def test_paired_bootstrap_degenerate_cases():
    same = paired_bootstrap([1, 0, 1, 0], [1, 0, 1, 0])
    assert (same.diff, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    better = paired_bootstrap([0, 0, 0], [1, 1, 1])
    assert (better.diff, better.ci_low, better.ci_high) == (1.0, 1.0, 1.0)
    assert (better.acc_a, better.acc_b, better.n) == (0.0, 1.0, 3)


def test_paired_bootstrap_interval_brackets_the_difference():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 200)
    b = a.copy()
    b[:30] = 1  # B fixes some of A's failures, never breaks one
    result = paired_bootstrap(a, b, n_boot=4000, seed=3)
    assert result.diff == pytest.approx(b.mean() - a.mean())
    assert result.ci_low <= result.diff <= result.ci_high
    assert result.ci_low >= 0.0  # a paired design sees that B is never worse
    # reproducible with the same seed
    assert paired_bootstrap(a, b, n_boot=4000, seed=3) == result


def test_bootstrap_ci_and_validation():
    lo, hi = bootstrap_ci([1, 1, 1, 1])
    assert (lo, hi) == (1.0, 1.0)
    lo, hi = bootstrap_ci([0, 1] * 50, seed=0)
    assert lo < 0.5 < hi
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1])
    with pytest.raises(ValueError):
        mcnemar_exact([2, 0], [1, 0])


def _entries(model: str, outcomes: dict[str, list[int]]):
    import pandas as pd

    rows = [{"model": model, "category": c, "id": f"{c}_{i}", "correct": bool(v)}
            for c, values in outcomes.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_compare_aggregate_weighs_categories_like_bfcl():
    from toolrl_lib.evaluate.analysis import compare_aggregate

    cats = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
            "parallel_multiple"]
    a = _entries("a", {c: [0, 0, 0, 0] for c in cats})
    # B gets every simple_python entry right and nothing else: non-live AST = (1/3)/4
    b = _entries("b", {c: [1, 1, 1, 1] if c == "simple_python" else [0, 0, 0, 0] for c in cats})
    result = compare_aggregate(a, b, "non_live_ast", n_boot=500)
    assert result["acc_a"] == 0.0
    assert abs(result["diff"] - 1 / 12) < 1e-12
    assert result["ci_low"] == result["ci_high"] == result["diff"]  # no variance to resample


def test_compare_aggregate_interval_contains_difference_and_refuses_missing_parts():
    import pytest

    from toolrl_lib.evaluate.analysis import compare_aggregate

    live = {"live_simple": [1, 0, 1, 0, 1, 1], "live_multiple": [0, 1, 0, 1, 0, 0, 1, 1],
            "live_parallel": [1, 0], "live_parallel_multiple": [0, 1]}
    better = {c: [1] * len(v) for c, v in live.items()}
    result = compare_aggregate(_entries("a", live), _entries("b", better), "live_ast", n_boot=2000)
    assert result["n"] == 18
    assert abs(result["acc_a"] - 10 / 18) < 1e-12  # entry-weighted: pooled accuracy
    assert result["ci_low"] <= result["diff"] <= result["ci_high"]
    assert result["ci_low"] > 0  # B is never worse on any entry
    partial = {c: v for c, v in live.items() if c != "live_parallel"}
    with pytest.raises(ValueError, match="live_parallel"):
        compare_aggregate(_entries("a", partial), _entries("b", better), "live_ast")


def test_call_precision_separates_calling_more_from_calling_better():
    import pandas as pd

    from toolrl_lib.evaluate.analysis import call_precision

    def model(name, called, correct):
        return pd.DataFrame({"model": name, "category": "simple_python", "id": [str(i) for i in range(len(called))],
                             "called": called, "correct": correct})

    # A calls on 2 of 4 and gets 1 right; B calls on all 4 and gets 2 right: accuracy doubles,
    # accuracy when called stays 0.5 - B only calls more
    a = model("a", [True, True, False, False], [True, False, False, False])
    b = model("b", [True, True, True, True], [True, False, True, False])
    live = model("a", [True], [True]).assign(category="live_simple")
    table = call_precision(pd.concat([a, b, live]), seed=0).set_index(["model", "group"])
    assert table.loc[("a", "non_live_ast"), "accuracy"] == 0.25
    assert table.loc[("b", "non_live_ast"), "accuracy"] == 0.5
    assert table.loc[("a", "non_live_ast"), "accuracy_when_called"] == 0.5
    assert table.loc[("b", "non_live_ast"), "accuracy_when_called"] == 0.5
    assert table.loc[("b", "non_live_ast"), "call_rate"] == 1.0
    assert table.loc[("a", "live_ast"), "calls"] == 1
    assert ("b", "live_ast") not in table.index  # no live entries for b: no row
    low, high = table.loc[("b", "non_live_ast"), ["ci_low", "ci_high"]]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
