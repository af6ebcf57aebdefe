"""Per-rank generation timing: the wrapper records what TRL's _generate returned, the reader
survives a torn line, and the straggler table sums rounds per rank and compares ranks."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from toolrl_lib.train.gen_timing import (
    read_generation_times,
    record_generation_times,
    straggler_table,
    timing_file,
)


class FakeTrainer:
    def __init__(self) -> None:
        self.state = SimpleNamespace(global_step=0)
        self.calls = 0

    def _generate(self, prompts):
        self.calls += 1
        completion_ids = [[1] * (3 + i) for i in range(len(prompts))]
        return ("prompt_ids", completion_ids, "tool_mask", ["text"] * len(prompts))


def test_wrapper_records_one_row_per_round_and_passes_results_through(tmp_path):
    trainer = FakeTrainer()
    path = timing_file(tmp_path, 1)
    assert record_generation_times(trainer, path, rank=1)
    first = trainer._generate(["a", "b"])
    trainer.state.global_step = 5
    trainer._generate(["a", "b", "c"])
    assert trainer.calls == 2 and first[1] == [[1] * 3, [1] * 4]  # the original ran, unchanged
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["rank"], r["step"], r["completions"], r["longest"]) for r in rows] == [
        (1, 0, 2, 4), (1, 5, 3, 5)]
    assert all(r["seconds"] >= 0 for r in rows)


def test_trainer_without_generate_is_skipped_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="_generate"):
        assert record_generation_times(SimpleNamespace(), tmp_path / "t.jsonl", 0) is False
    assert not (tmp_path / "t.jsonl").exists()


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
