"""End-to-end GRPO runs on a tiny random model (CPU, seconds): artefacts, loss types, resume.

The resume test kills a training subprocess with SIGKILL right after a mid-run checkpoint,
resumes it, and compares final adapter weights and metrics with an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from toolrl_lib.data.example import Example, write_jsonl

pytestmark = pytest.mark.slow

WEATHER = {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}},
                   "required": ["city"]},
}
CITIES = ["Paris", "Oslo", "Lima", "Rome", "Kyiv", "Doha"]


def toy_examples(n: int, offset: int = 0) -> list[Example]:
    return [
        Example(id=f"toy-{offset + i}", source="synthetic",
                messages=[{"role": "user", "content": f"Weather in {CITIES[i % len(CITIES)]}?"}],
                tools=[WEATHER],
                ground_truth=[{"name": "get_weather", "arguments": {"city": CITIES[i % len(CITIES)]}}])
        for i in range(n)
    ]


def write_tiny_setup(root: Path, train: int = 16) -> Path:
    """The tiny model and toy train/val splits under ``root`` (the tiny runs' inputs)."""
    from toolrl_lib.models import make_tiny_model

    make_tiny_model(root / "model")
    write_jsonl(toy_examples(train), root / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), root / "val.jsonl")
    return root


@pytest.fixture(scope="module")
def tiny_setup(tmp_path_factory):
    return write_tiny_setup(tmp_path_factory.mktemp("tiny"))


def tiny_overrides(root: Path, **extra: object) -> list[str]:
    base = {
        "model.name": str(root / "model"), "model.family": "hermes", "device": "cpu", "backend": "peft",
        "data.train_files": f"[{root / 'train.jsonl'}]", "data.val_files": f"[{root / 'val.jsonl'}]",
        "grpo.num_generations": 2, "grpo.per_device_train_batch_size": 4,
        "grpo.gradient_accumulation_steps": 1, "grpo.max_completion_length": 8, "grpo.max_steps": 2,
        "grpo.learning_rate": 0.01, "lora.r": 4, "lora.alpha": 8, "validation.k": 2,
        "validation.num_examples": 2, "validation.max_new_tokens": 8, "validation.every_steps": 0,
        "checkpoint.save_steps": 2, "logging.progress_bar": "false", "logging.tensorboard": "false",
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def assert_same_training(straight: Path, resumed: Path, steps: int):
    """The resumed run ends with the uninterrupted run's adapter (within 1e-6) and metrics rows
    (step times aside); returns the uninterrupted run's metrics."""
    import pandas as pd
    from safetensors.torch import load_file

    a = load_file(straight / "last" / "adapter_model.safetensors")
    b = load_file(resumed / "last" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)  # it learned
    for key in a:
        assert (a[key] - b[key]).abs().max().item() <= 1e-6, key
    ma, mb = pd.read_csv(straight / "metrics.csv"), pd.read_csv(resumed / "metrics.csv")
    assert list(ma["step"]) == list(mb["step"]) == list(range(1, steps + 1))  # each step once
    columns = [c for c in ma.columns if c != "step_time"]
    pd.testing.assert_frame_equal(ma[columns], mb[columns], check_exact=False, rtol=1e-5, atol=1e-6)
    return ma


def length_reward(prompts, completions, **kwargs):
    """Varies across samples, so groups have non-zero advantage (the real rewards are flat
    for a random model)."""
    return [float(len(c) % 5) for c in completions]


def test_run_directory_contract_with_priming_and_filtering(tiny_setup, tmp_path):
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config(None, tiny_overrides(
        tiny_setup, **{"priming.enabled": "true", "priming.max_steps": 2, "priming.batch_size": 4,
                       "priming.num_examples": 8, "filtering.enabled": "true", "filtering.k": 2,
                       "filtering.max_new_tokens": 8, "filtering.drop_never_solved": "false",
                       "validation.every_steps": 1, "data.oversample_kinds.simple": 2}))
    run = train(config, tmp_path / "run")
    for name in ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "data_report.json"):
        assert (run / name).is_file(), name
    for folder in ("best", "last"):
        assert (run / folder / "adapter_config.json").is_file()
        assert (run / folder / "adapter_model.safetensors").is_file()
        assert (run / folder / "tokenizer_config.json").is_file()
    assert (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").is_file()
    info = json.loads((run / "run_info.json").read_text())
    assert info["primed"] is True and info["base_model"] == str(run / "primed_model")
    assert info["family"] == "hermes" and info["backend"] == "peft" and info["seed"] == 0
    assert (run / "primed_model" / "config.json").is_file()
    adapter_cfg = json.loads((run / "last" / "adapter_config.json").read_text())
    assert adapter_cfg["base_model_name_or_path"] == str(run / "primed_model")

    import pandas as pd

    metrics = pd.read_csv(run / "metrics.csv")
    assert list(metrics["step"]) == [1, 2]
    for column in ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
                   "clip_ratio/region_mean", "learning_rate", "step_time", "reward/format",
                   "reward/name", "reward/args"):
        assert column in metrics.columns, column
    validation = pd.read_csv(run / "validation.csv")
    assert list(validation["stage"]) == ["base", "primed", "grpo", "grpo", "final"]
    assert "binary_mean@2" in validation.columns and "weighted_mean@2" in validation.columns
    report = json.loads((run / "data_report.json").read_text())
    assert report["filtering"]["total"] == 16
    grpo = report["grpo_dataset"]  # oversampling runs after filtering: every kept prompt twice
    assert grpo["kept"] + sum(grpo["dropped"].values()) == 2 * report["filtering"]["kept"]
    assert grpo["kinds"] == {"simple": grpo["kept"]}
    with pytest.raises(ValueError, match="--resume"):
        train(config, tmp_path / "run")  # never overwrite a finished run silently


