"""fast.loss_mmap_threshold (``toolrl_lib.fast.loss_memory``): the threshold is set for the loss
and lifted for the rollout, and the setting changes memory only, not what is trained."""

from __future__ import annotations

import sys

import pytest

from toolrl_lib.fast import loss_memory, memory
from toolrl_lib.train.config import ConfigError, load_run_config


class FakeTrainer:
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def _generate_and_score_completions(self, batch: list[int]) -> list[int]:
        self.seen.append("rollout")
        return [x * 2 for x in batch]


def test_the_rollout_runs_under_the_ceiling_and_the_loss_under_the_threshold(monkeypatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(loss_memory, "set_mmap_threshold", lambda n: seen.append(f"set {n}") or True)
    trainer = FakeTrainer(seen)
    assert loss_memory.install(trainer, 2**20) is True
    assert trainer._generate_and_score_completions([1, 2]) == [2, 4]
    ceiling = f"set {memory.GLIBC_MAX_MMAP_THRESHOLD}"
    assert seen == [f"set {2**20}", ceiling, "rollout", f"set {2**20}"]


def test_nothing_is_hooked_for_zero_or_without_mallopt(monkeypatch) -> None:
    trainer = FakeTrainer([])
    method = trainer._generate_and_score_completions
    assert loss_memory.install(trainer, 0) is False
    monkeypatch.setattr(loss_memory, "set_mmap_threshold", lambda n: False)  # musl, macOS, Windows
    assert loss_memory.install(trainer, 2**20) is False
    assert trainer._generate_and_score_completions == method


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_glibc_takes_the_setting() -> None:
    assert memory.set_mmap_threshold(2**20) is True
    assert memory.set_mmap_threshold(memory.GLIBC_MAX_MMAP_THRESHOLD) is True
    assert memory.set_mmap_threshold(0) is False


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ConfigError, match="fast.loss_mmap_threshold"):
        load_run_config(None, ["fast.loss_mmap_threshold=-1"])

