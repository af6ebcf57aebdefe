"""Multi-turn rollouts: append-only transcripts, env_mask, batched rounds, rewards, GRPO + resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from toolrl_lib.data.example import Example
from toolrl_lib.envs import get_env, make_tasks
from toolrl_lib.envs.episode import Episode, EpisodeSettings, encode, gold_replies
from toolrl_lib.envs.rewards import EpisodeRewardScheme, episode_reward, make_episode_reward_funcs
from toolrl_lib.envs.rollout import SamplingSettings, new_episodes, run_episodes
from toolrl_lib.prompts import get_adapter

BIG = EpisodeSettings(max_episode_tokens=8192)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from toolrl_lib.models import make_tiny_model

    root = tmp_path_factory.mktemp("mt-tiny")
    model, tokenizer = make_tiny_model(root / "model")
    return root, model, tokenizer


def test_multi_turn_env_mask_covers_exactly_the_injected_tokens(tiny):
    _, _, tokenizer = tiny
    adapter = get_adapter("hermes")
    for task in [t for t in make_tasks("train", 20) if len(t.turns) == 2][:4]:
        episode = Episode(get_env(task.env), task, adapter, tokenizer, BIG)
        fed = []
        for text in gold_replies(task, adapter):
            tokens = encode(tokenizer, text) + [tokenizer.eos_token_id]
            fed.append(tokens)
            episode.feed(tokens)
        assert episode.done and episode.result()["success"]
        mask, ids = episode.env_mask, episode.completion_ids
        assert len(mask) == len(ids) and set(mask) == {0, 1}
        assert [t for t, m in zip(ids, mask, strict=True) if m] == [t for step in fed for t in step]
        runs, current = [], []  # each contiguous run of 1s is exactly one step as fed
        for token, bit in zip(ids, mask, strict=True):
            if bit:
                current.append(token)
            elif current:
                runs.append(current)
                current = []
        runs += [current] if current else []
        assert runs == fed
        # the injected tokens are what the template writes between turns: the transcript equals a
        # fresh render of the whole conversation
        convo = Example(id="x", source="env", messages=episode.messages[:-1], ground_truth=[],
                        tools=get_env(task.env).tool_schemas(Episode(get_env(task.env), task, adapter,
                                                                      tokenizer).session.offered))
        expected = adapter.render_prompt(convo, tokenizer) + episode.messages[-1]["content"] + tokenizer.eos_token
        assert tokenizer.decode(episode.context()) == expected
        assert sum(1 - m for m in mask) > 0  # tool results / the second user turn were injected


def test_multi_turn_rounds_are_batched_and_train_on_sampled_tokens(tiny, monkeypatch):
    import toolrl_lib.generation as generation

    _, model, tokenizer = tiny
    calls, returned = [], {}
    real = generation.decode_group

    def spy(model, prompt_ids, k, max_new_tokens, sampler, stops, pad_id):
        out = real(model, prompt_ids, k, max_new_tokens, sampler, stops, pad_id)
        calls.append(len(prompt_ids))
        for context, tokens in zip(prompt_ids, out, strict=True):
            returned.setdefault(len(context), []).append(tokens)
        return out

    monkeypatch.setattr(generation, "decode_group", spy)
    tasks = make_tasks("val", 6)
    settings = EpisodeSettings(max_new_tokens=6, max_episode_tokens=64, step_limit=2)
    episodes = new_episodes(tasks, get_adapter("hermes"), tokenizer, settings)
    run_episodes(model, tokenizer, episodes, SamplingSettings(batch_size=16), seed=0)
    assert all(e.done for e in episodes)
    assert calls[0] == 6  # the first round decodes every episode in one batch
    assert len(calls) == max(e.steps for e in episodes)  # one batched call per round
    for e in episodes:
        assert len(e.completion_ids) <= 64 and len(e.env_mask) == len(e.completion_ids)
        assert sum(e.env_mask) == sum(len(s) for s in _model_runs(e))


def _model_runs(episode):
    runs, current = [], []
    for token, bit in zip(episode.completion_ids, episode.env_mask, strict=True):
        if bit:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def test_multi_turn_reward_scheme_and_logged_components():
    outcome = {"success": False, "call_credit": 0.5, "turns_passed": 1, "turns": 2, "steps": 4,
               "valid_steps": 3, "forced": 0, "truncated": False, "refused": 1, "model_tokens": 9,
               "injected_tokens": 20}
    assert episode_reward(outcome, EpisodeRewardScheme()) == 0.0
    assert episode_reward(outcome, EpisodeRewardScheme(1.0, 0.5, 0.5)) == pytest.approx(0.5)
    assert episode_reward({**outcome, "success": True}, EpisodeRewardScheme(1.0, 0.0, 0.0)) == 1.0
    logged = {}
    (func,) = make_episode_reward_funcs(EpisodeRewardScheme(1.0, 0.2, 0.0))
    assert func(episode=[outcome, {**outcome, "success": True, "call_credit": 1.0}],
                log_metric=lambda k, v: logged.__setitem__(k, v)) == pytest.approx([0.1, 1.2])
    assert logged["reward/success"] == 0.5 and logged["reward/format"] == 0.75
    assert logged["episode/refused"] == 1.0
    with pytest.raises(ValueError):
        EpisodeRewardScheme(0.0, 0.0, 0.0).check()
    with pytest.raises(ValueError, match="episode"):
        func(completions=["x"])
    # the refusal charge: the share of the episode's calls refused, subtracted; logged as reward/refused
    charged = EpisodeRewardScheme(1.0, 0.5, 0.0, refused=0.2)
    assert episode_reward({**outcome, "calls": 4}, charged) == pytest.approx(0.25 - 0.2 * 1 / 4)
    assert episode_reward({**outcome, "calls": 4, "refused": 0}, charged) == pytest.approx(0.25)
    (func,) = make_episode_reward_funcs(charged)
    func(episode=[{**outcome, "calls": 2}, {**outcome, "calls": 2, "refused": 0}],
         log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged["reward/refused"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="charge"):
        EpisodeRewardScheme(refused=-0.1).check()


def test_the_reward_weights_come_from_the_multi_turn_section():
    import doctest

    import toolrl_lib.envs.rewards
    from toolrl_lib.envs.rewards import scheme_of
    from toolrl_lib.train.config import load_run_config

    found = doctest.testmod(toolrl_lib.envs.rewards)
    assert found.attempted > 0 and found.failed == 0
    config = load_run_config(None, ["multi_turn.enabled=true", "backend=peft", "multi_turn.reward_calls=0.25",
                                    "multi_turn.reward_refused=0.1"])
    assert scheme_of(config.multi_turn) == EpisodeRewardScheme(1.0, 0.25, 0.0, 0.1)


def test_multi_turn_config_rules():
    from toolrl_lib.config import ConfigError
    from toolrl_lib.train.config import load_run_config

    ok = load_run_config(None, ["multi_turn.enabled=true", "backend=peft"])
    assert ok.multi_turn.enabled
    for override, needle in [("multi_turn.environments=[shop]", "unknown environment"),
                             ("multi_turn.kinds=[easy]", "unknown task kind"),
                             ("backend=unsloth", "peft backend only"),
                             ("multi_turn.reward_success=0", "positive sum"),
                             ("multi_turn.reward_refused=-0.1", "a charge")]:
        with pytest.raises(ConfigError, match=needle):
            load_run_config(None, ["multi_turn.enabled=true", override])


def _overrides(root: Path, **extra) -> list[str]:
    base = {
        "model.name": str(root / "model"), "model.family": "hermes", "device": "cpu", "backend": "peft",
        "multi_turn.enabled": "true", "multi_turn.environments": "[bank]", "multi_turn.train_tasks": 4,
        "multi_turn.val_tasks": 2, "multi_turn.max_new_tokens": 6, "multi_turn.max_episode_tokens": 48,
        "multi_turn.step_limit": 2, "grpo.num_generations": 2, "grpo.per_device_train_batch_size": 4,
        "grpo.gradient_accumulation_steps": 1, "grpo.max_completion_length": 48, "grpo.max_steps": 2,
        "grpo.learning_rate": 0.01, "grpo.lr_scheduler_type": "constant", "lora.r": 4, "lora.alpha": 8,
        "checkpoint.save_steps": 1, "logging.progress_bar": "false", "logging.tensorboard": "false",
        "validation.before_training": "false",
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def varied_reward(prompts=None, completions=None, completion_ids=None, episode=None, **kwargs):
    """Differs between samples (a random model never succeeds), so the update is not zero."""
    assert episode is not None and len(episode) == len(completion_ids)  # the rollout's outcomes arrive
    return [float(sum(ids) % 5) for ids in completion_ids]


class StopAfter:
    def __init__(self, step: int) -> None:
        from transformers import TrainerCallback

        class _Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step >= step:
                    control.should_training_stop = True

        self.callback = _Stop()


@pytest.mark.slow
def test_multi_turn_grpo_through_rollout_func_trains_and_resumes(tiny, tmp_path, monkeypatch):
    import pandas as pd
    from safetensors.torch import load_file

    import toolrl_lib.train.multi_turn_rollout as rollout
    from toolrl_lib.train import train
    from toolrl_lib.train.config import load_run_config

    root, _, _ = tiny
    seen = []
    real = rollout.make_rollout_func

    def spying(*args, **kwargs):
        func = real(*args, **kwargs)

        def wrapped(prompts, trainer):
            out = func(prompts, trainer)
            seen.append((list(prompts), out))
            return out

        return wrapped

    monkeypatch.setattr(rollout, "make_rollout_func", spying)
    straight = train(load_run_config(None, _overrides(root)), tmp_path / "a", reward_funcs=[varied_reward])
    assert len(seen) == 2 and all(len(p) == 4 and p[0] == p[1] for p, _ in seen)  # groups of 2
    prompts, out = seen[0]
    assert all(len(m) == len(c) for m, c in zip(out["env_mask"], out["completion_ids"], strict=True))
    assert prompts[0].startswith("bank:") and out["episode"][0]["env"] == "bank"
    metrics = pd.read_csv(straight / "metrics.csv")
    assert list(metrics["step"]) == [1, 2] and "rewards/varied_reward/mean" in metrics
    assert metrics["grad_norm"].abs().sum() > 0
    assert (straight / "episodes" / "final.jsonl").is_file()
    paused = train(load_run_config(None, _overrides(root)), tmp_path / "b", reward_funcs=[varied_reward],
                   callbacks=[StopAfter(1).callback])
    assert list(pd.read_csv(paused / "metrics.csv")["step"]) == [1]
    resumed = train(load_run_config(None, _overrides(root)), tmp_path / "b", resume=True,
                    reward_funcs=[varied_reward])
    a = load_file(straight / "last" / "adapter_model.safetensors")
    b = load_file(resumed / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)  # it learned
    assert all((a[k] - b[k]).abs().max().item() <= 1e-6 for k in a)
    assert list(pd.read_csv(resumed / "metrics.csv")["step"]) == [1, 2]


class _GoldEngine:
    """A stand-in for vllm.LLM: each request continues its transcript with the task's next gold
    reply (found by the transcript's prompt ids), reports log-probs, and sometimes, as vLLM may,
    leaves the stop token out of the ids (finish_reason "stop", stop_reason None)."""

    def __init__(self, tokenizer, episodes, adapter):
        self.tokenizer, self.calls, self.plans = tokenizer, [], {}
        for episode in episodes:
            self.plans[tuple(episode.prompt_ids)] = [encode(tokenizer, text) for text in gold_replies(episode.task, adapter)]
        self.served: dict[tuple, int] = {}

    def generate(self, prompts, params, use_tqdm=False):
        from types import SimpleNamespace

        self.calls.append([p.kwargs for p in params])
        out = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            key = next(k for k in self.plans if tuple(ids[: len(k)]) == k)
            step = self.served.get(key, 0)
            self.served[key] = step + 1
            tokens = self.plans[key][step]
            with_stop = step % 2 == 0
            token_ids = tokens + ([self.tokenizer.eos_token_id] if with_stop else [])
            logprobs = [{t: SimpleNamespace(logprob=-0.5)} for t in token_ids]
            out.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=token_ids, logprobs=logprobs,
                                                                finish_reason="stop", stop_reason=None)]))
        return out


class _Params:
    """vllm.SamplingParams: keeps its keyword arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def vllm_params(monkeypatch):
    """A ``vllm`` module whose only name is SamplingParams (what the rollout step imports)."""
    import sys
    from types import SimpleNamespace

    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(SamplingParams=_Params))


