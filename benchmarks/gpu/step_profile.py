"""Where a GRPO optimizer step spends its time: torch's profiler (or Python stack sampling) over chosen steps of a run.

``make_callback("9;10-11", out, "vllm")`` is a ``TrainerCallback``: it starts the profiler before
the first step of each window (1-based optimizer steps, ``a-b`` inclusive) and stops it after
the last, then writes ``<out>/profile/<name>_steps<a>-<b>.txt`` (the ops by GPU time and by CPU
time) and one JSON line per window to ``<out>/profile/<name>.jsonl``:

- ``wall_s``: the window's wall-clock seconds;
- ``gpu_busy_s``: the sum of the GPU kernels' own time (overlapping streams counted twice);
- ``busy_share``: ``gpu_busy_s / wall_s`` — well below 1 means the step waits on the host
  (Python, kernel launches, synchronisations), not on the GPU's arithmetic.

The profiler adds its own host overhead, so its ``wall_s`` is above an unprofiled step's; read
the shares, and time without it (``grpo_throughput``'s rows never come from a profiled run).
``make_sampler_callback`` does the same with ``StackSampler`` (the main thread's Python stacks);
both are ``window_callback`` with their own start, stop and files.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def parse_windows(text: str) -> list[tuple[int, int]]:
    """``"9;10-11"`` -> ``[(9, 9), (10, 11)]``.

    >>> parse_windows("9;10-11")
    [(9, 9), (10, 11)]
    """
    windows = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        first, _, last = part.partition("-")
        window = (int(first), int(last or first))
        if window[0] < 1 or window[1] < window[0]:
            raise ValueError(f"profile window {part!r}: expected a step number >= 1 or 'a-b' with a <= b")
        windows.append(window)
    return windows


def device_seconds(events: Any) -> float:
    """The kernels' own time in a profile's ``key_averages()``, seconds: the events that ran on a
    device (the table's "Self CUDA time total"; an op's CPU row also carries its kernels' time,
    so counting every row would count each kernel twice)."""
    from torch.autograd import DeviceType

    return sum(getattr(event, "self_device_time_total", 0) or 0 for event in events
               if getattr(event, "device_type", DeviceType.CPU) != DeviceType.CPU) / 1e6


def window_callback(windows_text: str, out: Path, name: str, start: Any, stop: Any, write: Any,
                    kind: str | None = None) -> Any:
    """A ``TrainerCallback`` over the optimizer-step windows of ``windows_text``: ``start()`` before
    a window's first step (its handle kept), ``stop(handle)`` after its last, the wall clock between
    them, then ``write(handle, folder, stem, wall)`` writes its files under ``<out>/profile`` and
    returns the window's figures, appended as one JSON line to ``<out>/profile/<name>.jsonl``."""
    from transformers import TrainerCallback

    windows = parse_windows(windows_text)
    folder = Path(out) / "profile"

    class WindowCallback(TrainerCallback):
        def __init__(self) -> None:
            self.active: tuple[Any, tuple[int, int], float] | None = None

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            window = next((w for w in windows if w[0] == state.global_step + 1), None)
            if window is not None and self.active is None:
                self.active = (start(), window, time.perf_counter())

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.active is None or state.global_step != self.active[1][1]:
                return
            handle, (first, last), began = self.active
            self.active = None
            stop(handle)
            wall = time.perf_counter() - began
            folder.mkdir(parents=True, exist_ok=True)
            stem = f"{name}_steps{first}-{last}" + (f"_{kind}" if kind else "")
            row = {"name": name, **({"kind": kind} if kind else {}), "first": first, "last": last,
                   "wall_s": round(wall, 4), **write(handle, folder, stem, wall)}
            with (folder / f"{name}.jsonl").open("a", encoding="utf-8") as file:
                file.write(json.dumps(row) + "\n")
            print("profile:", json.dumps(row), flush=True)

    return WindowCallback()


