"""Profile the smoke workbook: seconds per notebook and per stage, and peak RSS.

Runs ``python -m tools.workbook run --profile smoke`` (or ``--only NN``) as a child process, samples
the RSS of every process in its tree (the papermill kernels, the BFCL scorer, priming
subprocesses) every ``--interval`` seconds, and reads the stage log the library writes when
``$TOOLRL_PROFILE_LOG`` is set (``toolrl_lib.fast.profiling.stage``: model loads, priming, each
validation, GRPO steps, merge checks, BFCL generation/scoring, each notebook). A stage's peak RSS
is the largest single-process RSS sampled while it ran.

Each run is stored under its ``--label`` in ``benchmarks/results/workbook_profile.json``
(other labels are kept), and the markdown table puts every label side by side, so "before"
and "after" come from one script on one box:

    python -m benchmarks.workbook_profile --label before          # on the old commit
    python -m benchmarks.workbook_profile --label after           # on the new one
    python -m benchmarks.workbook_profile --only 03 --label after-03
    python -m benchmarks.workbook_profile --table                 # rewrite the .md only

The reading of the runs is prose in ``workbook_profile.notes.md``, appended below the table
each time the markdown is written (so a new run never drops it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GIB = 2**30


class RssSampler(threading.Thread):
    """Sample (time, largest process RSS, whole-tree RSS, RSS by pid) of a process and its
    descendants."""

    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int, int, dict[int, int]]] = []
        self.high_water: dict[int, int] = {}  # pid -> the kernel's own peak RSS (VmHWM), bytes
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.is_set():
            rss: dict[int, int] = {}
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    rss[proc.pid] = proc.memory_info().rss
                hwm = high_water_mark(proc.pid)
                if hwm:
                    self.high_water[proc.pid] = max(hwm, self.high_water.get(proc.pid, 0))
            if rss:
                self.samples.append((time.time(), max(rss.values()), sum(rss.values()), rss))
            self.done.wait(self.interval)


def high_water_mark(pid: int) -> int:
    """A process's peak RSS as the kernel counts it (``VmHWM``, bytes; 0 where unreadable). The
    samples can miss a spike shorter than the interval; this cannot (for a process sampled at
    least once before it ends)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def read_stages(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stage_rows(stages: list[dict[str, Any]], samples: list[tuple[float, int, int, dict[int, int]]]
               ) -> list[dict[str, Any]]:
    """One row per stage occurrence, in start order, with its seconds and peak RSS, and the RSS of
    the stage's own process at its first and last sample (what a stage leaves behind in a
    long-lived kernel)."""
    rows = []
    for s in sorted(stages, key=lambda s: s["start"]):
        inside = [sample for sample in samples if s["start"] <= sample[0] <= s["end"]]
        row = {
            "stage": s["stage"], "seconds": round(s["end"] - s["start"], 1),
            "peak_rss_gib": round(max(sample[1] for sample in inside) / GIB, 2) if inside else None,
        }
        own = [sample[3][s["pid"]] for sample in inside if s.get("pid") in sample[3]]
        if own:
            row["own_rss_start_gib"], row["own_rss_end_gib"] = round(own[0] / GIB, 2), round(own[-1] / GIB, 2)
        rows.append(row)
    return rows


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "commit": _git("rev-parse", "--short", "HEAD"), "dirty": bool(_git("status", "--porcelain"))}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def profile(only: list[str], interval: float, workdir: Path) -> dict[str, Any]:
    log_file = workdir / "profile_stages.jsonl"
    workdir.mkdir(parents=True, exist_ok=True)
    log_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "tools.workbook", "run", "--profile", "smoke",
               "--workdir", str(workdir)]
    for number in only:
        command += ["--only", number]
    env = {**os.environ, "TOOLRL_PROFILE_LOG": str(log_file)}
    start = time.time()
    proc = subprocess.Popen(command, cwd=ROOT, env=env)
    sampler = RssSampler(proc.pid, interval)
    sampler.start()
    returncode = proc.wait()
    sampler.done.set()
    sampler.join()
    total = time.time() - start
    samples = sampler.samples
    return {
        "command": " ".join(["toolrl", *command[3:]]), "returncode": returncode,
        "total_seconds": round(total, 1),
        "peak_rss_gib": round(max((sample[1] for sample in samples), default=0) / GIB, 2),
        "peak_tree_rss_gib": round(max((sample[2] for sample in samples), default=0) / GIB, 2),
        "peak_hwm_gib": round(max(sampler.high_water.values(), default=0) / GIB, 2),
        "stages": stage_rows(read_stages(log_file), samples),
        "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def markdown(runs: dict[str, dict[str, Any]], notes: str = "") -> str:
    """The side-by-side table; ``notes`` (the hand-written reading of the runs) goes below it."""
    labels = list(runs)
    lines = ["# Smoke workbook profile", "",
             "Seconds and peak RSS (largest single process, GiB) per notebook and stage, one column",
             "pair per run. Produced by `benchmarks/workbook_profile.py` (commands below).", ""]
    header = "| stage | " + " | ".join(f"{label} s | {label} GiB" for label in labels) + " |"
    lines += [header, "|" + " --- |" * (1 + 2 * len(labels))]
    order: list[str] = []
    for run in runs.values():
        for row in run["stages"]:
            if row["stage"] not in order:
                order.append(row["stage"])

    def cells(run: dict[str, Any], name: str) -> str:
        rows = [r for r in run["stages"] if r["stage"] == name]
        if not rows:
            return "– | –"
        seconds = sum(r["seconds"] for r in rows)
        peaks = [r["peak_rss_gib"] for r in rows if r["peak_rss_gib"] is not None]
        times = f" (x{len(rows)})" if len(rows) > 1 else ""
        return f"{seconds:.0f}{times} | {max(peaks):.2f}" if peaks else f"{seconds:.0f}{times} | –"

    for name in order:
        lines.append(f"| {name} | " + " | ".join(cells(runs[label], name) for label in labels) + " |")
    lines.append("| **whole run** | " + " | ".join(
        f"**{runs[label]['total_seconds']:.0f}** | **{runs[label]['peak_rss_gib']:.2f}**" for label in labels) + " |")
    lines += ["", "| run | commit | date | cpus | exit | whole-tree peak RSS GiB | largest VmHWM GiB | command |",
              "| --- " * 8 + "|"]
    for label, run in runs.items():
        m = run["machine"]
        hwm = f"{run['peak_hwm_gib']:.2f}" if run.get("peak_hwm_gib") else "–"
        lines.append(f"| {label} | {m['commit']}{' (dirty)' if m['dirty'] else ''} | {run['date']} | {m['cpus']} | "
                     f"{run['returncode']} | {run['peak_tree_rss_gib']:.2f} | {hwm} | `{run['command']}` |")
    lines += ["", "GiB columns: the largest single-process RSS sampled every 0.5 s; \"largest VmHWM\" is the",
              "kernel's own peak RSS of each process (no spike missed), the largest over the run's processes."]
    lines += ["", "Reproduce: `git checkout <commit>`, `bash scripts/bootstrap.sh`, then",
              "`.venv/bin/python -m benchmarks.workbook_profile --label <label>` (add `--only 03` for one",
              "notebook). The seconds include the kernels' start and the workbook's own set-up.", ""]
    if notes.strip():
        lines += [notes.strip("\n"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="run", help="name of this run's column (e.g. before, after)")
    parser.add_argument("--only", action="append", default=[], help="notebook number(s), e.g. 03")
    parser.add_argument("--interval", type=float, default=0.5, help="RSS sampling period, seconds")
    parser.add_argument("--workdir", type=Path, default=None, help="default: runs/profile-<label>")
    parser.add_argument("--results", type=Path, default=RESULTS / "workbook_profile.json")
    parser.add_argument("--table", action="store_true", help="only rewrite the markdown from the JSON")
    args = parser.parse_args(argv)
    stored = json.loads(args.results.read_text(encoding="utf-8")) if args.results.is_file() else {}
    if not args.table:
        workdir = args.workdir or ROOT / "runs" / f"profile-{args.label}"
        stored[args.label] = profile(args.only, args.interval, workdir)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(stored, indent=2) + "\n", encoding="utf-8")
    # What each run showed is written by hand in <results>.notes.md; regenerating keeps it.
    notes_file = args.results.with_suffix(".notes.md")
    notes = notes_file.read_text(encoding="utf-8") if notes_file.is_file() else ""
    args.results.with_suffix(".md").write_text(markdown(stored, notes), encoding="utf-8")
    print(args.results.with_suffix(".md").read_text(encoding="utf-8"))
    return 0 if all(r["returncode"] == 0 for r in stored.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
