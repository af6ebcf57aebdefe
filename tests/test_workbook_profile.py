"""benchmarks/workbook_profile.py: the table side by side, the hand-written notes kept."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import workbook_profile as wp


def run(total: float, priming: float) -> dict:
    return {
        "total_seconds": total, "peak_rss_gib": 3.5, "peak_tree_rss_gib": 3.6, "returncode": 0,
        "command": "python -m tools.workbook run --profile smoke", "date": "2026-12-02 02:00",
        "machine": {"commit": "abc1234", "dirty": False, "cpus": 2},
        "stages": [{"stage": "priming", "seconds": priming, "peak_rss_gib": 3.2},
                   {"stage": "BFCL scoring: base", "seconds": 4.0, "peak_rss_gib": 1.1},
                   {"stage": "BFCL scoring: base", "seconds": 3.0, "peak_rss_gib": 1.2}],
    }


def test_markdown_puts_runs_side_by_side_and_appends_notes() -> None:
    text = wp.markdown({"before": run(958.0, 274.0), "after": run(900.0, 270.0)}, "`after`: merged rollouts.\n")
    assert "| stage | before s | before GiB | after s | after GiB |" in text
    assert "| priming | 274 | 3.20 | 270 | 3.20 |" in text
    assert "| BFCL scoring: base | 7 (x2) | 1.20 | 7 (x2) | 1.20 |" in text
    assert "| **whole run** | **958** | **3.50** | **900** | **3.50** |" in text
    assert text.rstrip().endswith("`after`: merged rollouts.")


def test_rewriting_the_table_keeps_the_notes(tmp_path: Path) -> None:
    results = tmp_path / "workbook_profile.json"
    results.write_text(json.dumps({"before": run(958.0, 274.0)}), encoding="utf-8")
    (tmp_path / "workbook_profile.notes.md").write_text("What `before` showed.\n", encoding="utf-8")
    assert wp.main(["--table", "--results", str(results)]) == 0
    assert "What `before` showed." in (tmp_path / "workbook_profile.md").read_text(encoding="utf-8")
    (tmp_path / "workbook_profile.notes.md").unlink()
    assert wp.main(["--table", "--results", str(results)]) == 0
    assert "What `before` showed." not in (tmp_path / "workbook_profile.md").read_text(encoding="utf-8")
