"""BFCL pass@k: n samples per entry, each judged by BFCL's own scorer (its venv, one process).

A scripted sampler answers entry j of a category correctly (its first possible answer) in
exactly j of its n samples, so BFCL's verdicts must give c = j, and the curves follow.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from toolrl_lib.data.bfcl import load_bfcl_examples
from toolrl_lib.evaluate import bfcl_pass_at_k as bpk
from toolrl_lib.evaluate.pass_at_k import pass_at_k
from toolrl_lib.prompts import get_adapter

N = 3
CATEGORIES = ["simple_python", "multiple"]


def scripted_sampler(tokenizer, categories, limit):
    """A LoadedSampler stand-in: entry j (file order) is right in its first j samples."""
    adapter = get_adapter("hermes")
    plan = {}
    for category in categories:
        for j, ex in enumerate(load_bfcl_examples(category, limit=limit)):
            plan[adapter.render_prompt(ex, tokenizer)] = (j, adapter.format_calls(ex.ground_truth))
    calls = []

    def sample(prompts, k, max_new_tokens, temperature, top_p, seed):
        calls.append(len(prompts))
        out = []
        for prompt in prompts:
            right, gold = plan[prompt]
            out.append([gold if i < right else "I cannot help with that." for i in range(k)])
        return out

    return SimpleNamespace(tokenizer=tokenizer, sample=sample, backend="scripted"), calls


def test_sampling_is_resumable_and_refuses_mixed_settings(tmp_path, tiny_model_dir):
    from toolrl_lib.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    loaded, calls = scripted_sampler(tokenizer, ["multiple"], 3)
    assert bpk.sample_pending(lambda: loaded, tmp_path, ["multiple"], "hermes", n=N, limit=2, chunk=1) == 2
    assert calls == [1, 1]
    # a larger limit samples only the new entry; nothing left: the loader is never called
    assert bpk.sample_pending(lambda: loaded, tmp_path, ["multiple"], "hermes", n=N, limit=3) == 1
    assert bpk.sample_pending(lambda: pytest.fail("loaded again"), tmp_path, ["multiple"], "hermes", n=N, limit=3) == 0
    rows = [json.loads(line) for line in bpk.samples_file(tmp_path, "multiple").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == [ex.id for ex in load_bfcl_examples("multiple", limit=3)]
    bpk.check_sampling_settings(tmp_path, {"n": N})
    with pytest.raises(ValueError, match="holds samples drawn with"):
        bpk.check_sampling_settings(tmp_path, {"n": N + 1})
    with pytest.raises(ValueError, match="non-live AST categories"):
        bpk.check_categories(["irrelevance"])
    with pytest.raises(ValueError, match="temperature > 0"):
        bpk.sample_pending(lambda: loaded, tmp_path, ["multiple"], "hermes", n=2, temperature=0.0)


def test_write_sample_results_names_a_missing_entry(tmp_path, tiny_model_dir):
    from toolrl_lib.models import load_tokenizer

    loaded, _ = scripted_sampler(load_tokenizer(str(tiny_model_dir)), ["parallel"], 2)
    bpk.sample_pending(lambda: loaded, tmp_path, ["parallel"], "hermes", n=N, limit=1)
    with pytest.raises(RuntimeError, match=r"parallel: 1 entries have no samples.*parallel_1"):
        bpk.write_sample_results(tmp_path, ["parallel"], "hermes", N, limit=2)


@pytest.mark.slow
def test_bfcl_judges_each_sample_and_the_curves_follow(tmp_path, tiny_model_dir):
    from toolrl_lib.models import load_tokenizer

    limit = N + 1  # entries right in 0, 1, 2 and 3 (= all) of their 3 samples
    loaded, _ = scripted_sampler(load_tokenizer(str(tiny_model_dir)), CATEGORIES, limit)
    bpk.sample_pending(lambda: loaded, tmp_path, CATEGORIES, "hermes", n=N, limit=limit)
    bpk.write_sample_results(tmp_path, CATEGORIES, "hermes", N, limit)
    counts = bpk.solved_counts(tmp_path, CATEGORIES, N)
    for category in CATEGORIES:
        ids = [ex.id for ex in load_bfcl_examples(category, limit=limit)]
        assert [counts[category][i] for i in ids] == [min(j, N) for j in range(limit)]
    result = bpk.curves(counts, N)
    expected = {str(k): round(sum(pass_at_k(N, min(j, N), k) for j in range(limit)) / limit, 6) for k in (1, 2, 3)}
    assert result["by_category"]["multiple"] == expected
    assert result["non_live_ast"] is None  # four of the six categories are missing
