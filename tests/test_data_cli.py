"""``toolrl data prepare|generate``: JSON summary on stdout, clear one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from toolrl_lib.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def test_prepare_prints_the_summary(tmp_path, capsys):
    code = main(["data", "prepare", "--source", "xlam", "--input", str(SAMPLE / "xlam_sample.json"),
                 "--out", str(tmp_path / "out")])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["kept"] == 8 and summary["dropped"]["bad_json"] == 1
    assert (tmp_path / "out" / "train.jsonl").is_file()


def test_synthetic_without_input_generates(tmp_path, capsys):
    code = main(["data", "prepare", "--source", "synthetic", "--n", "60", "--seed", "4",
                 "--kinds", "simple,parallel", "--out", str(tmp_path / "out")])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["sources"]["synthetic"]["rows"] == 60
    assert set(summary["kinds"]) <= {"simple", "parallel"}


def test_strict_stops_with_row_and_field(tmp_path, capsys):
    code = main(["data", "prepare", "--source", "xlam", "--input", str(SAMPLE / "xlam_sample.json"),
                 "--out", str(tmp_path / "out"), "--strict"])
    err = capsys.readouterr().err
    assert code == 2 and "xlam_sample.json:8" in err and "'answers'" in err
    assert "Traceback" not in err


def test_not_data_missing_file_and_wrong_columns_are_clear_errors(tmp_path, capsys):
    prose = tmp_path / "notes.json"
    prose.write_text("hello, this is not data\n", encoding="utf-8")
    cases = [
        (["--source", "xlam", "--input", str(prose)], "not a data file"),
        (["--source", "xlam", "--input", str(tmp_path / "missing.json")], "no such file"),
        (["--source", "toolace", "--input", str(SAMPLE / "xlam_sample.json")], "does not look like toolace rows"),
        (["--source", "parquet"], "needs --input"),
    ]
    for args, message in cases:
        code = main(["data", "prepare", *args, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, (args, err)


def test_generate_parquet_then_prepare_it(tmp_path, capsys):
    out = tmp_path / "syn.parquet"
    assert main(["data", "generate", "--format", "parquet", "--n", "25", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["data", "prepare", "--source", "parquet", "--input", str(out),
                 "--out", str(tmp_path / "p")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kept"] + sum(summary["dropped"].values()) == 25 and summary["kept"] >= 23


def test_synthetic_rows_from_a_file_are_read_by_their_format(tmp_path, capsys):
    for fmt in ("xlam", "toolace"):
        raw = tmp_path / f"{fmt}.jsonl"
        assert main(["data", "generate", "--format", fmt, "--n", "20", "--seed", "1",
                     "--out", str(raw)]) == 0
        capsys.readouterr()
        assert main(["data", "prepare", "--source", "synthetic", "--input", str(raw),
                     "--out", str(tmp_path / fmt)]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["kept"] == 20 and summary["sources"]["synthetic"]["rows"] == 20


def test_smoke_prepares_once_then_skips(tmp_path, capsys):
    out = tmp_path / "smoke"
    assert main(["data", "smoke", "--out", str(out)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["prepared"] is True and first["train"] > 0 and (out / "val.jsonl").is_file()
    assert main(["data", "smoke", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["prepared"] is False
