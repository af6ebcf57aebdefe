"""Rollouts of many episodes at once: the sampling loop behind episode evaluation and training.

Each round, every live episode needs one model step: their contexts (token ids, never
re-rendered text) are sorted by length and decoded together in chunks with the shared
sampler of ``toolrl_lib.generation`` (``decode_group``: HF's sampling rules, stop at the
eos token). A step is capped by the episode's remaining token budget, so no transcript
outgrows ``max_episode_tokens`` (TRL does not truncate what a rollout returns).

Training plugs this loop into TRL's GRPOTrainer through ``toolrl_lib.train.multi_turn_rollout``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolrl_lib.envs import get_env
from toolrl_lib.envs.base import Task
from toolrl_lib.envs.episode import Episode, EpisodeSettings


@dataclass
class SamplingSettings:
    do_sample: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    batch_size: int = 16  # episodes decoded together


# (contexts as token ids, each one's token budget) -> per context: (sampled tokens, their log-probs)
StepFn = Callable[[list[list[int]], list[int]], list[tuple[list[int], list[float] | None]]]


def run_episodes(model: Any, tokenizer: Any, episodes: list[Episode], sampling: SamplingSettings,
                 seed: int | None = None, step: StepFn | None = None) -> list[Episode]:
    """Advance every episode to its end, one batched model step per round; ``step``: another
    sampler for the rounds (``vllm_step``), which then gets every live episode at once."""
    if step is not None:
        live = [e for e in episodes if not e.done]
        while live:
            budgets = [max(1, min(e.room(), e.settings.max_new_tokens)) for e in live]
            for episode, (tokens, logprobs) in zip(live, step([e.context() for e in live], budgets), strict=True):
                episode.feed(tokens, logprobs)
            live = [e for e in live if not e.done]
        return episodes
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


def vllm_step(llm: Any, tokenizer: Any, sampling: SamplingSettings, top_k: int, seed: int | None = None) -> StepFn:
    """A round of episode steps through the vLLM engine ``llm`` (a trainer's colocated one):
    every context sent as token ids (the engine's prefix cache makes re-sending a transcript
    cheap), each capped by its own budget, the sampled tokens returned with their log-probs and
    the stop token kept at the end (``Episode.feed`` reads the turn's end from it)."""
    from vllm import SamplingParams

    from toolrl_lib.generation import stop_token_ids

    stops = stop_token_ids(tokenizer)
    calls = [0]

    def step(contexts: list[list[int]], budgets: list[int]) -> list[tuple[list[int], list[float] | None]]:
        params = [SamplingParams(
            n=1, temperature=sampling.temperature if sampling.do_sample else 0.0, top_p=sampling.top_p,
            top_k=top_k if sampling.do_sample else -1, max_tokens=budget, stop_token_ids=stops, logprobs=0,
            detokenize=False, seed=None if seed is None else seed + calls[0] * 100_003 + i,
        ) for i, budget in enumerate(budgets)]  # fmt: skip
        calls[0] += 1
        outputs = llm.generate([{"prompt_token_ids": list(c)} for c in contexts], params, use_tqdm=False)
        out = []
        for result in outputs:
            choice = result.outputs[0]
            tokens = list(choice.token_ids)
            logprobs = [entry[token].logprob if entry and token in entry else math.nan
                        for token, entry in zip(tokens, choice.logprobs or [None] * len(tokens), strict=True)]
            reason = getattr(choice, "stop_reason", None)
            if choice.finish_reason == "stop" and (not tokens or tokens[-1] not in stops):
                tokens.append(reason if isinstance(reason, int) else stops[0])  # the stop token it ended on
                logprobs.append(math.nan)
            out.append((tokens, logprobs))
        return out

    return step
