"""A pure-PyTorch stand-in for TRL's Triton log-prob kernel, for machines without Triton.

TRL 1.15's GRPOTrainer patches the model with a "fused LM head" whose projection is done
by ``trl.kernels.ChunkedLogProbFunction``, a Triton kernel. CPU-only PyTorch wheels ship
without Triton, so ``trl.trainer.utils._ChunkedLogProbFunction`` is ``None`` and every
GRPO forward pass fails with ``'NoneType' object has no attribute 'apply'``. This module
supplies the same contract with plain tensor ops (materialising the logits of the scored
tokens only, in fp32), which is fine for the small models the CPU profile trains.
It is not RLSD-specific: plain GRPO needs it on CPU too.
"""

from __future__ import annotations

import torch

_OPTIONAL = ("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


class TorchChunkedLogProb:
    """Same call signature and outputs as TRL's ``ChunkedLogProbFunction.apply``."""

    @staticmethod
    def apply(
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        temperature: float,
        chunk_size: int,
        final_logit_softcapping: float | None = None,
        logit_scale: float = 1.0,
        outputs: tuple[str, ...] = _OPTIONAL,
    ) -> tuple[torch.Tensor | None, ...]:
        logits = hidden.float() @ weight.float().t()
        if bias is not None:
            logits = logits + bias.float()
        logits = logits * logit_scale
        if final_logit_softcapping is not None:
            logits = final_logit_softcapping * torch.tanh(logits / final_logit_softcapping)
        logits = logits / temperature
        log_z = torch.logsumexp(logits, dim=-1)
        target_logits = logits.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        log_probs = target_logits - log_z
        probs = torch.softmax(logits, dim=-1) if "entropy" in outputs or "log_sum_sq_probs" in outputs else None
        entropy = log_z - (probs * logits).sum(-1) if "entropy" in outputs else None
        with torch.no_grad():
            log_sum_sq = torch.log((probs.detach() ** 2).sum(-1)) if "log_sum_sq_probs" in outputs else None
            mean_logits = logits.detach().mean(-1) if "mean_logits" in outputs else None
            is_top1 = (logits.detach().argmax(-1) == targets) if "is_top1" in outputs else None
        return log_probs, entropy, log_sum_sq, mean_logits, is_top1


def triton_kernel_available() -> bool:
    from toolrl_lib.fast.trl_compat import chunked_logprob_kernel

    return chunked_logprob_kernel() is not None


def install_cpu_logprob_fallback() -> bool:
    """Use ``TorchChunkedLogProb`` when TRL's Triton kernel is missing; True if installed."""
    from toolrl_lib.fast.trl_compat import chunked_logprob_kernel, set_chunked_logprob_kernel

    if chunked_logprob_kernel() is not None:
        return False
    set_chunked_logprob_kernel(TorchChunkedLogProb)
    return True

