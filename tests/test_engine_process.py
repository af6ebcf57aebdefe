"""fast.generation_process on CPU: the IPC weight sync against a stand-in engine process.

CUDA IPC needs a GPU, so ``reduce_tensor``/``rebuild_cuda_tensor`` are replaced by a registry that
hands the same tensor over; everything else (the buffer layout, the one-time opening, the copies,
the worker's views and its ``load_weights``) runs as on the GPU host.
"""

from __future__ import annotations

import doctest
import types
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from toolrl_lib.fast import engine_process  # noqa: E402
from toolrl_lib.fast.engine_process import IPCWeightSync, WeightReceiver  # noqa: E402


class Worker(WeightReceiver):
    """vLLM's worker as the receiver sees it: ``model_runner.model.load_weights``."""

    def __init__(self) -> None:
        self.loaded: list[list[tuple[str, Any]]] = []
        self.model_runner = types.SimpleNamespace(model=types.SimpleNamespace(
            load_weights=lambda weights: self.loaded.append([(n, t.clone()) for n, t in weights])))


class Engine:
    """``LLM`` in the trainer's process: ``collective_rpc`` by method name, ``reset_prefix_cache``;
    several workers stand for an ``EnginePool``'s engines, which answer one after another."""

    def __init__(self, *workers: Worker) -> None:
        self.workers, self.calls = workers, []

    def collective_rpc(self, method: str, args: tuple = ()) -> list[Any]:
        self.calls.append(method)
        return [getattr(worker, method)(*args) for worker in self.workers]

    def reset_prefix_cache(self) -> None:
        self.calls.append("reset_prefix_cache")


class Generation:
    """TRL's ``VLLMGeneration``: ``_iter_named_params`` yields the merged weights under vLLM's names."""

    def __init__(self, weights: dict[str, Any], engine: Engine) -> None:
        self.weights, self.llm, self.passes = weights, engine, 0

    def _iter_named_params(self) -> Any:
        self.passes += 1
        yield from self.weights.items()


@pytest.fixture
def ipc(monkeypatch: Any) -> dict[int, Any]:
    """CUDA IPC as a registry of tensors (the handle is the tensor's id) and no-op synchronisations."""
    shared: dict[int, Any] = {}

    def reduce_tensor(tensor: Any) -> tuple[Any, tuple]:
        shared[id(tensor)] = tensor
        return None, (id(tensor),)

    monkeypatch.setattr("torch.multiprocessing.reductions.reduce_tensor", reduce_tensor)
    monkeypatch.setattr("torch.multiprocessing.reductions.rebuild_cuda_tensor", lambda key: shared[key])
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    return shared


def _weights(scale: float) -> dict[str, Any]:
    return {"model.layers.0.self_attn.q_proj.weight": torch.arange(6, dtype=torch.bfloat16).view(2, 3) * scale,
            "model.norm.weight": torch.full((3,), scale, dtype=torch.bfloat16),
            "model.layers.0.extra.weight": torch.arange(4, dtype=torch.float32) * scale}


def test_every_sync_loads_the_policys_current_weights(ipc):
    worker = Worker()
    generation = Generation(_weights(1.0), Engine(worker))
    sync = IPCWeightSync(generation)
    sync()
    generation.weights = _weights(3.0)  # an optimizer step later
    sync()
    assert len(ipc) == 2  # one buffer per dtype, opened once
    assert generation.llm.calls == ["toolrl_open_buffers", "toolrl_load_buffers", "reset_prefix_cache",
                                    "toolrl_load_buffers", "reset_prefix_cache"]
    assert generation.passes == 3  # the opening's sizing pass, then one pass per sync
    assert len(worker.loaded) == 2 and sync.syncs == 2
    for loaded, expected in zip(worker.loaded, (_weights(1.0), _weights(3.0)), strict=True):
        assert [name for name, _ in loaded] == list(expected)
        for name, tensor in loaded:
            assert tensor.dtype == expected[name].dtype and torch.equal(tensor, expected[name]), name


