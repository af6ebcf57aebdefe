"""How busy the GPU was during a benchmark's timed steps, by the driver's own counters (NVML).

With vLLM's engine in a process of its own (``fast.generation_process``) the trainer and the
engine share one GPU, and torch's profiler sees one process only. NVML sees both:

- the device's utilisation: the share of each sample period in which any kernel ran;
- per process, the share of the SMs' time its kernels held (``nvmlDeviceGetProcessUtilization``)
  and its GPU memory, which tells the trainer (the larger) from the engine.

A device near 100% busy means the two halves' GPU work is the bound, and only less of it helps;
well below means each waits on its host or on the other (time slices), and overlapping them
better still could. ``NvmlSampler`` polls in a daemon thread (a few calls a second, nothing on
the GPU); ``summarize_util`` keeps the samples of one window. NVML's process ids are the host's,
which inside a container may not be ours: processes are told apart by their memory.

First run (run 12, one H200, ``benchmarks/results/grpo_throughput.md``): the overlapped sampler
path kept the device busy 52.8% of its timed rounds, TRL's generate 68.7%. A process's SM
percent is its mean over the samples in which the driver reports it, so the processes' figures
do not add up to the device's; under CUDA MPS the driver reports the MPS server alone.
"""

from __future__ import annotations

import threading
import time
from typing import Any


def load_nvml() -> Any:
    """pynvml (nvidia-ml-py), else the copy vLLM carries; None where neither imports (a CPU box)."""
    try:
        import pynvml
        return pynvml
    except ImportError:
        pass
    try:
        from vllm.third_party import pynvml
        return pynvml
    except ImportError:
        return None


def nvml_index() -> int:
    """NVML's index of this process's current CUDA device (CUDA_VISIBLE_DEVICES may renumber them);
    0 where torch cannot tell."""
    try:
        import torch

        return int(torch.cuda._get_nvml_device_index(torch.cuda.current_device()))
    except Exception:  # noqa: BLE001 - one GPU per host here: its index is 0
        return 0


class NvmlSampler:
    """The device's busy percent every ``period_s`` and every per-process SM sample the driver
    kept, from ``start()`` to ``stop()``. ``nvml`` is the module (tests pass a stand-in)."""

    def __init__(self, device_index: int = 0, period_s: float = 0.2, nvml: Any = None) -> None:
        self.device_index, self.period_s, self.nvml = device_index, period_s, nvml
        self.busy: list[tuple[float, int]] = []  # (epoch s, percent)
        self.processes: dict[int, list[tuple[float, int]]] = {}  # pid -> [(epoch s, SM percent)]
        self.memory_gib: dict[int, float] = {}  # pid -> the most GPU memory seen
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start polling; False (and ``error`` says why) where NVML is missing or refuses."""
        nvml = self.nvml or load_nvml()
        if nvml is None:
            self.error = "NVML not importable"
            return False
        try:
            nvml.nvmlInit()
            self._handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
        except Exception as error:  # noqa: BLE001 - no driver: report, never stop the benchmark
            self.error = f"{type(error).__name__}: {error}"
            return False
        self.nvml = nvml
        self._last_us = int(time.time() * 1e6)
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return True

    def poll(self) -> None:
        """One sample of the device, and the per-process samples the driver kept since the last poll."""
        nvml, handle = self.nvml, self._handle
        self.busy.append((time.time(), int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)))
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, self._last_us)
        except Exception:  # noqa: BLE001 - NVML raises NotFound when no new sample was kept
            samples = []
        for s in samples:
            self.processes.setdefault(int(s.pid), []).append((s.timeStamp / 1e6, int(s.smUtil)))
            self._last_us = max(self._last_us, int(s.timeStamp))
        for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            used = (p.usedGpuMemory or 0) / 2**30
            self.memory_gib[int(p.pid)] = max(self.memory_gib.get(int(p.pid), 0.0), used)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.poll()
            except Exception as error:  # noqa: BLE001 - a failing counter ends the sampling, not the run
                self.error = f"{type(error).__name__}: {error}"
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def summarize_util(busy: list[tuple[float, int]], processes: dict[int, list[tuple[float, int]]],
                   memory_gib: dict[int, float], start: float, end: float) -> dict[str, Any]:
    """The samples inside ``[start, end]`` (epoch seconds): the device's mean busy percent and,
    per process that ran kernels, its mean SM percent and GPU memory, the largest memory first.

    >>> summarize_util([(0.5, 10), (1.5, 90), (2.5, 70), (9.0, 5)], {7: [(1.2, 60), (2.2, 40)], 8: [(2.0, 20)]},
    ...                {7: 50.0, 8: 24.9}, 1.0, 3.0)
    {'busy_percent': 80.0, 'samples': 2, 'processes': [{'gib': 50.0, 'sm_percent': 50.0}, {'gib': 24.9, 'sm_percent': 20.0}]}
    """
    inside = [percent for t, percent in busy if start <= t <= end]
    per_process = []
    for pid, samples in processes.items():
        sm = [percent for t, percent in samples if start <= t <= end]
        if sm:
            per_process.append({"gib": round(memory_gib.get(pid, 0.0), 1), "sm_percent": round(sum(sm) / len(sm), 1)})
    per_process.sort(key=lambda p: -p["gib"])
    return {"busy_percent": round(sum(inside) / len(inside), 1) if inside else None, "samples": len(inside),
            "processes": per_process}


__all__ = ["NvmlSampler", "load_nvml", "nvml_index", "summarize_util"]
