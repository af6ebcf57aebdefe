"""fast.sampler_logps on CPU: TRL's GRPOTrainer with a stand-in for its colocated vLLM engine whose
sampled log-probs are known. With the option, each round's old log-probs are exactly the engine's
(also when the next round is generated ahead, fast.overlap_generation), TRL's importance-sampling
ratio is exactly 1 and TRL's no-grad forward over the round never runs; a round whose log-probs
cannot serve runs that forward as before and is counted."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

pytest.importorskip("trl")


from tests.test_overlap_generation import GPU, StandInEngine, refusal, stand_in_trainer  # noqa: E402
from toolrl_lib.fast import sampler_logps, trl_compat  # noqa: E402
from toolrl_lib.train.config import load_run_config, validate  # noqa: E402


def sampled_logprob(token: int, version: int) -> float:
    """What the stand-in engine reports for sampling ``token`` under weight ``version``."""
    return -0.01 * token - 0.125 * version


class KnownLogprobEngine(StandInEngine):
    """The overlap tests' engine, reporting ``sampled_logprob`` per token (``missing``: one None,
    as vLLM reports a NaN log-prob, in the rounds it lists)."""

    def __init__(self, eos: int, missing: tuple[int, ...] = ()) -> None:
        super().__init__(eos)
        self.missing = missing

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int, profiler: Any = None) -> tuple:
        version, call = self.version, len(self.calls)
        prompts, completions, _, extra = super().generate(prompts, images, num_generations, profiler)
        logprobs = [[[sampled_logprob(t, version)] for t in ids] for ids in completions]
        if call in self.missing:
            logprobs[0][0] = [None]
        return prompts, completions, logprobs, extra


def _run(tmp_path: Any, option: bool, overlap: bool = False, missing: tuple[int, ...] = ()) -> dict[str, Any]:
    trainer, engine = stand_in_trainer(tmp_path, KnownLogprobEngine, max_steps=6, missing=missing)
    forwards: list[int] = []  # rows of each no-grad training-mode forward TRL ran

    def count(call: Any, model: Any, input_ids: Any, *args: Any, **kwargs: Any) -> Any:
        import torch

        if not torch.is_grad_enabled() and model.training:
            forwards.append(int(input_ids.shape[0]))
        return call(model, input_ids, *args, **kwargs)

    trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", count)  # innermost: sees only real forwards
    if overlap:  # both through the library's own install, in its order (the sampler's hook outside the overlap's)
        from toolrl_lib import fast

        config = load_run_config("configs/embedded_gpu.yaml", [*GPU, "fast.overlap_generation=true",
                                                                 f"fast.sampler_logps={str(option).lower()}"])
        config.fast.skip_zero_advantage = False
        holder = fast.install(trainer, config, device="cuda").sampler
    else:
        holder = sampler_logps.install(trainer) if option else None
    rounds: list[dict[str, Any]] = []

    def keep(call: Any, *args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        rounds.append(out)
        return out

    trl_compat.hook(trainer, "_generate_and_score_completions", keep)
    trainer.train()
    return {"trainer": trainer, "engine": engine, "forwards": forwards, "rounds": rounds, "holder": holder}


def _old_and_sampled(round_: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The round's old log-probs over its completion tokens (row after row), and the engine's."""
    mask = round_["completion_mask"].bool()
    return round_["old_per_token_logps"][mask].tolist(), round_["sampling_per_token_logps"][mask].tolist()


def _versions(round_: dict[str, Any]) -> set[int]:
    """The weight versions the round's old log-probs name (``sampled_logprob`` inverted)."""
    old, _ = _old_and_sampled(round_)
    tokens = round_["completion_ids"][round_["completion_mask"].bool()].tolist()
    return {round((-lp - 0.01 * t) / 0.125) for t, lp in zip(tokens, old, strict=True)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return {"plain": _run(tmp_path_factory.mktemp("plain"), option=False),
            "sampler": _run(tmp_path_factory.mktemp("sampler"), option=True),
            "overlap": _run(tmp_path_factory.mktemp("overlap"), option=True, overlap=True)}


def test_doctests():
    assert doctest.testmod(sampler_logps).failed == 0


def test_without_the_option_trl_runs_its_forward_over_each_round(runs):
    plain = runs["plain"]
    assert plain["forwards"] == [8, 8, 8]  # 6 steps: 3 rounds of 4 prompts x 2 completions
    old, sampled = _old_and_sampled(plain["rounds"][0])
    assert max(abs(a - b) for a, b in zip(old, sampled, strict=True)) > 0.1  # the trainer's own forward: not the engine's numbers


@pytest.mark.parametrize("name", ["sampler", "overlap"])
def test_old_logprobs_are_the_engines_and_no_forward_runs(runs, name):
    run = runs[name]
    assert run["forwards"] == []
    assert len(run["rounds"]) == 3 and run["holder"].stats() == {
        "rounds_from_sampler": 3, "rounds_forward": 0, "fallbacks": []}
    for round_ in run["rounds"]:
        old, sampled = _old_and_sampled(round_)
        assert old == pytest.approx(sampled, abs=1e-6)
        assert len(_versions(round_)) == 1  # one weight version per round: the one that sampled it
        assert bool((round_["importance_sampling_ratio"] == 1.0).all())  # (rows, 1): TRL's sequence-level default


def test_prefetched_rounds_carry_the_staler_weights_they_were_sampled_with(runs):
    def versions(run: dict[str, Any]) -> list[set[int]]:
        return [_versions(round_) for round_ in run["rounds"]]

    assert versions(runs["sampler"]) == [{1}, {2}, {3}]
    assert versions(runs["overlap"]) == [{1}, {1}, {2}]  # rounds 1 and 2 generated a round ahead


def test_a_round_with_a_missing_logprob_runs_the_forward_and_is_counted(tmp_path):
    run = _run(tmp_path, option=True, missing=(1,))
    assert run["forwards"] == [8]  # round 1 only
    stats = run["holder"].stats()
    assert stats["rounds_from_sampler"] == 2 and stats["rounds_forward"] == 1
    assert "round of 8 rows at step 2" in stats["fallbacks"][0]
    old, sampled = _old_and_sampled(run["rounds"][1])
    assert sampled[0] != sampled[0]  # the engine's missing value, NaN in TRL's tensor
    assert all(v == v for v in old)
    assert max(abs(a - b) for a, b in zip(old[1:], sampled[1:], strict=True)) > 0.1  # old: the forward's


@pytest.mark.parametrize("overrides, expected", [
    (["grpo.vllm.mode=off"], "grpo.vllm on"),
    ([*GPU, "grpo.vllm.importance_sampling_correction=false"], "importance_sampling_correction true"),
    ([*GPU, "backend=unsloth"], "the peft backend"),
    ([*GPU, "grpo.loss_type=rlsd"], "rlsd"),
])
def test_config_rules(overrides, expected):
    assert expected in refusal("sampler_logps", overrides)


def test_config_accepts_it_with_vllm_and_the_correction():
    config = load_run_config("configs/embedded_gpu.yaml", [*GPU, "fast.sampler_logps=true"])
    assert validate(config).fast.sampler_logps
