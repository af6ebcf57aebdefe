"""Library helpers that notebooks 02, 03, 04 and 05 call instead of inline code: the reward
figures, sample scoring, group signal, notebook 05's model resolution and the mean@k rates."""

import json

import pandas as pd
import pytest

from toolrl_lib.data.explore import prepare_smoke
from toolrl_lib.evaluate import compare_models
from toolrl_lib.evaluate.mean_at_k import MeanAtK
from toolrl_lib.prompts import get_adapter
from toolrl_lib.rewards import SCHEMES
from toolrl_lib.rewards import plots as reward_plots
from toolrl_lib.rewards.groups import group_signal
from toolrl_lib.rewards.probes import (
    WORKED_TOOLS,
    hacking_probes,
    score_samples,
    score_table,
    worked_cases,
)
from toolrl_lib.train.dataset import ensure_split

PNG = b"\x89PNG\r\n\x1a\n"


def _examples():
    from toolrl_lib.data.synthetic import generate_examples

    return generate_examples(6, seed=3)[:2]


def test_normalised_maps_each_scheme_range_to_unit_interval():
    assert reward_plots.normalised(-1.0, "weighted") == 0.0
    assert reward_plots.normalised(4.0, "fine_grained") == 1.0
    assert reward_plots.normalised(0.5, "binary") == 0.5


def test_reward_figures_are_pngs(tmp_path):
    worked = score_table(worked_cases("hermes"), WORKED_TOOLS, family="hermes")
    example = _examples()[0]
    probes = score_table(hacking_probes(example, "hermes"), example.tools, family="hermes")
    samples = pd.DataFrame({s: [0.0, 0.5, 1.0, 0.5] for s in SCHEMES})
    paths = [
        reward_plots.plot_worked_examples(worked, tmp_path / "a" / "worked.png"),
        reward_plots.plot_reward_distribution(samples, tmp_path / "dist.png", "title"),
        reward_plots.plot_zero_variance({s: 0.5 for s in SCHEMES}, tmp_path / "zero.png", 2),
        reward_plots.plot_hacking_probes(probes, tmp_path / "probes.png"),
    ]
    assert all(p.read_bytes()[:8] == PNG for p in paths)


def test_score_samples_one_row_per_completion_with_components():
    examples = _examples()
    adapter = get_adapter("hermes")
    gold = [adapter.render_completion(e.ground_truth) for e in examples]
    completions = [[gold[0], "no call here"], [gold[1], gold[1]]]
    table = score_samples(examples, ["p0", "p1"], completions, "hermes")
    assert len(table) == 4 and list(table["sample"]) == [0, 1, 0, 1]
    assert {*SCHEMES, "w_format", "w_args", "valid", "n_calls"} <= set(table.columns)
    first = table.iloc[0]
    assert first["binary"] == 1.0 and bool(first["valid"])
    with pytest.raises(ValueError):  # a missing group is an error, not a silently short table
        score_samples(examples, ["p0", "p1"], completions[:1], "hermes")


def test_group_signal_flags_zero_variance_and_g1():
    signal = group_signal({"binary": [1, 1, 0, 1], "weighted": [0.2, 0.2, 0.2, 0.2]}, 2)
    zero = signal["zero-variance groups (G=2)"]
    assert zero == {"binary": 0.5, "weighted": 1.0}
    assert signal["max |advantage| with G=1"] == {"binary": 0.0, "weighted": 0.0}
    assert signal["mean reward"]["binary"] == 0.75


def test_mean_at_k_rates_average_over_examples():
    result = MeanAtK(scores={}, n_examples=2, k=2, per_example=[
        {"valid_rate": 1.0, "call_rate": 0.5}, {"valid_rate": 0.0, "call_rate": 1.0}])
    assert result.rates() == {"valid_rate": 0.5, "call_rate": 0.75}
    assert MeanAtK(scores={}, n_examples=0, k=1).rates() == {}


def test_compare_models_resolution(tmp_path):
    with pytest.raises(FileNotFoundError, match="notebook 04"):
        compare_models.model_path("merged", tmp_path)
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "config.json").write_text("{}")
    assert compare_models.resolve_models(["embedded", "merged"], ["base", "tuned"], tmp_path) == {
        "base": "embedded", "tuned": str(tmp_path / "merged")}
    with pytest.raises(ValueError, match="same length"):
        compare_models.resolve_models(["embedded"], ["a", "b"], tmp_path)


def test_trained_family_prefers_parameter_then_run(tmp_path):
    assert compare_models.trained_family(tmp_path, "auto") is None
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "run_info.json").write_text(json.dumps({"family": "qwen3"}))
    assert compare_models.trained_family(tmp_path, "auto") == "qwen3"
    assert compare_models.trained_family(tmp_path, "hermes") == "hermes"


def test_mean_at_k_table_needs_the_split(tmp_path):
    with pytest.raises(FileNotFoundError, match="notebook 01"):
        compare_models.mean_at_k_table({"a": "embedded"}, tmp_path / "val.jsonl", None, n=1, k=1,
                                       max_new_tokens=4)


def test_mean_at_k_table_on_the_tiny_model(tiny_model_dir, tmp_path):
    from toolrl_lib.data.example import write_jsonl

    write_jsonl(_examples(), tmp_path / "val.jsonl")
    table = compare_models.mean_at_k_table({"tiny": str(tiny_model_dir)}, tmp_path / "val.jsonl",
                                           "hermes", n=2, k=2, max_new_tokens=4)
    assert list(table["model"]) == ["tiny"] and table["n"].iloc[0] == 2
    assert 0.0 <= table["call_rate"].iloc[0] <= 1.0 and "binary_mean@2" in table


def test_ensure_split_fails_clearly_or_prepares(tmp_path):
    with pytest.raises(FileNotFoundError, match="01_data_exploration"):
        ensure_split(tmp_path / "none", "smoke")
    with pytest.raises(FileNotFoundError):
        ensure_split(tmp_path / "none", "full", prepare_if_missing=True)
    out = ensure_split(tmp_path / "made", "smoke", prepare_if_missing=True)
    # notebook 01's smoke set, byte for byte: data/processed/smoke has one owner (prepare_smoke)
    prepare_smoke(tmp_path / "direct")
    for split in ("train.jsonl", "val.jsonl"):
        assert (out / split).read_bytes() == (tmp_path / "direct" / split).read_bytes()
    assert ensure_split(out, "smoke", prepare_if_missing=True) == out  # present: left as it is
