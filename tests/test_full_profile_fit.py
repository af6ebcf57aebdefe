"""benchmarks/gpu/full_profile_fit.py on CPU with tiny shapes: its overrides, a failed backend as a
result row, and the colab profile's fit (train + validation + merge; the 15 GB measurement at real
shapes runs on a GPU). Harness tests: ``pytest -m gpu_harness``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu import full_profile_fit as fpf

ROOT = Path(__file__).resolve().parents[1]
COLAB = ROOT / "configs" / "qwen3_1p7b_colab.yaml"

pytestmark = pytest.mark.gpu_harness


def test_full_profile_overrides_validate(tmp_path):
    from toolrl_lib.train.config import load_run_config

    args = fpf.argparse.Namespace(backend="peft", max_steps=2, val_examples=4, val_tokens=32, cpu=False,
                                  set=["grpo.loss_type=grpo"])
    config = load_run_config(fpf.CONFIG, fpf.overrides(args, tmp_path / "model"))
    assert config.model.name == str(tmp_path / "model") and config.model.family == "qwen3"
    assert config.backend == "peft" and config.grpo.max_steps == 2 and not config.filtering.enabled
    assert config.data.train_files == ["data/processed/smoke/train.jsonl"]
    assert config.grpo.max_completion_length == 1024 and config.grpo.per_device_train_batch_size == 8
    assert config.grpo.loss_type == "grpo" and not config.logging.tensorboard


def test_full_profile_fit_defaults_to_the_configs_backend(tmp_path):
    """No --backend: the profile's own (unsloth). On this CPU box it fails as a result row."""
    rc = fpf.main(["--out", str(tmp_path), "--shapes", "tiny", "--cpu", "--max-steps", "1",
                   "--model-dir", str(tmp_path / "model"), "--run-dir", str(tmp_path / "run")])
    result = json.loads((tmp_path / "full_profile_fit_unsloth.json").read_text())
    assert rc == 1 and result["backend"] == "unsloth" and "backend=unsloth" in result["overrides"]
    assert result["status"] == "failed" and "unsloth" in result["error"]


@pytest.mark.slow
def test_colab_fit_trains_validates_and_merges_on_cpu(tmp_path: Path) -> None:
    """The GPU command, at tiny shapes on CPU with the peft backend: 1 step, validation, merge."""
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples

    # a clean clone has no data/processed/smoke (notebook 01 writes it): synthetic examples
    write_jsonl(generate_examples(16, seed=1), tmp_path / "train.jsonl")
    write_jsonl(generate_examples(4, seed=2), tmp_path / "val.jsonl")
    data = ["--set", f"data.train_files=[{tmp_path / 'train.jsonl'}]",
            "--set", f"data.val_files=[{tmp_path / 'val.jsonl'}]"]
    rc = fpf.main([*data, "--config", str(COLAB), "--shapes", "tiny", "--cpu", "--backend", "peft",
                   "--max-steps", "1", "--val-examples", "2", "--val-tokens", "8", "--merge",
                   "--label", "colab_profile_fit", "--out", str(tmp_path),
                   "--model-dir", str(tmp_path / "model"), "--run-dir", str(tmp_path / "run"),
                   "--set", "grpo.max_completion_length=8", "--set", "grpo.warmup_steps=0"])
    result = json.loads((tmp_path / "colab_profile_fit_peft.json").read_text())
    assert rc == 0, result.get("error")
    assert result["status"] == "ok" and result["steps_done"] == 1 and result["merge_rc"] == 0
    assert (tmp_path / "run" / "merged" / "toolrl_merge.json").is_file()
    merge, probes = result["merge"], result["merge"]["saved_probes"]
    assert merge["backend"] == "peft" and merge["dtype"] == "fp16" and all(merge["checks"].values())
    assert probes["delta_matched"] == probes["delta_visible"] > 0  # every visible delta exact
    assert result["config"] == str(COLAB)
