"""One scheduler for the GPU experiments: jobs as subprocesses over lanes, under one deadline.

A 10-minute device command holds several runs side by side, so every experiment needs the
same thing: start each job in its own process on a free lane (a GPU id, exported as
``CUDA_VISIBLE_DEVICES``; ``None`` leaves the environment alone, so several ``None`` lanes share
whatever is visible), log its output to a file, kill what still runs at the deadline (plus
``grace_s``) and say for every job how it ended. A job is not started with less than
``min_start_s`` left; a job with ``wait_for_all`` starts only when nothing else runs (it reads
the others' results). ``prepare`` may rewrite a job when its turn comes (before the time check),
or return a reason to skip it; a skipped job's outcome names the job as queued.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Lane = str | None


@dataclass
class Job:
    name: str
    command: list[str] = field(default_factory=list)
    log: Path | None = None  # stdout + stderr; None = inherited
    env: dict[str, str] = field(default_factory=dict)  # on top of os.environ (and the lane)
    append_log: bool = False  # a resumed phase keeps the earlier calls' output
    wait_for_all: bool = False  # start only once every earlier job has ended
    data: Any = None  # the caller's own description of the job


@dataclass
class Outcome:
    job: Job
    status: str  # "exit" (see returncode), "killed" (deadline) or "skipped" (never started)
    returncode: int | None = None
    seconds: float = 0.0
    lane: Lane = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "exit" and self.returncode == 0

    def describe(self) -> str:
        if self.status == "exit":
            return f"exit {self.returncode} after {self.seconds:.0f} s"
        if self.status == "killed":
            return f"killed at the deadline after {self.seconds:.0f} s"
        return f"not started ({self.reason})"


@dataclass
class _Running:
    job: Job
    proc: subprocess.Popen
    handle: Any
    began: float


def lanes_from_env(count: int) -> list[str]:
    """GPU lanes: an outer ``CUDA_VISIBLE_DEVICES`` (physical ids) when set, else ``0..count-1``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return visible.split(",") if visible else [str(i) for i in range(count)]


def run_lanes(
    jobs: Sequence[Job],
    lanes: Sequence[Lane],
    deadline: float,
    *,
    grace_s: float = 0.0,
    min_start_s: float = 0.0,
    poll_s: float = 1.0,
    prepare: Callable[[Job], Job | str] | None = None,
    on_end: Callable[[Outcome], None] | None = None,
    say: Callable[[str], None] | None = print,
    own_group: bool = False,
) -> list[Outcome]:
    """Run ``jobs`` in order, one per lane at a time, until done or ``deadline`` (``time.time()``).

    ``own_group``: each job in its own session, killed with its whole process group (a launcher
    and the ranks it spawned). Returns one outcome per job in the order they ended."""
    if not lanes:
        raise ValueError("run_lanes: no lane to run on")
    say = say or (lambda _: None)
    pending, running, outcomes = list(jobs), {}, []
    t0 = time.time()

    def end(outcome: Outcome) -> None:
        outcomes.append(outcome)
        say(f"[{time.time() - t0:6.0f}s] {outcome.job.name}: {outcome.describe()}")
        if on_end is not None:
            on_end(outcome)

    while pending or running:
        for slot, run in list(running.items()):
            killed = run.proc.poll() is None and time.time() > deadline + grace_s
            if killed:
                _kill(run.proc, own_group)
            if run.proc.poll() is None:
                continue
            if run.handle is not None:
                run.handle.close()
            del running[slot]
            end(Outcome(run.job, "killed" if killed else "exit", None if killed else run.proc.returncode,
                        time.time() - run.began, lanes[slot]))
        free = [slot for slot in range(len(lanes)) if slot not in running]
        while pending and free:
            if pending[0].wait_for_all and running:
                break  # it reads what the running jobs will write
            queued = pending.pop(0)
            job = prepare(queued) if prepare is not None else queued
            if isinstance(job, str):
                end(Outcome(queued, "skipped", reason=job))
                continue
            left = deadline - time.time()
            if left < min_start_s:
                end(Outcome(queued, "skipped",
                            reason=f"{left:.0f} s left of the time budget (< min_start_s {min_start_s:g})"))
                continue
            slot = free.pop(0)
            running[slot] = _start(job, lanes[slot], own_group)
            say(f"[{time.time() - t0:6.0f}s] started {job.name} on {lanes[slot] or 'the visible devices'}")
        if pending or running:
            time.sleep(poll_s)
    return outcomes


def _start(job: Job, lane: Lane, own_group: bool) -> _Running:
    env = {**os.environ, **job.env}
    if lane is not None:
        env["CUDA_VISIBLE_DEVICES"] = lane
    handle = None
    if job.log is not None:
        job.log.parent.mkdir(parents=True, exist_ok=True)
        handle = job.log.open("a" if job.append_log else "w")  # noqa: SIM115 - closed when the job ends
    proc = subprocess.Popen(job.command, env=env, stdout=handle, stderr=subprocess.STDOUT if handle else None,
                            start_new_session=own_group)
    return _Running(job, proc, handle, time.time())


def _kill(proc: subprocess.Popen, own_group: bool) -> None:
    if own_group:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this job's own session started
    else:
        proc.kill()
    proc.wait()
