"""vLLM as the rollout and evaluation generator: whether it can run here, and the one error when not.

Training hands generation to vLLM through the run config's ``grpo.vllm`` section
(``train/config.py`` ``VLLMSection``): TRL's own engine (``GRPOConfig(use_vllm=True, ...)``,
``train/trainer.py`` ``grpo_vllm_kwargs``) for the peft backend, Unsloth's ``fast_inference=True``
(``train/backend.py`` ``unsloth_vllm_kwargs``) for the unsloth backend. Evaluation picks it with
``--backend vllm`` (``evaluate/backends.py``). This module holds what both share: the import check
(without importing vLLM: importing it takes seconds and initialises CUDA) and the single one-line
error, raised before any model loads, that says how to install it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the engine process module loads when a run asks for it
    from toolrl_lib.fast.engine_process import EngineOptions

INSTALL_HINT = 'pip install -e ".[vllm]"'


class VLLMMissing(ValueError):
    """vLLM was asked for but cannot run here (not importable, or no CUDA device).

    A ``ValueError`` so that ``toolrl`` prints it as one line (``toolrl_lib/cli.py``)."""


def vllm_importable() -> bool:
    """vLLM is installed (found by the import system; nothing is imported)."""
    return importlib.util.find_spec("vllm") is not None


def missing_message(what: str, instead: str) -> str:
    """The one-line error for ``what`` (e.g. ``grpo.vllm.mode: colocate``) when vLLM is absent;
    ``instead``: how to go on without it."""
    return (f"{what} asks for vLLM, which is not installed: on a CUDA machine run {INSTALL_HINT} "
            f"(pinned to the torch it needs; docs/SCALING.md), or {instead}")


def require_vllm(what: str, instead: str) -> None:
    """Raise ``VLLMMissing`` (one line, with the install command) unless vLLM is importable."""
    if not vllm_importable():
        raise VLLMMissing(missing_message(what, instead))


def require_for_run(config: Any, device: str) -> None:
    """Before a training run loads anything: vLLM asked for (``grpo.vllm.mode`` not off) needs a
    CUDA device (``device`` is the resolved one, so ``auto`` on a CPU box fails here) and the
    package. A no-op with vLLM off."""
    mode = config.grpo.vllm.mode
    if mode == "off":
        return
    what = f"grpo.vllm.mode: {mode}"
    if device != "cuda":
        raise VLLMMissing(f"{what}: vLLM generates on CUDA GPUs only and this run's device is "
                          f"{device}; set grpo.vllm.mode: off (or run on a GPU)")
    require_vllm(what, "set grpo.vllm.mode: off")


@contextmanager
def colocated_engine(kv_cache_gib: float | None = None, dtype: str | None = None,
                     process: EngineOptions | None = None,
                     max_num_batched_tokens: int | None = None) -> Iterator[None]:
    """While TRL builds its colocated engine, pass it what TRL 1.15's ``LLM(...)`` call cannot.

    TRL builds the engine inside ``trl.generation.vllm_generation`` with no way to add arguments,
    so that module's ``LLM`` is wrapped for the trainer's construction only (a no-op when nothing
    is asked):

    - ``kv_cache_gib``: a fixed KV cache (``kv_cache_memory_bytes``). vLLM (0.26) then skips the
      start-up profiling that compares free GPU memory before and after loading, which fails when
      another process on the GPU frees memory meanwhile.
    - ``dtype``: the engine's weights and compute (``"float32"``). TRL syncs a LoRA policy by
      merging ``W + BA`` into the trainer's weights and copying them in; a bf16 engine rounds them
      to bf16, which drops updates smaller than half a bf16 step of the weight
      (``benchmarks/results/bf16_weight_sync.md``).
    - ``max_num_batched_tokens``: the scheduler's token budget a model step, in place of the 4096
      TRL passes (``grpo.vllm.max_num_batched_tokens``; the only argument here that overrides one of
      TRL's rather than adding one).
    - ``process`` (an ``engine_process.EngineOptions``): the whole engine in a process of its own
      (``fast.generation_process``, ``engine_process.py``), run as those options say: TRL gets an
      ``EngineClient`` in place of the ``LLM``. None: TRL's engine in this process."""
    extra: dict[str, Any] = {}
    if kv_cache_gib:
        extra["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
    if dtype and dtype != "auto":
        extra["dtype"] = dtype
    overrides = {} if max_num_batched_tokens is None else {"max_num_batched_tokens": max_num_batched_tokens}
    if not extra and not overrides and process is None:
        yield
        return
    from trl.generation import vllm_generation

    real = getattr(vllm_generation, "LLM", None)
    if real is None:  # TRL imports it only when vLLM is importable
        asked = ", ".join(f"{k}={v}" for k, v in (("kv_cache_gib", kv_cache_gib), ("dtype", dtype),
                                                   ("max_num_batched_tokens", max_num_batched_tokens),
                                                   ("fast.generation_process", process is not None)) if v)
        raise VLLMMissing(missing_message(f"grpo.vllm ({asked})", "set grpo.vllm.mode: off"))

    def llm_with_extras(*args: Any, **kwargs: Any) -> Any:
        for key, value in extra.items():
            kwargs.setdefault(key, value)
        kwargs.update(overrides)
        if process is not None:
            from toolrl_lib.fast.engine_process import engine_client

            return engine_client(kwargs, options=process)
        return real(*args, **kwargs)

    vllm_generation.LLM = llm_with_extras
    try:
        yield
    finally:
        vllm_generation.LLM = real


__all__ = ["INSTALL_HINT", "VLLMMissing", "colocated_engine", "missing_message", "require_for_run", "require_vllm",
           "vllm_importable"]
