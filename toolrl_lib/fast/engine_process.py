"""TRL's colocated vLLM engine in a process of its own on the same GPU, weights in through CUDA IPC.

TRL 1.15 builds its colocated engine inside the training process
(``distributed_executor_backend="external_launcher"``), so vLLM's scheduler, input preparation
and sampler share one interpreter with the trainer. For a small model both halves are bound by
host-side Python, and generating on a thread beside the trainer (``fast.overlap_generation``)
only traded one half's time for the other's: one interpreter lock (run 4,
``benchmarks/results/grpo_throughput.md``). Without ``external_launcher`` vLLM 0.26 runs its V1
engine core in a child process (``VLLM_ENABLE_V1_MULTIPROCESSING=1``, its default elsewhere); the
trainer's process keeps only vLLM's thin client, which waits on a socket without the lock.

What then breaks is TRL's weight sync: it calls ``load_weights`` on the engine's model in-process.
``sync_weights`` here replaces it. The policy's weights as TRL yields them (LoRA merged, names as
vLLM's) are copied into one flat buffer per dtype on the trainer's GPU, whose CUDA IPC handle the
engine's worker opened once (``WeightReceiver``, mixed into vLLM's worker through its
``worker_extension_cls``); each sync is those device-to-device copies, a host synchronisation and
one ``collective_rpc`` in which the worker loads its views of the buffers. The handle travels as
bytes that this module pickles and the worker unpickles: our own tensors' metadata, never model
output, so vLLM's insecure-serialisation switch stays off.

``fast.generation_process`` (colocate, one GPU, peft backend, no sleep mode, single-turn).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

RECEIVER = "toolrl_lib.fast.engine_process.WeightReceiver"


class WeightReceiver:
    """Methods mixed into vLLM's GPU worker (``LLM(worker_extension_cls=RECEIVER)``), called by
    name through ``LLM.collective_rpc``; ``self`` is the worker, ``self.model_runner.model`` its model."""

    def toolrl_open_buffers(self, buffers: list[tuple[bytes, list[tuple[str, list[int], int]]]]) -> int:
        """Map the trainer's flat buffers (pickled ``reduce_tensor`` arguments) and keep a view per
        weight: (vLLM name, shape, element offset). Returns how many views."""
        import torch
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        views: list[tuple[str, Any]] = []
        self._toolrl_buffers = []
        for handle, layout in buffers:
            flat = rebuild_cuda_tensor(*pickle.loads(handle))  # noqa: S301 - our own process's tensor metadata
            self._toolrl_buffers.append(flat)
            for name, shape, offset in layout:
                count = int(torch.Size(shape).numel())
                views.append((name, flat[offset:offset + count].view(shape)))
        self._toolrl_views = views
        return len(views)

    def toolrl_load_buffers(self) -> int:
        """Load every view into the engine's model (the trainer filled the buffers and synchronised)."""
        import torch

        self.model_runner.model.load_weights(list(self._toolrl_views))
        torch.cuda.synchronize()
        return len(self._toolrl_views)


def layout(named: list[tuple[str, Any]]) -> dict[Any, list[tuple[str, list[int], int]]]:
    """Weights grouped by dtype, each with its element offset in its dtype's flat buffer.

    >>> import torch
    >>> layout([("a", torch.zeros(2, 3)), ("b", torch.zeros(4, dtype=torch.bfloat16)), ("c", torch.zeros(5))])
    {torch.float32: [('a', [2, 3], 0), ('c', [5], 6)], torch.bfloat16: [('b', [4], 0)]}
    """
    out: dict[Any, list[tuple[str, list[int], int]]] = {}
    sizes: dict[Any, int] = {}
    for name, tensor in named:
        offset = sizes.get(tensor.dtype, 0)
        out.setdefault(tensor.dtype, []).append((name, list(tensor.shape), offset))
        sizes[tensor.dtype] = offset + tensor.numel()
    return out


class IPCWeightSync:
    """``sync_weights`` for an engine in another process (see the module docstring)."""

    def __init__(self, generation: Any) -> None:
        self.generation = generation  # TRL's VLLMGeneration
        self.buffers: dict[Any, Any] = {}
        self.slots: dict[str, Any] = {}
        self.syncs = 0

    def _open(self) -> None:
        """First sync: size the buffers from one pass over TRL's weights and hand their handles over."""
        import torch
        from torch.multiprocessing.reductions import reduce_tensor

        named = [(name, param) for name, param in self.generation._iter_named_params()]
        sent = []
        for dtype, entries in layout(named).items():
            total = sum(int(torch.Size(shape).numel()) for _, shape, _ in entries)
            flat = torch.empty(total, dtype=dtype, device=named[0][1].device)
            self.buffers[dtype] = flat
            for name, shape, offset in entries:
                self.slots[name] = flat[offset:offset + int(torch.Size(shape).numel())].view(shape)
            _, args = reduce_tensor(flat)
            sent.append((pickle.dumps(args), entries))
        opened = self.generation.llm.collective_rpc("toolrl_open_buffers", args=(sent,))
        if opened != [len(self.slots)]:
            raise RuntimeError(f"the vLLM engine process mapped {opened} weights, expected [{len(self.slots)}]")

    def __call__(self) -> None:
        import torch

        if not self.buffers:
            self._open()
        for name, param in self.generation._iter_named_params():
            slot = self.slots.get(name)
            if slot is None:
                raise RuntimeError(f"TRL yielded a weight {name!r} that was not there at the first sync")
            slot.copy_(param)
        torch.cuda.current_stream().synchronize()  # the engine reads the buffers from another process
        self.generation.llm.collective_rpc("toolrl_load_buffers")
        self.generation.llm.reset_prefix_cache()
        self.syncs += 1


@contextmanager
def engine_in_child_process() -> Iterator[dict[str, Any]]:
    """While TRL builds its colocated engine: what ``LLM(...)`` gets instead of TRL's in-process
    arguments (used by ``vllm_engine.colocated_engine``): no ``external_launcher``, the receiver
    mixed into the worker, and vLLM's multiprocessing on for the construction."""
    before = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    try:
        yield {"drop": ("distributed_executor_backend",), "set": {"worker_extension_cls": RECEIVER}}
    finally:
        if before is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = before


def install(trainer: Any) -> str:
    """Replace TRL's in-process weight sync on ``trainer.vllm_generation`` with ``IPCWeightSync``."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or getattr(generation, "mode", None) != "colocate":
        raise ValueError("fast.generation_process needs TRL's colocated vLLM engine (grpo.vllm.mode: colocate)")
    generation.sync_weights = IPCWeightSync(generation)
    return "VLLMGeneration.sync_weights"


__all__ = ["IPCWeightSync", "RECEIVER", "WeightReceiver", "engine_in_child_process", "install", "layout"]
