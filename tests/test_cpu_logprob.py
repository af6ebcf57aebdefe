"""The pure-PyTorch stand-in for TRL's Triton log-prob kernel matches a direct computation."""

from __future__ import annotations

import torch

from toolrl_lib.train.cpu_logprob import TorchChunkedLogProb


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


def test_chunks_give_the_full_graphs_values_and_gradients(monkeypatch) -> None:
    """Over several chunks (the last one partial), with a bias, a softcap and gradients into the
    entropy too: the same log-probs, entropies, extras and gradients (hidden, weight, bias) as one
    graph over all the logits."""
    from toolrl_lib.train import cpu_logprob

    monkeypatch.setattr(cpu_logprob, "CHUNK_ROWS", 4)
    torch.manual_seed(1)
    hidden = torch.randn(11, 8, requires_grad=True)
    weight = torch.randn(13, 8, requires_grad=True)
    bias = torch.randn(13, requires_grad=True)
    targets = torch.randint(0, 13, (11,))
    coef_lp, coef_ent = torch.randn(11), torch.randn(11)
    outputs = ("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")
    got = TorchChunkedLogProb.apply(hidden, weight, bias, targets, 0.8, 4, 3.0, 0.5, outputs)
    (got[0] * coef_lp + got[1] * coef_ent).sum().backward()
    grads = [t.grad.clone() for t in (hidden, weight, bias)]
    for t in (hidden, weight, bias):
        t.grad = None
    logits = 3.0 * torch.tanh((hidden @ weight.t() + bias) * 0.5 / 3.0) / 0.8
    ref = torch.log_softmax(logits, -1)
    probs = ref.exp()
    want = (ref.gather(-1, targets[:, None]).squeeze(-1), -(probs * ref).sum(-1),
            torch.log((probs**2).sum(-1)), logits.mean(-1), logits.argmax(-1) == targets)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b.detach() if b.dtype != torch.bool else b)
    assert not got[2].requires_grad and not got[4].requires_grad
    (want[0] * coef_lp + want[1] * coef_ent).sum().backward()
    for a, t in zip(grads, (hidden, weight, bias), strict=True):
        torch.testing.assert_close(a, t.grad)
