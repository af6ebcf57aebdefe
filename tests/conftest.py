"""Shared fixtures. Unit tests use the tiny random model; only tests marked ``slow`` load the
embedded SmolLM2-135M (prepared once per machine by ``toolrl model prepare``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny random Llama + ChatML byte tokenizer (a normal HF model folder)."""
    from toolrl_lib.models import make_tiny_model

    folder = tmp_path_factory.mktemp("tiny-model")
    make_tiny_model(folder)
    return folder


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The real embedded model folder (converted from the GGUF once per machine)."""
    from toolrl_lib.models import prepare_embedded_model

    return prepare_embedded_model()
