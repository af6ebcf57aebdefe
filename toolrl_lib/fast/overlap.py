"""The next rollout round generated while the optimizer steps through this one (``fast.overlap_generation``).

With vLLM colocated, TRL's GRPO round is strictly one thing after another: the engine generates
the round (512 completions of the embedded model: ~1.6 s on an H100), then the trainer scores them
and takes the round's optimizer steps (8 x ~0.28 s, bound by the host launching small kernels: the
GPU is busy about a quarter of the time; ``benchmarks/results/grpo_step_profile.md``). Each half
leaves the GPU mostly idle while the other runs. Here the next round's generation starts on a
worker thread, on its own CUDA stream, as soon as a round's completions are in hand, and runs
while the main thread scores the round, runs TRL's log-prob forward over it and takes the
round's optimizer steps.

What it changes: a round is sampled from the weights at the start of the round before, one round
(``steps_per_generation`` optimizer steps) staler than in TRL's loop (8-15 steps old instead of
0-7 with rounds of 8 steps). TRL's importance-sampling correction
(``grpo.vllm.importance_sampling_correction``, on by default) weights each token by the trainer's
over vLLM's probability of it, which is exactly the correction that staleness needs; with it off
the stale round is trained as if it were on-policy. The prompts, their order and everything else
are TRL's.

How it knows the next round: TRL's sampler repeats each round's batch ``steps_per_generation x
num_iterations`` times in a row, so the next round is that many items further on in the epoch's
dataloader, which ``Lookahead`` reads ahead (transformers' ``get_batch_samples`` draws from it).
The next round uses the prefetched completions only if its prompt ids are the ones generated;
otherwise (an epoch's first round, a resumed run) it generates as TRL does, so a wrong guess costs
time, never a different sample. Every other use of the engine (TRL's own rollouts, evaluation)
first waits for the worker, and the weights are synced into the engine only while it is idle.

Measured (``benchmarks/results/grpo_throughput.md``, run 4, one H100, the embedded model): the
generation was hidden (the trainer waited 0.014 s a round for it) and the run was slower, 105.6
against 111.9 completions/s in the same run. The worker's ~2 s of generation ran during the round's
scoring and bookkeeping and stretched them by ~1.6 s: both are Python on the host, and the
interpreter lock runs one thread's Python at a time. What does overlap is GPU work the main thread
waits on (TRL's log-prob forward over the round, a large model's training step). A generation process
beside the trainer does not share the lock: with ``fast.generation_process`` (run 6) the overlap ran
128.2 against 107.0 completions/s without it in the same run. Off by default.

Limits (``train/config.py`` ``_fast_rules``; ``install`` checks the trainer): vLLM colocate in one
process, ``tensor_parallel_size`` 1, no sleep mode, the peft backend, TRL's own sampler (no
``rollout_func``, tools or environments), text prompts.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

from toolrl_lib.fast import trl_compat

ATTRIBUTE = "_toolrl_overlap"  # the trainer's Overlap, once installed


class Lookahead:
    """An iterator over ``source`` that can be read ahead.

    ``at(position)`` is the item at that position of the stream (0 = the first ever yielded),
    read from the source and held until it is yielded; None past the end or once yielded.
    ``position_of(item)`` is the position of a recently yielded item (by identity).

    >>> it = Lookahead(iter("abcde"))
    >>> next(it), it.at(3), next(it), it.position_of("b"), it.at(9)
    ('a', 'd', 'b', 1, None)
    >>> list(it)
    ['c', 'd', 'e']
    """

    def __init__(self, source: Iterator[Any], memory: int = 256) -> None:
        self.source = source
        self.ahead: deque[Any] = deque()
        self.position = 0  # of the next item to yield
        self.recent: deque[tuple[int, Any]] = deque(maxlen=memory)
        self.ended = False

    def __iter__(self) -> Lookahead:
        return self

    def __next__(self) -> Any:
        if self.ahead:
            item = self.ahead.popleft()
        elif self.ended:
            raise StopIteration
        else:
            item = next(self.source)
        self.recent.append((self.position, item))
        self.position += 1
        return item

    def at(self, position: int) -> Any:
        offset = position - self.position
        if offset < 0:
            return None
        while len(self.ahead) <= offset:
            if self.ended:
                return None
            try:
                self.ahead.append(next(self.source))
            except StopIteration:
                self.ended = True
                return None
        return self.ahead[offset]

    def position_of(self, item: Any) -> int | None:
        for position, seen in reversed(self.recent):
            if seen is item:
                return position
        return None


def round_key(prompt_ids: list[Any], num_generations: int) -> tuple[Any, ...]:
    """What identifies a round's generation: its prompt ids, in order, and the group size."""
    return (num_generations, *(tuple(int(t) for t in ids) for ids in prompt_ids))