def test_episodes_play_through_a_vllm_engine_with_log_probs(tiny, vllm_params):
    import math

    from toolrl_lib.envs.rollout import vllm_step

    _, model, tokenizer = tiny
    adapter = get_adapter("hermes")
    tasks = [t for t in make_tasks("train", 30) if len(t.turns) == 2][:3]
    episodes = new_episodes(tasks, adapter, tokenizer, BIG)
    engine = _GoldEngine(tokenizer, episodes, adapter)
    sampling = SamplingSettings(temperature=0.7, top_p=0.9)
    run_episodes(None, tokenizer, episodes, sampling, step=vllm_step(engine, tokenizer, sampling, top_k=20))
    assert all(e.done and e.result()["success"] for e in episodes)
    first = engine.calls[0]
    assert len(first) == 3 and {(p["temperature"], p["top_p"], p["top_k"], p["logprobs"]) for p in first} == {(0.7, 0.9, 20, 0)}
    assert all(p["max_tokens"] == BIG.max_new_tokens for p in first)  # each capped by its own budget
    for e in episodes:
        assert len(e.logprobs) == len(e.completion_ids) == len(e.env_mask)
        sampled = [lp for lp, m in zip(e.logprobs, e.env_mask, strict=True) if m]
        assert sampled.count(-0.5) >= len(sampled) - len(e.texts)  # one appended stop token per step at most
        assert all(math.isnan(lp) for lp, m in zip(e.logprobs, e.env_mask, strict=True) if not m)
        ends = [i for i, t in enumerate(e.completion_ids) if t == tokenizer.eos_token_id and e.env_mask[i]]
        assert len(ends) == len(e.texts)  # every step ends on its stop token, given back or not


