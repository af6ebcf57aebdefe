"""evaluate_bfcl with a tiny random model: result files, resumable generation, CLI refusals."""

import json

import pytest

from toolrl_lib.cli import main
from toolrl_lib.evaluate import backends, runner
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.models import make_tiny_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    make_tiny_model(folder)
    return str(folder)


def test_generation_is_resumable(tiny_dir, tmp_path, monkeypatch):
    kwargs = dict(family="hermes", categories="simple_python,irrelevance", max_new_tokens=3,
                  run_scorer=False, label="tiny")
    first = runner.evaluate_bfcl(tiny_dir, tmp_path, limit=2, **kwargs)
    assert first.timings["generated"] == 4
    rows = results.read_results(results.generations_file(tmp_path, "simple_python"))
    assert sorted(r["id"] for r in rows) == ["simple_python_0", "simple_python_1"]
    assert set(rows[0]) >= {"id", "result", "raw", "format_valid", "n_calls"}
    more = runner.evaluate_bfcl(tiny_dir, tmp_path, limit=3, **kwargs)
    assert more.timings["generated"] == 2  # only the new third entry of each category
    result_rows = results.read_results(results.result_file(tmp_path, "tiny", "irrelevance"))
    assert len(result_rows) == 3

    def no_loading(*args, **kw):
        raise AssertionError("nothing left to generate: the model must not be loaded")

    monkeypatch.setattr(backends, "load_for_eval", no_loading)
    again = runner.evaluate_bfcl(tiny_dir, tmp_path, limit=3, **kwargs)
    assert again.timings["generated"] == 0
    # a smaller limit re-scores a subset without losing the cached generations
    runner.evaluate_bfcl(tiny_dir, tmp_path, limit=1, **kwargs)
    assert len(results.read_results(results.result_file(tmp_path, "tiny", "irrelevance"))) == 1
    assert len(results.read_results(results.generations_file(tmp_path, "irrelevance"))) == 3
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["family"] == "hermes" and info["categories"] == ["simple_python", "irrelevance"]


def test_backend_choice():
    assert backends.pick_backend("hf") == "hf"
    assert backends.pick_backend("auto") in ("hf", "vllm")
    with pytest.raises(ValueError):
        backends.pick_backend("tgi")