class _Pending:
    """One round being generated on the worker thread."""

    def __init__(self, key: tuple[Any, ...], step: int) -> None:
        self.key, self.step = key, step
        self.result: tuple[Any, Any] | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.thread: threading.Thread | None = None

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()


class Overlap:
    """The state of one trainer's overlapped generation (``install`` builds it and hooks the trainer).

    ``rounds``: one dict per training round, ``{"step", "prefetched", "wait_s", "generate_s"}``
    (``generate_s``: the worker's seconds for a prefetched round, else None): what the run logs as
    ``overlap/*`` metrics."""

    def __init__(self, trainer: Any) -> None:
        import torch

        self.trainer = trainer
        self.every = trainer.args.steps_per_generation * trainer.num_iterations  # dataloader items per round
        self.steps_per_round = max(1, self.every // trainer.args.gradient_accumulation_steps)
        self.lookahead: Lookahead | None = None
        self.round_batch: Any = None  # the generation batch of the round being prepared
        self.pending: _Pending | None = None
        self.stream = torch.cuda.Stream() if trainer.accelerator.device.type == "cuda" else None
        self.rounds: list[dict[str, Any]] = []

    # -- the hooks -------------------------------------------------------------------------------
    def batch_samples(self, call: Any, epoch_iterator: Any, *args: Any, **kwargs: Any) -> Any:
        """transformers' ``get_batch_samples``: draw from a ``Lookahead`` over the epoch's iterator."""
        if self.lookahead is None or self.lookahead.source is not epoch_iterator:
            self.lookahead = Lookahead(epoch_iterator)
        return call(self.lookahead, *args, **kwargs)

    def prepare_inputs(self, call: Any, generation_batch: Any, *args: Any, **kwargs: Any) -> Any:
        """TRL's ``_prepare_inputs``: remember which dataloader item the round comes from."""
        if self.trainer.model.training:
            self.round_batch = generation_batch
        return call(generation_batch, *args, **kwargs)

    def generate(self, call: Any, prompt_ids: Any, images: Any, multimodal_fields: Any,
                 num_generations: int, *args: Any, **kwargs: Any) -> Any:
        """TRL's ``_generate_single_turn``: the prefetched round if it is this one, else TRL's own
        generation; then the next round goes to the worker."""
        trainer = self.trainer
        if not trainer.model.training or images is not None or multimodal_fields:
            self.wait()
            return call(prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs)
        started = time.perf_counter()
        pending, self.pending = self.pending, None
        result, generate_s = None, None
        if pending is not None:
            pending.wait()
            if pending.error is not None:
                raise RuntimeError(f"the overlapped generation of step {pending.step}'s next round failed "
                                   f"(fast.overlap_generation)") from pending.error
            if pending.key == round_key(prompt_ids, num_generations):
                result, generate_s = pending.result, round(pending.seconds, 4)
        wait_s = round(time.perf_counter() - started, 4)
        if result is None:
            result = call(prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs)
        self.rounds.append({"step": trainer.state.global_step, "prefetched": generate_s is not None,
                            "wait_s": wait_s, "generate_s": generate_s})
        trl_compat.log_metric(trainer, "train", "overlap/prefetched", float(generate_s is not None))
        trl_compat.log_metric(trainer, "train", "overlap/wait_s", wait_s)
        if generate_s is not None:
            trl_compat.log_metric(trainer, "train", "overlap/generate_s", generate_s)
        self.start_next(num_generations)
        return result

    # -- the worker ------------------------------------------------------------------------------
    def next_prompt_ids(self) -> Any:
        """The next round's prompt ids as TRL tokenises them, or None when there is none to read
        (the epoch's last round, the run's last round, a batch the lookahead did not yield)."""
        trainer = self.trainer
        if self.lookahead is None or self.round_batch is None:
            return None
        max_steps = trainer.state.max_steps
        if max_steps and max_steps > 0 and trainer.state.global_step + self.steps_per_round >= max_steps:
            return None  # this is the run's last round
        position = self.lookahead.position_of(self.round_batch)
        batch = None if position is None else self.lookahead.at(position + self.every)
        if batch is None:
            return None
        prompt_ids, images, multimodal_fields = trainer._tokenize_prompts(copy.deepcopy([x["prompt"] for x in batch]))
        return None if images is not None or multimodal_fields else prompt_ids

    def start_next(self, num_generations: int) -> None:
        import torch

        trainer = self.trainer
        prompt_ids = self.next_prompt_ids()
        if prompt_ids is None:
            return
        engine = trainer.vllm_generation
        if trainer.state.global_step != trainer._last_loaded_step:  # the engine is idle: sync now
            engine.sync_weights()
            trainer._last_loaded_step = trainer.state.global_step
        pending = _Pending(round_key(prompt_ids, num_generations), trainer.state.global_step)
        stream = self.stream
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream())  # the synced weights first

        def work() -> None:
            started = time.perf_counter()
            try:
                with torch.cuda.stream(stream) if stream is not None else nullcontext():
                    _, completion_ids, logprobs, _ = engine.generate(
                        prompts=prompt_ids, images=None, num_generations=num_generations)
                    if stream is not None:
                        stream.synchronize()
                # as TRL's _generate_single_turn keeps it: the sampled token's log-prob
                pending.result = (completion_ids, [[lp[0] for lp in seq] for seq in logprobs])
            except BaseException as error:  # re-raised on the main thread when the round is taken
                pending.error = error
            pending.seconds = time.perf_counter() - started

        pending.thread = threading.Thread(target=work, name="toolrl-overlap-generation", daemon=True)
        self.pending = pending
        pending.thread.start()

    def wait(self) -> None:
        """Let the worker finish (its round stays pending for the next training round)."""
        if self.pending is not None:
            self.pending.wait()

    def close(self) -> None:
        """At the end of training: wait for the worker and drop what it made."""
        self.wait()
        self.pending = None


