"""mean@k validation inside a training run: on the policy in memory (periodic), and on a model
loaded fresh from disk (the start model, the primed model, the saved ``last/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.models import release_memory
from toolrl_lib.train.config import RunConfig


def validation_result(config: RunConfig, model: Any, tokenizer: Any, examples: list[Any], family: str,
                      sampler: Any = None) -> Any:
    """``mean_at_k`` with the run's validation settings (a ``MeanAtK``, per-example rows kept);
    ``sampler``: another way to draw the samples (``colocated_sampler``), else ``model``'s generate."""
    from toolrl_lib.evaluate.mean_at_k import mean_at_k

    v = config.validation
    return mean_at_k(
        model, tokenizer, examples, family, k=v.k, schemes=tuple(v.schemes),
        max_new_tokens=v.max_new_tokens, temperature=v.temperature, top_p=v.top_p,
        batch_size=v.batch_size, seed=config.seed, sampler=sampler,
    )


def colocated_llm(trainer: Any) -> Any:
    """The trainer's colocated vLLM engine with the policy's current weights, or None when there
    is none (no vLLM, server mode, sleep mode: the engine may be asleep).

    The engine holds the weights of the last rollout round; they are synced first, as TRL syncs
    them before a round (``_last_loaded_step``, TRL's own marker, updated so the next round does
    not sync twice)."""
    generation = getattr(trainer, "vllm_generation", None)
    args = getattr(trainer, "args", None)
    if (generation is None or getattr(args, "vllm_mode", None) != "colocate"
            or getattr(args, "vllm_enable_sleep_mode", False)):
        return None
    from toolrl_lib.fast.overlap import wait_for_worker

    wait_for_worker(trainer)  # fast.overlap_generation: the engine may be generating the next round
    step = trainer.state.global_step
    if getattr(trainer, "_last_loaded_step", None) != step:
        generation.sync_weights()
        trainer._last_loaded_step = step
    return generation.llm


def colocated_sampler(trainer: Any, tokenizer: Any) -> Any:
    """A mean@k sampler over ``colocated_llm(trainer)``, or None (see there)."""
    llm = colocated_llm(trainer)
    if llm is None:
        return None
    from toolrl_lib.evaluate.backends import sampler_from_llm
    from toolrl_lib.generation import default_top_k

    model = getattr(trainer, "model", None)
    return sampler_from_llm(llm, tokenizer, default_top_k(getattr(model, "generation_config", None)))


def validation_scores(
    config: RunConfig, model: Any, tokenizer: Any, examples: list[Any], family: str, sampler: Any = None
) -> dict[str, float]:
    v = config.validation
    result = validation_result(config, model, tokenizer, examples, family, sampler)
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
