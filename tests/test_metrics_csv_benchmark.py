"""benchmarks/metrics_csv.py: both ways of logging a step timed at each run length, its files written."""

import json

from benchmarks import metrics_csv


def test_the_benchmark_times_both_ways_at_each_length_and_writes_its_table(tmp_path):
    assert metrics_csv.main(["--out", str(tmp_path), "--rows", "5,40", "--columns", "3", "--repeats", "2"]) == 0
    data = json.loads((tmp_path / "metrics_csv.json").read_text())
    assert [r["rows"] for r in data["rows"]] == [5, 40] and all(r["columns"] == 5 for r in data["rows"])
    assert all(r["rewrite_ms"] > 0 and r["append_ms"] > 0 for r in data["rows"])
    table = (tmp_path / "metrics_csv.md").read_text()
    assert "| 40 | 5 |" in table and data["command"] in table


def test_fake_rows_are_logged_steps_with_the_asked_columns():
    rows = metrics_csv.fake_rows(3, 4)
    assert [r["step"] for r in rows] == [1, 2, 3] and len(rows[0]) == 6
    assert rows == metrics_csv.fake_rows(3, 4)
