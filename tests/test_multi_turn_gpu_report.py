"""Reading a multi-turn GPU result file back: every variant's validation curve (the selection's
only input), its table in the report and its figure, for result files with and without
``variant_validation`` (run 1's carries only the selected variant's curve)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.gpu.rl_multi_turn_gpu import VARIANTS, variant_config, variant_table
from toolrl_lib.envs.report import plot_validation_curves, runs_side_by_side, validation_curves
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


def test_runs_from_separate_sessions_side_by_side(tmp_path):
    a = _result(a="0,base,0.1,0.2,0.0\n25,grpo,0.3,0.5,0.0\n")
    a.update(variants={"a": {"step": 25}}, models={"primed": {"own_task_success": 0.1}, "grpo": {"own_task_success": 0.4}},
             comparisons=[{"metric": "bfcl_multi_turn_base", "diff": 0.0, "ci_low": 0.0, "ci_high": 0.0},
                          {"metric": "own_task_success", "diff": 0.3, "ci_low": 0.2, "ci_high": 0.4}])
    b = _result(a="0,base,0.2,0.2,0.0\n")  # evaluated nothing yet: its test cells stay empty
    table, curves = runs_side_by_side({"G=8": a, "G=16": b})
    assert list(table.index) == ["G=8", "G=16"]
    assert table.loc["G=8", ["steps", "primed", "grpo", "diff", "ci_low", "ci_high"]].tolist() == [25, 0.1, 0.4, 0.3, 0.2, 0.4]
    assert table.loc["G=16"].isna()[["grpo", "diff"]].all()
    assert sorted(curves["variant"].unique()) == ["G=16: a", "G=8: a"] and len(curves) == 3
    figure = plot_validation_curves(curves, "G=8: a", [], tmp_path / "both.png")
    assert figure.stat().st_size > 5_000


def test_the_committed_runs_side_by_side():
    results = {name: json.loads((ROOT / "benchmarks" / "results" / f"{file}.json").read_text())
               for name, file in (("run 5 (G=8)", "rl_multi_turn_run5"), ("run 6 (G=16)", "rl_multi_turn"))}
    table, curves = runs_side_by_side(results)
    assert table.loc["run 6 (G=16)", "steps"] == 300 and table.loc["run 5 (G=8)", "steps"] == 156
    for name, result in results.items():  # the table repeats each file's own comparison
        test = next(c for c in result["comparisons"] if c["metric"] == "own_task_success")
        assert table.loc[name, "diff"] == test["diff"] and table.loc[name, "ci_low"] > 0
    assert len(curves) == sum(len(validation_curves(r)) for r in results.values())


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


def _carried_run(work: Path) -> None:
    """A run as `carry` leaves it mid-way: primed evaluated, GRPO validated at 0 and 25 only."""
    run = work / "runs" / "v"
    (run / "episodes").mkdir(parents=True)
    (work / "own").mkdir()
    (work / "gpu_run.json").write_text(json.dumps({
        "variants": ["v"], "timings": {"train_s": 100.0}, "calls": [{"command": "run ...", "seconds": 120.0}],
        "overrides": ["device=cuda"], "priming_mix": "default*3,hard*2",
        "primed_from": {"mix": "d3h2", "val_success": 0.5}}))
    (work / "own" / "primed.jsonl").write_text("".join(
        json.dumps({"task_id": f"t{i}", "kind": "chain", "success": i < 1}) + "\n" for i in range(4)))
    (run / "validation.csv").write_text(HEADER + "0,base,0.25,0.2,0.0\n25,grpo,0.75,0.5,0.0\n")
    for stage, wins in (("base", {"a"}), ("step-5", set()), ("step-25", {"a", "b", "c"})):
        (run / "episodes" / f"{stage}.jsonl").write_text("".join(
            json.dumps({"task_id": t, "success": t in wins}) + "\n" for t in "abcd"))
    (run / "worker.json").write_text(json.dumps({"step": 27, "max_steps": 1000, "finished": False}))
    # two rounds of 3 steps: TRL logs completion lengths only on the step that generated the round
    (run / "metrics.csv").write_text("step,step_time,completions/mean_length\n"
                                     "1,9.0,100\n2,2.0,\n3,3.0,\n4,11.0,90\n5,2.0,\n6,2.0,\n")


def test_a_carried_run_reports_its_progress_on_validation_only(tmp_path):
    from benchmarks.gpu.rl_multi_turn_gpu import main

    work, out = tmp_path / "work", tmp_path / "out"
    _carried_run(work)
    assert main(["progress", "--work", str(work), "--out", str(out), "--tag", "t",
                 "--figure", str(tmp_path / "curves.png")]) == 0
    result = json.loads((out / "rl_multi_turn_t.json").read_text())
    assert result["models"]["primed"] == {"own_task_success": 0.25, "own_tasks": 4}  # no BFCL folder: no BFCL keys
    assert "comparisons" not in result  # no GRPO - primed claim before the GRPO model is evaluated
    variant = result["variants"]["v"]
    check = variant["validation_start_vs_last"]
    assert check["last"] == "step-25" and check["n"] == 4  # the newest stage by step number, not by name
    assert (check["start"], check["last_success"], check["diff"]) == (0.25, 0.75, 0.5)
    assert variant["step_seconds"] == {"steps": 6, "mean": 4.833, "median_rollout_step": 10.0,
                                       "median_reuse_step": 2.0}
    text = (out / "rl_multi_turn_t.md").read_text()
    assert "| v | 27 | 1000 | 0.250 | 0.750 (step-25) | +0.500 |" in text and "in progress" in text
    assert (tmp_path / "curves.png").stat().st_size > 10_000


def test_progress_refuses_an_evaluated_run(tmp_path):
    from benchmarks.gpu.rl_multi_turn_gpu import main

    _carried_run(tmp_path / "work")
    (tmp_path / "work" / "own" / "grpo.jsonl").write_text("")
    with pytest.raises(SystemExit, match="use `report`"):
        main(["progress", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")])


def test_a_cut_bfcl_run_is_compared_on_the_categories_both_models_finished(tmp_path):
    """report --partial: the deadline cut both models' BFCL (run 5, 2026-12-06); the category each
    finished whole is compared (paired, BFCL's checker), a category one model left unfinished is not,
    and our test tasks are compared as ever."""
    from benchmarks.gpu.rl_multi_turn_gpu import main
    from toolrl_lib.data.bfcl import load_bfcl_entries
    from toolrl_lib.evaluate import bfcl_results as results

    work, out = tmp_path / "work", tmp_path / "out"
    _carried_run(work)
    info = json.loads((work / "gpu_run.json").read_text())
    info.update(own_tasks=4, bfcl_limit=2, bfcl_settings={"limit": 2, "max_new_tokens": 128, "compact_docs": False})
    (work / "gpu_run.json").write_text(json.dumps(info))
    (work / "own" / "grpo.jsonl").write_text("".join(
        json.dumps({"task_id": f"t{i}", "kind": "chain", "env": "bank", "success": i < 3}) + "\n" for i in range(4)))
    (work / "own" / "primed.jsonl").write_text("".join(
        json.dumps({"task_id": f"t{i}", "kind": "chain", "env": "bank", "success": i < 1}) + "\n" for i in range(4)))
    (work / "selection.json").write_text(json.dumps({"key": "success", "scores": {"v": 0.75}, "chosen": "v"}))

    def empty(entry_id: str) -> dict:  # an entry with no call in its one turn: BFCL's checker fails it
        return {"id": entry_id, "result": [[]], "steps": 1, "generate_seconds": 0.1}

    # both finished multi_turn_base (its first 2 entries, the limit); only primed finished miss_func
    for label, done in (("primed", {"multi_turn_base": 2, "multi_turn_miss_func": 2}),
                        ("grpo", {"multi_turn_base": 2, "multi_turn_miss_func": 1})):
        for category, n in done.items():
            ids = [e["id"] for e in load_bfcl_entries(category)[:n]]
            results.append_results(results.generations_file(work / "bfcl" / label, category), [empty(i) for i in ids])
    assert main(["report", "--work", str(work), "--out", str(out), "--partial"]) == 0
    result = json.loads((out / "rl_multi_turn.json").read_text())
    assert [c["metric"] for c in result["comparisons"]] == ["bfcl_multi_turn_base", "own_task_success"]
    base, own = result["comparisons"]
    assert (base["n"], base["diff"]) == (2, 0.0)
    assert (own["n"], own["diff"]) == (4, 0.5)
    assert result["partial_categories"] == {"primed": ["multi_turn_base", "multi_turn_miss_func"],
                                            "grpo": ["multi_turn_base"]}
    text = (out / "rl_multi_turn.md").read_text()
    assert "covers only the categories both models finished, ['multi_turn_base']" in text
    assert "| bfcl_multi_turn_base | 2 | 0.000 | 0.000 | +0.000 |" in text
