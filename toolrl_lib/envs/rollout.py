"""Rollouts of many episodes at once, and the ``rollout_func`` TRL's GRPOTrainer calls.

Each round, every live episode needs one model step: their contexts (token ids, never
re-rendered text) are sorted by length and decoded together in chunks with the shared
sampler of ``toolrl_lib.generation`` (``decode_group``: HF's sampling rules, stop at the
eos token). A step is capped by the episode's remaining token budget, so no transcript
outgrows ``max_episode_tokens`` (TRL does not truncate what a rollout returns).

``make_rollout_func`` plugs this into TRL 1.15's public hook: ``rollout_func(prompts,
trainer)`` gets the batch's prompts (task keys, each repeated ``num_generations`` times)
and returns ``prompt_ids``, ``completion_ids``, ``logprobs`` (None: TRL recomputes the old
log-probs itself), ``env_mask`` (1 = a sampled token, 0 = injected; TRL uses it as the loss
mask) and ``episode`` (the checker's verdict per rollout, passed on to the rewards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolrl_lib.envs import get_env, task_from_key
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings


@dataclass
class SamplingSettings:
    do_sample: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    batch_size: int = 16  # episodes decoded together


def run_episodes(model: Any, tokenizer: Any, episodes: list[Episode], sampling: SamplingSettings,
                 seed: int | None = None) -> list[Episode]:
    """Advance every episode to its end, one batched model step per round."""
    import torch

    from toolrl_lib.generation import Sampler, batches, decode_group, stop_token_ids

    if seed is not None:
        torch.manual_seed(seed)
    sampler = Sampler.from_model(model, sampling.do_sample, sampling.temperature, sampling.top_p)
    stops = stop_token_ids(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            live = [e for e in episodes if not e.done]
            while live:
                for chunk in batches(sorted(live, key=lambda e: len(e.context())), sampling.batch_size):
                    budget = min(min(e.room() for e in chunk), max(e.settings.max_new_tokens for e in chunk))
                    new = decode_group(model, [e.context() for e in chunk], 1, max(1, budget), sampler,
                                       stops, pad_id)
                    for episode, tokens in zip(chunk, new, strict=True):
                        episode.feed(tokens)
                live = [e for e in live if not e.done]
    finally:
        if was_training:
            model.train()
    return episodes


def new_episodes(tasks: list[Task], adapter: Any, tokenizer: Any, settings: EpisodeSettings) -> list[Episode]:
    return [Episode(get_env(t.env), t, adapter, tokenizer, settings) for t in tasks]


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