def test_a_weight_not_seen_at_the_first_sync_is_refused(ipc):
    generation = Generation(_weights(1.0), Engine(Worker()))
    sync = IPCWeightSync(generation)
    sync()
    generation.weights = {**_weights(2.0), "lm_head.weight": torch.zeros(2)}
    with pytest.raises(RuntimeError, match="lm_head.weight"):
        sync()


def test_every_engine_of_a_pool_maps_the_same_buffers_and_loads_each_sync(ipc):
    first, second = Worker(), Worker()
    generation = Generation(_weights(1.0), Engine(first, second))
    sync = IPCWeightSync(generation)
    sync()
    generation.weights = _weights(2.0)
    sync()
    assert len(ipc) == 2  # one buffer per dtype, opened by both engines
    for worker in (first, second):
        assert len(worker.loaded) == 2
        assert all(torch.equal(t, _weights(2.0)[name]) for name, t in worker.loaded[1])


def test_an_engine_that_maps_another_count_is_refused(ipc, monkeypatch):
    monkeypatch.setattr(Worker, "toolrl_open_buffers", lambda self, buffers: 1)
    with pytest.raises(RuntimeError, match=r"mapped \[1\] weights, expected 3 each"):
        IPCWeightSync(Generation(_weights(1.0), Engine(Worker())))()
    good = Worker()  # a pool whose second engine maps another count
    seen = iter([3, 2])
    monkeypatch.setattr(Worker, "toolrl_open_buffers", lambda self, buffers: next(seen))
    with pytest.raises(RuntimeError, match=r"mapped \[3, 2\] weights, expected 3 each"):
        IPCWeightSync(Generation(_weights(1.0), Engine(good, Worker())))()


def test_install_needs_trls_colocated_engine():
    trainer = types.SimpleNamespace(vllm_generation=types.SimpleNamespace(mode="server"))
    with pytest.raises(ValueError, match="grpo.vllm.mode: colocate"):
        engine_process.install(trainer)
    trainer.vllm_generation.mode = "colocate"
    sync = engine_process.install(trainer)
    assert isinstance(sync, IPCWeightSync) and trainer.vllm_generation.sync_weights is sync


def test_doctests():
    assert doctest.testmod(engine_process).failed == 0


def test_engine_client_arguments_drop_trls_launcher(monkeypatch):
    made = []
    monkeypatch.setattr(engine_process, "EngineClient",
                        lambda kwargs, options: made.append((kwargs, options)) or "client")
    tuned = engine_process.EngineOptions(core_process=True, sm_percent=40)
    assert engine_process.engine_client({"model": "m", "distributed_executor_backend": "external_launcher"}) == "client"
    assert engine_process.engine_client({"model": "m"}, options=tuned) == "client"
    assert made == [({"model": "m", "worker_extension_cls": engine_process.RECEIVER}, None),
                    ({"model": "m", "worker_extension_cls": engine_process.RECEIVER}, tuned)]


def test_the_engine_process_answers_as_trls_llm(tmp_path):
    """A real spawned engine process with a stand-in engine (tests/engine_standin.py): generate's
    outputs come back in RequestOutput's shape (what TRL's extract_logprobs reads), rpc and cache
    resets reach it, a failing request is raised with its cause and the engine stays up."""
    from trl.generation.vllm_generation import extract_logprobs

    client = engine_process.EngineClient({"seed": 3}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120)
    try:
        outputs = client.generate([{"prompt_token_ids": [5, 6, 7]}, {"prompt_token_ids": [9]}],
                                  sampling_params={"max_tokens": 3})
        assert [o.prompt_token_ids for o in outputs] == [[5, 6, 7], [9]]
        assert [o.outputs[0].token_ids for o in outputs] == [[8, 9, 10], [10, 11, 12]]
        logprobs, token_ids = extract_logprobs(outputs)
        assert token_ids == [[[8], [9], [10]], [[10], [11], [12]]] and logprobs[0] == [[-0.5], [-0.5], [-0.5]]
        assert client.collective_rpc("echo", args=(1, "a")) == [[3, 1, "a"]]
        assert client.reset_prefix_cache() == "reset"
        with pytest.raises(RuntimeError, match="stand-in refuses"):
            client.collective_rpc("fail")
        assert client.collective_rpc("echo", args=(2,)) == [[3, 2]]  # still up
        assert client.collective_rpc("environ", args=("VLLM_ENABLE_V1_MULTIPROCESSING",)) == ["0"]
        # each generate call's seconds, split between vLLM, the packing, the pipe and the unpacking
        assert [t["requests"] for t in client.timings] == [2]
        assert all(t[k] >= 0 for t in client.timings for k in ("generate_s", "pack_s", "transfer_s", "unpack_s"))
        stats = IPCWeightSync(types.SimpleNamespace(llm=client)).stats()
        assert stats["generate_calls"] == 1 and len(stats["generate_s"]) == 1 and stats["syncs"] == 0
        assert stats["transfer_s_mean"] is not None and stats["sync_s_mean"] is None
    finally:
        client.close()
    assert not client.process.is_alive()


