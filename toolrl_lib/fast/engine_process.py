"""TRL's colocated vLLM engine in a process of its own on the same GPU, weights in through CUDA IPC.

TRL 1.15 builds its colocated engine inside the training process
(``distributed_executor_backend="external_launcher"``), so vLLM's request handling, scheduler,
sampler and output processing share one interpreter with the trainer. For a small model both
halves are bound by host-side Python, and generating on a thread beside the trainer
(``fast.overlap_generation``) only traded one half's time for the other's: one interpreter lock
(run 4, ``benchmarks/results/grpo_throughput.md``). vLLM's own multiprocessing (its engine core in
a child process) still leaves the request and output processing, per token, in the trainer's
interpreter: measured, it hid the generation but still slowed the trainer (run 5).

So the whole engine moves out: ``EngineClient`` stands where TRL keeps its ``LLM`` and starts a
spawned process (``serve``) that builds the ``LLM`` with TRL's own arguments (less the
``external_launcher``) and answers ``generate``, ``collective_rpc`` and ``reset_prefix_cache``
over a pipe. A round's prompts go over as token ids and come back as token ids and the sampled
tokens' log-probs, rebuilt into the shape TRL reads (``RequestOutput``'s fields); the trainer
waits on the pipe without the interpreter lock.

TRL's weight sync calls ``load_weights`` on the engine's model in-process; ``IPCWeightSync``
replaces it. The policy's weights as TRL yields them (LoRA merged, vLLM's names) are copied into
one flat buffer per dtype on the trainer's GPU, whose CUDA IPC handle the engine's worker opened
once (``WeightReceiver``, mixed into vLLM's worker through ``worker_extension_cls``); each sync is
those device-to-device copies, a host synchronisation and one ``collective_rpc`` in which the
worker loads its views of the buffers. The handle travels as bytes this module pickles and the
engine process unpickles: our own tensors' metadata, never model output.

``fast.generation_process`` (colocate, one GPU, peft backend, no sleep mode, single-turn). Tested
on the CPU against a stand-in engine in a real spawned process (``tests/test_engine_process.py``).
Measured on one H100 with ``fast.overlap_generation`` (run 6, ``benchmarks/results/grpo_throughput.md``):
128.2 completions/s against 107.0 for the same recipe without the overlap in the same run. A round's
first step fell from 2.6-3.1 s to 1.4-1.6 s. Mid-round steps rose from 0.27 to 0.35-0.37 s (mean),
since the child's generation shares the GPU with them.

``fast.engine_core_process`` turns vLLM's own multiprocessing on in this process (``serve``): the
engine core then runs in a grandchild and this process only handles requests and outputs. Run 11
measured it no faster (133.4 against 132.7/s).

Each ``generate`` call's seconds are kept (``EngineClient.timings``: vLLM's own generate, the
packing there, the pipe, the unpacking here) and, with the syncs', recorded in run_info's
``generation_process`` (``IPCWeightSync.stats``): run 13 found the engine's round alone (2.87 s
for 512 completions on an H100, sync included) to be what bounds an overlapped round.

``fast.engine_processes`` runs several engine processes (``EnginePool``), each generating a
contiguous share of a round's groups at the same time: vLLM's round for this small model is bound
by its host-side work per decode step, not by the GPU. Run 14 (H100): vLLM's round 1.57-1.92 s with
two engines against 2.67-3.49 s with one, 149.3 against 141.0 completions/s, the trainer then the
bound; sending each group's prompt once (``fast.engine_prompt_groups``) with a larger token budget
per model step did not shorten the round.

``fast.engine_sm_percent`` caps the engine process's share of the GPU's SMs under CUDA MPS
(``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, set in this process before vLLM creates its CUDA context;
``serve``). Without MPS the two processes take turns on the GPU in time slices; under MPS without a
cap the trainer's large kernels take every SM from the engine's small decode steps (run 12: the
engine's round 4.45 s against 3.50 s without MPS). The trainer's own cap is the same variable in its
environment when it starts. Run 13 (H100): 50/50 ran 153.9 against 162.8/s without MPS; with the
engine at 30% its generations were wrong (log-probs 7.7 nats a token off the trainer's).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import time
from array import array
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

RECEIVER = "toolrl_lib.fast.engine_process.WeightReceiver"


@dataclass(frozen=True)
class EngineOptions:
    """How the engine process runs vLLM: the run's ``fast.engine_*`` fields (``from_config``)."""

    core_process: bool = False  # fast.engine_core_process: vLLM's engine core in a process beneath this one
    sm_percent: int = 0  # fast.engine_sm_percent: this process's SM cap under CUDA MPS (0: none of its own)
    prompt_groups: bool = False  # fast.engine_prompt_groups: a group's copies of a prompt as one request of n
    processes: int = 1  # fast.engine_processes: engines, each in its own process, sharing each round (EnginePool)

    @classmethod
    def from_config(cls, fast: Any) -> EngineOptions:
        return cls(core_process=fast.engine_core_process, sm_percent=fast.engine_sm_percent,
                   prompt_groups=fast.engine_prompt_groups, processes=fast.engine_processes)


