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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the one-off GPU experiment harness (benchmarks/gpu/) leave the default suite:
    they run only when ``-m`` names the marker (``pytest -m gpu_harness``), so CI's
    ``-m "not notebooks and not browser"`` does not pay for them."""
    if "gpu_harness" in (config.getoption("markexpr") or ""):
        return
    kept, dropped = [], []
    for item in items:
        (dropped if item.get_closest_marker("gpu_harness") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny random Llama + ChatML byte tokenizer (a normal HF model folder)."""
    from toolrl_lib.models import make_tiny_model

    folder = tmp_path_factory.mktemp("tiny-model")
    make_tiny_model(folder)
    return folder


@pytest.fixture(scope="module")
def lively():
    """A tiny random model (grouped-query attention: 4 heads, 2 kv heads) with large weights, so
    greedy replies depend on the prompt and stop at different lengths (the decoder tests)."""
    import torch

    from toolrl_lib.models import make_tiny_model

    model, tokenizer = make_tiny_model(seed=1, hidden_size=32)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.5)
    return model, tokenizer


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The real embedded model folder (converted from the GGUF once per machine)."""
    from toolrl_lib.models import prepare_embedded_model

    return prepare_embedded_model()


@pytest.fixture()
def fused_model():
    """A tiny random model with TRL's fused log-prob head (temperature 0.7), as GRPO's loss runs it:
    the reference for the ``fast`` forwards that replace TRL's (shared prompts, trimmed padding)."""
    from trl import GRPOTrainer  # noqa: F401  (TRL's module sets up its kernels on import)
    from trl.trainer.utils import add_fused_lm_head

    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback
    from toolrl_lib.models import make_tiny_model

    install_cpu_logprob_fallback()
    model, _ = make_tiny_model(seed=2)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    return model