def test_engine_core_process_turns_vllms_multiprocessing_on_in_the_engine_process():
    """fast.engine_core_process: the engine process sets VLLM_ENABLE_V1_MULTIPROCESSING=1 before it
    builds the engine (vLLM reads it then), whatever the trainer's environment says."""
    client = engine_process.EngineClient({}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120,
                                         options=engine_process.EngineOptions(core_process=True))
    try:
        assert client.collective_rpc("environ", args=("VLLM_ENABLE_V1_MULTIPROCESSING",)) == ["1"]
    finally:
        client.close()


def test_engine_sm_percent_caps_the_engine_process_under_mps(monkeypatch):
    """fast.engine_sm_percent: the engine process sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE to its own
    cap before it builds the engine, whatever the trainer's environment holds; without a cap it
    keeps the trainer's (inherited) value."""
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "70")  # the trainer's own cap
    for sm_percent, seen in ((30, "30"), (0, "70")):
        client = engine_process.EngineClient({}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120,
                                             options=engine_process.EngineOptions(sm_percent=sm_percent))
        try:
            assert client.collective_rpc("environ", args=("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",)) == [seen]
        finally:
            client.close()


def test_prompt_groups_send_each_groups_prompt_once_with_n_samples():
    """fast.engine_prompt_groups: G copies of a prompt go to vLLM as one request of n = G, and come
    back as G single-sample outputs in the copies' order; anything else goes as it came."""
    calls = []

    class Engine:
        def generate(self, prompts, sampling_params, use_tqdm=False):
            calls.append((prompts, sampling_params))
            n = sampling_params.get("n", 1)
            return [types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"],
                                          outputs=[f"{p['prompt_token_ids'][0]}.{k}" for k in range(n)]) for p in prompts]

    prompts = [{"prompt_token_ids": [1, 2]}] * 3 + [{"prompt_token_ids": [7]}] * 3
    out = engine_process.generate_in_groups(Engine(), prompts, {"max_tokens": 4})
    assert calls == [([{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [7]}], {"max_tokens": 4, "n": 3})]
    assert [(o.prompt_token_ids, o.outputs) for o in out] == [([1, 2], ["1.0"]), ([1, 2], ["1.1"]), ([1, 2], ["1.2"]),
                                                             ([7], ["7.0"]), ([7], ["7.1"]), ([7], ["7.2"])]
    for params, batch in (({"max_tokens": 4, "seed": 3}, prompts), ({"max_tokens": 4, "n": 2}, prompts),
                          ({"max_tokens": 4}, prompts[:4]), ({"max_tokens": 4}, prompts[:1])):
        calls.clear()
        assert len(engine_process.generate_in_groups(Engine(), batch, params)) == len(batch)  # one output a request
        assert calls == [(batch, params)]  # as it came: a seed, several samples already, unequal groups, one prompt


def test_prompt_groups_copy_vllms_sampling_params():
    class Params:  # vLLM's SamplingParams: clone(), then n set on the copy
        def __init__(self, n=1, seed=None):
            self.n, self.seed = n, seed

        def clone(self):
            return Params(self.n, self.seed)

    original = Params()
    copy = engine_process._with_n(original, 8)
    assert copy.n == 8 and original.n == 1


