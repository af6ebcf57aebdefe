"""Per-rank generation times: one JSON line per rollout round, from every process.

Under DDP a GRPO step is synchronous: every rank generates its share, then all of them meet
in the backward pass's all-reduce. A step therefore costs the *slowest* rank's generation,
and ``metrics.csv`` (rank 0's view) cannot say whether a rank waited. These lines can:
``benchmarks/gpu/multi_gpu.py`` reads them to split a step into generation, waiting and training.

It wraps TRL's rollout method (``trl_compat.generation_method``: the call around
``model.generate``, which holds no collective under DDP). Wrapping TRL 1.x's ``_generate``
instead, as the first version did, times a gather of every rank's lengths too: each rank
then "finishes" with the slowest, and the wait reads ~0 whatever happened.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolrl_lib.fast.trl_compat import completion_ids_of, generation_method, hook


def timing_file(run_dir: str | Path, rank: int) -> Path:
    return Path(run_dir) / f"generation_times.rank{rank}.jsonl"


def time_rollouts(trainer: Any, on_call: Callable[[float, str, Any], None],
                  sync: Callable[[], None] | None = None) -> str:
    """Wrap TRL's rollout method on this ``trainer`` so that each call reports
    ``on_call(seconds, method_name, result)``; ``sync`` (e.g. ``torch.cuda.synchronize``) runs
    before the clock starts and before it stops. Returns the method's name; raises
    ``RuntimeError`` when this TRL has none (``trl_compat.generation_method``)."""
    name, _ = generation_method(trainer)

    def timed(call: Any, *args: Any, **kwargs: Any) -> Any:
        if sync is not None:
            sync()
        start = time.perf_counter()
        out = call(*args, **kwargs)
        if sync is not None:
            sync()
        on_call(time.perf_counter() - start, name, out)
        return out

    return hook(trainer, name, timed)


def record_generation_times(trainer: Any, path: str | Path, rank: int) -> bool:
    """Append ``{"rank", "step", "seconds", "completions", "longest", "method"}`` per rollout
    call of ``trainer`` to ``path``; returns False (and warns) when TRL's rollout method is
    not found (then nothing is timed and training goes on)."""
    try:
        generation_method(trainer)
    except RuntimeError as err:
        warnings.warn(f"generation times are not recorded: {err}", stacklevel=2)
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(seconds: float, name: str, out: Any) -> None:
        # completions come back as token-id lists: the GPU work is done, no sync needed
        completion_ids = completion_ids_of(name, out)
        row = {"rank": rank, "step": trainer.state.global_step, "seconds": round(seconds, 4),
               "completions": len(completion_ids),
               "longest": max((len(ids) for ids in completion_ids), default=0), "method": name}
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    time_rollouts(trainer, write)
    return True


def read_generation_times(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every rank's rows (sorted by step, then rank); a torn last line is skipped."""
    rows = []
    for path in sorted(Path(run_dir).glob("generation_times.rank*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # an interrupted write; the other rows stand
    return sorted(rows, key=lambda r: (r["step"], r["rank"]))


def straggler_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step: the slowest rank's generation seconds, the mean over ranks, and the wait
    (slowest minus mean: what the faster ranks spent idle at the next collective)."""
    by_step: dict[int, dict[int, float]] = {}
    for row in rows:  # several rounds of one rank in one step add up
        ranks = by_step.setdefault(row["step"], {})
        ranks[row["rank"]] = ranks.get(row["rank"], 0.0) + row["seconds"]
    table = []
    for step, ranks in sorted(by_step.items()):
        slowest, mean = max(ranks.values()), sum(ranks.values()) / len(ranks)
        table.append({"step": step, "ranks": len(ranks), "slowest_s": round(slowest, 3),
                      "mean_s": round(mean, 3), "wait_s": round(slowest - mean, 3)})
    return table


def decode_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Over all rounds of all ranks: how many, their mean longest completion (a round decodes
    until its longest one ends) and milliseconds per decode step (seconds / longest, summed).
    Separates "rounds ran longer" from "each token got slower" when two runs differ."""
    timed = [r for r in rows if r.get("longest")]
    if not timed:
        return {}
    steps = sum(r["longest"] for r in timed)
    return {"rounds": len(timed), "mean_longest": round(steps / len(timed), 1),
            "ms_per_decode_step": round(1000 * sum(r["seconds"] for r in timed) / steps, 2)}
