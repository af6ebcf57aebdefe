"""Reading a multi-turn GPU result file back: every variant's validation curve (the selection's
only input), its table in the report and its figure, for result files with and without
``variant_validation`` (run 1's carries only the selected variant's curve)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.gpu.rl_multi_turn_gpu import VARIANTS, variant_config, variant_table
from toolrl_lib.envs.report import plot_validation_curves, validation_curves
from toolrl_lib.train.config import generation_batch_size

ROOT = Path(__file__).resolve().parents[1]
HEADER = "step,stage,success,success_recover,success_chain\n"


def _result(**variants: str) -> dict:
    return {"selection": {"chosen": "a", "validation_csv": HEADER + variants["a"]}, "variant_validation":
            {name: HEADER + rows for name, rows in variants.items()}}


def test_every_variants_curve_and_its_table():
    result = _result(a="0,base,0.1,0.2,0.0\n25,grpo,0.3,0.5,0.0\n30,final,0.2,0.4,0.0\n",
                     b="0,base,0.1,0.2,0.0\n25,grpo,0.15,0.25,0.0\n")
    curves = validation_curves(result)
    assert sorted(curves["variant"].unique()) == ["a", "b"] and len(curves) == 5
    lines = variant_table(result)
    assert "| a | 30 | 0.100 | 0.300 | 25 | 0.200 |" in lines  # start, best (and where), last
    assert "| b | 25 | 0.100 | 0.150 | 25 | 0.150 |" in lines


def test_an_older_result_gives_the_selected_curve_only():
    result = _result(a="0,base,0.1,0.2,0.0\n")
    del result["variant_validation"]
    assert list(validation_curves(result)["variant"].unique()) == ["a"]
    assert "| a | 0 | 0.100 | — | — | — |" in variant_table(result)  # no GRPO validation yet


def test_the_committed_result_plots(tmp_path):
    result = json.loads((ROOT / "benchmarks" / "results" / "rl_multi_turn.json").read_text())
    curves = validation_curves(result)
    assert set(curves["variant"]) == set(result["variants"])
    figure = plot_validation_curves(curves, result["selection"]["chosen"], sorted(result["own_by_kind"]),
                                    tmp_path / "curves.png")
    assert figure.stat().st_size > 10_000


def test_a_cut_bfcl_run_scores_only_the_categories_it_finished(tmp_path):
    """--partial: a GRPO model whose BFCL generation the deadline cut is scored on the categories
    holding every entry; a category with entries missing gets no result file (nothing is padded)."""
    from benchmarks.gpu.bfcl_multi_turn import category_rows, write_complete_results
    from toolrl_lib.data.bfcl import load_bfcl_entries
    from toolrl_lib.evaluate import bfcl_results as results

    def empty(entry_id: str) -> dict:
        return {"id": entry_id, "result": [[] for _ in range(1)], "steps": 1, "generate_seconds": 0.1}

    for category, n in (("multi_turn_base", 2), ("multi_turn_miss_func", 1)):
        ids = [e["id"] for e in load_bfcl_entries(category)[:n]]
        results.append_results(results.generations_file(tmp_path, category), [empty(i) for i in ids])
    assert write_complete_results("grpo", tmp_path, limit=2) == ["multi_turn_base"]
    assert results.result_file(tmp_path, "grpo", "multi_turn_base").is_file()
    assert not results.result_file(tmp_path, "grpo", "multi_turn_miss_func").exists()
    rows, _ = category_rows("grpo", tmp_path)
    assert [(r["category"], r["n"], r["accuracy"]) for r in rows] == [("multi_turn_base", 2, 0.0)]


def test_refusals_are_tabulated_per_kind_with_the_commonest():
    import doctest

    import benchmarks.gpu.rl_multi_turn_gpu
    import benchmarks.priming_mix
    import toolrl_lib.envs.report
    from benchmarks.gpu.rl_multi_turn_gpu import refusal_lines
    from toolrl_lib.envs.report import common_refusals

    for module in (toolrl_lib.envs.report, benchmarks.priming_mix, benchmarks.gpu.rl_multi_turn_gpu):
        found = doctest.testmod(module)
        assert found.attempted > 0 and found.failed == 0, module.__name__
    grpo = [{"kind": "recover", "refused": 2, "refusals": ["Error: insufficient funds in 12", "Error: a | b"]},
            {"kind": "recover", "refused": 1, "refusals": ["Error: insufficient funds in 3"]}]
    older = [{"kind": "recover", "refused": 4}]  # a row from before rows kept their refusals
    table = {"primed": common_refusals(older), "grpo": common_refusals(grpo)}
    assert table["grpo"]["recover"]["top"][0] == ["Error: insufficient funds in N", 2]
    assert table["primed"]["recover"] == {"episodes": 1, "refused_per_episode": 4.0, "top": []}
    lines = refusal_lines({"own_refusals": table})
    assert "| recover | 4.00 | 1.50 | Error: insufficient funds in N (2); Error: a / b (1) |" in lines
    assert refusal_lines({}) == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("card", [["grpo.per_device_train_batch_size=16", "grpo.gradient_accumulation_steps=2"],
                                  ["grpo.per_device_train_batch_size=8", "grpo.gradient_accumulation_steps=4"]],
                         ids=["h200", "h100"])
def test_every_variant_is_a_valid_config_on_either_card(variant, card, tmp_path):
    """session.sh's mtrlbg sets the micro-batch by the card; each variant must validate under both
    (a generation round a multiple of the optimizer step's 32 completions, a group size that divides it)."""
    args = argparse.Namespace(tiny=None, device="cuda", set=card)
    config = variant_config(args, variant, tmp_path / "primed_model")
    g = config.grpo
    assert g.per_device_train_batch_size * g.gradient_accumulation_steps == 32
    assert generation_batch_size(g) % 32 == 0 and generation_batch_size(g) % g.num_generations == 0
    if variant.endswith("-gen128"):
        assert generation_batch_size(g) == 128  # 4 optimizer steps a round