def group_size(prompts: list[Any]) -> int:
    """The size k when ``prompts`` is runs of k identical consecutive prompts, each run's prompt
    different from the next run's (TRL's colocated engine gets each prompt once per completion of
    its group); else 1.

    >>> group_size([[1], [1], [2], [2]]), group_size([[1], [1], [2]]), group_size([[1], [2]]), group_size([[1]] * 4)
    (2, 1, 1, 4)
    """
    runs, start = [], 0
    for i in range(1, len(prompts) + 1):
        if i == len(prompts) or prompts[i] != prompts[start]:
            runs.append(i - start)
            start = i
    if not runs or len(set(runs)) != 1:
        return 1
    return runs[0]


def split_at_groups(count: int, parts: int, k: int = 1) -> list[slice]:
    """At most ``parts`` contiguous, non-empty slices of ``count`` items cut only between runs of
    ``k`` (a group's copies of its prompt stay with one engine), as even as whole runs allow.

    >>> split_at_groups(512, 2, 8), split_at_groups(24, 2, 8), split_at_groups(8, 2, 8), split_at_groups(3, 2)
    ([slice(0, 256, None), slice(256, 512, None)], [slice(0, 16, None), slice(16, 24, None)], [slice(0, 8, None)], [slice(0, 2, None), slice(2, 3, None)])
    """
    if k < 1 or count % k:
        k = 1
    runs, slices, start = count // k, [], 0
    base, extra = divmod(runs, parts)
    for i in range(parts):
        stop = start + (base + (i < extra)) * k
        if stop > start:
            slices.append(slice(start, stop))
        start = stop
    return slices


def _with_n(sampling_params: Any, n: int) -> Any:
    """A copy of ``sampling_params`` asking for ``n`` samples (vLLM's ``SamplingParams``, or a stand-in's dict)."""
    if isinstance(sampling_params, dict):
        return {**sampling_params, "n": n}
    params = sampling_params.clone()
    params.n = n
    return params


