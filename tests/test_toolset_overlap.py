"""The broad tool set's contamination check: planted overlaps are found, reported and
dropped; the real check reads BFCL from the packaged ``bfcl-eval`` data."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from toolrl_lib.cli import main
from toolrl_lib.data.contamination import build_index
from toolrl_lib.data.toolset import all_signatures, generate_broad
from toolrl_lib.data.toolset.naming import snake, words_of
from toolrl_lib.data.toolset.overlap import OverlapReport, check_examples, check_signatures


def _reference(name: str, params: list[str]) -> tuple[str, dict]:
    return ("planted_1", {"name": name, "parameters": {"type": "dict",
                                                       "properties": {p: {"type": "string"} for p in params}}})


def test_a_planted_function_name_is_found_in_any_spelling_and_dropped():
    target = next(s for s in all_signatures() if s.style == "dotted_camel")
    report = OverlapReport()
    kept = check_signatures(all_signatures(), [_reference("other_ns." + snake(words_of(target.name)), [])], report)
    assert [o["ours"] for o in report.name_overlaps] == [target.name]
    assert target not in kept and len(kept) == len(all_signatures()) - 1


def test_a_planted_parameter_list_is_found_and_dropped():
    target = next(s for s in all_signatures() if len(s.params) >= 4)
    report = OverlapReport()
    snake_params = [snake(words_of(p.name)) for p in target.params]
    kept = check_signatures(all_signatures(), [_reference("unrelated_name", snake_params)], report)
    assert target.name in {o["ours"] for o in report.parameter_set_overlaps} and target not in kept
    assert report.summary()["parameter_names_shared"] >= len(target.params)


def test_a_planted_query_is_found_and_dropped_through_the_generator():
    clean = generate_broad(60, 3, contamination=False).examples["train"]
    planted = clean[7]
    index = build_index([("bfcl_planted", planted.query.upper() + "  ")])
    phrase_index = build_index([("bfcl_phrase", "Hello " + " ".join(clean[9].query.split()[-8:]))], ngram=8)
    report = OverlapReport()
    kept = check_examples(clean, index, report)
    assert [o["id"] for o in report.query_overlaps] == [planted.id] and planted not in kept
    data = generate_broad(60, 3, references=lambda: [], index=index, phrase_index=phrase_index)
    train = {e.id: e.query for e in data.examples["train"]}
    assert planted.id not in train and clean[8].id in train  # same seed, same examples, one dropped
    assert [o["bfcl_id"] for o in data.report.query_overlaps] == ["bfcl_planted"]
    assert [o["bfcl_id"] for o in data.report.phrase_overlaps] == ["bfcl_phrase"]
    assert train[clean[9].id] == clean[9].query  # a shorter shared run is reported, not dropped
    target = all_signatures()[10]
    data = generate_broad(200, 3, references=lambda: [_reference(target.name, [])], index=index)
    assert target.name in data.report.dropped_signatures()
    assert all(target.name not in {t["name"] for t in e.tools} for rows in data.examples.values() for e in rows)
    assert "planted_1" in data.report.to_markdown()


def _bfcl_installed() -> bool:
    try:
        metadata.distribution("bfcl-eval")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _bfcl_installed(), reason="BFCL's data comes from the bfcl-eval package, which "
                    "scripts/bootstrap.sh installs (pip install --no-deps bfcl-eval==2026.3.23)")
def test_the_real_check_against_packaged_bfcl_writes_its_report(tmp_path, capsys):
    out = tmp_path / "broad"
    code = main(["data", "generate", "--generator", "broad", "--examples", "400", "--seed", "0", "--out", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sum(printed["examples"].values()) == 400 - printed["contamination"]["examples_dropped"]
    report = json.loads((out / "contamination.json").read_text())
    assert report["summary"]["bfcl_functions"] > 1000 and report["summary"]["examples_checked"] == 400
    for overlap in report["name_overlaps"]:  # any name that overlaps is dropped from every split
        assert " ".join(words_of(overlap["ours"])) == " ".join(words_of(overlap["bfcl"]))
    dropped = {o["ours"] for o in report["name_overlaps"]}
    for split in ("train", "val", "test"):
        rows = [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
        assert not dropped & {t["name"] for row in rows for t in row["tools"]}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["signatures"] >= 2000 and stats["domains"] >= 40
    assert (out / "contamination.md").read_text().startswith("# Broad tool set")


def test_the_synthetic_generator_still_needs_a_format(tmp_path, capsys):
    assert main(["data", "generate", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "--format is required" in capsys.readouterr().err
