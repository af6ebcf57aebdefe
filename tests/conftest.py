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

try:  # property tests: random inputs here, a fixed sequence in CI (``HYPOTHESIS_PROFILE=ci``)
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("dev", print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
except ImportError:  # hypothesis is a test extra; the tests that need it import it themselves
    pass


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
