"""benchmarks/priming_variants.py: variant names, their overrides and compute, and the report's
paired differences over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import priming_variants as pv


def test_variant_names_overrides_and_compute() -> None:
    assert pv.parse_variant("rows96") == (96, 0, 0)
    assert pv.parse_variant("rows128-of256-top15") == (128, 256, 15)
    assert "priming.shortest_of=256" in pv.variant_overrides("rows128-of256", 32)
    assert pv.relative_compute("rows128-of256", 30, 45.0, 60.0) == pytest.approx(0.75)
    assert "priming.gradient_accumulation_steps=3" in pv.variant_overrides("rows96", 32)
    assert pv.relative_compute("rows128", 30) == pytest.approx(1.0)
    assert pv.relative_compute("rows128-top15", 30) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="rows<N>"):
        pv.parse_variant("128rows")
    with pytest.raises(ValueError, match="cannot give"):
        pv.parse_variant("rows128-of64")
    with pytest.raises(ValueError, match="do not split"):
        pv.variant_overrides("rows100", 32)


def test_t_interval_matches_the_t_table() -> None:
    mean, low, high = pv.t_interval([0.1, 0.3])  # sd 0.1414, t(1) 12.706
    assert mean == pytest.approx(0.2)
    assert high - mean == pytest.approx(12.706 * 0.1414214 / 2 ** 0.5, rel=1e-4)


def _job(work: Path, variant: str, seed: int, binary: list[float]) -> None:
    rows = [{"binary": b, "weighted": b - 1, "valid_rate": 1.0, "call_rate": 0.5} for b in binary]
    mean = sum(binary) / len(binary)
    (work / f"{variant}-s{seed}.json").write_text(json.dumps({
        "variant": variant, "seed": seed, "device": "cpu", "k": 2, "n_validation": len(rows),
        "layers": 30, "priming_seconds": 10.0, "losses": [1.0, 0.5],
        "scores": {"binary_mean@2": mean, "weighted_mean@2": mean - 1, "valid_rate": 1.0, "call_rate": 0.5},
        "per_example": rows}))


def test_report_pairs_each_seed_with_the_reference(tmp_path: Path) -> None:
    _job(tmp_path, "rows128", 0, [1.0, 0.0])
    _job(tmp_path, "rows128", 1, [1.0, 1.0])
    _job(tmp_path, "rows64", 0, [0.0, 0.0])   # -0.5 against seed 0
    _job(tmp_path, "rows64", 1, [1.0, 0.0])   # -0.5 against seed 1
    out = tmp_path / "report"
    assert pv.main(["--report", "--work", str(tmp_path), "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    by = {v["variant"]: v for v in result["variants"]}
    assert by["rows128"]["binary"] == pytest.approx(0.75)
    assert by["rows64"]["binary_by_seed"] == [0.0, 0.5]
    diff = by["rows64"]["binary_minus_reference"]
    assert diff["diff"] == pytest.approx(-0.5) and diff["ci_low"] == pytest.approx(-0.5)  # no spread
    assert "binary_minus_reference" not in by["rows128"]
    assert "| rows64 | 2 | 0.50 |" in out.with_suffix(".md").read_text()