def generate_in_groups(llm: Any, prompts: list[Any], sampling_params: Any) -> list[Any]:
    """``llm.generate`` with each group's k copies of a prompt sent once with ``n = k``
    (``fast.engine_prompt_groups``), its k samples handed back as k single-sample outputs in the
    order the copies came; as it is when the prompts are not such groups, or when the call already
    asks for several samples or fixes a seed (k copies under one seed sample alike; n samples do not)."""
    k = group_size([p["prompt_token_ids"] if isinstance(p, dict) else p for p in prompts])
    n = sampling_params.get("n", 1) if isinstance(sampling_params, dict) else getattr(sampling_params, "n", 1)
    seed = sampling_params.get("seed") if isinstance(sampling_params, dict) else getattr(sampling_params, "seed", None)
    if k == 1 or n != 1 or seed is not None:
        return llm.generate(prompts, sampling_params=sampling_params, use_tqdm=False)
    outputs = llm.generate(prompts[::k], sampling_params=_with_n(sampling_params, k), use_tqdm=False)
    return [SimpleNamespace(prompt_token_ids=request.prompt_token_ids, outputs=[sample])
            for request in outputs for sample in request.outputs]


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
        self.sync_seconds: list[float] = []

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
        if not opened or any(count != len(self.slots) for count in opened):  # one count per engine's worker
            raise RuntimeError(f"the vLLM engine processes mapped {opened} weights, expected {len(self.slots)} each")

    def __call__(self) -> None:
        import torch

        started = time.perf_counter()
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
        self.sync_seconds.append(time.perf_counter() - started)

    def stats(self) -> dict[str, Any]:
        """What the run records (run_info's ``generation_process``): the syncs' and the engine's
        generate calls' seconds, so that a slow round says whether vLLM or the traffic was slow."""
        out: dict[str, Any] = {"syncs": self.syncs, "sync_s_mean": _mean(self.sync_seconds)}
        timings = getattr(self.generation.llm, "timings", None) or []
        out["generate_calls"] = len(timings)
        out["generate_s"] = [round(t["generate_s"], 3) for t in timings]
        for key in ("pack_s", "transfer_s", "unpack_s"):
            out[f"{key}_mean"] = _mean([t[key] for t in timings])
        return out


def _mean(values: list[float]) -> float | None:
    """The mean to 4 places, None for no values.

    >>> _mean([1.0, 2.0]), _mean([])
    (1.5, None)
    """
    return round(sum(values) / len(values), 4) if values else None


class _Logprob:
    """The two fields of vLLM's ``Logprob`` that TRL reads (``extract_logprobs``)."""

    __slots__ = ("logprob", "rank")

    def __init__(self, logprob: float, rank: int | None) -> None:
        self.logprob, self.rank = logprob, rank


def pack_outputs(outputs: list[Any]) -> list[tuple]:
    """vLLM ``RequestOutput``s as flat arrays for the pipe: (prompt ids, [(token ids, text, finish
    reason, log-probs or None), ...]), the log-probs as (entries per position, or None when each
    position has one; token ids; log-probs; ranks, -1 for None), each an ``array``. Flat arrays
    pickle as raw bytes: a round of 512 with a tuple a token cost the two ends ~0.23 s of host time
    (``benchmarks/results/engine_transport.md``)."""
    packed = []
    for request in outputs:
        samples = []
        for out in request.outputs:
            logprobs = None
            if out.logprobs is not None:
                counts, ids, values, ranks = array("i"), array("i"), array("d"), array("i")
                for position in out.logprobs:
                    counts.append(len(position))
                    for t, lp in position.items():
                        ids.append(int(t))
                        values.append(float(lp.logprob))
                        ranks.append(-1 if lp.rank is None else int(lp.rank))
                logprobs = (None if all(c == 1 for c in counts) else counts, ids, values, ranks)
            samples.append((array("i", out.token_ids), out.text, out.finish_reason, logprobs))
        packed.append((array("i", request.prompt_token_ids or []), samples))
    return packed


def _positions(logprobs: tuple) -> list[dict[int, _Logprob]]:
    """One packed sample's log-probs back into vLLM's shape: a dict per position."""
    counts, ids, values, ranks = logprobs
    ids, values, ranks = ids.tolist(), values.tolist(), ranks.tolist()
    if counts is None:
        return [{t: _Logprob(lp, None if r < 0 else r)} for t, lp, r in zip(ids, values, ranks, strict=True)]
    positions, at = [], 0
    for count in counts:
        positions.append({ids[i]: _Logprob(values[i], None if ranks[i] < 0 else ranks[i]) for i in range(at, at + count)})
        at += count
    return positions


