"""benchmarks/gpu/lanes.py, the one scheduler of the GPU experiments, with fake 'GPU' jobs on CPU
(plain Python subprocesses; a few seconds). Stays in the default suite: every GPU session's
deadline handling rests on it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.gpu import lanes

PY = [sys.executable, "-S", "-c"]  # no site import: a quick start on a busy box
SAY = [*PY, "import os; print('gpu', os.environ['CUDA_VISIBLE_DEVICES'])"]


def _job(tmp_path: Path, name: str, command: list[str], **kw) -> lanes.Job:
    return lanes.Job(name, command, log=tmp_path / f"{name}.log", **kw)


def _dead(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet: dead either way."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(") ", 1)[-1][0] == "Z"
    except FileNotFoundError:
        return True


def test_one_job_per_lane_and_the_deadline_kills_a_job_with_its_children(tmp_path):
    """c is a launcher with a child (multi_gpu's accelerate runs): both die at the deadline."""
    pid_file = tmp_path / "child.pid"
    launcher = [*PY, "import subprocess, sys, time; "
                     "p = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(60)']); "
                     f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)"]
    jobs = [_job(tmp_path, n, c) for n, c in (("a", SAY), ("b", SAY), ("c", launcher), ("d", SAY))]
    said: list[str] = []
    t0 = time.time()
    ended = {o.job.name: o for o in lanes.run_lanes(jobs, ["0", "1"], time.time() + 4, poll_s=0.1,
                                                      say=said.append, own_group=True)}
    assert time.time() - t0 < 6
    assert ended["a"].ok and ended["b"].ok and ended["d"].ok  # d took a freed lane while c slept
    assert ended["c"].status == "killed" and ended["c"].returncode is None
    assert "gpu 0" in (tmp_path / "a.log").read_text() and "gpu 1" in (tmp_path / "b.log").read_text()
    assert any("c: killed at the deadline" in line for line in said)
    child = int(pid_file.read_text())
    wait = time.time() + 2
    while not _dead(child) and time.time() < wait:
        time.sleep(0.05)
    assert _dead(child), "the launcher's child survived its group's kill"


def test_prepare_can_skip_and_no_job_starts_without_time_left(tmp_path):
    def prepare(job: lanes.Job) -> lanes.Job | str:
        return "nothing to resolve" if job.name == "x" else job

    ended = lanes.run_lanes([_job(tmp_path, "x", SAY), _job(tmp_path, "y", SAY)], [None], time.time() + 5,
                            min_start_s=60, prepare=prepare, say=None, poll_s=0.1)
    assert [(o.job.name, o.status) for o in ended] == [("x", "skipped"), ("y", "skipped")]
    assert ended[0].reason == "nothing to resolve" and "time budget" in ended[1].reason
    assert not (tmp_path / "y.log").exists()  # never started


def test_wait_for_all_starts_after_the_others_and_logs_can_append(tmp_path):
    stamp = [*PY, "import time; print(time.time())"]
    (tmp_path / "last.log").write_text("earlier call\n")
    jobs = [_job(tmp_path, "first", [*PY, "import time; time.sleep(0.3); print(time.time())"]),
            _job(tmp_path, "last", stamp, wait_for_all=True, append_log=True)]
    ended = lanes.run_lanes(jobs, ["0", "1"], time.time() + 10, say=None, poll_s=0.05)
    assert [o.job.name for o in ended] == ["first", "last"] and all(o.ok for o in ended)
    first = float((tmp_path / "first.log").read_text())
    earlier, last = (tmp_path / "last.log").read_text().splitlines()
    assert earlier == "earlier call" and float(last) > first  # it waited although lane 1 was free
