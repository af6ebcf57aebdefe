"""Our multi-turn executor: BFCL's classes driven by name, under limits, never ``eval``."""

import decimal

import pytest

from toolrl_lib.data.bfcl import load_bfcl_entries, load_possible_answers
from toolrl_lib.evaluate.bfcl_multi_turn.env import (
    REJECTED_NAME,
    EnvPool,
    compact_docs,
    entry_functions,
    held_out_message,
    parse_ground_truth_call,
    validate_call,
)
from toolrl_lib.evaluate.bfcl_multi_turn.results import decode_step, sanitise_multi_turn_row
from toolrl_lib.evaluate.bfcl_multi_turn.worker import Host, render_result


def _entry(category: str, with_class: str) -> dict:
    return next(e for e in load_bfcl_entries(category) if with_class in e["involved_classes"])


@pytest.fixture(scope="module")
def pool():
    with EnvPool(call_timeout=2.0, max_bytes=1 << 30) as p:
        yield p


def test_validate_call_accepts_literals_and_refuses_code():
    methods = {"pwd": ["GorillaFileSystem", []], "mkdir": ["GorillaFileSystem", ["dir_name"]]}
    assert validate_call({"name": "mkdir", "arguments": {"dir_name": "a"}}, methods) is None
    assert "invalid function name" in validate_call({"name": "print('X') or pwd", "arguments": {}}, methods)
    assert validate_call({"name": "open", "arguments": {}}, methods) == "name 'open' is not defined"
    assert "invalid argument name" in validate_call(
        {"name": "pwd", "arguments": {"_=print('X') or 1,x": 1}}, methods)
    assert validate_call({"name": "pwd", "arguments": {"class": 1}}, methods).startswith("invalid argument")
    assert validate_call({"name": "mkdir", "arguments": {"dir_name": float("inf")}}, methods) == (
        "name 'inf' is not defined")
    assert validate_call({"name": "_private", "arguments": {}}, {"_private": []}) is not None
    assert "longer than" in validate_call({"name": "mkdir", "arguments": {"dir_name": "x" * 70_000}}, methods)


def test_fresh_state_per_episode_and_bfcl_rendering(pool):
    entry = _entry("multi_turn_base", "GorillaFileSystem")
    pool.open("a", entry)
    made = pool.call("a", {"name": "mkdir", "arguments": {"dir_name": "fresh_dir_1"}})
    assert made.executed
    listing = pool.call("a", {"name": "ls", "arguments": {}})
    assert "fresh_dir_1" in listing.result and listing.result.startswith("{")  # dicts as JSON
    pool.close("a")
    pool.open("b", entry)  # same entry again: a fresh instance, not BFCL's cached one
    assert "fresh_dir_1" not in pool.call("b", {"name": "ls", "arguments": {}}).result
    bad = pool.call("b", {"name": "mkdir", "arguments": {"nope": 1}})
    assert bad.executed and bad.result.startswith("Error during execution: ")
    assert "unexpected keyword argument 'nope'" in bad.result
    pool.close("b")


def test_unbounded_math_is_cut_off_and_rolled_back(pool):
    entry = _entry("multi_turn_base", "MathAPI")
    pool.open("m", entry)
    ok = pool.call("m", {"name": "add", "arguments": {"a": 1, "b": 2}})
    assert ok.executed and '"result": 3' in ok.result
    before = pool.restarts
    slow = pool.call("m", {"name": "logarithm", "arguments": {"value": 3, "base": 7, "precision": 10**8}})
    assert not slow.executed and "did not finish" in slow.refused and pool.restarts == before + 1
    assert slow.canonical() == {"name": REJECTED_NAME, "arguments": {}}
    huge = pool.call("m", {"name": "power", "arguments": {"base": 10, "exponent": 10**10}})
    assert not huge.executed and huge.refused  # memory or time limit
    assert pool.call("m", {"name": "add", "arguments": {"a": 2, "b": 2}}).result == '{"result": 4}'
    pool.close("m")


def test_decimal_precision_is_restored_after_a_call():
    host = Host(max_result_chars=10_000)
    host.open("k", ["MathAPI"], {}, False)
    before = decimal.getcontext().prec
    reply = host.call("k", "square_root", {"number": 2, "precision": 5})
    assert reply["ok"] and "1.4142" in reply["result"]
    assert decimal.getcontext().prec == before
    assert render_result({"a": 1}) == '{"a": 1}' and render_result(3) == "3"


def test_docs_held_out_and_compact():
    entry = next(e for e in load_bfcl_entries("multi_turn_miss_func") if e.get("missed_function"))
    docs, held = entry_functions(entry)
    turn, missing = next(iter(held.items()))
    names = {d["name"] for d in docs}
    assert all(d["name"] not in names for d in missing)
    assert all(d["description"].endswith("Python 3 syntax.") for d in docs)
    message = held_out_message(missing)
    assert message.endswith("What about now?") and missing[0]["name"] in message
    small = compact_docs(docs)
    assert all("response" not in d for d in small) and len(str(small)) < len(str(docs))


def test_ground_truth_positional_arguments_are_mapped(pool):
    entry = load_bfcl_entries("multi_turn_miss_func")[0]
    methods = pool.open("g", entry)
    assert parse_ground_truth_call("sort('final_report.pdf')", methods) == {
        "name": "sort", "arguments": {"file_name": "final_report.pdf"}}
    with pytest.raises(ValueError):
        parse_ground_truth_call("__import__('os').getcwd()", methods)
    pool.close("g")
    assert load_possible_answers("multi_turn_miss_func")[entry["id"]]


def test_sanitiser_rewrites_hostile_steps(pool):
    entry = _entry("multi_turn_base", "GorillaFileSystem")
    hostile = [
        '<tool_call>\n{"name": "print(\'X\') or pwd", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "pwd", "arguments": {"_=print(\'X\') or 1,x": 1}}\n</tool_call>',
        '<tool_call>\n{"name": "pwd", "arguments": "{}"}\n</tool_call>',
        '<tool_call>\n["not", "a", "call"]\n</tool_call>',
        "plain text",
    ]
    row = {"id": entry["id"], "result": [hostile] + [[] for _ in entry["question"][1:]]}
    clean = sanitise_multi_turn_row(row, entry, pool)
    first = clean["result"][0]
    assert decode_step(first[0]) == [{"name": REJECTED_NAME, "arguments": {}}]
    assert decode_step(first[1]) == [{"name": REJECTED_NAME, "arguments": {}}]
    assert decode_step(first[2]) == [{"name": "pwd", "arguments": {}}]
    assert first[3] == "" and first[4] == ""
    assert clean["unsanitised_result"] == row["result"]
    broken = sanitise_multi_turn_row({"id": entry["id"], "result": {"x": 1}}, entry, pool)
    assert broken["result"].startswith("Error during inference")


def test_single_turn_lines_are_decoded_like_bfcls_ast_decoder():
    from toolrl_lib.evaluate.bfcl_multi_turn.results import sanitise_single_turn_row

    good = '<tool_call>\n{"name": "math.factorial", "arguments": {"n": 5}}\n</tool_call>'
    assert sanitise_single_turn_row({"id": "x", "result": good})["result"] == good
    as_string = '<tool_call>\n{"name": "f", "arguments": "{\\"n\\": 5}"}\n</tool_call>'
    assert sanitise_single_turn_row({"id": "x", "result": as_string})["result"] == ""  # BFCL cannot decode it
    odd = sanitise_single_turn_row({"id": "x", "result": '<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>'})
    assert decode_step(odd["result"]) == [{"name": REJECTED_NAME, "arguments": {}}]
    assert "unsanitised_result" in odd
