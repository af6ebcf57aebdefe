"""benchmarks/prompt_token_cache.py: TRL's tokenisation of a round against fast.prompt_token_cache."""

from __future__ import annotations

import doctest
import json

from benchmarks import prompt_token_cache as ptc


def test_doctests():
    assert doctest.testmod(ptc).failed == 0


def test_main_times_a_training_file_and_writes_its_tables(tmp_path):
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples

    write_jsonl(generate_examples(40, seed=3), tmp_path / "train.jsonl")
    assert ptc.main(["--train", str(tmp_path / "train.jsonl"), "--round-prompts", "8", "--group", "4",
                     "--rounds", "3", "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "prompt_token_cache.json").read_text())
    assert result["training_prompts"] == 40 and result["rows_per_round"] == 32
    assert result["trl_ms"] > 0 and result["cache_first_ms"] > 0 and result["cache_seen_ms"] > 0
    assert "| 32 (8) |" in (tmp_path / "out" / "prompt_token_cache.md").read_text()


def test_a_training_file_too_small_for_a_round_stops_with_a_reason(tmp_path):
    import pytest

    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples

    write_jsonl(generate_examples(5, seed=3), tmp_path / "train.jsonl")
    with pytest.raises(SystemExit, match="fewer than a round's 8"):
        ptc.main(["--train", str(tmp_path / "train.jsonl"), "--round-prompts", "8", "--out", str(tmp_path / "o")])
