"""The pure-PyTorch stand-in for TRL's Triton log-prob kernel matches a direct computation."""

from __future__ import annotations

import torch

from toolrl_lib.fast.cpu_logprob import TorchChunkedLogProb


def test_matches_log_softmax_and_entropy_with_gradients() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(5, 8, requires_grad=True)
    weight = torch.randn(11, 8, requires_grad=True)
    targets = torch.tensor([0, 3, 10, 7, 3])
    logps, entropy, lssp, mean_logits, top1 = TorchChunkedLogProb.apply(
        hidden, weight, None, targets, 0.7, 4, None, 1.0, ("entropy", "is_top1"))
    logits = hidden @ weight.t() / 0.7
    ref = torch.log_softmax(logits, -1)
    torch.testing.assert_close(logps, ref.gather(-1, targets[:, None]).squeeze(-1))
    torch.testing.assert_close(entropy, -(ref.exp() * ref).sum(-1))
    assert lssp is None and mean_logits is None
    assert torch.equal(top1, logits.argmax(-1) == targets)
    logps.sum().backward()
    grad = hidden.grad.clone()
    hidden.grad = None
    ref.gather(-1, targets[:, None]).sum().backward()
    torch.testing.assert_close(grad, hidden.grad)


def test_softcap_and_scale() -> None:
    hidden, weight = torch.randn(3, 4), torch.randn(6, 4)
    targets = torch.tensor([1, 2, 5])
    logps = TorchChunkedLogProb.apply(hidden, weight, None, targets, 1.0, 8, 5.0, 0.5, ())[0]
    logits = 5.0 * torch.tanh((hidden @ weight.t()) * 0.5 / 5.0)
    torch.testing.assert_close(logps, torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1))