def make_callback(windows_text: str, out: Path, name: str) -> Any:
    """torch's profiler over each window: ``<out>/profile/<name>_steps<a>-<b>.txt`` (the ops by GPU
    and CPU time) and the window's GPU kernel seconds (built here so that importing this module
    needs no transformers)."""
    import torch

    def start() -> Any:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
            torch.cuda.synchronize()
        profiler = torch.profiler.profile(activities=activities)
        profiler.__enter__()
        return profiler

    def stop(profiler: Any) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def write(profiler: Any, folder: Path, stem: str, wall: float) -> dict[str, Any]:
        profiler.__exit__(None, None, None)
        events = profiler.key_averages()
        busy = device_seconds(events)
        tables = []
        for key in ("self_cuda_time_total", "self_cpu_time_total", "cpu_time_total"):
            try:
                tables.append(f"== sorted by {key}\n{events.table(sort_by=key, row_limit=45, max_name_column_width=70)}")
            except (AttributeError, KeyError, RuntimeError) as error:  # the key's name moved in a torch release
                tables.append(f"== sorted by {key}: {error}")
        (folder / f"{stem}.txt").write_text(f"wall {wall:.3f} s, GPU kernels {busy:.3f} s\n\n" + "\n\n".join(tables))
        return {"gpu_busy_s": round(busy, 3), "busy_share": round(busy / wall, 3) if wall else None}

    return window_callback(windows_text, out, name, start, stop, write)


class StackSampler:
    """Where the main thread's Python is, sampled from a thread every ``interval_s``.

    torch's profiler times ops, not the Python between them; a mid-round step of the embedded
    model is bound by the host (the GPU busy ~29% of it) and ``fast.fused_lora`` removed a third
    of its ops and none of its time, so what bounds it is found by sampling the interpreter's
    stack (py-spy is not on the GPU host). ``self`` counts the innermost frame of each sample (the
    Python function that was running or had called into C), ``inclusive`` every function on the
    stack once. The sampler needs the interpreter lock to look, which the main thread gives up at
    least every ``sys.getswitchinterval()`` (5 ms) and whenever torch or a pipe releases it, so
    samples fall on those points: read shares, not exact times. A stack deeper than ``depth``
    keeps its innermost ``depth`` frames (run 6 sampled with 48, which cut the outermost frames
    of some stacks, never the trainer's methods that ``REGIONS`` names).
    """

    def __init__(self, interval_s: float = 0.002, depth: int = 160) -> None:
        import threading

        self.interval_s, self.depth = interval_s, depth
        self.target = threading.main_thread().ident
        self.self_counts: dict[str, int] = {}
        self.inclusive: dict[str, int] = {}
        self.stacks: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolrl-stack-sampler", daemon=True)

    @staticmethod
    def frame_name(frame: Any) -> str:
        code = frame.f_code
        path = code.co_filename
        for marker in ("site-packages/", "toolrl_lib/", "benchmarks/"):
            if marker in path:
                path = (marker if marker != "site-packages/" else "") + path.split(marker, 1)[1]
                break
        return f"{path}:{code.co_name}"

    def sample(self, frame: Any) -> None:
        """Count one stack (innermost frame first)."""
        names: list[str] = []
        while frame is not None and len(names) < self.depth:
            names.append(self.frame_name(frame))
            frame = frame.f_back
        if not names:
            return
        self.samples += 1
        self.self_counts[names[0]] = self.self_counts.get(names[0], 0) + 1
        for name in set(names):
            self.inclusive[name] = self.inclusive.get(name, 0) + 1
        key = ";".join(reversed(names))
        self.stacks[key] = self.stacks.get(key, 0) + 1

    def _run(self) -> None:
        import sys

        while not self._stop.wait(self.interval_s):
            frame = sys._current_frames().get(self.target)
            if frame is not None:
                self.sample(frame)

    def start(self) -> StackSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def table(self, top: int = 40) -> str:
        """The ``top`` functions by self and by inclusive samples, with their shares."""
        lines = [f"{self.samples} samples every {self.interval_s * 1e3:g} ms"]
        for title, counts in (("self", self.self_counts), ("inclusive", self.inclusive)):
            lines += ["", f"== by {title} samples"]
            for name, count in sorted(counts.items(), key=lambda item: -item[1])[:top]:
                lines.append(f"{count:7d} {count / max(self.samples, 1):6.1%}  {name}")
        return "\n".join(lines) + "\n"

    def collapsed(self) -> str:
        """The stacks in the collapsed format flame-graph tools read (``a;b;c count``)."""
        return "".join(f"{key} {count}\n" for key, count in sorted(self.stacks.items(), key=lambda item: -item[1]))


