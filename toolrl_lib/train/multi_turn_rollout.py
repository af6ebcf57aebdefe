"""The ``rollout_func`` TRL's GRPOTrainer calls in a multi-turn run: whole episodes in our environments.

TRL 1.15's public hook ``rollout_func(prompts, trainer)`` gets the batch's prompts (task keys,
each repeated ``num_generations`` times) and returns ``prompt_ids``, ``completion_ids``,
``logprobs`` (None: TRL recomputes the old log-probs itself; with vLLM, the sampled tokens' log-probs
for its importance-sampling correction), ``env_mask`` (1 = a sampled token,
0 = injected; TRL uses it as the loss mask) and ``episode`` (the checker's verdict per rollout,
passed on to the rewards). The episodes themselves are played by ``toolrl_lib.envs.rollout``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toolrl_lib.envs import task_from_key
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings
from toolrl_lib.envs.rollout import SamplingSettings, new_episodes, run_episodes, vllm_step
from toolrl_lib.train.validation import colocated_llm


def make_rollout_func(family: str, settings: EpisodeSettings, sampling: SamplingSettings,
                      on_rollouts: Callable[[list[Episode]], None] | None = None,
                      merge_lora: bool = False) -> Callable[..., dict]:
    """TRL's ``rollout_func`` over our environments (prompts are ``task_key`` strings);
    ``merge_lora``: sample through ``W + sBA`` (``fast.merged_generation``). When the trainer
    runs a colocated vLLM engine (``grpo.vllm.mode: colocate``; TRL syncs its weights before
    calling this), every round of episode steps goes through it instead."""
    from toolrl_lib.fast.merged_generation import merged_if
    from toolrl_lib.prompts import get_adapter

    adapter = get_adapter(family)
    cache: dict[str, Task] = {}

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list]:
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        tasks = []
        for key in prompts:
            if key not in cache:
                cache[key] = task_from_key(str(key))
            tasks.append(cache[key])
        engine = colocated_llm(trainer)  # TRL synced its weights before calling us: no second sync
        started = time.perf_counter()
        fresh = new_episodes(tasks, adapter, tokenizer, settings)
        if engine is not None:
            from toolrl_lib.generation import default_top_k

            top_k = default_top_k(getattr(model, "generation_config", None))
            episodes = run_episodes(model, tokenizer, fresh, sampling, step=vllm_step(engine, tokenizer, sampling, top_k))
        else:
            with merged_if(model, merge_lora) as sampler_model:
                episodes = run_episodes(sampler_model, tokenizer, fresh, sampling)
        seconds = time.perf_counter() - started
        if on_rollouts is not None:
            on_rollouts(episodes)
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes] if engine is not None else None,
            "env_mask": [e.env_mask for e in episodes],
            # the round's seconds (sampling and the environments; TRL's weight sync before it is not in them),
            # logged as episode/rollout_s: a step's time less this is the optimizer's share
            "episode": [{**e.result(), "rollout_s": seconds} for e in episodes],
        }

    return rollout_func

