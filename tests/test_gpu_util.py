"""benchmarks/gpu/gpu_util.py: NVML's busy counters sampled beside a benchmark (a stand-in NVML here)."""

from __future__ import annotations

import doctest
import time
from types import SimpleNamespace

from benchmarks.gpu import gpu_util
from benchmarks.gpu import grpo_throughput as tp


class StandInNVML:
    """The five NVML calls the sampler makes; two processes, the trainer (50 GiB) and the engine."""

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init, self.polls = fail_init, 0

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("no driver")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        self.polls += 1
        return SimpleNamespace(gpu=90)

    def nvmlDeviceGetProcessUtilization(self, handle: str, since_us: int) -> list[SimpleNamespace]:
        now = int(time.time() * 1e6)
        return [SimpleNamespace(pid=11, timeStamp=now, smUtil=60), SimpleNamespace(pid=12, timeStamp=now, smUtil=30)]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=11, usedGpuMemory=50 * 2**30), SimpleNamespace(pid=12, usedGpuMemory=25 * 2**30)]


def test_doctests():
    assert doctest.testmod(gpu_util).failed == 0
    assert doctest.testmod(tp).failed == 0


def test_the_sampler_keeps_both_processes_and_the_device():
    nvml = StandInNVML()
    sampler = gpu_util.NvmlSampler(0, period_s=0.01, nvml=nvml)
    begin = time.time()
    assert sampler.start()
    deadline = time.time() + 5
    while nvml.polls < 3 and time.time() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert nvml.polls >= 3 and sampler.error is None
    summary = gpu_util.summarize_util(sampler.busy, sampler.processes, sampler.memory_gib, begin, time.time())
    assert summary["busy_percent"] == 90.0 and summary["samples"] >= 3
    assert summary["processes"] == [{"gib": 50.0, "sm_percent": 60.0}, {"gib": 25.0, "sm_percent": 30.0}]


def test_without_nvml_nothing_is_sampled_and_the_row_says_why():
    sampler = gpu_util.NvmlSampler(0, nvml=StandInNVML(fail_init=True))
    assert not sampler.start() and "no driver" in sampler.error
    sampler.stop()  # harmless when it never started
    assert tp.gpu_util_figures(sampler, [1.0, 2.0], 0.5, 1, 2, 0.0) == {"error": "RuntimeError: no driver"}