def make_sampler_callback(windows_text: str, out: Path, name: str, interval_s: float = 0.002) -> Any:
    """A ``StackSampler`` over each window: ``<out>/profile/<name>_steps<a>-<b>_stacks.txt`` (the
    tables), ``..._stacks.collapsed`` and a JSON line (``kind: "stacks"``) with its sample count."""

    def write(sampler: StackSampler, folder: Path, stem: str, wall: float) -> dict[str, Any]:
        (folder / f"{stem}.txt").write_text(f"wall {wall:.3f} s\n" + sampler.table())
        (folder / f"{stem}.collapsed").write_text(sampler.collapsed())
        return {"samples": sampler.samples}

    return window_callback(windows_text, out, name, lambda: StackSampler(interval_s).start(), StackSampler.stop,
                           write, kind="stacks")


def read_window(text: str, top: int = 8) -> dict[str, Any]:
    """The figures of one window's ``.txt``: wall, GPU and CPU totals (seconds), the ``top``
    aten ops by their kernels' own time (ms, share, calls)."""
    import re

    def seconds(label: str) -> float:
        found = re.search(rf"{label}: ([0-9.]+)(ms|s|us)", text)
        if not found:
            raise ValueError(f"no '{label}' line in the profile text")
        return float(found.group(1)) / {"s": 1, "ms": 1e3, "us": 1e6}[found.group(2)]

    section = text.split("== sorted by self_cuda_time_total", 1)[-1].split("== sorted by", 1)[0]
    ops = []
    for line in section.splitlines():
        fields = line.split()
        if fields and fields[0].startswith("aten::") and len(ops) < top:
            ms = fields[-5]
            value = float(ms[:-2]) if ms.endswith("ms") else float(ms[:-2]) / 1e3 if ms.endswith("us") else float(ms[:-1]) * 1e3
            ops.append({"op": fields[0], "gpu_ms": round(value, 1), "share": fields[-4], "calls": int(fields[-1])})
    wall = float(re.search(r"wall ([0-9.]+) s", text).group(1))
    gpu = seconds("Self CUDA time total")
    return {"wall_s": wall, "gpu_s": round(gpu, 3), "cpu_s": round(seconds("Self CPU time total"), 3),
            "gpu_busy": round(gpu / wall, 2), "top_gpu_ops": ops}


# The frames of a log-prob forward: TRL's method (or our hooks standing for it: fast.shared_prompt,
# fast.round_logprob_rows),
# the model call TRL wraps (its fused LM head) and the decoder layers
_LOGPROB_FORWARD = ("_get_per_token_logps_and_entropies", "shared_prompt.py:", "round_logprobs.py:",
                    "utils.py:_fused_forward", "modeling_layers.py:__call__")
# Where a GRPO step's samples fall: a region counts a sample when each of its entries is on the
# sample's stack (an entry that is a tuple: any one of its frame names). TRL 1.15 and transformers'
# frame names; a sample may fall in several regions or in none
REGIONS: dict[str, tuple[str | tuple[str, ...], ...]] = {
    "backward": ("torch/autograd/graph.py:_engine_run_backward",),
    "loss forward": ("grpo_trainer.py:_compute_loss",),
    "round log-prob forward": ("grpo_trainer.py:_generate_and_score_completions", _LOGPROB_FORWARD),
    "weight sync": ("sync_weights",),
    "engine-process weight sync": ("engine_process.py:__call__",),
    "next round's prompts": ("overlap.py:next_prompt_ids",),
    "prompt tokenisation": ("grpo_trainer.py:_tokenize_prompts",),
    "rewards": ("grpo_trainer.py:_calculate_rewards",),
    "optimizer": ("torch/optim/optimizer.py",),
    "gradient clipping": ("clip_grad.py",),
    "callbacks": ("trainer_callback.py:call_event",),
}


