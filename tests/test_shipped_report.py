"""benchmarks/gpu/shipped.py: the shipped config's GPU run directory read back into a report."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from benchmarks.gpu import shipped

VALIDATION_HEAD = "step,stage,binary_mean@16,binary_summary@16,weighted_summary@16,call_rate,valid_rate,seconds\n"


def run_dir(tmp_path, validation_vllm=True):
    run = tmp_path / "shipped"
    run.mkdir()
    shipped_config = Path(__file__).parents[1] / "configs" / "embedded_gpu.yaml"  # rounds of 256, steps of 16 x 4
    config = yaml.safe_load(shipped_config.read_text())
    config["validation"]["vllm"] = validation_vllm
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    steps = [4.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    (run / "metrics.csv").write_text("step,loss,step_time\n" + "".join(f"{i + 1},0.1,{s}\n" for i, s in enumerate(steps))
                                     + "8,,\n")  # the trainer's summary row has no step_time
    (run / "validation.csv").write_text(VALIDATION_HEAD + "0,base,0.1,0.3,-0.2,0.0,0.9,25.0\n"
                                        "4,grpo,0.2,0.25,-0.1,0.6,0.8,5.0\n8,final,0.2,0.26,-0.1,0.7,0.8,16.0\n")
    return run


def test_the_archive_becomes_rounds_and_validation_rows(tmp_path):
    run = run_dir(tmp_path)
    archive = tmp_path / "shipped.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname="shipped")
    assert shipped.main(["report", "--archive", str(archive), "--out", str(tmp_path / "out"),
                         "--device", "a GPU", "--command", "the command"]) == 0
    record = json.loads((tmp_path / "out" / "embedded_gpu_shipped.json").read_text())
    assert record["steps"] == 8 and record["round_s"] == [7.0, 5.0]  # 256 / 64 = 4 steps a round
    assert record["completions_per_s_after_first_round"] == 51.2  # 256 completions in 5 s
    assert [(v["stage"], v["generator"]) for v in record["validation"]] == [
        ("base", "transformers"), ("grpo", "colocated vLLM"), ("final", "transformers")]
    md = (tmp_path / "out" / "embedded_gpu_shipped.md").read_text()
    assert "| 2 | 5.0 | 2.00, 1.00, 1.00, 1.00 |" in md and "the command" in md


def test_validation_without_the_engine_says_transformers(tmp_path):
    record = shipped.read_run(run_dir(tmp_path, validation_vllm=False))
    assert {v["generator"] for v in record["validation"]} == {"transformers"}


def test_a_missing_file_or_column_is_named(tmp_path):
    run = run_dir(tmp_path)
    (run / "validation.csv").write_text("step,stage,seconds\n0,base,1.0\n")
    with pytest.raises(ValueError, match="validation.csv.*binary_summary@16"):
        shipped.read_run(run)
    (run / "metrics.csv").unlink()
    with pytest.raises(FileNotFoundError, match="metrics.csv"):
        shipped.read_run(run)
