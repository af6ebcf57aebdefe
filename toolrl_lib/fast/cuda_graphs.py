"""The shared-prompt loss forward's backbone replayed from CUDA graphs (``fast.cuda_graphs``).

After the other options, a mid-round GRPO step of the embedded model on an H100 takes ~0.3 s,
of which the GPU runs kernels for ~0.14 s: the rest is the host launching ~5,000 small kernels
forward and backward, one eager op at a time (``benchmarks/results/grpo_step_profile*.md``).
Fusing the LoRA projections removed a third of the ops and no time (``fused_lora.py``), and
regional compilation made it slower (``compiled_layers.py``). A CUDA graph removes the launches
altogether: the kernels are recorded once and replayed with one call.

What is recorded is ``fast.shared_prompt``'s two backbone passes (the prompts, then every
completion on top of its prompt's keys and values) as one function of tensors, ``tail_hidden``:
with gradients through ``torch.cuda.make_graphed_callables`` (a forward graph and a backward
graph, the LoRA parameters' gradients returned to autograd), without them as one captured
forward. The kernels are eager's, so are the numbers. A graph is recorded per shape, so shapes
are kept few: the prompts' width is rounded up to a multiple of ``WIDTH_BUCKET`` tokens and the
completions to ``TAIL_BUCKET`` (masked keys, ignored labels). The LM head stays outside (TRL's
fused log-prob head selects the positions that have labels, a data-dependent shape): it runs
eagerly on the replayed hidden states, through TRL's own code (``shared_prompt.given_backbone``).

Rules the replays rely on, each kept by how GRPO runs here: a graph's outputs and its
parameters' gradients are overwritten by the next replay of any graph (all share one memory
pool), so a forward's hidden states are used by the head and its backward before the next call
(one micro-batch an optimizer step, gradients set to None after each); the adapters are neither
disabled nor merged (a call where they are runs eagerly: TRL's reference pass, the weight sync);
no other thread makes CUDA calls while a graph is recorded (the overlapped generation's worker,
which synchronizes its stream, is waited for: ``before_recording``).

Measured on an H100 (runs 8 and 9, ``benchmarks/results/grpo_throughput.md``): no recording
failed; replayed mid-round steps took 0.18-0.21 s against 0.33-0.53 s eager, and a round that met
no new shape 3.3-3.5 s against 5.2-6.4 s for every eager round. But a run kept meeting new widths
(8 training and 11 no-grad graphs over 7 rounds), each recording cost 2-6 s (it first waits for the
overlapped generation), and 24 timed steps ran slower than eager (75.2 against 88.1/s, run 9).
So the widths are planned: ``planned_widths`` of the training prompts (``dataset_widths``; at most
``MAX_PLANNED``, each training graph keeping its activations) are recorded at each mode's first
recording, with that call's rows and completions (``at_width``), and a run pays for its
recordings in its first steps. Run 10 (H100): 12 widths, 24 graphs recorded in the warm-up round
(21-25 s), no shape met after it; 163.9 and 135.2 completions/s in two calls against 88.9/s eager,
6.85x TRL's generate in the same call; graphs recorded from stand-in inputs replay real data with
eager's log-probs exactly (``cuda_graphs_check.py --planned``). They cost memory: peak 63 GiB
against 49 GiB eager (both processes), and one planned width failed to record (out of memory)
beside ``fast.sampler_logps`` on the H100, which left that shape eager; with the engine's KV cache
fixed at 6 GiB (``grpo.vllm.kv_cache_gib``) instead of 0.3 of the card every width recorded (run 11,
device peak 50.1 GiB). The cost is not in
proportion to the count (the trainer's peak over its eager twin: +20, +10.5 and +22 GiB for 10, 19
and 24 graphs in runs 8-10; graphs of one pool reuse blocks the others freed), so ``MAX_PLANNED``
is a bound on the count, not a measured budget.
``benchmarks/gpu/cuda_graphs_check.py`` (run 9): on the same padded shapes a replay gives eager's
log-probs exactly, in fp32 and bf16, and gradients to fp32 rounding; the large differences its
first form found were the buckets' padding in bf16 on random tokens
(``benchmarks/results/cuda_graphs_check.md``). Off by default.

First tried: ``torch.compile``'s ``cudagraphs`` backend with dynamic widths. On an H100 its two
traces took minutes, and a replay for a new width reused a graph recorded for another (``The size
of tensor a (832) must match the size of tensor b (512)``): that backend keys its recordings on
the integer inputs only (``benchmarks/results/grpo_throughput.md``, run 7).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from toolrl_lib.fast.shared_prompt import causal_lm, tail_hidden

WIDTH_BUCKET = 64
TAIL_BUCKET = 32
MAX_PLANNED = 16  # widths recorded up front at most (planned_widths)


def planned_widths(prompt_lengths: Iterable[int], limit: int = MAX_PLANNED) -> list[int]:
    """Every width bucket a micro-batch of these prompts (token counts) can need, from the shortest
    prompt's to the longest's: a batch's width is its longest prompt less its last token. More than
    ``limit`` buckets: the ``limit`` that hold the most prompts (each training graph keeps its
    activations, so a wide range of lengths would fill the GPU); the rest are recorded when met.

    >>> planned_widths([207, 368, 899])
    [256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960]
    >>> planned_widths([100, 120, 700, 700, 4000], limit=3)
    [128, 704, 4032]
    >>> planned_widths([])
    []
    """
    widths = [n - 1 for n in prompt_lengths if n >= 2]
    if not widths:
        return []
    every = list(range(bucketed(min(widths), WIDTH_BUCKET), bucketed(max(widths), WIDTH_BUCKET) + 1, WIDTH_BUCKET))
    if len(every) <= limit:
        return every
    held = Counter(bucketed(w, WIDTH_BUCKET) for w in widths)
    return sorted(sorted(every, key=lambda w: (-held[w], -w))[:limit])


def dataset_widths(trainer: Any) -> list[int]:
    """``planned_widths`` of the trainer's training prompts (the rendered prompt texts of the
    library's GRPO rows, tokenized as TRL tokenizes them); none when it has no such column."""
    dataset, tokenizer = getattr(trainer, "train_dataset", None), getattr(trainer, "processing_class", None)
    if dataset is None or tokenizer is None or "prompt" not in (getattr(dataset, "column_names", None) or []):
        return []
    prompts = [p for p in dataset["prompt"] if isinstance(p, str)]
    return planned_widths(len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]) if prompts else []