def test_cli_refuses_unknown_category_at_once(capsys):
    assert main(["eval", "bfcl", "--model", "/nonexistent/model", "--categories", "simple_python,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_cli_refuses_a_zero_token_budget(capsys):
    assert main(["eval", "bfcl", "--model", "/nonexistent/model", "--max-batch-tokens", "0"]) == 2
    assert "--max-batch-tokens must be >= 1" in capsys.readouterr().err


def test_cli_compare_needs_finished_dirs(tmp_path, capsys):
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "entries.csv" in capsys.readouterr().err


def test_adapter_folder_is_merged_in_memory(tiny_dir, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    from toolrl_lib.generation import generate
    from toolrl_lib.models import load_model, load_tokenizer

    run = tmp_path / "run"
    base = load_model(tiny_dir, device="cpu")
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(run / "best")
    load_tokenizer(tiny_dir).save_pretrained(run / "best")
    (run / "run_info.json").write_text(json.dumps({"base_model": tiny_dir, "family": "hermes"}))
    assert backends.adapter_base(str(run / "best")) == tiny_dir
    assert backends.adapter_base(tiny_dir) is None
    loaded = backends.load_for_eval(str(run / "best"), backend="hf", max_new_tokens=5, dtype="fp32")
    with torch.no_grad():
        expected = generate(peft_model.merge_and_unload(), loaded.tokenizer, ["hello"], max_new_tokens=5)[0][0]
    assert loaded.complete(["hello"]) == [expected]


def test_changed_settings_move_the_cache_aside(tiny_dir, tmp_path):
    kwargs = dict(family="hermes", categories="irrelevance", limit=1, run_scorer=False, label="t")
    runner.evaluate_bfcl(tiny_dir, tmp_path, max_new_tokens=2, **kwargs)
    again = runner.evaluate_bfcl(tiny_dir, tmp_path, max_new_tokens=3, **kwargs)
    assert again.timings["generated"] == 1  # regenerated under the new settings
    assert (tmp_path / "generations.stale-1" / "irrelevance.jsonl").is_file()  # old ones kept


def test_score_only_run_refuses_to_generate(tmp_path):
    import pytest

    from toolrl_lib.evaluate.runner import evaluate_bfcl

    with pytest.raises(RuntimeError, match="not generated"):
        evaluate_bfcl("no-such-model", tmp_path, family="hermes", categories="simple_python", limit=1,
                      run_scorer=False, generate=False)


def test_small_categories_share_generate_calls(tiny_dir, tmp_path):
    """Pending entries of all categories are pooled: 3 categories x 2 entries, chunk 4 ->
    2 generate calls (not 3), and every answer lands in its own category's file."""
    from toolrl_lib.data.bfcl import load_bfcl_examples
    from toolrl_lib.models import load_tokenizer

    calls: list[int] = []

    def complete(prompts):
        calls.append(len(prompts))
        return [f"answer {i}" for i in range(len(prompts))]

    def loader():
        return backends.LoadedModel(load_tokenizer(tiny_dir), complete, "fake")

    cats = ["simple_python", "irrelevance", "live_relevance"]
    n = runner.generate_pending(loader, tmp_path, cats, "hermes", limit=2, chunk=4)
    assert n == 6 and calls == [4, 2]
    for category in cats:
        ids = sorted(r["id"] for r in results.read_results(results.generations_file(tmp_path, category)))
        assert ids == sorted(ex.id for ex in load_bfcl_examples(category, limit=2))
    assert runner.generate_pending(loader, tmp_path, cats, "hermes", limit=2, chunk=4) == 0
    assert calls == [4, 2]  # nothing pending: no call, no model load


def test_scoring_a_common_subset_of_existing_generations(tiny_dir, tmp_path):
    kwargs = dict(family="hermes", categories="simple_python,irrelevance", max_new_tokens=2,
                  run_scorer=False, label="tiny", limit=2)
    runner.evaluate_bfcl(tiny_dir, tmp_path, **kwargs)
    with pytest.raises(ValueError, match="generate=False"):
        runner.evaluate_bfcl(tiny_dir, tmp_path, only_ids={"simple_python_0"}, **kwargs)
    run = runner.evaluate_bfcl(tiny_dir, tmp_path, generate=False, only_ids={"simple_python_0"}, **kwargs)
    assert run.categories == ["simple_python"]  # irrelevance has nothing in the subset
    rows = results.read_results(results.result_file(tmp_path, "tiny", "simple_python"))
    assert [r["id"] for r in rows] == ["simple_python_0"]


def test_chunks_respect_the_token_budget():
    # budget 100, 10 new tokens: lengths 10 -> (n x 20) fits 5; 30 -> (n x 40) fits 2; 95 alone
    spans = results.plan_chunks([10, 10, 10, 10, 10, 10, 30, 30, 30, 95], 4, 100, 10)
    assert spans == [(0, 4), (4, 6), (6, 8), (8, 9), (9, 10)]
    for start, stop in spans[:-1]:
        assert (stop - start) <= 4
    with pytest.raises(ValueError, match="sorted"):
        results.plan_chunks([30, 10], 4, 100, 10)
    assert results.plan_chunks([10] * 5 + [900], 4, None, 10) == [(0, 4), (4, 6)]  # no token cap
    for bad_budget, bad_batch in ((0, 4), (-5, 4), (100, 0)):
        with pytest.raises(ValueError, match=">= 1"):
            results.plan_chunks([10, 20], bad_batch, bad_budget, 10)


def test_token_budget_splits_long_prompts_into_smaller_calls(tiny_dir, tmp_path):
    """With a budget, calls shrink as prompts grow; every entry is still generated once."""
    from toolrl_lib.models import load_tokenizer

    tokenizer = load_tokenizer(tiny_dir)
    calls: list[list[int]] = []

    def complete(prompts):
        calls.append([len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts])
        return ["x"] * len(prompts)

    def loader():
        return backends.LoadedModel(tokenizer, complete, "fake")

    cats = ["simple_python", "live_multiple"]
    budget = 6000
    n = runner.generate_pending(loader, tmp_path, cats, "hermes", limit=6, chunk=8,
                                max_batch_tokens=budget, max_new_tokens=16)
    assert n == 12 and sum(len(c) for c in calls) == 12
    assert len(calls) > 2  # 12 prompts at chunk 8 would be 2 calls without the budget
    lengths = [t for call in calls for t in call]
    assert lengths == sorted(lengths)
    for call in calls:
        assert len(call) == 1 or len(call) * (max(call) + 16) <= budget