def test_the_engine_process_groups_prompts_when_asked():
    client = engine_process.EngineClient({}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120,
                                         options=engine_process.EngineOptions(prompt_groups=True))
    try:
        prompts = [{"prompt_token_ids": [5, 6]}] * 2 + [{"prompt_token_ids": [9]}] * 2
        outputs = client.generate(prompts, sampling_params={"max_tokens": 2})
        assert client.collective_rpc("calls") == [[(2, 2)]]  # two requests of two samples
        assert [o.prompt_token_ids for o in outputs] == [[5, 6], [5, 6], [9], [9]]
        assert [o.outputs[0].token_ids for o in outputs] == [[7, 8], [107, 108], [10, 11], [110, 111]]
    finally:
        client.close()


def test_outputs_cross_the_pipe_with_every_field_trl_reads():
    """pack_outputs -> pickle -> unpack_outputs keeps token ids, text, finish reasons and every
    log-prob entry (one or several a position, a rank or None), and a sample without log-probs."""
    import pickle

    from trl.generation.vllm_generation import extract_logprobs

    lp = engine_process._Logprob
    one = types.SimpleNamespace(token_ids=[7, 8], text="ab", finish_reason="stop",
                                logprobs=[{7: lp(-0.5, 1)}, {8: lp(-0.25, None)}])
    several = types.SimpleNamespace(token_ids=[3], text="", finish_reason="length",
                                    logprobs=[{3: lp(-1.5, 2), 4: lp(-0.1, 1)}])
    bare = types.SimpleNamespace(token_ids=[9], text="", finish_reason="stop", logprobs=None)
    outputs = [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[one, several]),
               types.SimpleNamespace(prompt_token_ids=None, outputs=[bare])]
    back = engine_process.unpack_outputs(pickle.loads(pickle.dumps(engine_process.pack_outputs(outputs))))
    assert [r.prompt_token_ids for r in back] == [[1, 2], []]
    for got, sent in zip([o for r in back for o in r.outputs], [one, several, bare], strict=True):
        assert (got.token_ids, got.text, got.finish_reason) == (sent.token_ids, sent.text, sent.finish_reason)
        if sent.logprobs is None:
            assert got.logprobs is None
            continue
        assert [{t: (e.logprob, e.rank) for t, e in p.items()} for p in got.logprobs] == [
            {t: (e.logprob, e.rank) for t, e in p.items()} for p in sent.logprobs]
    assert extract_logprobs(back[:1]) == extract_logprobs(outputs[:1])


def test_an_engine_that_fails_to_start_says_why():
    with pytest.raises(RuntimeError, match="no engine today"):
        engine_process.EngineClient({"fail": True}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120)


def test_an_engine_pool_splits_a_round_at_its_groups_and_answers_as_one_engine():
    """fast.engine_processes: two real engine processes (the stand-in engine) each get a contiguous
    share of whole groups at once, their outputs come back in the round's order, each has its own
    seed, and rpc and cache resets reach both."""
    from trl.generation.vllm_generation import extract_logprobs

    options = engine_process.EngineOptions(processes=2)
    pool = engine_process.EnginePool({"seed": 3}, factory="tests.engine_standin:StandInLLM", start_timeout_s=120,
                                     options=options)
    try:
        # three groups of two copies: two groups go to the first engine, one to the second
        prompts = [{"prompt_token_ids": [p]} for p in (5, 5, 7, 7, 9, 9)]
        outputs = pool.generate(prompts, sampling_params={"max_tokens": 2})
        assert [o.prompt_token_ids for o in outputs] == [[5], [5], [7], [7], [9], [9]]
        assert [o.outputs[0].token_ids for o in outputs] == [[6, 7], [6, 7], [8, 9], [8, 9], [10, 11], [10, 11]]
        assert extract_logprobs(outputs)[0][4] == [[-0.5], [-0.5]]
        assert pool.collective_rpc("calls") == [[(4, 1)], [(2, 1)]]
        assert pool.collective_rpc("echo", args=(1,)) == [[3, 1], [4, 1]]  # seeds 3 and 4
        assert pool.reset_prefix_cache() == ["reset", "reset"]
        # fewer groups than engines: the one group goes to one engine
        assert len(pool.generate(prompts[:2], sampling_params={"max_tokens": 1})) == 2
        assert pool.collective_rpc("calls") == [[(4, 1), (2, 1)], [(2, 1)]]
        assert pool.generate([], sampling_params={"max_tokens": 1}) == []
        assert [t["engines"] for t in pool.timings] == [2, 1, 1] and [t["requests"] for t in pool.timings] == [6, 2, 0]
        stats = IPCWeightSync(types.SimpleNamespace(llm=pool)).stats()
        assert stats["generate_calls"] == 3 and stats["transfer_s_mean"] is not None
        # one engine failing is raised, and the other's answer is not left for the next call to take
        with pytest.raises(RuntimeError, match="seed 3 refuses"):  # the first engine fails, the second answers
            pool.collective_rpc("fail_if_seed", args=(3,))
        assert pool.collective_rpc("echo", args=(5,)) == [[3, 5], [4, 5]]
    finally:
        pool.close()
    assert not any(client.process.is_alive() for client in pool.clients)


