"""benchmarks/result_files.py: the JSON and markdown pair a CPU benchmark writes."""

from __future__ import annotations

import doctest
import json

from benchmarks import result_files


def test_doctests():
    assert doctest.testmod(result_files).failed == 0


def test_the_json_holds_the_data_as_given(tmp_path):
    result_files.write_result(tmp_path / "new", "r", {"rows": [{"a": 1.5}], "command": "c"}, ["| a |"], "n", "c")
    assert json.loads((tmp_path / "new" / "r.json").read_text()) == {"rows": [{"a": 1.5}], "command": "c"}
    assert (tmp_path / "new" / "r.md").read_text().endswith("```bash\nc\n```\n")
