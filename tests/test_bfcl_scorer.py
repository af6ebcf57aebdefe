"""The official BFCL scorer (own venv, subprocess): ground-truth replay and known-wrong outputs.

Slow: creates the scorer venv on first use (~1 min, ~550 MB) and runs BFCL's evaluator.
"""

import pytest

from toolrl_lib.data.bfcl import SCORED_SINGLE_TURN, load_bfcl_examples
from toolrl_lib.evaluate import analysis
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.replay import KNOWN_GT_DEFECTS, replay_ground_truth
from toolrl_lib.evaluate.scorer import read_bfcl_summaries, score

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    out = tmp_path_factory.mktemp("gt")
    return out, replay_ground_truth(out, list(SCORED_SINGLE_TURN))


def test_ground_truth_replay_is_correct_except_bfcl_data_defects(replay):
    _, scores = replay
    failed = {f["id"] for s in scores.values() for f in s.failures}
    assert failed == set(KNOWN_GT_DEFECTS)
    for category, s in scores.items():
        assert s.total == len(load_bfcl_examples(category))
        if not any(i.startswith(category + "_") for i in KNOWN_GT_DEFECTS):
            assert s.accuracy == 1.0, category


def test_our_aggregates_match_bfcl_csv(replay):
    out, scores = replay
    entries = analysis.entries_table(out, "groundtruth", list(scores), scores, label="gt")
    ours = analysis.aggregates(analysis.summary_table(entries, ci=False))
    theirs = read_bfcl_summaries(out)
    assert ours["non_live_ast"] == pytest.approx(theirs["non_live_ast"], abs=5e-5)
    assert ours["live_ast"] == pytest.approx(theirs["live_ast"], abs=5e-5)


def test_known_wrong_outputs_fail_with_expected_error_types(tmp_path):
    sp = load_bfcl_examples("simple_python", limit=4)
    irr = load_bfcl_examples("irrelevance", limit=2)
    rel = load_bfcl_examples("live_relevance", limit=1)
    good = sp[0].ground_truth[0]
    rows = {
        "simple_python": [
            results.calls_entry(sp[0].id, [{"name": "not_a_function", "arguments": good["arguments"]}]),
            results.calls_entry(sp[1].id, []),  # no call at all
            results.calls_entry(sp[2].id, [{"name": sp[2].ground_truth[0]["name"], "arguments": {}}]),
            results.calls_entry(sp[3].id, [{**sp[3].ground_truth[0],
                                            "arguments": {**sp[3].ground_truth[0]["arguments"], "a": 999}}]),
        ],
        "irrelevance": [
            results.calls_entry(irr[0].id, [{"name": irr[0].tools[0]["name"], "arguments": {}}]),
            results.calls_entry(irr[1].id, []),
        ],
        "live_relevance": [results.calls_entry(rel[0].id, [])],
    }
    for category, lines in rows.items():
        results.write_results(results.result_file(tmp_path, "wrong", category), lines)
    scores = score(tmp_path, "wrong", list(rows))
    errors = {f["id"]: f["error_type"] for s in scores.values() for f in s.failures}
    assert errors[sp[0].id] == "simple_function_checker:wrong_func_name"
    assert errors[sp[1].id] == "simple_function_checker:wrong_count"  # no call
    assert errors[sp[2].id] == "simple_function_checker:missing_required"
    assert errors[sp[3].id].startswith("value_error:")
    assert errors[irr[0].id] == "irrelevance_error:decoder_success"
    assert irr[1].id not in errors  # silence is right on irrelevance
    assert errors[rel[0].id] == "relevance_error:decoder_failed"
    assert scores["irrelevance"].accuracy == 0.5


def test_the_driver_stands_in_for_the_hosted_api_handlers_only():
    """The scorer process skips BFCL's hosted-API handler modules (and the vendor SDKs they
    import); the checkers and the local handler the driver registers are BFCL's own modules."""
    import subprocess

    from toolrl_lib.evaluate.bfcl_venv import ensure_bfcl_venv
    from toolrl_lib.evaluate.scorer import DRIVER

    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import bfcl_driver\n"
        "sys.meta_path.insert(0, bfcl_driver._SkipApiHandlers())\n"
        "from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING\n"
        "from bfcl_eval.eval_checker import eval_runner\n"
        "from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler\n"
        "claude = sys.modules['bfcl_eval.model_handler.api_inference.claude']\n"
        "print(type(claude).__name__, 'anthropic' in sys.modules, bool(getattr(eval_runner, '__file__', None)),\n"
        "      QwenFCHandler.__module__, len(MODEL_CONFIG_MAPPING) > 50)\n"
    )
    out = subprocess.run([str(ensure_bfcl_venv()), "-c", probe, str(DRIVER.parent)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["_UnusedHandlers", "False", "True",
                   "bfcl_eval.model_handler.local_inference.qwen_fc", "True"]
