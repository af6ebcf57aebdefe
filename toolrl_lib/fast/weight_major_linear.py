"""Linear layers of a CPU decode step computed as ``W @ x.T`` instead of ``x @ W.T``.

At a decode step every linear layer multiplies a few rows by a weight that comes from memory.
``F.linear(x, W)`` (MKL's ``x @ W.T``) walks the row-major weight against its grain;
``W @ x.T`` walks it in its stored order. On a 2-core AMD EPYC a step's linear layers took
43 instead of 76 ms at 8 rows and 143 instead of 203 ms at 80 rows
(``benchmarks/results/cpu_floor_epyc.md``). The products are the same, summed in another order
(differences ~1e-6 in the logits). Only inference on fp32 CPU tensors with at most
``MAX_ROWS`` rows takes this path; training, CUDA and long prefills keep ``F.linear``.

It is a gain only where MKL's ``x @ W.T`` is slow. The figures above are from an AMD EPYC
(MKL's generic, non-Intel code path), where the library's whole 8-row GRPO decode also ran
~1.9x faster. On an Intel Xeon (AVX-512, MKL's own path) neither the layers alone nor the
library's ``generate`` were faster with it (``benchmarks/results/cpu_floor_xeon.md``: 13.0
vs 12.2 s a GRPO rollout, 74 vs 64 s a validation), so on Intel CPUs ``MAX_ROWS`` is 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def intel_cpu(cpuinfo_path: str = "/proc/cpuinfo") -> bool:
    """Whether this (Linux) CPU reports Intel as its vendor; False where that cannot be read."""
    try:
        with open(cpuinfo_path, encoding="utf-8") as cpuinfo:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in cpuinfo)
    except OSError:
        return False


# At most this many rows take ``W @ x.T``: measured faster at 8 and 80 rows off Intel; a
# ~450-token prefill keeps F.linear. 0 (never) on Intel CPUs, where it was not faster.
WEIGHT_MAJOR_ROWS = 128
MAX_ROWS = 0 if intel_cpu() else WEIGHT_MAJOR_ROWS


def weight_major(weight: Any, x: Any, bias: Any = None) -> Any:
    """``F.linear(x, weight, bias)`` as ``(weight @ x.T).T``, same shape, contiguous.

    >>> import torch
    >>> w, x = torch.randn(6, 4), torch.randn(2, 3, 4)
    >>> bool(torch.allclose(weight_major(w, x), torch.nn.functional.linear(x, w), atol=1e-6))
    True
    """
    flat = x.reshape(-1, x.shape[-1])
    out = (weight @ flat.t()).t().contiguous()
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


def applies(weight: Any, x: Any) -> bool:
    import torch

    return (not torch.is_grad_enabled() and x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32 and weight.dim() == 2 and x.dim() >= 2
            and x.numel() // max(1, x.shape[-1]) <= MAX_ROWS)


@contextlib.contextmanager
def weight_major_linear() -> Iterator[None]:
    """Within the body, ``nn.Linear`` uses ``weight_major`` where ``applies`` (re-entrant).
    With ``MAX_ROWS`` 0 (Intel CPUs) nothing is patched: no per-layer check on the hot path."""
    import torch

    original = torch.nn.Linear.forward
    if MAX_ROWS <= 0 or getattr(original, "_weight_major", False):  # off, or already inside
        yield
        return

    def forward(self: Any, x: Any) -> Any:
        if applies(self.weight, x):
            return weight_major(self.weight, x, self.bias)
        return original(self, x)

    forward._weight_major = True  # type: ignore[attr-defined]
    torch.nn.Linear.forward = forward
    try:
        yield
    finally:
        torch.nn.Linear.forward = original
