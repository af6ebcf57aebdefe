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


# Scored tokens per chunk: each chunk's logits are [rows, vocab] fp32 (128 x 49152 x 4 B = 25 MB for
# SmolLM2), alive only while that chunk is computed, in the forward and again in the backward.
CHUNK_ROWS = 128


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float,
            softcapping: float | None, logit_scale: float) -> torch.Tensor:
    logits = hidden.float() @ weight.float().t()
    if bias is not None:
        logits = logits + bias.float()
    logits = logits * logit_scale
    if softcapping is not None:
        logits = softcapping * torch.tanh(logits / softcapping)
    return logits / temperature


def _scored(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-prob of each target, entropy, softmax) of ``logits`` rows."""
    log_z = torch.logsumexp(logits, dim=-1)
    log_probs = logits.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1) - log_z
    probs = torch.softmax(logits, dim=-1)
    return log_probs, log_z - (probs * logits).sum(-1), probs


class _ChunkedHead(torch.autograd.Function):
    """Log-probs and entropies of the targets through the LM head, ``CHUNK_ROWS`` tokens at a time.

    The forward keeps no logits: the backward recomputes each chunk's and differentiates it
    alone. A full ``[tokens, vocab]`` graph (logits, softmax, their gradients) is several times
    the chunk's size: for a smoke GRPO micro-batch (~380 scored tokens) ~75 MB a copy."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, softcapping, logit_scale, extras):  # noqa: ANN001, ANN205
        ctx.settings = (temperature, softcapping, logit_scale)
        ctx.save_for_backward(hidden, weight, bias, targets)
        pieces: dict[str, list[torch.Tensor]] = {name: [] for name in ("log_probs", "entropy", *extras)}
        for start in range(0, hidden.shape[0], CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            logits = _logits(hidden[rows], weight, bias, temperature, softcapping, logit_scale)
            log_probs, entropy, probs = _scored(logits, targets[rows])
            pieces["log_probs"].append(log_probs)
            pieces["entropy"].append(entropy)
            if "log_sum_sq_probs" in extras:
                pieces["log_sum_sq_probs"].append(torch.log((probs**2).sum(-1)))
            if "mean_logits" in extras:
                pieces["mean_logits"].append(logits.mean(-1))
            if "is_top1" in extras:
                pieces["is_top1"].append(logits.argmax(-1) == targets[rows])
        out = [torch.cat(v) if v else hidden.new_zeros(0) for v in pieces.values()]
        ctx.mark_non_differentiable(*out[2:])
        return tuple(out)

    @staticmethod
    def backward(ctx, grad_log_probs, grad_entropy, *unused):  # noqa: ANN001, ANN205
        hidden, weight, bias, targets = ctx.saved_tensors
        temperature, softcapping, logit_scale = ctx.settings
        grad_hidden = torch.zeros_like(hidden) if ctx.needs_input_grad[0] else None
        w = weight.detach().requires_grad_(ctx.needs_input_grad[1])
        b = None if bias is None else bias.detach().requires_grad_(ctx.needs_input_grad[2])
        for start in range(0, hidden.shape[0], CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            h = hidden[rows].detach().requires_grad_(grad_hidden is not None)
            with torch.enable_grad():
                log_probs, entropy, _ = _scored(_logits(h, w, b, temperature, softcapping, logit_scale),
                                                targets[rows])
                objective = (log_probs * grad_log_probs[rows]).sum()
                if grad_entropy is not None:
                    objective = objective + (entropy * grad_entropy[rows]).sum()
                wanted = [t for t in (h, w, b) if t is not None and t.requires_grad]
                if wanted:
                    grads = iter(torch.autograd.grad(objective, wanted))
                    if h.requires_grad:
                        grad_hidden[rows] = next(grads)
                    for t in (w, b):
                        if t is not None and t.requires_grad:
                            g = next(grads)
                            t.grad = g if t.grad is None else t.grad + g
        return (grad_hidden, w.grad, None if b is None else b.grad, None, None, None, None, None)


class TorchChunkedLogProb:
    """Same call signature and outputs as TRL's ``ChunkedLogProbFunction.apply``, chunked over
    the scored tokens (``_ChunkedHead``); ``chunk_size`` (TRL's GPU setting) is not used."""

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
        extras = tuple(name for name in ("log_sum_sq_probs", "mean_logits", "is_top1") if name in outputs)
        log_probs, entropy, *rest = _ChunkedHead.apply(
            hidden, weight, bias, targets, temperature, final_logit_softcapping, logit_scale, extras)
        computed = dict(zip(extras, rest, strict=True))
        return (log_probs, entropy if "entropy" in outputs else None,
                *(computed.get(name) for name in ("log_sum_sq_probs", "mean_logits", "is_top1")))


def triton_kernel_available() -> bool:
    from toolrl_lib.train.trl_compat import chunked_logprob_kernel

    return chunked_logprob_kernel() is not None


def install_cpu_logprob_fallback() -> bool:
    """Use ``TorchChunkedLogProb`` when TRL's Triton kernel is missing; True if installed."""
    from toolrl_lib.train.trl_compat import chunked_logprob_kernel, set_chunked_logprob_kernel

    if chunked_logprob_kernel() is not None:
        return False
    set_chunked_logprob_kernel(TorchChunkedLogProb)
    return True

