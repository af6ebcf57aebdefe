"""Trainer callbacks: metrics.csv, step time, NaN stop, periodic validation mean@k.

They only read what the trainer logs and write files in the run directory; periodic
validation runs the in-memory policy in eval mode under a forked RNG, so turning it on
or off (or resuming) does not change the training trajectory.
"""

from __future__ import annotations

import csv
import io
import math
import random
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

# Trainer log keys that are run summaries, not per-step metrics.
SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second")


def read_csv_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a CSV this module wrote; a last line cut short (the file not ending in a newline: a
    process killed while appending) is dropped, so a resumed run never reads a half-written row."""
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text, newline=""))]


def _csv_line(columns: list[str], row: dict[str, Any]) -> str:
    line = io.StringIO()
    csv.DictWriter(line, fieldnames=columns).writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return line.getvalue()


def write_csv_rows(path: str | Path, rows: list[dict[str, Any]]) -> list[str]:
    """Rewrite the whole CSV (union of keys, first-seen order) atomically; returns its columns."""
    path = Path(path)
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as handle:
        csv.DictWriter(handle, fieldnames=columns).writeheader()
        handle.write("".join(_csv_line(columns, row) for row in rows))
    tmp.replace(path)
    return columns


def append_csv_row(path: str | Path, columns: list[str], row: dict[str, Any]) -> None:
    """One row at the end of a CSV whose header is ``columns``, in one write: a step's cost stays the same
    however long the run: ~0.2 ms, where rewriting the whole file each step took 58 ms at 1,000 logged
    steps and 295 ms at 5,000 (50 columns, the course's CPU; ``benchmarks/results/metrics_csv.md``)."""
    with Path(path).open("a", newline="", encoding="utf-8") as handle:
        handle.write(_csv_line(columns, row))


def _number(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def trim_rows(path: str | Path, max_step: int) -> list[dict[str, Any]]:
    """Keep rows up to ``max_step`` (resume: later rows belong to the lost tail)."""
    rows = [r for r in read_csv_rows(path) if isinstance(r.get("step"), int) and r["step"] <= max_step]
    if Path(path).is_file():
        write_csv_rows(path, rows)
    return rows


class MetricsCSVCallback(TrainerCallback):
    """One row per logging step in ``metrics.csv``, plus ``step_time`` (seconds/step). A step is one
    appended line, so logging costs the same at step 10 as at step 10,000; the file is rewritten only
    when a column first appears or a step is logged again (``benchmarks/results/metrics_csv.md``)."""

    def __init__(self, path: str | Path, start_rows: list[dict[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.rows = list(start_rows or [])
        self._durations: list[float] = []
        self._t0: float | None = None
        self._columns: list[str] | None = None  # the file's header once this callback has written it

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._t0 is not None:
            self._durations.append(time.perf_counter() - self._t0)
            self._t0 = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        if not logs or any(k in logs for k in SUMMARY_KEYS):
            return
        row: dict[str, Any] = {"step": state.global_step, "epoch": state.epoch}
        row.update(logs)
        if self._durations:
            row["step_time"] = sum(self._durations) / len(self._durations)
            self._durations.clear()
        # a new last step whose keys the header has: one line appended; else (a new column, a step logged
        # again, a file that is not ours yet) the whole file rewritten
        appendable = (self._columns is not None and all(k in self._columns for k in row) and self.path.is_file()
                      and (not self.rows or (self.rows[-1].get("step") or 0) < state.global_step))
        if appendable:  # rows are in step order (trimmed to the checkpoint on a resume): none has this step
            self.rows.append(row)
            append_csv_row(self.path, self._columns, row)
        else:
            self.rows = [r for r in self.rows if r.get("step") != state.global_step] + [row]
            self._columns = write_csv_rows(self.path, self.rows)


class NaNStopCallback(TrainerCallback):
    """Stop at the first NaN/inf loss and remember the step, for a clear error afterwards."""

    def __init__(self) -> None:
        self.bad_step: int | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "grad_norm"):
            value = (logs or {}).get(key)
            if isinstance(value, float) and not math.isfinite(value):
                self.bad_step = state.global_step
                control.should_training_stop = True
                control.should_save = False
                return control


@contextmanager
def forked_rng(seed: int | None = None):
    """Run a block with its own RNG streams; restore python/numpy/torch state afterwards."""
    import numpy as np
    import torch

    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        if seed is not None:
            torch.manual_seed(seed)
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


class ValidationCallback(TrainerCallback):
    """Every ``every_steps`` optimizer steps: mean@k on held-out examples -> validation.csv;
    when the tracked metric improves, the adapter is saved to ``best/``."""

    def __init__(
        self,
        evaluate: Callable[[Any], dict[str, float]],
        csv_path: str | Path,
        every_steps: int,
        best_key: str,
        save_best: Callable[[Any, int, dict[str, float]], None],
        start_rows: list[dict[str, Any]] | None = None,
    ) -> None:
        self.evaluate = evaluate
        self.csv_path = Path(csv_path)
        self.every_steps = every_steps
        self.best_key = best_key
        self.save_best = save_best
        self.rows = list(start_rows or [])
        scores = [r[best_key] for r in self.rows if isinstance(r.get(best_key), float | int)]
        self.best = max(scores) if scores else -math.inf

    def record(self, step: int, stage: str, scores: dict[str, float], seconds: float) -> None:
        row = {"step": step, "stage": stage, **scores, "seconds": round(seconds, 3)}
        self.rows = [r for r in self.rows if not (r.get("step") == step and r.get("stage") == stage)]
        self.rows.append(row)
        write_csv_rows(self.csv_path, self.rows)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every_steps <= 0 or state.global_step % self.every_steps or model is None:
            return
        start = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            with forked_rng():
                scores = self.evaluate(model)
        finally:
            if was_training:
                model.train()
        self.record(state.global_step, "grpo", scores, time.perf_counter() - start)
        if scores.get(self.best_key, -math.inf) > self.best:
            self.best = scores[self.best_key]
            self.save_best(model, state.global_step, scores)
