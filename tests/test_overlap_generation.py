"""fast.overlap_generation on CPU: TRL's GRPOTrainer with a stand-in for its colocated vLLM engine.

The stand-in records which thread generated each round, from which synced weight version, and
fails if weights are synced while it generates. The run must train on the same prompts in the same
order as without the overlap, each prefetched round one weight version older, with no generation
wasted past the last round and an epoch's first round generated as TRL does.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from transformers import set_seed  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback  # noqa: E402
from toolrl_lib.fast.overlap import Lookahead, install, round_key  # noqa: E402
from toolrl_lib.models import make_tiny_model  # noqa: E402
from toolrl_lib.train.config import ConfigError, load_run_config, validate  # noqa: E402


class StandInEngine:
    """TRL's ``VLLMGeneration`` as the overlap uses it: ``sync_weights`` and ``generate``."""

    def __init__(self, eos: int) -> None:
        self.eos, self.version, self.busy = eos, 0, False
        self.calls: list[dict[str, Any]] = []

    def sync_weights(self) -> None:
        assert not self.busy, "weights synced into the engine while it generates"
        self.version += 1

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int, profiler: Any = None) -> tuple:
        assert not self.busy, "two generations at once"
        self.busy = True
        try:
            version = self.version
            time.sleep(0.05)  # long enough for the main thread to get on with the round
            completions = [[5 + (sum(p) + 7 * version + i) % 40 for i in range(2 + row % 3)] + [self.eos]
                           for row, p in enumerate(prompts)]
            logprobs = [[[-1.0] for _ in ids] for ids in completions]
            self.calls.append({"thread": threading.current_thread().name, "version": version,
                               "prompts": [list(map(int, p)) for p in prompts]})
            assert self.version == version, "weights synced into the engine while it generated"
            return prompts, completions, logprobs, None
        finally:
            self.busy = False


def _reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    return [float(len(c) % 3) for c in completions]


def stand_in_trainer(tmp_path: Any, engine_class: Any = StandInEngine, max_steps: int = 10,
                     correction: bool = True, **engine_kwargs: Any) -> tuple[Any, Any]:
    """TRL's GRPOTrainer on the tiny model (12 prompts, rounds of 2 steps of 4 rows) with
    ``engine_class(eos, **engine_kwargs)`` as its colocated vLLM engine; not yet trained."""
    install_cpu_logprob_fallback()
    set_seed(0)
    model, tok = make_tiny_model(seed=0)
    rows = [{"prompt": tok.apply_chat_template([{"role": "user", "content": f"call tool {i}"}],
                                               add_generation_prompt=True, tokenize=False)} for i in range(12)]
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                      gradient_accumulation_steps=1, steps_per_generation=2, num_generations=2,
                      max_completion_length=6, max_steps=max_steps, logging_steps=1, report_to=[],
                      learning_rate=5e-2, save_strategy="no", seed=0, disable_tqdm=True, loss_type="dapo")
    trainer = GRPOTrainer(model=model, reward_funcs=_reward, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok)
    engine = engine_class(tok.eos_token_id, **engine_kwargs)
    # what GRPOConfig(use_vllm=True, vllm_mode="colocate") builds, with the stand-in as its engine
    trainer.use_vllm, trainer.args.vllm_mode, trainer.vllm_generation = True, "colocate", engine
    trainer._last_loaded_step = -1
    trainer.vllm_importance_sampling_correction = correction
    return trainer, engine


def refusal(option: str, overrides: list[str]) -> str:
    """The config error for ``fast.<option>=true`` on top of configs/embedded_gpu.yaml and ``overrides``."""
    config = load_run_config("configs/embedded_gpu.yaml", [*overrides, f"fast.{option}=true"], check=False)
    with pytest.raises(ConfigError, match=f"fast.{option}") as error:
        validate(config)
    return str(error.value)


def _run(tmp_path: Any, overlap: bool, max_steps: int = 10, correction: bool = True) -> tuple[Any, StandInEngine]:
    trainer, engine = stand_in_trainer(tmp_path, max_steps=max_steps, correction=correction)
    if overlap:
        install(trainer)
    trainer.train()
    return trainer, engine


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, StandInEngine]]:
    return {"plain": _run(tmp_path_factory.mktemp("plain"), overlap=False),
            "overlap": _run(tmp_path_factory.mktemp("overlap"), overlap=True)}


def test_same_prompts_in_the_same_order(runs):
    plain, overlap = runs["plain"][1].calls, runs["overlap"][1].calls
    assert len(plain) == 5  # 10 steps, rounds of 2 (12 prompts: an epoch is 3 rounds of 4 prompts x 2)
    assert [c["prompts"] for c in overlap] == [c["prompts"] for c in plain]


def test_rounds_are_prefetched_except_where_there_is_no_next_round(runs):
    trainer, engine = runs["overlap"]
    rounds = trainer._toolrl_overlap.rounds
    assert [r["step"] for r in rounds] == [0, 2, 4, 6, 8]
    # round 0: nothing before it; round 3 opens the second epoch (the lookahead ends with the first)
    assert [r["prefetched"] for r in rounds] == [False, True, True, False, True]
    main = threading.main_thread().name
    assert [c["thread"] == main for c in engine.calls] == [True, False, False, True, False]
    assert all(r["generate_s"] >= 0.05 for r in rounds if r["prefetched"])