def at_width(tensors: tuple[Any, ...], width: int) -> tuple[Any, ...]:
    """``tail_hidden``'s inputs with the prompts ``width`` wide: the same rows and completions, new
    prompt tensors (pad ids, the first column masked so that the masked path is what gets recorded).
    Only the shapes matter: it is what ``GraphedBackbone`` records the planned widths with."""
    import torch

    head, head_mask, head_positions, owner, tail, mask, positions = tensors
    new_head = head.new_zeros((head.shape[0], width))
    new_mask = head_mask.new_ones((head.shape[0], width))
    new_mask[:, 0] = 0
    new_positions = (new_mask.cumsum(-1) - 1).clamp(min=0).to(head_positions.dtype)
    rows_mask = torch.cat([new_mask[owner], mask[:, head.shape[1]:]], dim=1)
    return new_head, new_mask, new_positions, owner, tail, rows_mask, positions


def bucketed(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step``: the sizes the graphs are recorded for.

    >>> [bucketed(n, 64) for n in (1, 64, 65, 898)]
    [64, 64, 128, 960]
    """
    return -(-n // step) * step


class GraphedBackbone:
    """``tail_hidden`` of one model, recorded per input shape and replayed (``capture=False``: run
    eagerly, the CPU tests' mode; the recording needs CUDA)."""

    def __init__(self, model: Any, capture: bool = True, before_recording: Callable[[], None] | None = None,
                 widths: Sequence[int] = ()) -> None:
        lm = causal_lm(model)
        self.lm, self.capture, self.before_recording = lm, capture, before_recording
        self.backbone = lm._modules[lm.base_model_prefix]
        # adapted layers, read on every call: a disabled or merged adapter is not what was recorded
        self.adapted = [m for m in model.modules() if hasattr(m, "disable_adapters") and hasattr(m, "merged")]
        self.trainable = tuple(p for p in model.parameters() if p.requires_grad)
        self.train_graphs: dict[tuple[Any, ...], Any] = {}
        self.infer_graphs: dict[tuple[Any, ...], Any] = {}
        self.pool: Any = None
        self.eager_calls = 0
        self.errors: list[str] = []  # recordings that failed (those shapes run eagerly)
        # prompt widths to record up front (``planned_widths``): at a mode's first recording, each of
        # them with that call's rows and completions, so the run's later steps meet few new shapes
        self.widths = sorted({bucketed(w, WIDTH_BUCKET) for w in widths})
        self.planned_modes: set[bool] = set()
        self.planned = 0  # graphs recorded for the planned widths
        self.recording_s = 0.0
        self.late: list[str] = []  # shapes first met after their mode's first recording (what planning missed)

    def serves(self, model: Any) -> bool:
        """Whether ``model`` is the one these graphs run (a reference model is not)."""
        return causal_lm(model) is self.lm

    @staticmethod
    def padded(width: int, length: int) -> tuple[int, int]:
        """The prompts' width and the completions' length these graphs are recorded for."""
        return bucketed(width, WIDTH_BUCKET), bucketed(length, TAIL_BUCKET)

    def _run(self, *tensors: Any) -> Any:
        return tail_hidden(self.backbone, *tensors[:7])

    def _quiet(self) -> None:
        """A capture forbids other threads' unsafe CUDA calls (a stream synchronize among them): let
        them finish first (``before_recording``: the overlapped generation's worker)."""
        if self.before_recording is not None:
            self.before_recording()

    def _recordable(self) -> bool:
        return self.capture and not any(m.disable_adapters or m.merged for m in self.adapted)

    def __call__(self, head: Any, head_mask: Any, head_positions: Any, owner: Any, tail: Any, mask: Any,
                 positions: Any) -> Any:
        import torch

        tensors = (head, head_mask, head_positions, owner, tail, mask, positions)
        if not self._recordable():
            self.eager_calls += 1
            return self._run(*tensors)
        dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
        key = self._key(dtype, tensors)
        with contextlib.ExitStack() as stack:
            if dtype is not None:  # the casts go into the graph; autocast's cache must stay out of it
                stack.enter_context(torch.autocast("cuda", dtype=dtype, cache_enabled=False))
            training = torch.is_grad_enabled()
            graphs, record = ((self.train_graphs, self.record_training) if training
                              else (self.infer_graphs, self.record_inference))
            if key not in graphs:
                self._quiet()
                if training in self.planned_modes:
                    self.late.append(self._label(training, key))
                self._record(graphs, key, record, tensors, training)
                if training not in self.planned_modes:  # this mode's first recording: the planned widths too
                    self.planned_modes.add(training)
                    for width in self.widths:
                        sibling = at_width(tensors, width)
                        sibling_key = self._key(dtype, sibling)
                        if sibling_key not in graphs:
                            self.planned += self._record(graphs, sibling_key, record, sibling, training)
            graphed = graphs[key]
        if graphed is None:
            self.eager_calls += 1
            return self._run(*tensors)
        return graphed(*tensors, *self.trainable) if training else graphed(*tensors)

    @staticmethod
    def _key(dtype: Any, tensors: tuple[Any, ...]) -> tuple[Any, ...]:
        """What a graph is recorded for: the autocast dtype and every input's shape."""
        return (dtype, *(tuple(t.shape) for t in tensors))

    @staticmethod
    def _label(training: bool, key: tuple[Any, ...]) -> str:
        """A graph's mode and input shapes, as stats quote them."""
        return f"{'training' if training else 'inference'} {key[1:]}"

    def _record(self, graphs: dict[tuple[Any, ...], Any], key: tuple[Any, ...], record: Callable[..., Any],
                tensors: tuple[Any, ...], training: bool) -> bool:
        """Records one shape into ``graphs``; a failure is kept in ``errors`` and that shape runs
        eagerly (``None``). Returns whether a graph was recorded."""
        start = time.perf_counter()
        try:
            graphs[key] = record(tensors)
        except Exception as error:  # noqa: BLE001 - this shape runs eagerly; the run goes on
            graphs[key] = None
            self.errors.append(f"{self._label(training, key)}: {type(error).__name__}: {error}"[:400])
        self.recording_s += time.perf_counter() - start
        return graphs[key] is not None

    def record_training(self, tensors: tuple[Any, ...]) -> Any:
        """A forward and a backward graph for these shapes (``make_graphed_callables``); the
        trainable parameters are inputs, so their gradients come back through autograd."""
        import torch

        static = tuple(t.clone() for t in tensors)  # the graph reads its inputs from these
        self.pool = self.pool if self.pool is not None else torch.cuda.graph_pool_handle()
        return torch.cuda.make_graphed_callables(self._run, (*static, *self.trainable), num_warmup_iters=2,
                                                 allow_unused_input=True, pool=self.pool)

    def record_inference(self, tensors: tuple[Any, ...]) -> Any:
        """One captured forward without gradients; returns ``replay(*tensors) -> hidden``."""
        import torch

        static = tuple(t.clone() for t in tensors)
        self.pool = self.pool if self.pool is not None else torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # a warm-up outside the capture (lazy initialisations)
            self._run(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            hidden = self._run(*static)

        def replay(*new: Any) -> Any:
            for into, value in zip(static, new, strict=True):
                into.copy_(value)
            graph.replay()
            return hidden

        return replay

    def stats(self) -> dict[str, Any]:
        """Graphs recorded (with and without gradients), calls run eagerly instead, the shapes met
        after their mode's first recording (planning missed them; the first few quoted) and the
        recordings that failed (their shapes run eagerly), the first few quoted."""
        return {"training_graphs": sum(g is not None for g in self.train_graphs.values()),
                "inference_graphs": sum(g is not None for g in self.infer_graphs.values()),
                "planned_graphs": self.planned, "recording_s": round(self.recording_s, 1),
                "late_recordings": len(self.late), "late_shapes": self.late[:6],
                "eager_calls": self.eager_calls, "failed_recordings": len(self.errors), "errors": self.errors[:3]}


__all__ = ["GraphedBackbone", "TAIL_BUCKET", "WIDTH_BUCKET", "at_width", "bucketed", "dataset_widths", "planned_widths"]
