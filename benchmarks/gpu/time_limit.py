"""A training run that fits a device call: stop cleanly once its wall budget is spent.

The GPU experiments run long GRPO over several 10-minute device calls. Each call trains until
``seconds`` have passed, then stops after the step in progress with a checkpoint (the next call
resumes from it) and lets the run finish as usual (``last/``, final validation). ``seen`` tells
the caller how far it got (``step``, ``max_steps``), for its ``worker.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def time_limit(seconds: float, seen: dict[str, int]) -> Any:
    """A ``TrainerCallback`` for the budget (a function: transformers loads only when called)."""
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def __init__(self) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            seen.update(step=state.global_step, max_steps=state.max_steps)
            if time.perf_counter() - self.start > seconds and state.global_step < state.max_steps:
                print(f"time budget reached at step {state.global_step}", flush=True)
                control.should_training_stop = True
                control.should_save = True
            return control

    return TimeLimit()


def record_call(folder: Path, seen: dict[str, int], seconds: float) -> dict[str, Any]:
    """Append this call to ``folder/worker.json``: step reached, max_steps, finished, calls."""
    path = folder / "worker.json"
    state = json.loads(path.read_text()) if path.is_file() else {}
    calls = [*state.get("calls", []), {"seconds": round(seconds, 1), "to_step": seen.get("step")}]
    state = {"step": seen.get("step"), "max_steps": seen.get("max_steps"),
             "finished": seen.get("step", 0) >= seen.get("max_steps", 1), "calls": calls}
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))
    return state


def worker_state(folder: Path) -> dict[str, Any]:
    path = folder / "worker.json"
    return json.loads(path.read_text()) if path.is_file() else {}