def test_the_rollout_func_uses_the_colocated_engine(tiny, vllm_params):
    from types import SimpleNamespace

    from toolrl_lib.envs import task_key
    from toolrl_lib.train.multi_turn_rollout import make_rollout_func

    _, model, tokenizer = tiny
    adapter = get_adapter("hermes")
    tasks = [t for t in make_tasks("train", 30) if len(t.turns) == 1][:2]
    engine = _GoldEngine(tokenizer, new_episodes(tasks, adapter, tokenizer, BIG), adapter)
    trainer = SimpleNamespace(processing_class=tokenizer, model=model, use_vllm=True,
                              args=SimpleNamespace(vllm_mode="colocate"),
                              vllm_generation=SimpleNamespace(llm=engine, sync_weights=lambda: None),
                              state=SimpleNamespace(global_step=0), _last_loaded_step=0,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    rollout = make_rollout_func("hermes", BIG, SamplingSettings())
    out = rollout([task_key(t) for t in tasks], trainer)
    assert engine.calls and [r["success"] for r in out["episode"]] == [True, True]
    assert len({r["rollout_s"] for r in out["episode"]}) == 1 and out["episode"][0]["rollout_s"] > 0  # one round
    assert [len(lp) for lp in out["logprobs"]] == [len(ids) for ids in out["completion_ids"]]


def test_multi_turn_validation_runs_every_n_steps_and_keeps_the_best(tiny, tmp_path):
    import pandas as pd

    from toolrl_lib.train import train
    from toolrl_lib.train.config import load_run_config

    root, _, _ = tiny
    run = train(load_run_config(None, _overrides(root, **{"validation.every_steps": 1})), tmp_path / "run",
                reward_funcs=[varied_reward])
    rows = pd.read_csv(run / "validation.csv")
    assert list(zip(rows["step"], rows["stage"], strict=True)) == [(1, "grpo"), (2, "grpo"), (2, "final")]
    assert "success" in rows and any(c.startswith("success_") for c in rows)  # per kind / env columns
    for step in (1, 2):
        assert len((run / "episodes" / f"step-{step}.jsonl").read_text().splitlines()) == 2  # the val tasks
    assert (run / "best" / "adapter_model.safetensors").is_file()


def test_multi_turn_grpo_with_trim_padding_trains_the_same_adapter(tiny, tmp_path):
    """fast.trim_padding on episodes (prompts and episodes of varied length, injected tool tokens
    masked by env_mask): the same adapter as TRL's own forwards up to float rounding, with rounds of
    8 episodes feeding 2 optimizer steps of 2 micro-batches (the sort within a step matters)."""
    from safetensors.torch import load_file

    from toolrl_lib.train import train
    from toolrl_lib.train.config import load_run_config

    root, _, _ = tiny
    runs = {}
    for trim in ("false", "true"):
        extra = {"fast.trim_padding": trim, "grpo.loss_type": "dapo", "grpo.per_device_train_batch_size": 2,
                 "grpo.gradient_accumulation_steps": 2, "grpo.generation_batch_size": 8,
                 "multi_turn.environments": "[bank,inbox]", "validation.enabled": "false"}
        runs[trim] = train(load_run_config(None, _overrides(root, **extra)), tmp_path / trim,
                           reward_funcs=[varied_reward])
    a = load_file(runs["false"] / "last" / "adapter_model.safetensors")
    b = load_file(runs["true"] / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)
    for key in a:  # Adam: rounding differences reach ~1e-5 of a 0.01 step; a wrong row or column ~1e-2
        assert torch.allclose(a[key], b[key], atol=1e-4), (key, (a[key] - b[key]).abs().max())
