"""mean@k validation inside a training run: on the policy in memory (periodic), and on a model
loaded fresh from disk (the start model, the primed model, the saved ``last/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.models import release_memory
from toolrl_lib.train.config import RunConfig


def validation_result(config: RunConfig, model: Any, tokenizer: Any, examples: list[Any], family: str) -> Any:
    """``mean_at_k`` with the run's validation settings (a ``MeanAtK``, per-example rows kept)."""
    from toolrl_lib.evaluate.mean_at_k import mean_at_k

    v = config.validation
    return mean_at_k(
        model, tokenizer, examples, family, k=v.k, schemes=tuple(v.schemes),
        max_new_tokens=v.max_new_tokens, temperature=v.temperature, top_p=v.top_p,
        batch_size=v.batch_size, seed=config.seed,
    )


def validation_scores(
    config: RunConfig, model: Any, tokenizer: Any, examples: list[Any], family: str
) -> dict[str, float]:
    v = config.validation
    result = validation_result(config, model, tokenizer, examples, family)
    scores = {**result.scores, **result.rates()}
    from toolrl_lib.evaluate.mean_at_k import kind_scores

    scores.update(kind_scores(result.per_example, tuple(v.schemes), v.k))  # per kind + summary
    return scores


def evaluate_saved(
    config: RunConfig, model_path: str, adapter_dir: Path | None, examples: list[Any], family: str,
    device: str,
) -> dict[str, float]:
    """mean@k of a model loaded fresh from disk (base, base + saved adapter, or a saved full
    model when ``adapter_dir`` holds one)."""
    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.train.backend import is_full_model, load_adapter_model
    from toolrl_lib.train.callbacks import forked_rng

    if adapter_dir is not None and is_full_model(adapter_dir):
        model_path, adapter_dir = str(adapter_dir), None
    tokenizer = load_tokenizer(model_path)
    if adapter_dir is None:
        model = load_model(model_path, dtype=config.model.dtype, device=device)
    else:
        model = load_adapter_model(model_path, str(adapter_dir), config.model.dtype, device)  # folded in fp32
    model.eval()
    with forked_rng():
        scores = validation_scores(config, model, tokenizer, examples, family)
    del model
    release_memory()
    return scores
