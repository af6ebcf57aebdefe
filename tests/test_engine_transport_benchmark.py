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
    assert [r["format"].split(" (")[0] for r in result["rows"]] == ["tuple a token", "flat arrays"]
    for row in result["rows"]:
        assert all(row[k] >= 0 for k in legs) and row["megabytes"] > 0
        assert abs(row["total_ms"] - sum(row[k] for k in legs)) < 0.05
    assert "| flat arrays (engine_process now) |" in (tmp_path / "engine_transport.md").read_text()


def test_both_reply_formats_carry_a_round_intact():
    from toolrl_lib.fast.engine_process import pack_outputs, unpack_outputs

    outputs = et.standin_round(5, 12, 7, seed=4)
    for pack, unpack in ((et.tuples_pack, et.tuples_unpack), (pack_outputs, unpack_outputs)):
        back = unpack(pack(outputs))
        assert all(et._same(a.outputs[0], b.outputs[0]) for a, b in zip(outputs, back, strict=True))
        assert [b.prompt_token_ids for b in back] == [list(a.prompt_token_ids) for a in outputs]
