"""The step profiler of the GPU throughput benchmark, on the CPU: windows, files, figures."""

import json
from types import SimpleNamespace

import pytest

from benchmarks.gpu.step_profile import make_callback, parse_windows


def test_windows_parse_and_bad_ones_are_named():
    assert parse_windows("3; 5-7;") == [(3, 3), (5, 7)]
    for bad in ("0", "4-2"):
        with pytest.raises(ValueError, match=repr(bad)):
            parse_windows(bad)


def test_profiles_only_the_window_and_writes_its_tables(tmp_path):
    import torch

    callback = make_callback("2-3", tmp_path, "cpu_variant")
    state = SimpleNamespace(global_step=0)
    for step in range(1, 5):  # steps 1..4; only 2-3 are profiled
        state.global_step = step - 1
        callback.on_step_begin(None, state, None)
        for _ in range(20):
            torch.ones(256, 256) @ torch.ones(256, 256)
        state.global_step = step
        callback.on_step_end(None, state, None)
    rows = [json.loads(line) for line in (tmp_path / "profile" / "cpu_variant.jsonl").read_text().splitlines()]
    assert [(r["first"], r["last"]) for r in rows] == [(2, 3)]
    assert rows[0]["wall_s"] > 0 and rows[0]["gpu_busy_s"] == 0.0  # no GPU here: no kernel time
    table = (tmp_path / "profile" / "cpu_variant_steps2-3.txt").read_text()
    assert "aten::mm" in table and "sorted by self_cpu_time_total" in table


def test_a_window_text_reads_back_into_figures():
    from pathlib import Path

    from benchmarks.gpu.step_profile import read_window

    text = (Path(__file__).parent / "fixtures" / "step_profile_window.txt").read_text()
    window = read_window(text)  # lines of a real H200 profile (two GRPO steps of the embedded model)
    assert (window["wall_s"], window["gpu_s"], window["cpu_s"], window["gpu_busy"]) == (1.192, 1.069, 1.234, 0.9)
    assert [(o["op"], o["gpu_ms"], o["calls"]) for o in window["top_gpu_ops"]] == [
        ("aten::copy_", 245.1, 4610), ("aten::_efficient_attention_backward", 218.7, 60), ("aten::mul", 170.6, 2624)]
    with pytest.raises(ValueError, match="Self CUDA time total"):
        read_window("wall 1.0 s, GPU kernels 0 s\nSelf CPU time total: 1.0s\n")


def _busy_leaf(seconds: float) -> int:
    import time

    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def test_the_stack_sampler_finds_the_function_the_window_spends_its_time_in(tmp_path):
    from benchmarks.gpu.step_profile import make_sampler_callback, read_stacks

    callback = make_sampler_callback("2", tmp_path, "cpu_variant", interval_s=0.001)
    state = SimpleNamespace(global_step=0)
    for step in range(1, 4):  # only step 2 is sampled
        state.global_step = step - 1
        callback.on_step_begin(None, state, None)
        _busy_leaf(0.3 if step == 2 else 0.05)
        state.global_step = step
        callback.on_step_end(None, state, None)
    folder = tmp_path / "profile"
    rows = [json.loads(line) for line in (folder / "cpu_variant.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["first"], r["last"]) for r in rows] == [("stacks", 2, 2)]
    assert rows[0]["samples"] >= 20
    figures = read_stacks(folder / "cpu_variant_steps2-2_stacks.txt")
    assert figures["variant"] == "cpu_variant" and figures["steps"] == "2-2"
    assert figures["top_self"][0]["frame"].endswith("test_step_profile.py:_busy_leaf")
    assert figures["top_self"][0]["share"] > 0.8
    collapsed = (folder / "cpu_variant_steps2-2_stacks.collapsed").read_text().splitlines()
    stack, count = collapsed[0].rsplit(" ", 1)  # the most frequent stack, outermost frame first
    assert stack.endswith("test_step_profile.py:_busy_leaf") and int(count) > 0


def test_the_report_puts_sampled_stacks_beside_the_profiler_windows(tmp_path):
    from pathlib import Path

    from benchmarks.gpu.step_profile import StackSampler, report

    folder = tmp_path / "profile"
    folder.mkdir()
    fixture = Path(__file__).parent / "fixtures" / "step_profile_window.txt"
    (folder / "v_steps10-11.txt").write_text(fixture.read_text())
    sampler = StackSampler()
    import sys

    sampler.sample(sys._getframe())
    (folder / "v_steps12-14_stacks.txt").write_text("wall 0.900 s\n" + sampler.table())
    assert report(["--profile", f"{folder}=run", "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "grpo_step_profile.json").read_text())
    assert [r["steps"] for r in data["rows"]] == ["10-11"]
    assert data["stacks"][0]["samples"] == 1 and data["stacks"][0]["wall_s"] == 0.9
    assert "test_step_profile.py:test_the_report_puts" in data["stacks"][0]["top_self"][0]["frame"]
    assert "Python stacks of v, steps 12-14" in (tmp_path / "out" / "grpo_step_profile.md").read_text()
