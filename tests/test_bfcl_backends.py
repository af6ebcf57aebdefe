"""benchmarks/bfcl_backends.py: entry-by-entry agreement of two BFCL generation folders and the
report's shape when one backend failed (no scorer needed: nothing is scored without exit code 0)."""

from __future__ import annotations

import json

from benchmarks import bfcl_backends as bb


def _folder(root, backend, rows_by_category):
    gen = root / backend / "generations"
    gen.mkdir(parents=True)
    for category, rows in rows_by_category.items():
        (gen / f"{category}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_agreement_counts_text_and_calls_per_category(tmp_path):
    _folder(tmp_path, "hf", {"simple_python": [{"id": "a", "raw": "x", "result": "r1"},
                                               {"id": "b", "raw": "y", "result": "r2"}],
                             "irrelevance": [{"id": "c", "raw": "no", "result": ""}]})
    _folder(tmp_path, "vllm", {"simple_python": [{"id": "a", "raw": "x", "result": "r1"},
                                                 {"id": "b", "raw": "y ", "result": "r2"}],
                               "irrelevance": [{"id": "c", "raw": "call", "result": "f()"},
                                               {"id": "d", "raw": "", "result": ""}]})
    ag = bb.agreement(bb.generations(tmp_path / "hf"), bb.generations(tmp_path / "vllm"))
    assert ag["entries"] == 3 and ag["only_in_second"] == 1 and ag["only_in_first"] == 0
    assert ag["raw_identical"] == round(1 / 3, 4) and ag["calls_identical"] == round(2 / 3, 4)
    assert ag["by_category"]["simple_python"] == {"entries": 2, "raw_identical": 0.5, "calls_identical": 1.0}
    assert ag["by_category"]["irrelevance"]["calls_identical"] == 0.0


def test_a_failed_backend_is_reported_not_scored(tmp_path):
    _folder(tmp_path, "hf", {"simple_python": [{"id": "a", "raw": "x", "result": "r"}]})
    _folder(tmp_path, "vllm", {})
    (tmp_path / "times.jsonl").write_text('{"backend": "vllm", "rc": 1, "seconds": 60}\n'
                                          '{"backend": "hf", "rc": 124, "seconds": 400}\n')
    result = bb.build(tmp_path)
    assert result["backends"]["vllm"] == {"entries": 0, "seconds": 60, "exit_code": 1}
    assert result["backends"]["hf"]["entries_per_s"] == round(1 / 400, 2)
    assert "overall" not in result["backends"]["hf"]  # timed out (124): not scored
    assert result["agreement"]["entries"] == 0 and result["speedup_vllm_over_hf"] == round(400 / 60, 2)
    md = bb.markdown(result, "cmd")
    assert "| vllm | 0 | 60 |  |" in md and "```bash\ncmd\n```" in md
