"""The shared-prompt loss forward's backbone replayed from CUDA graphs (``fast.cuda_graphs``).

After the other options, a mid-round GRPO step of the embedded model on an H100 takes ~0.3 s,
of which the GPU runs kernels for ~0.14 s: the rest is the host launching ~5,000 small kernels
forward and backward, one eager op at a time (``benchmarks/results/grpo_step_profile*.md``).
Fusing the LoRA projections removed a third of the ops and no time (``fused_lora.py``), and
regional compilation made it slower (``compiled_layers.py``). A CUDA graph removes the launches
altogether: the whole sequence of kernels is recorded once and replayed with one call.

What is captured is ``fast.shared_prompt``'s two backbone passes (the prompts, then every
completion on top of its prompt's keys and values) as one function of tensors,
``tail_hidden``. ``torch.compile`` with its ``cudagraphs`` backend traces it once forward and
backward (no code generation: the same aten kernels as eager, so the same numbers), and
PyTorch's CUDA-graph trees record one graph per distinct shape. Shapes are kept few: the
prompts' width is rounded up to a multiple of ``WIDTH_BUCKET`` tokens and the completions to
a multiple of ``TAIL_BUCKET`` (the extra positions are masked keys and ignored labels), and
the widths and batch sizes are traced as dynamic, so a new width records a graph but does not
trace again (a call with one prompt traces once more: dynamo specialises sizes of 1). The LM head stays outside the graph (TRL's fused log-prob head picks the
positions that have labels, a data-dependent shape): it runs eagerly on the graph's hidden
states, through TRL's own code (``given_backbone``).

A graph break (an op the trace cannot hold) would split the trace rather than fail the run:
``stats()`` counts the traces, and ``tests/test_cuda_graphs.py`` pins their number.

Costs: one trace with gradients and one without (~2 minutes of a slow CPU for the embedded
model's 30 layers; a start-up cost), a recording per new shape, the graphs' memory pool.
Each call starts a new CUDA-graph step (``torch.compiler.cudagraph_mark_step_begin``), so a
graph's outputs live until the next call: the loss forward's hidden states are used by its
own backward before the next call. Tests run the same trace with the ``aot_eager`` backend on
the CPU (``tests/test_cuda_graphs.py``); the recording itself needs a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

WIDTH_BUCKET = 64
TAIL_BUCKET = 32


def bucketed(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step``: the sizes the graphs are recorded for.

    >>> [bucketed(n, 64) for n in (1, 64, 65, 898)]
    [64, 64, 128, 960]
    """
    return -(-n // step) * step


def tail_hidden(backbone: Any, head: Any, head_mask: Any, head_positions: Any, owner: Any, tail: Any,
                mask: Any, positions: Any) -> Any:
    """The last hidden states of every completion row (``tail``, led by its prompt's last token),
    each on top of its prompt's keys and values: the prompts (``head``, left-padded, all but their
    last token) run once, their cache rows are picked per completion by ``owner``."""
    from transformers import DynamicCache

    cache = DynamicCache()
    backbone(input_ids=head, attention_mask=head_mask, position_ids=head_positions, past_key_values=cache,
             use_cache=True)
    cache.batch_select_indices(owner)  # an index: each prompt's gradient sums over its completions
    return backbone(input_ids=tail, attention_mask=mask, position_ids=positions, past_key_values=cache,
                    use_cache=True).last_hidden_state


def causal_lm(model: Any) -> Any:
    """The ``*ForCausalLM`` under a PEFT wrapper (or ``model`` itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class _Given:
    """Stands in for a backbone for one call: returns the hidden states it holds; anything else
    (the input embeddings the head's lookup checks) is the real backbone's."""

    def __init__(self, real: Any, hidden: Any) -> None:
        self.real, self.hidden = real, hidden

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(last_hidden_state=self.hidden)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextlib.contextmanager
def given_backbone(lm: Any, hidden: Any) -> Iterator[None]:
    """For the duration, ``lm``'s backbone returns ``hidden``: TRL's fused LM head, which looks its
    backbone up on every call (``base_model``), then scores hidden states computed elsewhere with its
    own code (temperature, scaling, entropy). Restored on exit, error or not."""
    prefix = lm.base_model_prefix
    real = lm._modules[prefix]
    lm._modules[prefix] = _Given(real, hidden)
    try:
        yield
    finally:
        lm._modules[prefix] = real


class GraphedBackbone:
    """``tail_hidden`` of one model, compiled once per grad mode and replayed from CUDA graphs
    (``backend="cudagraphs"``; the tests pass ``"aot_eager"``: the same trace, run eagerly)."""

    def __init__(self, model: Any, backend: str = "cudagraphs") -> None:
        import torch

        lm = causal_lm(model)
        self.lm, self.backend = lm, backend
        backbone = lm._modules[lm.base_model_prefix]
        self.shapes: set[tuple[Any, ...]] = set()
        self.traces = 0
        compile_graph = torch._dynamo.lookup_backend(backend)

        def counted(graph: Any, inputs: Any) -> Any:
            self.traces += 1
            return compile_graph(graph, inputs)

        self._compiled = torch.compile(lambda *tensors: tail_hidden(backbone, *tensors), backend=counted,
                                       dynamic=False)

    def __call__(self, head: Any, head_mask: Any, head_positions: Any, owner: Any, tail: Any, mask: Any,
                 positions: Any) -> Any:
        import torch

        tensors = (head, head_mask, head_positions, owner, tail, mask, positions)
        for tensor in tensors:  # widths and batch sizes vary: one trace, a recording per shape
            for dim in range(tensor.dim()):
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
        self.shapes.add((torch.is_grad_enabled(), *(tuple(t.shape) for t in tensors)))
        if self.backend == "cudagraphs":
            torch.compiler.cudagraph_mark_step_begin()
        return self._compiled(*tensors)

    def serves(self, model: Any) -> bool:
        """Whether ``model`` is the one these graphs run (a reference model is not)."""
        return causal_lm(model) is self.lm

    def stats(self) -> dict[str, int]:
        """Shapes called, traces made, and graphs the backend declined to record in this process
        (these run eagerly from the trace; ``torch._dynamo``'s counter)."""
        from torch._dynamo.utils import counters

        return {"shapes": len(self.shapes), "traces": self.traces,
                "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


__all__ = ["GraphedBackbone", "TAIL_BUCKET", "WIDTH_BUCKET", "bucketed", "causal_lm", "given_backbone",
           "tail_hidden"]