def unpack_outputs(packed: list[tuple]) -> list[Any]:
    """``pack_outputs``' arrays back into objects with ``RequestOutput``'s fields.

    >>> fake = lambda ids, lps: SimpleNamespace(prompt_token_ids=[1, 2], outputs=[SimpleNamespace(
    ...     token_ids=ids, text="", finish_reason="stop", logprobs=lps)])
    >>> out = unpack_outputs(pack_outputs([fake([7, 8], [{7: _Logprob(-0.5, 1)}, {8: _Logprob(-0.25, None)}])]))
    >>> out[0].prompt_token_ids, out[0].outputs[0].token_ids, out[0].outputs[0].logprobs[1][8].logprob
    ([1, 2], [7, 8], -0.25)
    """
    requests = []
    for prompt_ids, samples in packed:
        outs = [SimpleNamespace(token_ids=ids.tolist(), text=text, finish_reason=finish,
                                logprobs=None if logprobs is None else _positions(logprobs))
                for ids, text, finish, logprobs in samples]
        requests.append(SimpleNamespace(prompt_token_ids=prompt_ids.tolist(), outputs=outs))
    return requests


def serve(conn: Any, llm_kwargs: dict[str, Any], factory: str = "vllm:LLM", options: EngineOptions | None = None) -> None:
    """The engine process: build the engine, then answer the trainer's requests until it closes."""
    import importlib
    import traceback

    # "0": vLLM's engine core (scheduler, model steps) in this process, which is the child already;
    # "1" (fast.engine_core_process): in a process of its own beneath this one, so that this process's
    # handling of each step's outputs runs beside the model's next steps
    options = options or EngineOptions()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if options.core_process else "0"
    if options.sm_percent:  # fast.engine_sm_percent: read by CUDA when this process first creates a context (MPS only)
        os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(options.sm_percent)
    try:
        module, name = factory.split(":")
        llm = getattr(importlib.import_module(module), name)(**llm_kwargs)
    except BaseException:  # noqa: BLE001 - reported to the trainer, which raises it
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:  # the trainer is gone
            return
        try:
            if op == "close":
                conn.send(("ok", None))
                return
            if op == "generate":  # the outputs, and where the engine process's time went
                prompts, sampling_params = args
                started = time.perf_counter()
                outputs = (generate_in_groups(llm, prompts, sampling_params) if options.prompt_groups
                           else llm.generate(prompts, sampling_params=sampling_params, use_tqdm=False))
                generated = time.perf_counter()
                packed = pack_outputs(outputs)
                value: Any = (packed, {"generate_s": generated - started, "pack_s": time.perf_counter() - generated})
            elif op == "rpc":
                method, rpc_args = args
                value = llm.collective_rpc(method, args=tuple(rpc_args))
            elif op == "reset_prefix_cache":
                value = llm.reset_prefix_cache()
            else:
                raise ValueError(f"unknown request {op!r}")
            conn.send(("ok", value))
        except BaseException:  # noqa: BLE001 - one failed request is reported, the engine stays up
            conn.send(("error", traceback.format_exc()))