def region_shares(collapsed: str) -> dict[str, float]:
    """Each ``REGIONS`` entry's share of the samples of a ``.collapsed`` text (absent: none).

    >>> region_shares("a;grpo_trainer.py:_compute_loss;x 3\\nb;clip_grad.py:y 1\\n")
    {'loss forward': 0.75, 'gradient clipping': 0.25}
    >>> region_shares("grpo_trainer.py:_generate_and_score_completions;shared_prompt.py:per_token 1\\n"
    ...               "grpo_trainer.py:_generate_and_score_completions;trl_compat.py:hooked 1\\n")
    {'round log-prob forward': 0.5}
    """
    counts = dict.fromkeys(REGIONS, 0)
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        total += int(count)
        for name, frames in REGIONS.items():
            if all(any(f in stack for f in ((frame,) if isinstance(frame, str) else frame)) for frame in frames):
                counts[name] += int(count)
    return {name: round(count / total, 3) for name, count in counts.items() if count and total}


def read_stacks(path: Path, top: int = 20) -> dict[str, Any]:
    """A ``StackSampler`` window file back into figures: wall, samples, the top self frames and
    (from the ``.collapsed`` file beside it) the ``REGIONS``' shares."""
    import re

    text = path.read_text()
    collapsed = path.with_suffix(".collapsed")
    wall = float(re.search(r"wall ([0-9.]+) s", text).group(1))
    samples = int(re.search(r"^(\d+) samples", text, re.M).group(1))
    section = text.split("== by self samples", 1)[1].split("== by", 1)[0]
    frames = []
    for line in section.strip().splitlines()[:top]:
        count, share, frame = line.split(None, 2)
        frames.append({"frame": frame, "samples": int(count), "share": round(int(count) / max(samples, 1), 3)})
    stem = path.stem.removesuffix("_stacks")
    return {"variant": stem.rsplit("_steps", 1)[0], "steps": stem.rsplit("_steps", 1)[1], "wall_s": wall,
            "samples": samples, "top_self": frames,
            "regions": region_shares(collapsed.read_text()) if collapsed.exists() else {}}


def report(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.gpu.step_profile --profile DIR=LABEL ... --out benchmarks/results``:
    every window of every profile folder, one JSON and one markdown table."""
    import argparse

    parser = argparse.ArgumentParser(description=report.__doc__)
    parser.add_argument("--profile", action="append", required=True, help="a profile/ folder as DIR=LABEL")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--note", default="")
    parser.add_argument("--command", default="")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    stacks: list[dict[str, Any]] = []
    for item in args.profile:
        folder, _, label = item.partition("=")
        for path in sorted(Path(folder).glob("*_steps*.txt")):
            if path.stem.endswith("_stacks"):
                stacks.append({"label": label or Path(folder).name, **read_stacks(path)})
                continue
            steps = path.stem.rsplit("_steps", 1)[1]
            rows.append({"label": label or Path(folder).name, "variant": path.stem.rsplit("_steps", 1)[0],
                         "steps": steps, **read_window(path.read_text())})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grpo_step_profile.json").write_text(json.dumps({"rows": rows, "stacks": stacks, "note": args.note,
                                                            "command": args.command}, indent=1))
    lines = ["| profile | variant | steps | wall s | GPU kernels s | GPU busy | host op time s | top GPU ops (ms) |",
             "|" + " --- |" * 8] if rows else []
    for r in rows:
        top = ", ".join(f"{o['op'].removeprefix('aten::')} {o['gpu_ms']:.0f}" for o in r["top_gpu_ops"][:5])
        lines.append(f"| {r['label']} | {r['variant']} | {r['steps']} | {r['wall_s']} | {r['gpu_s']} | "
                     f"{r['gpu_busy']:.0%} | {r['cpu_s']} | {top} |")
    for st in stacks:
        lines += ["", f"Python stacks of {st['variant']}, steps {st['steps']} ({st['label']}): {st['samples']} samples "
                  f"over {st['wall_s']} s, the innermost frames (self) with the most samples:", ""]
        lines += [f"- {f['share']:.0%} `{f['frame']}`" for f in st["top_self"][:12]]
        if st["regions"]:
            lines += ["", "By region (a sample counts in every region whose frames are on its stack): " + ", ".join(
                f"{name} {share:.0%} (~{share * st['wall_s']:.2f} s)" for name, share in st["regions"].items()) + "."]
    if args.note:
        lines += ["", args.note]
    if args.command:
        lines += ["", "```bash", args.command, "```"]
    (out / "grpo_step_profile.md").write_text("\n".join(lines).lstrip("\n") + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(report())