def test_engine_client_builds_a_pool_for_several_engine_processes(monkeypatch):
    monkeypatch.setattr(engine_process, "EnginePool", lambda kwargs, options: ("pool", kwargs["model"], options.processes))
    monkeypatch.setattr(engine_process, "EngineClient", lambda kwargs, options: "client")
    two = engine_process.EngineOptions(processes=2)
    assert engine_process.engine_client({"model": "m"}, options=two) == ("pool", "m", 2)
    assert engine_process.engine_client({"model": "m"}, options=engine_process.EngineOptions()) == "client"


def test_config_rules():
    from toolrl_lib.train.config import ConfigError, load_run_config

    gpu = ["device=cuda", "grpo.vllm.mode=colocate", "fast.generation_process=true"]
    load_run_config("configs/embedded_gpu.yaml", gpu)  # validated on load
    load_run_config("configs/embedded_gpu.yaml", [*gpu, "fast.engine_core_process=true"])
    with pytest.raises(ConfigError, match="fast.engine_core_process"):
        load_run_config("configs/embedded_gpu.yaml", [*gpu[:2], "fast.engine_core_process=true"])
    load_run_config("configs/embedded_gpu.yaml", [*gpu, "fast.engine_sm_percent=30", "fast.engine_prompt_groups=true"])
    with pytest.raises(ConfigError, match="fast.engine_prompt_groups"):
        load_run_config("configs/embedded_gpu.yaml", [*gpu[:2], "fast.engine_prompt_groups=true"])
    with pytest.raises(ConfigError, match="fast.engine_sm_percent"):
        load_run_config("configs/embedded_gpu.yaml", [*gpu[:2], "fast.engine_sm_percent=30"])
    load_run_config("configs/embedded_gpu.yaml", [*gpu, "fast.engine_processes=2", "grpo.vllm.kv_cache_gib=6"])
    for extra in (["fast.engine_processes=2"], ["fast.engine_processes=0", "grpo.vllm.kv_cache_gib=6"]):
        with pytest.raises(ConfigError, match="fast.engine_processes"):  # no fixed KV cache; no engine
            load_run_config("configs/embedded_gpu.yaml", [*gpu, *extra])
    with pytest.raises(ConfigError, match="fast.engine_processes"):
        load_run_config("configs/embedded_gpu.yaml", [*gpu[:2], "fast.engine_processes=2", "grpo.vllm.kv_cache_gib=6"])
    assert engine_process.EngineOptions.from_config(load_run_config(
        "configs/embedded_gpu.yaml", [*gpu, "fast.engine_processes=3", "grpo.vllm.kv_cache_gib=6"]).fast).processes == 3
    for bad in ("-1", "101"):
        with pytest.raises(ConfigError, match="fast.engine_sm_percent"):
            load_run_config("configs/embedded_gpu.yaml", [*gpu, f"fast.engine_sm_percent={bad}"])
    for extra in (["grpo.vllm.mode=off"], ["grpo.vllm.enable_sleep_mode=true"],
                  ["grpo.vllm.tensor_parallel_size=2"]):
        with pytest.raises(ConfigError, match="fast.generation_process"):
            load_run_config("configs/embedded_gpu.yaml", [*gpu, *extra])
