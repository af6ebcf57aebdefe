"""Multi-turn through BFCL's official checker: ground truth 800/800, hostile files inert.

Slow-ish: BFCL's evaluator runs in its own venv (``toolrl eval setup``), ~15 s in all.
"""

import json

import pytest

from toolrl_lib.data.bfcl import MULTI_TURN, load_bfcl_entries, load_possible_answers
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.bfcl_multi_turn.results import REJECTED_NAME, write_ground_truth
from toolrl_lib.evaluate.rescore import score_folder

pytestmark = pytest.mark.slow


def _hostile_rows(marker_dir):
    """Two entries whose every turn holds a call that runs code in BFCL's own checker."""
    entries = [e for e in load_bfcl_entries("multi_turn_base") if "GorillaFileSystem" in e["involved_classes"]][:2]
    answers = load_possible_answers("multi_turn_base")
    touch = "__import__('pathlib').Path({!r}).write_text('x')"  # not a method name: BFCL leaves it alone
    by_name = json.dumps({"name": f"{touch.format(str(marker_dir / 'NAME'))} or pwd", "arguments": {}})
    by_key = json.dumps({"name": "pwd", "arguments": {f"_={touch.format(str(marker_dir / 'KEY'))} or 1,x": 1}})
    steps = [f"<tool_call>\n{by_name}\n</tool_call>", f"<tool_call>\n{by_key}\n</tool_call>"]
    return [{"id": e["id"], "result": [list(steps) for _ in answers[e["id"]]]} for e in entries]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One folder scored once: the ground truth of all 800 entries, except two entries of
    multi_turn_base replaced by hostile steps, plus one hostile single-turn line."""
    root = tmp_path_factory.mktemp("mixed")
    markers = root / "markers"
    markers.mkdir()
    assert write_ground_truth(root, list(MULTI_TURN), name="mixed") == {c: 0 for c in MULTI_TURN}
    hostile = _hostile_rows(markers)
    path = results.result_file(root, "mixed", "multi_turn_base")
    bad_ids = {r["id"] for r in hostile}
    kept = [r for r in results.read_results(path) if r["id"] not in bad_ids]
    results.write_results(path, hostile + kept)
    entry = load_bfcl_entries("simple_python")[0]
    line = {"id": entry["id"], "result": '<tool_call>\n{"name": 1, "arguments": {}}\n</tool_call>'}
    results.write_results(results.result_file(root, "mixed", "simple_python"), [line])
    return root, markers, bad_ids, score_folder(root)


def test_ground_truth_replays_800_of_800_through_our_executor_and_bfcl(scored):
    root, _, bad_ids, out = scored
    by_category = {row["category"]: row for row in out.summary}
    for category in MULTI_TURN:
        expected = 200 - (len(bad_ids) if category == "multi_turn_base" else 0)
        assert by_category[category]["n"] == 200
        assert by_category[category]["correct"] == expected, category
    entries = (root / "entries.csv").read_text()
    failed = {line.split(",")[2] for line in entries.splitlines()[1:] if ",False," in line}
    assert failed == bad_ids | {load_bfcl_entries("simple_python")[0]["id"]}
    turns = (root / "multi_turn.csv").read_text()
    assert turns.count("multi_turn_") >= 800
    assert out.overall["parts"]["multi_turn"] == pytest.approx(798 / 800)
    assert "agentic" in out.overall["parts_missing"] and "memory_kv" in out.overall["categories_missing"]


def test_hostile_result_files_never_run_code_and_fail(scored):
    root, markers, bad_ids, out = scored
    assert list(markers.iterdir()) == []  # neither payload ran in BFCL's checker
    changed = {r.category: r.changed for r in out.sanitised}
    assert changed["multi_turn_base"] == len(bad_ids) and changed["multi_turn_miss_func"] == 0
    written = [r for r in results.read_results(results.result_file(root, "mixed", "multi_turn_base"))
               if r["id"] in bad_ids]
    assert all("__import__" not in json.dumps(r["result"]) for r in written)
    assert all("__import__" in json.dumps(r["unsanitised_result"]) for r in written)
    single = results.read_results(results.result_file(root, "mixed", "simple_python"))[0]
    assert REJECTED_NAME in single["result"] and out.summary[0]["correct"] == 0


CONTROL = """
import json, sys
from bfcl_eval.model_handler.utils import convert_to_function_call
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
entry, steps = json.load(sys.stdin)
for step in steps:
    item = json.loads(step.split("\\n")[1])
    calls = convert_to_function_call([{item["name"]: item["arguments"]}])
    execute_multi_turn_func_call(calls, entry["initial_config"], entry["involved_classes"], "control", entry["id"])
"""


def test_control_bfcl_runs_the_same_payloads_unsanitised(tmp_path):
    """The marker files do prove execution: BFCL's own decoding and executor, given the raw
    steps, create them (in the scorer venv)."""
    import subprocess

    from toolrl_lib.evaluate.bfcl_venv import ensure_bfcl_venv

    markers = tmp_path / "markers"
    markers.mkdir()
    row = _hostile_rows(markers)[0]
    entry = next(e for e in load_bfcl_entries("multi_turn_base") if e["id"] == row["id"])
    payload = json.dumps([entry, row["result"][0]])
    proc = subprocess.run([str(ensure_bfcl_venv()), "-c", CONTROL], input=payload, text=True,
                          capture_output=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (markers / "NAME").exists() and (markers / "KEY").exists()
