"""Differential check of our binary reward against BFCL's verdicts (no scorer needed here)."""

import pytest

from benchmarks import reward_check as rc
from toolrl_lib.data.bfcl import load_bfcl_examples
from toolrl_lib.prompts import get_adapter

RENDER = get_adapter("hermes").render_completion


@pytest.fixture(scope="module")
def examples():
    return {e.id: e for c in ("simple_python", "parallel", "irrelevance") for e in load_bfcl_examples(c, limit=6)}


def test_accepts_any_uses_every_accepted_value(examples):
    example = next(e for e in examples.values() if rc._second_accepted(e) is not None)
    other = rc._second_accepted(example)
    assert rc.accepts_any(other, example.meta["possible_answer"], example.tools)
    verdict = rc.verdicts(example, RENDER(other))
    assert verdict["binary"] and not verdict["binary_first"]  # the reward now sees every accepted value


def test_accepts_any_is_order_free_and_exact_in_count(examples):
    example = examples["parallel_0"]
    gold = example.ground_truth
    answer = example.meta["possible_answer"]
    assert rc.accepts_any(list(reversed(gold)), answer, example.tools)
    assert not rc.accepts_any(gold[:-1], answer, example.tools)
    assert not rc.accepts_any([*gold, gold[0]], answer, example.tools)
    assert rc.accepts_any([], [], [])


def test_perturbations_cover_call_and_no_call_entries(examples):
    call = rc.perturbations(examples["simple_python_0"])
    assert {"exact", "no_call", "wrong_name", "extra_arg", "drop_first_arg"} <= set(call)
    none = rc.perturbations(examples["irrelevance_0"])
    assert set(none) == {"exact", "spurious_call"} and none["exact"] == []


def test_differential_table_reasons(examples):
    ids = ["simple_python_0", "simple_python_1", "irrelevance_0"]
    texts = {ids[0]: RENDER(examples[ids[0]].ground_truth), ids[1]: "Sure! " + RENDER(examples[ids[1]].ground_truth),
             ids[2]: "No function fits."}
    bfcl = {ids[0]: True, ids[1]: True, ids[2]: True}
    bfcl[ids[0]] = False  # pretend BFCL refused the exact answer: a disagreement with a reason
    table = rc.differential_table(examples, texts, bfcl).set_index("id")
    assert table.loc[ids[1], "agree"] and table.loc[ids[2], "agree"]  # stray text: BFCL reads the call
    assert not table.loc[ids[0], "agree"]
    assert table.loc[ids[0], "reason"].startswith("our value rules are looser")
    summary = rc.agreement_summary(table.reset_index())
    assert summary["n"] == 3 and summary["disagreements"] == 1
    assert summary["agreement"] == pytest.approx(2 / 3)


def test_undecodable_text_is_an_abstention_on_no_call_entries(examples):
    example = examples["irrelevance_0"]
    for text in ("<tool_call>{broken", "Calls go inside <tool_call> tags."):
        verdict = rc.verdicts(example, text)
        assert verdict["binary"] and not verdict["format_valid"]


def test_explain_names_looser_value_rules():
    row = {"category": "simple_python", "binary": True, "bfcl": False, "binary_first": True,
           "format_valid": True, "n_calls": 1}
    assert "looser" in rc.explain(row)
    assert rc.explain({**row, "bfcl": True}) == ""
    assert rc.explain({**row, "category": "simple_java"}).startswith("java source literal")