@pytest.mark.parametrize(("loss", "beta"), [("gspo", 0.0), ("dr_grpo", 0.1)])
def test_loss_types_and_kl(tiny_setup, tmp_path, loss, beta):
    import pandas as pd

    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config(None, tiny_overrides(
        tiny_setup, **{"grpo.loss_type": loss, "grpo.beta": beta, "grpo.max_steps": 1,
                       "validation.enabled": "false", "grpo.scale_rewards": "none"}))
    run = train(config, tmp_path / "run", reward_funcs=[length_reward])
    metrics = pd.read_csv(run / "metrics.csv")
    assert ("kl" in metrics.columns) == (beta > 0)
    assert metrics["frac_reward_zero_std"].iloc[0] < 1.0
    assert (run / "best" / "adapter_model.safetensors").is_file()  # best = last without validation


def test_merged_generation_rolls_out_merged_and_trains_lora(tiny_setup, tmp_path, monkeypatch):
    import json as json_

    import toolrl_lib.fast.merged_generation as mg
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    entered = []
    real = mg.lora_merged

    def spy(model):
        from peft.tuners.lora import LoraLayer

        entered.append(sum(1 for m in model.modules() if isinstance(m, LoraLayer) and m.disable_adapters))
        return real(model)

    monkeypatch.setattr(mg, "lora_merged", spy)
    config = load_run_config(None, tiny_overrides(
        tiny_setup, **{"fast.merged_generation": "true", "fast.generation_times": "true",
                       "validation.enabled": "false"}))
    run = train(config, tmp_path / "run", reward_funcs=[length_reward])
    assert len(entered) == 2 and entered == [0, 0]  # one merged rollout per step, adapters on before
    rows = [json_.loads(line) for line in (run / "generation_times.rank0.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and all(r["completions"] == 4 for r in rows)
    assert (run / "last" / "adapter_model.safetensors").is_file()


SCRIPT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from transformers import TrainerCallback
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    out, pause_step, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    overrides = sys.argv[4:]

    def length_reward(prompts, completions, **kwargs):
        return [float(len(c) % 5) for c in completions]

    class Pause(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == pause_step:
                Path(out, "PAUSED").write_text(str(state.global_step))
                time.sleep(600)

    config = load_run_config(None, overrides)
    train(config, out, resume=resume, callbacks=[Pause()], reward_funcs=[length_reward])
''')


def _start(script: Path, out: Path, pause: int, resume: bool, overrides: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, str(script), str(out), str(pause), "1" if resume else "0",
                             *overrides], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _finish(proc: subprocess.Popen) -> None:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]


@pytest.mark.timeout(1800)  # three subprocesses; slow on a loaded 2-core box
def test_sigkill_then_resume_matches_uninterrupted_run(tiny_setup, tmp_path):
    import pandas as pd

    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT)
    overrides = tiny_overrides(tiny_setup, **{"grpo.max_steps": 6, "checkpoint.save_steps": 2,
                                              "validation.every_steps": 3})
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    _finish(_start(script, straight, -1, False, overrides))

    proc = _start(script, killed, 4, False, overrides)
    deadline = time.time() + 600
    while not (killed / "PAUSED").exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline, "run never reached the checkpoint at step 4"
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "last").exists()  # really stopped mid-run
    assert (killed / "checkpoints" / "checkpoint-4").is_dir()
    (killed / "PAUSED").unlink()
    _finish(_start(script, killed, -1, True, overrides))

    ma = assert_same_training(straight, killed, steps=6)
    assert (ma["grad_norm"] > 0).any()
    va, vb = pd.read_csv(straight / "validation.csv"), pd.read_csv(killed / "validation.csv")
    cols = [c for c in va.columns if c != "seconds"]
    pd.testing.assert_frame_equal(va[cols], vb[cols], check_exact=False, rtol=1e-5, atol=1e-6)


def test_run_directory_copied_elsewhere_merges_and_evaluates(tiny_setup, tmp_path):
    """run_info.json records the primed base by its absolute training-time path; after the run
    folder moves (another machine, another disk) merge and evaluation find the base inside it."""
    import shutil

    from toolrl_lib import merge
    from toolrl_lib.evaluate import backends
    from toolrl_lib.run_dir import read_run_info, run_base
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config(None, tiny_overrides(
        tiny_setup, **{"priming.enabled": "true", "priming.max_steps": 1, "priming.batch_size": 4,
                       "priming.num_examples": 4, "grpo.max_steps": 1,
                       "validation.enabled": "false"}))
    trained = train(config, tmp_path / "box_a" / "run", reward_funcs=[length_reward])  # it learns
    recorded = read_run_info(trained).base_model
    copy = tmp_path / "box_b" / "copied_run"
    shutil.copytree(trained, copy)
    shutil.rmtree(tmp_path / "box_a")  # the training machine's paths are gone
    assert not Path(recorded).exists()
    assert run_base(copy) == str(copy / "primed_model")
    assert backends.adapter_base(str(copy / "last")) == str(copy / "primed_model")
    report = merge.merge_run(copy, "last", tmp_path / "merged", options=merge.MergeOptions(
        dtype="fp32", device="cpu", n_generations=1, max_new_tokens=4))
    assert report.passed and Path(report.base_model) == copy / "primed_model"
    loaded = backends.load_for_eval(str(copy / "last"), backend="hf", max_new_tokens=4, dtype="fp32")
    merged = backends.load_for_eval(str(tmp_path / "merged"), backend="hf", max_new_tokens=4, dtype="fp32")
    prompt = ["Weather in Oslo?"]
    assert loaded.complete(prompt) == merged.complete(prompt)


def test_loss_mmap_threshold_changes_memory_not_the_adapter(tiny_setup, tmp_path, monkeypatch):
    """fast.loss_mmap_threshold (toolrl_lib/fast/loss_memory.py) only moves blocks between the
    heap and their own mappings: the same adapter, bit for bit; TRL's rollout phase is hooked."""
    from safetensors.torch import load_file

    from toolrl_lib.fast import loss_memory
    from toolrl_lib.fast.memory import GLIBC_MAX_MMAP_THRESHOLD
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    calls = []
    real = loss_memory.set_mmap_threshold
    monkeypatch.setattr(loss_memory, "set_mmap_threshold", lambda n: calls.append(n) or real(n))
    adapters = []
    for threshold in (0, 2**18):
        config = load_run_config(None, tiny_overrides(tiny_setup, **{
            "fast.loss_mmap_threshold": threshold, "grpo.max_steps": 2, "validation.enabled": "false"}))
        run = train(config, tmp_path / f"t{threshold}", reward_funcs=[length_reward])
        adapters.append(load_file(str(run / "last" / "adapter_model.safetensors")))
    a, b = adapters
    assert a.keys() == b.keys() and any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)
    assert all(bool((a[k] == b[k]).all()) for k in a)
    # set for the loss, lifted for each of the 2 rollouts and set again after it, reset at the end
    assert calls == [2**18, *[GLIBC_MAX_MMAP_THRESHOLD, 2**18] * 2, GLIBC_MAX_MMAP_THRESHOLD]
