"""benchmarks/gpu/rl_learning_gpu.py helpers that must be right before a GPU session: the
validation-only selection (its job queue is benchmarks/gpu/lanes.py: tests/test_gpu_lanes.py).
Harness tests: ``pytest -m gpu_harness``."""

from __future__ import annotations

import pytest

from benchmarks.gpu import rl_learning_gpu as rl

pytestmark = pytest.mark.gpu_harness


def _ran(root, name, body="25,grpo,0.2\n"):
    """A variant folder with the validation rows ``body`` (step,stage,binary_mean@16)."""
    folder = root / "runs" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "validation.csv").write_text("step,stage,binary_mean@16\n" + body)


def test_selection_uses_validation_only_and_skips_rlsd(tmp_path):
    rows = {"grpo-weighted": "25,grpo,0.20\n50,final,0.25\n",
            "grpo-binary": "25,grpo,0.30\n50,final,0.10\n",
            "rlsd-weighted": "25,grpo,0.90\n"}
    for name, body in rows.items():
        _ran(tmp_path, name, "0,primed,0.5\n" + body)
    assert rl.select_grpo(tmp_path, "binary_mean@16") == "grpo-binary"  # best row, not final
    assert rl.best_validation(tmp_path / "runs" / "grpo-weighted", "binary_mean@16") == (0.25, 50)
    assert rl.best_validation(tmp_path / "runs" / "missing", "binary_mean@16")[1] == -1
    import json

    scores = json.loads((tmp_path / "selection.json").read_text())["scores"]
    assert set(scores) == {"grpo-weighted", "grpo-binary"}  # variants that never ran are not candidates


def test_selection_refuses_when_no_grpo_variant_ran(tmp_path):
    import pytest

    (tmp_path / "runs" / "rlsd-weighted").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no GRPO variant"):
        rl.select_grpo(tmp_path, "binary_mean@16")


def test_rlsd_run_paired_with_its_grpo_twin(tmp_path):
    import json

    _ran(tmp_path, "grpo-weighted")
    _ran(tmp_path, "dapo-weighted", "25,grpo,0.3\n")
    _ran(tmp_path, "rlsd-weighted", "25,grpo,0.9\n")  # never a GRPO candidate, however well it validates
    assert rl.select_grpo(tmp_path, "binary_mean@16") == "dapo-weighted"
    assert rl.pick_rlsd(tmp_path, "dapo-weighted") == "rlsd-weighted"  # the only RLSD run
    selection = json.loads((tmp_path / "selection.json").read_text())
    assert (selection["rlsd"], selection["rlsd_twin"]) == ("rlsd-weighted", "grpo-weighted")
    _ran(tmp_path, "rlsd-dapo-weighted")
    assert rl.pick_rlsd(tmp_path, "dapo-weighted") == "rlsd-dapo-weighted"  # the chosen one's twin
    assert rl.pick_rlsd(tmp_path, "grpo-weighted") == "rlsd-weighted"
    assert rl.pick_rlsd(tmp_path / "empty", "grpo-weighted") is None


def test_bfcl_models_only_base_primed_needs_no_trained_variant(tmp_path):
    models = rl.bfcl_models(tmp_path, "binary_mean@16", also=[], only=["base", "primed"])
    assert models == {"base": "embedded", "primed": str(tmp_path / "primed_model")}
    assert not (tmp_path / "selection.json").exists()  # no selection was made


def test_bfcl_models_also_adds_the_variant_not_selected(tmp_path):
    import pytest

    _ran(tmp_path, "dapo-weighted", "50,grpo,0.20\n")
    _ran(tmp_path, "dapo-weighted-nocall3", "50,grpo,0.25\n")
    models = rl.bfcl_models(tmp_path, "binary_mean@16", also=["dapo-weighted", "dapo-weighted-nocall3"],
                            only=None)
    # the selected one is "grpo"; the other keeps its name, so both are on BFCL whichever wins
    assert models["grpo"] == str(tmp_path / "runs" / "dapo-weighted-nocall3" / "best")
    assert models["dapo-weighted"] == str(tmp_path / "runs" / "dapo-weighted" / "best")
    assert "dapo-weighted-nocall3" not in models and "rlsd" not in models
    with pytest.raises(SystemExit, match="not a variant"):
        rl.bfcl_models(tmp_path, "binary_mean@16", also=["dapo"], only=None)
    with pytest.raises(SystemExit, match="expected labels"):
        rl.bfcl_models(tmp_path, "binary_mean@16", also=[], only=["base", "nocall"])


def test_report_pairs_each_extra_variant_with_primed_and_the_selected():
    from benchmarks import rl_learning_report as report

    pairs = report.pairs_for(["base", "primed", "grpo", "dapo-weighted"])
    assert ("primed", "dapo-weighted") in pairs and ("grpo", "dapo-weighted") in pairs
    assert pairs[: len(report.PAIRS)] == report.PAIRS
    assert report.pairs_for(["base", "primed", "grpo"]) == report.PAIRS


def test_issue18_second_session_variants_load_and_keep_the_no_call_share(monkeypatch):
    """The GPU variants' overrides pass config validation, and hard negatives replace easy copies
    one for one (the same GRPO prompt count and no-call count as the control)."""
    from collections import Counter

    from toolrl_lib.data.example import Example
    from toolrl_lib.data.synthetic import generate_examples
    from toolrl_lib.train.mix import grpo_mix

    monkeypatch.setattr(rl, "EXTRA", ["validation.hard_negatives=12"])
    examples: list[Example] = generate_examples(600, seed=3)
    easy = Counter(e.kind for e in examples)["irrelevance"]
    counts = {}
    for name in ("i18f-binary", "i18f-hardneg", "i18f-hardneg-bal", "i18f-strict"):
        config = rl.load_config(rl.VARIANTS[name])
        assert config.reward.scheme == "binary" and config.validation.hard_negatives == 12
        config.data.hard_negatives = 2 * easy if config.data.hard_negatives else 0  # this pool's share
        mixed = grpo_mix(examples, config)
        counts[name] = (len(mixed), Counter(e.kind for e in mixed)["irrelevance"])
    assert len(set(counts.values())) == 1 and counts["i18f-binary"][1] == 3 * easy
    assert rl.load_config(rl.VARIANTS["i18f-strict"]).reward.strict_format
