"""The colab profile (a free-tier T4: 16 GB, fp16): its configs load and its shapes are Qwen3-1.7B's
(the fit benchmark's CPU run of it: test_full_profile_fit.py)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import grpo_throughput as gt
from tools import workbook

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "qwen3_1p7b_colab.yaml"


def test_colab_profile_is_a_workbook_profile() -> None:
    assert "colab" in workbook.PROFILES
    training = workbook.profile_parameters("colab", "03")
    assert training["config_path"] == "configs/qwen3_1p7b_colab.yaml"
    assert workbook.profile_parameters("colab", "04")["dtype"] == "fp16"  # a T4 has no bf16
    assert workbook.profile_parameters("colab", "02")["dtype"] == "fp16"
    assert "toolace" in workbook.profile_parameters("colab", "01")["sources"]


def test_colab_run_config_is_fp16_unsloth_and_fits_its_lengths() -> None:
    from toolrl_lib.train.config import load_run_config

    config = load_run_config(CONFIG)
    assert config.model.name == "Qwen/Qwen3-1.7B" and config.model.dtype == "fp16"
    assert config.backend == "unsloth" and config.lora.r == 16
    assert config.data.max_prompt_tokens + config.grpo.max_completion_length <= config.model.max_seq_length
    assert config.data.train_files == ["data/processed/colab/train.jsonl"]
    assert config.grpo.generation_batch_size % config.grpo.num_generations == 0


def test_colab_shapes_are_qwen3_1p7b() -> None:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = gt.embedded_tokenizer()
    config = gt.qwen3_config("qwen3-1.7b", tokenizer)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    embedding = config.vocab_size * config.hidden_size
    # Qwen3-1.7B's model card: 1.7B parameters, 1.4B of them non-embedding (tied lm_head).
    assert 1.65e9 < total < 2.1e9 and 1.35e9 < total - embedding < 1.45e9
    assert config.tie_word_embeddings
