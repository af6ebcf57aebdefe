"""Per-rank generation timing: the wrapper times TRL's rollout method (not the gathering
_generate around it), the reader survives a torn line, and the straggler table sums rounds
per rank and compares ranks."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from toolrl_lib.fast.gen_timing import (
    decode_summary,
    read_generation_times,
    record_generation_times,
    straggler_table,
    timing_file,
)


class OldTrainer:
    """A TRL without _generate_single_turn: _generate returns (prompt_ids, completion_ids, ...)."""

    def __init__(self) -> None:
        self.state = SimpleNamespace(global_step=0)
        self.calls = 0

    def _generate(self, prompts):
        self.calls += 1
        completion_ids = [[1] * (3 + i) for i in range(len(prompts))]
        return ("prompt_ids", completion_ids, "tool_mask", ["text"] * len(prompts))


class Trl1Trainer:
    """TRL 1.x: _generate calls _generate_single_turn, then gathers from every rank (here:
    a sleep standing in for waiting on a slower rank)."""

    gather_wait_s = 0.3

    def __init__(self) -> None:
        self.state = SimpleNamespace(global_step=0)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        return [[1] * n for n in prompt_ids], None

    def _generate(self, prompts):
        completion_ids, _ = self._generate_single_turn(prompts, None, None, 1)
        time.sleep(self.gather_wait_s)
        return "prompt_ids", completion_ids


def test_wrapper_records_one_row_per_round_and_passes_results_through(tmp_path):
    trainer = OldTrainer()
    path = timing_file(tmp_path, 1)
    assert record_generation_times(trainer, path, rank=1)
    first = trainer._generate(["a", "b"])
    trainer.state.global_step = 5
    trainer._generate(["a", "b", "c"])
    assert trainer.calls == 2 and first[1] == [[1] * 3, [1] * 4]  # the original ran, unchanged
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["rank"], r["step"], r["completions"], r["longest"], r["method"]) for r in rows] == [
        (1, 0, 2, 4, "_generate"), (1, 5, 3, 5, "_generate")]
    assert all(r["seconds"] >= 0 for r in rows)


def test_trl1_rollout_is_timed_without_the_gather_after_it(tmp_path):
    trainer = Trl1Trainer()
    path = timing_file(tmp_path, 0)
    assert record_generation_times(trainer, path, rank=0)
    assert trainer._generate([2, 7, 5]) == ("prompt_ids", [[1] * 2, [1] * 7, [1] * 5])
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert row["method"] == "_generate_single_turn"
    assert (row["completions"], row["longest"]) == (3, 7)
    assert row["seconds"] < Trl1Trainer.gather_wait_s  # the wait for other ranks is not generation


def test_trainer_without_a_rollout_method_is_skipped_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="not recorded.*_generate_single_turn"):
        assert record_generation_times(SimpleNamespace(), tmp_path / "t.jsonl", 0) is False
    assert not (tmp_path / "t.jsonl").exists()


def test_decode_summary_separates_longer_rounds_from_slower_tokens():
    rows = [{"seconds": 1.0, "longest": 50}, {"seconds": 3.0, "longest": 150},
            {"seconds": 0.5, "longest": 0}]  # a round without tokens is left out
    assert decode_summary(rows) == {"rounds": 2, "mean_longest": 100.0, "ms_per_decode_step": 20.0}
    assert decode_summary([]) == {}


def test_straggler_table_sums_rounds_and_measures_the_wait(tmp_path):
    lines = {0: [{"rank": 0, "step": 0, "seconds": 2.0}, {"rank": 0, "step": 0, "seconds": 1.0},
                 {"rank": 0, "step": 1, "seconds": 1.0}],
             1: [{"rank": 1, "step": 0, "seconds": 1.0}, {"rank": 1, "step": 1, "seconds": 4.0}]}
    for rank, rows in lines.items():
        text = "".join(json.dumps(r) + "\n" for r in rows)
        timing_file(tmp_path, rank).write_text(text + ('{"rank": 1, "st' if rank else ""))
    rows = read_generation_times(tmp_path)  # the torn last line of rank 1 is skipped
    assert len(rows) == 5
    assert straggler_table(rows) == [
        {"step": 0, "ranks": 2, "slowest_s": 3.0, "mean_s": 2.0, "wait_s": 1.0},
        {"step": 1, "ranks": 2, "slowest_s": 4.0, "mean_s": 2.5, "wait_s": 1.5}]
