"""benchmarks/engine_transport.py: the engine process's traffic for a round, timed on stand-in outputs."""

from __future__ import annotations

import doctest
import json

from benchmarks import engine_transport as et


def test_doctests():
    assert doctest.testmod(et).failed == 0


def test_main_times_each_leg_and_writes_its_tables(tmp_path):
    assert et.main(["--requests", "16", "--tokens", "20", "--prompt-tokens", "30", "--repeats", "2",
                    "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "engine_transport.json").read_text())
    legs = ("pack_ms", "pickle_ms", "unpickle_ms", "unpack_ms")
    assert all(result[k] >= 0 for k in legs) and result["megabytes"] > 0
    assert abs(result["total_ms"] - sum(result[k] for k in legs)) < 0.05
    assert "| 16 (20) |" in (tmp_path / "engine_transport.md").read_text()
