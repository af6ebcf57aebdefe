"""The ``rollout_func`` TRL's GRPOTrainer calls in a multi-turn run: whole episodes in our environments.

TRL 1.15's public hook ``rollout_func(prompts, trainer)`` gets the batch's prompts (task keys,
each repeated ``num_generations`` times) and returns ``prompt_ids``, ``completion_ids``,
``logprobs`` (None: TRL recomputes the old log-probs itself), ``env_mask`` (1 = a sampled token,
0 = injected; TRL uses it as the loss mask) and ``episode`` (the checker's verdict per rollout,
passed on to the rewards). The episodes themselves are played by ``toolrl_lib.envs.rollout``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolrl_lib.envs import task_from_key
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings
from toolrl_lib.envs.rollout import SamplingSettings, new_episodes, run_episodes


def make_rollout_func(family: str, settings: EpisodeSettings, sampling: SamplingSettings,
                      on_rollouts: Callable[[list[Episode]], None] | None = None,
                      merge_lora: bool = False) -> Callable[..., dict]:
    """TRL's ``rollout_func`` over our environments (prompts are ``task_key`` strings);
    ``merge_lora``: sample through ``W + sBA`` (``fast.merged_generation``)."""
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
        with merged_if(model, merge_lora) as sampler_model:
            episodes = run_episodes(sampler_model, tokenizer, new_episodes(tasks, adapter, tokenizer, settings),
                                    sampling)
        if on_rollouts is not None:
            on_rollouts(episodes)
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": None,
            "env_mask": [e.env_mask for e in episodes],
            "episode": [e.result() for e in episodes],
        }

    return rollout_func
