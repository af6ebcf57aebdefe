"""The round's old log-probs taken from vLLM's sampler instead of a forward pass (``fast.sampler_logps``).

When a rollout round spans several optimizer steps, TRL 1.15 runs the policy over the whole round
once more, without gradients, for PPO's ``old_per_token_logps`` (and, with vLLM, for its
importance-sampling correction against the sampler's log-probs). On an H100 that forward takes
~0.9-1.0 s of a round of 512 completions of the embedded model, a fifth of the round
(``benchmarks/results/grpo_throughput.md``, run 6). vLLM already returned the log-prob of every
token it sampled, under the weights it sampled with (TRL asks for ``processed_logprobs``: after
temperature). This option hands those to TRL as the old log-probs and skips the forward.

That is a change of algorithm, not of speed alone, and is reported as one:

- PPO's ratio is taken against the policy that actually sampled (the behaviour policy): vLLM's
  bf16 kernels, and under ``fast.overlap_generation`` weights one round staler. Without the option
  it is taken against the trainer's own forward at the round's start, and TRL's correction
  ``exp(old - sampler)`` (clipped) re-weights for the sampler's difference; with it that
  correction is exactly 1 and the clip range absorbs the difference instead.
- Tokens where the engine and the trainer disagree most are the ones the clip cuts first.

Measured (``benchmarks/results/grpo_throughput.md``, one H100, with the engine-process overlap),
every round served from the sampler: run 8 (one warm-up round) 88.4 against 99.3 completions/s for
its twin, slower, the next round's generation overlapping the training steps instead of the removed
forward (two processes take turns on one GPU); run 9 (three warm-up rounds) 103.5 and 90.2 against
87.8-88.5/s, and 111.5 and 103.3/s with CUDA MPS. Calls of one path spread by up to 13%, as much as
these differences. Off by default.

Each round is checked: every row's sampled log-probs must match its completion's length and be
finite; a round that fails (a missing log-prob, a multi-turn completion extended by tool output)
runs TRL's forward as before and is counted (``stats``). Training-mode calls without gradients
on the trainer's own model only, once per round: the reference pass and validation are
untouched.
"""

from __future__ import annotations

import math
from typing import Any

from toolrl_lib.fast import trl_compat


def sampled_rows(logprobs: list[list[float | None]], lengths: list[int], width: int) -> list[list[float]] | None:
    """Each row's sampled log-probs right-padded with 0.0 to ``width`` (TRL's padding), or None when
    a row's count differs from its completion's ``lengths`` or holds a missing or non-finite value.
    A row of length 0 is masked out of the loss (``mask_truncated_completions``): zeros.

    >>> sampled_rows([[-0.5, -1.0], [-2.0], [-0.1, -0.2]], [2, 1, 0], 3)
    [[-0.5, -1.0, 0.0], [-2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    >>> sampled_rows([[-0.5, None]], [2], 2) is None, sampled_rows([[-0.5]], [2], 2) is None
    (True, True)
    """
    if len(logprobs) != len(lengths):
        return None
    rows = []
    for values, length in zip(logprobs, lengths, strict=True):
        if length == 0:
            rows.append([0.0] * width)
            continue
        if len(values) != length or length > width or any(v is None or not math.isfinite(v) for v in values):
            return None
        rows.append([float(v) for v in values] + [0.0] * (width - length))
    return rows


class SamplerLogps:
    """Holds the last round's sampled log-probs (from TRL's rollout method) until the round's
    no-grad forward asks for them; counts the rounds served and those that fell back."""

    def __init__(self, trainer: Any, method: str = "_generate_single_turn") -> None:
        self.trainer, self.method = trainer, method  # method: TRL's rollout method that was hooked
        self.pending: list[list[float | None]] | None = None
        self.served = 0
        self.fallbacks: list[str] = []

    def rollout(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        if self.trainer.model.training:  # validation's rollouts are not a training round
            # _generate_single_turn returns (completion_ids, logprobs); the older _generate has them 5th
            self.pending = result[1] if self.method == "_generate_single_turn" else result[4]
        return result

    def per_token(self, call: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                  *args: Any, **kwargs: Any) -> Any:
        """The round's no-grad call (TRL makes it right after the rollout: the config demands its
        importance-sampling correction, which needs it) gets the sampled log-probs; any other call,
        or a round whose log-probs do not fit, runs the forward."""
        import torch

        if self.pending is None or torch.is_grad_enabled() or not model.training or model is not self.trainer.model:
            return call(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        pending, self.pending = self.pending, None
        rows = sampled_rows(pending, attention_mask[:, -logits_to_keep:].sum(-1).tolist(), logits_to_keep)
        if rows is None:
            self.fallbacks.append(f"round of {input_ids.shape[0]} rows at step {self.trainer.state.global_step}: "
                                  f"sampled log-probs missing, not finite or not matching the completions' lengths")
            return call(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        self.served += 1
        return torch.tensor(rows, dtype=torch.float32, device=input_ids.device), None, None

    def stats(self) -> dict[str, Any]:
        return {"rounds_from_sampler": self.served, "rounds_forward": len(self.fallbacks),
                "fallbacks": self.fallbacks[:3]}


def install(trainer: Any) -> SamplerLogps:
    """Hook TRL's rollout method (keep the round's sampled log-probs) and its per-token log-prob
    forward (serve them to the round's no-grad call)."""
    holder = SamplerLogps(trainer, trl_compat.generation_method(trainer)[0])
    trl_compat.hook(trainer, holder.method, holder.rollout)
    trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", holder.per_token)
    return holder


__all__ = ["SamplerLogps", "install", "sampled_rows"]
