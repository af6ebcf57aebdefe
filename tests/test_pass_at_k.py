"""pass@k: the unbiased estimator, curves by kind, and ``toolrl eval pass-at-k`` end to end."""

import itertools
import json
from types import SimpleNamespace

import pytest

from toolrl_lib.data.example import Example, write_jsonl
from toolrl_lib.evaluate.pass_at_k import default_ks, pass_at_k, pass_at_k_curves
from toolrl_lib.prompts import get_adapter

TOOLS = [{"name": "get_weather", "description": "Weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]  # fmt: skip


@pytest.mark.parametrize("n,c", [(5, 0), (5, 1), (5, 3), (6, 2), (6, 6)])
def test_estimator_equals_the_mean_over_all_k_subsets(n, c):
    """pass@k is the chance that a k-subset of the n samples holds a correct one: enumerate them."""
    correct = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(correct, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_estimator_refuses_impossible_counts():
    for n, c, k in ((4, 5, 1), (4, 1, 5), (4, 1, 0), (0, 0, 1)):
        with pytest.raises(ValueError, match="pass_at_k needs"):
            pass_at_k(n, c, k)


def test_curves_overall_and_by_kind():
    rows = [{"kind": "simple", "solved": 1, "samples": 4}, {"kind": "simple", "solved": 0, "samples": 4},
            {"kind": "irrelevance", "solved": 4, "samples": 4}]
    out = pass_at_k_curves(rows)
    assert out["ks"] == [1, 2, 4] == default_ks(4) and out["n"] == 4 and out["examples"] == 3
    assert out["by_kind"]["simple"] == {"1": 0.125, "2": 0.25, "4": 0.5}
    assert out["overall"]["1"] == pytest.approx((0.25 + 0 + 1) / 3, abs=1e-6)
    assert all(a <= b for a, b in itertools.pairwise(out["overall"].values()))  # never falls with k
    # 1 of 4 and 0 of 4 (simple), 4 of 4 (irrelevance): groups of these 4 samples with no variance
    assert out["all_or_none"] == {"overall": pytest.approx(2 / 3, abs=1e-6),
                                  "by_kind": {"irrelevance": 1.0, "simple": 0.5}}
    with pytest.raises(ValueError, match="same number of samples"):
        pass_at_k_curves([{"kind": "a", "solved": 1, "samples": 4}, {"kind": "a", "solved": 1, "samples": 2}])


def test_cli_curves_from_a_sampler(tmp_path, monkeypatch, capsys):
    """One call example solved by 1 of its 4 samples, one no-call example by all 4 (no call made)."""
    from toolrl_lib.cli import main
    from toolrl_lib.evaluate import backends
    from toolrl_lib.models import make_tiny_model

    _, tok = make_tiny_model(seed=0)
    adapter = get_adapter("hermes")
    call = Example("p-0", "test", [{"role": "user", "content": "Weather in Oslo?"}], TOOLS,
                   [{"name": "get_weather", "arguments": {"city": "Oslo"}}], kind="simple")
    none = Example("p-1", "test", [{"role": "user", "content": "Tell me a joke."}], TOOLS, [], kind="irrelevance")
    write_jsonl([call, none], tmp_path / "val.jsonl")
    right = adapter.render_completion(call.ground_truth)
    wrong = adapter.render_completion([{"name": "get_weather", "arguments": {"city": "Rome"}}])
    texts = {adapter.render_prompt(call, tok): [wrong, right, wrong, wrong],
             adapter.render_prompt(none, tok): ["Here is one: ..."] * 4}
    asked = {}

    def sample(prompts, k, max_new_tokens, temperature, top_p, seed):
        asked.update(k=k, temperature=temperature)
        return [texts[p] for p in prompts]

    monkeypatch.setattr(backends, "load_sampler", lambda model, **kw: SimpleNamespace(
        tokenizer=tok, sample=sample, backend="fake"))
    out = tmp_path / "curves" / "sft_val.json"
    assert main(["eval", "pass-at-k", "--model", "m", "--data", str(tmp_path / "val.jsonl"), "--n", "4",
                 "--format", "hermes", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert asked == {"k": 4, "temperature": 1.0}
    assert data["by_kind"] == {"irrelevance": {"1": 1.0, "2": 1.0, "4": 1.0},
                               "simple": {"1": 0.25, "2": 0.5, "4": 1.0}}
    assert data["overall"]["1"] == 0.625 and data["backend"] == "fake"
    assert json.loads(capsys.readouterr().out) == data
    assert main(["eval", "pass-at-k", "--model", "m", "--data", str(tmp_path / "val.jsonl"), "--n", "4",
                 "--ks", "1,8"]) != 0
    assert "every k must be between 1 and --n (4)" in capsys.readouterr().err


def test_pass_at_k_table_gives_each_model_its_curves(tmp_path, tiny_model_dir):
    from tests.test_train_run import toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.evaluate.compare_models import pass_at_k_table

    write_jsonl(toy_examples(3), tmp_path / "val.jsonl")
    curves = pass_at_k_table({"a": str(tiny_model_dir), "b": str(tiny_model_dir)}, tmp_path / "val.jsonl", "hermes",
                             examples=2, n=4, max_new_tokens=4)
    assert set(curves) == {"a", "b"} and curves["a"]["examples"] == 2 and curves["a"]["ks"] == [1, 2, 4]
    assert curves["a"] == curves["b"]  # the same model and seed draw the same samples