def test_a_prefetched_round_is_one_weight_version_staler(runs):
    plain, overlap = runs["plain"][1].calls, runs["overlap"][1].calls
    # without the overlap each round is generated right after the sync for its own step
    assert [c["version"] for c in plain] == [1, 2, 3, 4, 5]
    # with it, rounds 1, 2 and 4 were generated at the start of the round before (its weights)
    assert [c["version"] for c in overlap] == [1, 1, 2, 3, 3]


def test_the_run_logs_its_overlap_metrics(runs):
    trainer, _ = runs["overlap"]
    logged = [row for row in trainer.state.log_history if "overlap/prefetched" in row]
    assert [row["overlap/prefetched"] for row in logged] == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert all(row["overlap/wait_s"] >= 0 for row in logged)
    assert sum("overlap/generate_s" in row for row in logged) == 3


def test_a_prompt_mismatch_generates_as_trl_does(tmp_path, monkeypatch):
    """A prefetched round whose prompts are not the round's is dropped, never trained on."""
    import toolrl_lib.fast.overlap as overlap_module

    calls = {"n": 0}

    def wrong_key(prompt_ids: Any, num_generations: int) -> Any:
        calls["n"] += 1
        return ("another round", calls["n"])  # never equal: every round misses

    monkeypatch.setattr(overlap_module, "round_key", wrong_key)
    trainer, engine = _run(tmp_path, overlap=True, max_steps=6, correction=False)
    assert [r["prefetched"] for r in trainer._toolrl_overlap.rounds] == [False, False, False]
    # each miss generated its round on the main thread, after the wasted prefetch
    main = threading.main_thread().name
    assert [c["thread"] == main for c in engine.calls] == [True, False, True, False, True]


def test_a_failed_prefetch_stops_the_run_with_its_cause(tmp_path, monkeypatch):
    original = StandInEngine.generate

    def fail_on_worker(self: StandInEngine, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            raise MemoryError("engine out of KV cache")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(StandInEngine, "generate", fail_on_worker)
    with pytest.raises(RuntimeError, match="overlapped generation") as error:
        _run(tmp_path, overlap=True, max_steps=4, correction=False)
    assert isinstance(error.value.__cause__, MemoryError)


def test_lookahead_reads_ahead_without_losing_or_reordering():
    it = Lookahead(iter(range(7)))
    assert next(it) == 0 and it.at(4) == 4 and it.at(1) == 1
    assert [next(it), next(it)] == [1, 2]
    assert it.at(1) is None  # already yielded
    assert it.at(20) is None and it.ended
    assert list(it) == [3, 4, 5, 6]
    assert it.position_of(5) == 5
    with pytest.raises(StopIteration):
        next(it)


def test_round_key_tells_rounds_apart():
    assert round_key([[1, 2], [3]], 2) == round_key([(1, 2), (3,)], 2)
    assert round_key([[1, 2], [3]], 2) != round_key([[3], [1, 2]], 2)
    assert round_key([[1, 2]], 2) != round_key([[1, 2]], 4)


def test_install_refuses_a_trainer_without_a_colocated_engine(tmp_path):
    install_cpu_logprob_fallback()
    model, tok = make_tiny_model(seed=0)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=4, max_steps=1, report_to=[], save_strategy="no")
    trainer = GRPOTrainer(model=model, reward_funcs=_reward, args=args,
                          train_dataset=Dataset.from_list([{"prompt": "a"}, {"prompt": "b"}]), processing_class=tok)
    with pytest.raises(ValueError, match="vLLM colocate rollouts"):
        install(trainer)


GPU = ["device=cuda", "grpo.vllm.mode=colocate"]


@pytest.mark.parametrize("overrides, expected", [
    (["grpo.vllm.mode=off"], "grpo.vllm.mode colocate"),
    (["grpo.vllm.mode=server"], "colocate"),
    ([*GPU, "grpo.vllm.enable_sleep_mode=true"], "without sleep mode"),
    ([*GPU, "grpo.vllm.tensor_parallel_size=2"], "tensor_parallel_size 1"),
    ([*GPU, "backend=unsloth"], "the peft backend"),
])
def test_config_rules(overrides, expected):
    assert expected in refusal("overlap_generation", overrides)


def test_config_accepts_it_with_the_colocated_engine():
    config = load_run_config("configs/embedded_gpu.yaml", [*GPU, "fast.overlap_generation=true"])
    assert validate(config).fast.overlap_generation


def test_validation_through_the_engine_waits_for_the_worker():
    """Validation syncs the weights and generates through the same engine: never while the worker does."""
    from types import SimpleNamespace

    from toolrl_lib.fast.overlap import ATTRIBUTE, Overlap, _Pending
    from toolrl_lib.train.validation import colocated_llm

    engine = StandInEngine(eos=0)
    trainer = SimpleNamespace(vllm_generation=engine, args=SimpleNamespace(vllm_mode="colocate"),
                              state=SimpleNamespace(global_step=3), _last_loaded_step=0)
    engine.llm = "the engine"
    overlap = Overlap.__new__(Overlap)
    overlap.pending = _Pending(("k",), 0)
    overlap.pending.thread = threading.Thread(target=engine.generate, args=([[1, 2]], None, 1))
    setattr(trainer, ATTRIBUTE, overlap)
    overlap.pending.thread.start()
    assert colocated_llm(trainer) == "the engine"  # StandInEngine.sync_weights asserts it is idle
    assert not overlap.pending.thread.is_alive() and engine.version == 1 and trainer._last_loaded_step == 3