def check_trainer(trainer: Any) -> None:
    """What the overlap needs of the built trainer, each as a clear error."""
    args = trainer.args
    problems = []
    if not getattr(trainer, "use_vllm", False) or getattr(args, "vllm_mode", None) != "colocate":
        problems.append("vLLM colocate rollouts (grpo.vllm.mode: colocate)")
    if trainer.accelerator.num_processes > 1:
        problems.append("one process (the worker thread and the engine belong to it)")
    if getattr(args, "vllm_enable_sleep_mode", False):
        problems.append("vLLM sleep mode off")
    if (getattr(args, "vllm_tensor_parallel_size", 1) or 1) > 1:
        problems.append("tensor_parallel_size 1")
    if trainer.rollout_func is not None or trainer.tools or getattr(trainer, "environment_factories", None):
        problems.append("TRL's own sampler (no rollout_func, tools or environments)")
    if problems:
        raise ValueError("fast.overlap_generation needs " + ", ".join(problems))


def install(trainer: Any) -> Overlap:
    """Hook ``trainer`` for overlapped generation; returns its ``Overlap`` (its ``rounds``)."""
    from transformers import TrainerCallback

    check_trainer(trainer)
    overlap = Overlap(trainer)
    trl_compat.hook(trainer, "get_batch_samples", overlap.batch_samples)
    trl_compat.hook(trainer, "_prepare_inputs", overlap.prepare_inputs)
    trl_compat.hook(trainer, "_generate_single_turn", overlap.generate)

    class CloseAtTrainEnd(TrainerCallback):
        def on_train_end(self, *args: Any, **kwargs: Any) -> None:
            overlap.close()

    trainer.add_callback(CloseAtTrainEnd())
    setattr(trainer, ATTRIBUTE, overlap)
    return overlap


def wait_for_worker(trainer: Any) -> None:
    """Before code outside TRL's rollouts uses the trainer's engine (validation through it syncs
    the weights and generates): let an overlapped generation finish. A no-op without the overlap."""
    overlap = getattr(trainer, ATTRIBUTE, None)
    if overlap is not None:
        overlap.wait()
