"""Single-turn GRPO rollouts through the library's decoding loop (TRL's public ``rollout_func``).

TRL samples completions with transformers' ``generate``, which prefills every one of a prompt's
``num_generations`` copies and copies its whole key/value cache at every token. On a CPU that
is a large share of each GRPO step. ``library_rollout`` hands TRL the same thing — for each row
of the batch, the prompt's token ids as TRL itself tokenizes them and the new token ids up to
and including the first end-of-turn id, at most ``max_completion_length`` — sampled by
``toolrl_lib.generation`` with TRL's settings (temperature, top-p, top-k; 0 = off, as in TRL).

Selected by ``fast.rollouts: library`` (the smoke profile); ``trl`` keeps TRL's own sampler,
which is what the GPU profiles (vLLM, Unsloth) need. ``fast.merged_generation`` applies to both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ROLLOUTS = ("trl", "library")


def distinct_runs(prompts: list[Any]) -> list[tuple[Any, int]]:
    """Consecutive equal prompts as (prompt, count) pairs: TRL repeats each prompt
    ``num_generations`` times in a row.

    >>> distinct_runs(["a", "a", "b", "b", "a"])
    [('a', 2), ('b', 2), ('a', 1)]
    """
    runs: list[tuple[Any, int]] = []
    for prompt in prompts:
        if runs and runs[-1][0] == prompt:
            runs[-1] = (prompt, runs[-1][1] + 1)
        else:
            runs.append((prompt, 1))
    return runs


def unsupported_settings(args: Any) -> list[str]:
    """GRPOConfig settings the library sampler does not implement (empty = it matches TRL)."""
    problems = []
    if getattr(args, "min_p", None) not in (None, 0, 0.0):
        problems.append(f"min_p={args.min_p}")
    if getattr(args, "repetition_penalty", 1.0) != 1.0:
        problems.append(f"repetition_penalty={args.repetition_penalty}")
    if getattr(args, "generation_kwargs", None):
        problems.append(f"generation_kwargs={args.generation_kwargs}")
    if getattr(args, "use_vllm", False):
        problems.append("use_vllm=True")
    return problems


def library_rollout(batch_size: int | None = None, merge_lora: bool = False) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A ``rollout_func`` for ``GRPOTrainer``: TRL's single-turn rollout, sampled by our loop.

    ``batch_size`` (sequences decoded together) defaults to the whole generation batch;
    ``merge_lora`` samples through ``W + sBA`` (``fast.merged_generation``; TRL's loss still
    recomputes the log-probs through the LoRA layers)."""

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from toolrl_lib.fast.merged_generation import merged_if
        from toolrl_lib.generation import Sampler, generate_ids

        if not all(isinstance(p, str) for p in prompts):
            raise ValueError("fast.rollouts=library takes rendered string prompts (the library's "
                             "GRPO dataset); conversational prompts need fast.rollouts=trl")
        args = trainer.args
        problems = unsupported_settings(args)
        if problems:
            raise ValueError(f"fast.rollouts=library does not implement {', '.join(problems)}; "
                             "use fast.rollouts=trl")
        runs = distinct_runs(prompts)
        tokenizer = trainer.processing_class
        prompt_ids = tokenizer(text=[p for p, _ in runs])["input_ids"]  # as TRL tokenizes them
        model = trainer.accelerator.unwrap_model(trainer.model)
        k = max(n for _, n in runs)
        stops = list(trainer.eos_token_ids)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        with merged_if(model, merge_lora) as sampler_model:
            samples = generate_ids(
                sampler_model, prompt_ids, sampler=Sampler(True, args.temperature, args.top_k or 0, args.top_p),
                stops=stops, pad_id=pad, max_new_tokens=args.max_completion_length,
                num_return_sequences=k, batch_size=batch_size or len(prompts))
        out_prompts, out_completions = [], []
        for (_, n), ids, completions in zip(runs, prompt_ids, samples, strict=True):
            out_prompts += [list(ids)] * n
            out_completions += completions[:n]
        return {"prompt_ids": out_prompts, "completion_ids": out_completions, "logprobs": None}

    return rollout
