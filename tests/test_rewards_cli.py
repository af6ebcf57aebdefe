"""``toolrl reward score``: per-line results, per-line errors naming the line number."""

from __future__ import annotations

import json

from toolrl_lib.cli import main
from toolrl_lib.prompts import get_adapter

GT = [{"name": "f", "arguments": {"x": 1}}]
TOOLS = [{"name": "f", "description": "", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}]


def test_reward_score_cli(tmp_path, capsys):
    good = get_adapter("llama3").render_completion(GT)
    lines = [
        json.dumps({"completion": good, "ground_truth": GT, "tools": TOOLS}),
        "{not json",
        json.dumps({"completion": 5, "ground_truth": GT}),
        "",
        json.dumps({"completion": "plain answer", "ground_truth": []}),
    ]
    path = tmp_path / "in.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    code = main(["reward", "score", "--input", str(path), "--scheme", "binary", "--format", "llama3"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [r["line"] for r in out] == [1, 2, 3, 5, 6]
    assert out[0]["total"] == 1.0 and out[0]["scheme"] == "binary"
    assert "invalid JSON" in out[1]["error"]
    assert "completion" in out[2]["error"]
    assert out[3]["total"] == 1.0
    assert "UTF-8" in out[4]["error"]


def test_reward_score_cli_weights_and_missing_file(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"completion": "no", "ground_truth": GT, "tools": TOOLS}) + "\n")
    assert main(["reward", "score", "--input", str(path), "--weights", '{"format": 1, "name": 0, "args": 0, "reasoning": 0}']) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 1.0  # only format counts; plain text is valid
    assert main(["reward", "score", "--input", str(path), "--weights", '{"bogus": 1}']) == 2
    assert main(["reward", "score", "--input", str(tmp_path / "missing.jsonl")]) == 2