class EngineClient:
    """Where TRL keeps its ``LLM`` (``VLLMGeneration.llm``): the same calls, answered by the engine
    process. ``factory`` names the engine class (``module:name``; tests pass a stand-in)."""

    def __init__(self, llm_kwargs: dict[str, Any], factory: str = "vllm:LLM", start_timeout_s: float = 900,
                 options: EngineOptions | None = None) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # CUDA is initialised here: never fork
        self.conn, child = context.Pipe()
        # not a daemon: vLLM's compilers may start processes of their own, which a daemon may not.
        # It ends when the trainer closes it, at exit, or when the pipe breaks (serve returns)
        self.process = context.Process(target=serve, args=(child, llm_kwargs, factory, options or EngineOptions()),
                                       name="toolrl-vllm-engine")
        self.process.start()
        child.close()
        self.timings: list[dict[str, float]] = []  # one per generate call (``generate``)
        atexit.register(self.close)  # before multiprocessing's own exit handler joins its children
        if not self.conn.poll(start_timeout_s):
            self.process.kill()
            raise RuntimeError(f"the vLLM engine process did not start within {start_timeout_s:.0f} s")
        self.receive()

    def send(self, op: str, *args: Any) -> None:
        """A request to the engine process; its answer is ``receive``'s (one answer per request, in order)."""
        self.conn.send((op, args))

    def receive(self) -> Any:
        """The answer to the oldest request not yet answered; an error there is raised here."""
        try:
            status, value = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"the vLLM engine process ended (exit code {self.process.exitcode})") from None
        if status == "error":
            raise RuntimeError(f"the vLLM engine process failed:\n{value}")
        return value

    def _call(self, op: str, *args: Any) -> Any:
        self.send(op, *args)
        return self.receive()

    def generate(self, prompts: list[Any], sampling_params: Any = None, use_tqdm: bool = False) -> list[Any]:
        """vLLM's ``generate`` in the engine process; each call's seconds go to ``timings``: vLLM's
        own ``generate_s``, ``pack_s`` (outputs to arrays, there), ``transfer_s`` (the pipe both
        ways and the pickling) and ``unpack_s`` (arrays back to objects, here)."""
        return generate_on([self], prompts, sampling_params, self.timings)

    def collective_rpc(self, method: str, args: tuple = ()) -> list[Any]:
        return self._call("rpc", method, list(args))

    def reset_prefix_cache(self) -> Any:
        return self._call("reset_prefix_cache")

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(RuntimeError, OSError):  # already ending: nothing to answer
                self._call("close")
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()


def receive_all(clients: list[EngineClient]) -> list[Any]:
    """Each engine's answer to its last request, read even when one fails (its error is raised
    after), so that no answer is left in a pipe for the next call to take as its own."""
    answers, failure = [], None
    for client in clients:
        try:
            answers.append(client.receive())
        except RuntimeError as error:
            failure = failure or error
    if failure is not None:
        raise failure
    return answers


def generate_on(clients: list[EngineClient], prompts: list[Any], sampling_params: Any,
                timings: list[dict[str, float]]) -> list[Any]:
    """``prompts`` split between the engines at their groups' boundaries (``split_at_groups``),
    generated by all of them at once, the outputs back in the prompts' order; the call's seconds
    appended to ``timings`` (``_generate_timing``)."""
    shares = [slice(None)]
    if len(clients) > 1 and prompts:  # none: the first engine answers the empty call
        ids = [p["prompt_token_ids"] if isinstance(p, dict) else p for p in prompts]
        shares = split_at_groups(len(prompts), len(clients), group_size(ids))
    busy = clients[:len(shares)]
    started = time.perf_counter()
    for client, share in zip(busy, shares, strict=True):
        client.send("generate", prompts[share], sampling_params)
    answers = receive_all(busy)
    answered = time.perf_counter()
    outputs = [output for packed, _ in answers for output in unpack_outputs(packed)]
    timings.append(_generate_timing(len(prompts), [timing for _, timing in answers], answered - started,
                                    time.perf_counter() - answered))
    return outputs


def _generate_timing(requests: int, engines: list[dict[str, float]], round_trip: float, unpack: float) -> dict:
    """One generate call's record (``timings``): the slowest engine's vLLM and packing seconds, the
    rest of the round trip as the pipe's, and the unpacking here.

    >>> _generate_timing(4, [{"generate_s": 1.0, "pack_s": 0.1}, {"generate_s": 1.5, "pack_s": 0.1}], 2.0, 0.2)
    {'requests': 4, 'engines': 2, 'generate_s': 1.5, 'pack_s': 0.1, 'transfer_s': 0.4, 'unpack_s': 0.2}
    """
    slowest = max(engines, key=lambda t: t["generate_s"] + t["pack_s"])
    return {"requests": requests, "engines": len(engines), "generate_s": slowest["generate_s"],
            "pack_s": slowest["pack_s"], "transfer_s": round(max(0.0, round_trip - slowest["generate_s"]
                                                                 - slowest["pack_s"]), 6), "unpack_s": unpack}


