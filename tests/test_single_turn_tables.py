"""Tables drawn from a committed results JSON of the rl_at_scale shape: pass@k curves with the
pass@1 -> pass@n gap, and the zero-variance shares by kind (notebooks 03 and 05)."""

from __future__ import annotations

import pytest

from toolrl_lib.evaluate import single_turn_figures as figs

RESULT = {
    "selection": {"grpo": {"chosen": "g16"}},
    "pass_at_k": {
        "sft": {"validation": {"n": 4, "overall": {"1": 0.5, "2": 0.7, "4": 0.8}},
                "bfcl_non_live_ast": {"n": 4, "non_live_ast": {"4": 0.3, "1": 0.1, "2": 0.2}}},
        "grpo": {"validation": {"n": 4, "overall": {"1": 0.6, "2": 0.7, "4": 0.75}},
                 "bfcl_non_live_ast": {"incomplete": "sampling stopped at its deadline"}},
    },
    "zero_variance": {"g16": {"all": {"all_steps": 0.5, "first_tenth": 0.4, "last_tenth": 0.6},
                              "simple": {"all_steps": 0.7, "first_tenth": 0.5, "last_tenth": 0.9}},
                      "other": {"all": {"all_steps": 0.1, "first_tenth": 0.1, "last_tenth": 0.1}}},
}


def test_pass_at_k_curves_one_row_per_model_and_split_with_the_gap():
    table = figs.pass_at_k_curves(RESULT)
    assert list(table.columns) == ["pass@1", "pass@2", "pass@4", "gap"]  # ks in numeric order
    assert list(table.index) == [("sft", "validation"), ("sft", "bfcl_non_live_ast"), ("grpo", "validation")]
    assert table.loc[("sft", "bfcl_non_live_ast"), "pass@1"] == pytest.approx(0.1)  # BFCL's key read
    assert table.loc[("sft", "validation"), "gap"] == pytest.approx(0.3)
    assert table.loc[("grpo", "validation"), "gap"] == pytest.approx(0.15)
    # the unfinished BFCL sampling is left out, not shown as zeros
    assert ("grpo", "bfcl_non_live_ast") not in table.index


def test_pass_at_k_curves_without_curves_says_so():
    with pytest.raises(ValueError, match="no pass@k curves"):
        figs.pass_at_k_curves({"pass_at_k": {"sft": {"validation": {"incomplete": "cut"}}}})


def test_zero_variance_table_defaults_to_the_selected_variant():
    table = figs.zero_variance_table(RESULT)
    assert list(table.columns) == ["all_steps", "first_tenth", "last_tenth"]
    assert table.loc["simple", "last_tenth"] == pytest.approx(0.9)
    assert figs.zero_variance_table(RESULT, "other").loc["all", "all_steps"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="no zero-variance shares for variant 'missing'"):
        figs.zero_variance_table(RESULT, "missing")


def test_the_committed_at_scale_result_reads():
    from toolrl_lib.paths import resolve

    result = figs.load_result(resolve("benchmarks/results/rl_at_scale.json"))
    curves = figs.pass_at_k_curves(result)
    assert {"base", "sft", "grpo"} <= set(curves.index.get_level_values("model"))
    assert "all" in figs.zero_variance_table(result).index
    assert len(figs.comparison_table(result, "sft", "grpo")) > 0
