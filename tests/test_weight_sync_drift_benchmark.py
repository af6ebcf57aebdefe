"""benchmarks/weight_sync_drift.py on one small layer: TRL's sync moves adapted base weights, the exact one none."""

import json

import pytest

pytest.importorskip("peft")


def test_trls_sync_walks_the_base_weights_and_the_exact_sync_leaves_them(tmp_path):
    from benchmarks import weight_sync_drift

    assert weight_sync_drift.main(["--out", str(tmp_path), "--layers", "1", "--b-step", "0.001",
                                   "--syncs", "1,5"]) == 0
    rows = json.loads((tmp_path / "weight_sync_drift.json").read_text())["rows"]
    by = {(r["sync"], r["syncs"]): r for r in rows}
    assert set(by) == {("trl", 1), ("trl", 5), ("exact", 1), ("exact", 5)}
    assert by[("trl", 5)]["changed_share"] > by[("trl", 1)]["changed_share"] > 0  # a changing adapter walks them
    assert by[("exact", 5)]["changed_share"] == 0 and by[("exact", 5)]["drift_over_update"] == 0
    assert "| trl | 0.001 | 5 |" in (tmp_path / "weight_sync_drift.md").read_text()
