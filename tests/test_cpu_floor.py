"""benchmarks/cpu_floor.py: its report reads both the committed results (before the bf16 column)
and new ones, and the bf16 timing runs a row under autocast."""

import json
from pathlib import Path

import torch

from benchmarks import cpu_floor

ROOT = Path(__file__).resolve().parents[1]


def test_report_of_a_result_without_and_with_the_bf16_column():
    old = json.loads((ROOT / "benchmarks" / "results" / "cpu_floor_xeon.json").read_text())
    assert "bf16_autocast_seconds_per_row" not in old["priming"]
    text = cpu_floor.markdown(old)
    assert "native bf16: none" in text and "| – |" in text
    new = {**old, "bf16_instructions": ["amx_bf16"],
           "priming": {**old["priming"], "bf16_autocast_seconds_per_row": 1.234}}
    text = cpu_floor.markdown(new)
    assert "native bf16: amx_bf16" in text and "| 1.234 |" in text
    assert set(cpu_floor.bf16_instructions()) <= {"amx_bf16", "avx512_bf16"}


def test_seconds_per_row_in_fp32_and_under_bf16_autocast(monkeypatch):
    seen = []
    monkeypatch.setattr(cpu_floor, "row_step", lambda model, ids, mask: seen.append(torch.is_autocast_enabled('cpu')))
    rows = [(None, None)] * 3
    assert len(cpu_floor.seconds_per_row(None, rows, rounds=2)) == 2
    assert len(cpu_floor.seconds_per_row(None, rows, rounds=1, bf16=True)) == 1
    assert seen == [False] * 6 + [True] * 3
