"""The validation metric that mirrors BFCL's single-turn summary on our own split."""

import pytest

from toolrl_lib.evaluate.mean_at_k import kind_key, kind_scores, summary_key


def _rows(kind, values, call_rate=1.0):
    return [{"id": f"{kind}{i}", "kind": kind, "binary": v, "call_rate": call_rate} for i, v in enumerate(values)]


def test_summary_weighs_call_kinds_two_to_one_against_no_call():
    rows = (_rows("simple", [1, 1]) + _rows("multiple", [0, 0, 0, 1]) + _rows("parallel", [0.5])
            + _rows("irrelevance", [0, 1, 1, 1], call_rate=0.25))
    out = kind_scores(rows, ("binary",), 16)
    call_part = (1 + 0.25 + 0.5) / 3  # kinds averaged unweighted, like BFCL's AST categories
    assert out[summary_key("binary", 16)] == pytest.approx((2 * call_part + 0.75) / 3)
    assert out[kind_key("irrelevance", "binary@16")] == 0.75
    assert out[kind_key("irrelevance", "call_rate")] == 0.25
    # the plain mean over examples would weigh kinds by their counts instead
    assert out[summary_key("binary", 16)] != pytest.approx(sum(r["binary"] for r in rows) / len(rows))


def test_summary_with_one_side_only():
    assert kind_scores(_rows("simple", [1, 0]), ("binary",), 2)[summary_key("binary", 2)] == 0.5
    assert kind_scores(_rows("irrelevance", [1]), ("binary",), 2)[summary_key("binary", 2)] == 1.0


def test_no_summary_column_is_a_mean_column():
    """Plots and the old selection read ``*_mean@*`` columns; the new ones stay out of them."""
    out = kind_scores(_rows("simple", [1]) + _rows("irrelevance", [0]), ("binary",), 4)
    assert not any("_mean@" in key for key in out)