class EnginePool:
    """Several engine processes standing where TRL keeps its ``LLM`` (``fast.engine_processes``).

    Why: for a small model vLLM's round is bound by its host-side work per model step (the scheduler
    and the outputs of every running request), not by the GPU, which sat idle most of run 13's
    rounds. Each engine takes a contiguous share of the round's groups (a group's copies stay
    together, so ``fast.engine_prompt_groups`` still applies), all of them generate at once, and
    their outputs come back in the round's order. Each engine gets its own seed (TRL's + its
    index), so that no two share a random stream. Weight syncs and cache resets go to all of them;
    every engine maps the same CUDA IPC buffers. The engines start one after another, so that the
    first fills vLLM's compile cache and the others read it."""

    def __init__(self, llm_kwargs: dict[str, Any], factory: str = "vllm:LLM", start_timeout_s: float = 900,
                 options: EngineOptions | None = None) -> None:
        options = options or EngineOptions()
        seed = llm_kwargs.get("seed") or 0
        self.clients: list[EngineClient] = []
        self.timings: list[dict[str, float]] = []
        try:
            for index in range(options.processes):
                self.clients.append(EngineClient({**llm_kwargs, "seed": seed + index}, factory=factory,
                                                 start_timeout_s=start_timeout_s, options=options))
        except BaseException:
            self.close()
            raise

    def _all(self, op: str, *args: Any) -> list[Any]:
        """``op`` sent to every engine before any answer is read, so that they work at once."""
        for client in self.clients:
            client.send(op, *args)
        return receive_all(self.clients)

    def generate(self, prompts: list[Any], sampling_params: Any = None, use_tqdm: bool = False) -> list[Any]:
        """The round split at its groups' boundaries, one share an engine, the outputs in order."""
        return generate_on(self.clients, prompts, sampling_params, self.timings)

    def collective_rpc(self, method: str, args: tuple = ()) -> list[Any]:
        """Every engine's answers, the first engine's first (vLLM's shape: a list of the workers')."""
        return [answer for answers in self._all("rpc", method, list(args)) for answer in answers]

    def reset_prefix_cache(self) -> list[Any]:
        return self._all("reset_prefix_cache")

    def close(self) -> None:
        for client in self.clients:
            client.close()


def engine_client(llm_kwargs: dict[str, Any], options: EngineOptions | None = None) -> EngineClient | EnginePool:
    """What TRL's ``LLM(...)`` becomes under ``fast.generation_process``: its arguments less the
    in-process ``external_launcher``, with the IPC receiver mixed into the worker; several engine
    processes (``EnginePool``) under ``fast.engine_processes`` > 1."""
    kwargs = {k: v for k, v in llm_kwargs.items() if k != "distributed_executor_backend"}
    kwargs["worker_extension_cls"] = RECEIVER
    if options is not None and options.processes > 1:
        return EnginePool(kwargs, options=options)
    return EngineClient(kwargs, options=options)


def install(trainer: Any) -> IPCWeightSync:
    """Replace TRL's in-process weight sync on ``trainer.vllm_generation`` with ``IPCWeightSync``
    (returned: its ``stats`` are the run's record of the engine process)."""
    from toolrl_lib.fast import trl_compat

    trl_compat.require_trl()  # VLLMGeneration's sync_weights and _iter_named_params among them
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or getattr(generation, "mode", None) != "colocate":
        raise ValueError("fast.generation_process needs TRL's colocated vLLM engine (grpo.vllm.mode: colocate)")
    generation.sync_weights = IPCWeightSync(generation)
    return generation.sync_weights


__all__ = ["EngineClient", "EngineOptions", "EnginePool", "IPCWeightSync", "RECEIVER", "WeightReceiver", "engine_client",
           "generate_in_groups", "generate_on", "group_size", "install", "layout", "pack_outputs", "receive_all", "serve",
           "split_at_groups", "unpack_outputs"]
