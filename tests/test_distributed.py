"""Several training processes through accelerate: launch command, refusals, full fine-tuning,
and one real 2-process (gloo, CPU) GRPO run through ``toolrl train --num-gpus 2``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_train_run import assert_same_training, tiny_overrides, tiny_setup  # noqa: F401  (shared tiny-run helpers; tiny_setup is a fixture)

from toolrl_lib.config import ConfigError
from toolrl_lib.train.distributed import (
    Dist,
    check_supported,
    engine_from_env,
    launch_command,
    train_argv,
)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------- launch command


def test_train_argv_drops_launch_flags_and_keeps_the_rest():
    argv = train_argv("configs/smoke.yaml", ["grpo.max_steps=3", "seed=1"], "runs/x", resume=True)
    assert argv == ["--config", "configs/smoke.yaml", "--set", "grpo.max_steps=3",
                    "--set", "seed=1", "--out", "runs/x", "--resume"]
    assert "--num-gpus" not in train_argv("c.yaml", [], "o", resume=False)


def test_launch_command_default_is_ddp_on_this_host():
    cmd = launch_command(["--config", "c.yaml"], 2, port=29555)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "2"
    assert "--multi_gpu" in cmd and "--config_file" not in cmd
    assert cmd[cmd.index("--main_process_port") + 1] == "29555"
    assert cmd[-4:] == ["-m", "toolrl_lib.commands.train", "--config", "c.yaml"]
    assert "--cpu" not in launch_command(["train"], 2, cpu=True)  # --cpu would start ONE process


def test_launch_command_with_config_file_lets_the_file_decide(tmp_path):
    config = REPO / "configs" / "accelerate" / "zero3.yaml"
    cmd = launch_command(["train"], 4, str(config))
    assert cmd[cmd.index("--config_file") + 1] == str(config)
    assert cmd[cmd.index("--num_processes") + 1] == "4"
    assert "--multi_gpu" not in cmd and "--main_process_port" not in cmd  # the file's port wins
    with pytest.raises(FileNotFoundError, match="configs/accelerate"):
        launch_command(["train"], 2, str(tmp_path / "missing.yaml"))
    with pytest.raises(ValueError, match=">= 2"):
        launch_command(["train"], 1)


@pytest.mark.parametrize("name", ["ddp", "zero2", "zero3", "fsdp", "multi_host_ddp"])
def test_accelerate_configs_parse_as_accelerate_configs(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO / "configs" / "accelerate" / f"{name}.yaml"))
    expected = {"ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED", "fsdp": "FSDP",
                "multi_host_ddp": "MULTI_GPU"}[name]
    assert str(config.distributed_type).endswith(expected)
    if name == "zero3":
        assert config.deepspeed_config["zero_stage"] == 3
    if name == "multi_host_ddp":
        assert config.num_machines == 2 and config.main_process_ip


def test_engine_from_env(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert engine_from_env({}) == "ddp"
    assert engine_from_env({"ACCELERATE_USE_DEEPSPEED": "true",
                            "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}) == "deepspeed-zero3"
    assert engine_from_env({"ACCELERATE_USE_FSDP": "true"}) == "fsdp"
    assert Dist(2, 0, 0, "deepspeed-zero3").sharded and not Dist(2, 0, 0, "deepspeed-zero2").sharded


# ------------------------------------------------------------------------- what is refused


def test_cli_refuses_unsloth_and_bad_counts_before_launching(capsys):
    from toolrl_lib.cli import main

    assert main(["train", "--config", "configs/smoke.yaml", "--set", "backend=unsloth",
                 "--set", "fast.rollouts=trl", "--num-gpus", "2"]) == 2
    assert "unsloth" in capsys.readouterr().err
    assert main(["train", "--config", "configs/smoke.yaml", "--num-gpus", "0"]) == 2
    assert "--num-gpus must be >= 1" in capsys.readouterr().err
    # batch rules are checked for the launched world size: 8 completions x 3 processes = 24,
    # not divisible by 5 generations
    assert main(["train", "--config", "configs/smoke.yaml", "--set", "grpo.num_generations=5",
                 "--num-gpus", "3", "--check"]) == 2
    assert "processes (3)" in capsys.readouterr().err


def test_sharded_engines_refuse_lora_periodic_validation_and_ema_teacher():
    from toolrl_lib.train.config import load_run_config

    sharded = Dist(world_size=2, rank=0, local_rank=0, engine="fsdp")
    config = load_run_config(None, ["validation.every_steps=5"])
    with pytest.raises(ValueError) as error:
        check_supported(config, sharded)
    assert "lora.enabled=false" in str(error.value) and "validation.every_steps=5" in str(error.value)
    ok = load_run_config(None, ["lora.enabled=false", "validation.every_steps=0"])
    check_supported(ok, sharded)  # full FT without periodic validation: fine
    check_supported(config, Dist(world_size=2, rank=1, local_rank=1, engine="ddp"))  # DDP: fine
    with pytest.raises(ValueError, match="one GPU only"):
        check_supported(load_run_config(None, ["backend=unsloth"]), Dist(2, 0, 0, "ddp"))


def test_full_finetuning_config_rules():
    from toolrl_lib.train.backend import resolve_backend
    from toolrl_lib.train.config import load_run_config

    config = load_run_config(None, ["lora.enabled=false", "backend=peft"])
    assert config.lora.enabled is False
    with pytest.raises(ConfigError, match=r"lora.enabled = False: full fine-tuning .* backend 'peft'"):
        load_run_config(None, ["lora.enabled=false", "backend=unsloth"])
    with pytest.raises(ConfigError, match="lora.enabled"):
        load_run_config(None, ["lora.enabled=maybe"])
    assert resolve_backend("auto", "cpu", processes=2, lora=False) == "peft"
    with pytest.raises(ValueError, match="one GPU only"):
        resolve_backend("unsloth", "cuda", processes=2)  # refused before any CUDA/unsloth check


def test_single_process_env_for_priming_leaves_the_group():
    from toolrl_lib.train.priming import single_process_env

    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_PORT": "1",
           "ACCELERATE_USE_DEEPSPEED": "true", "FSDP_SHARDING_STRATEGY": "1", "PATH": "/bin",
           "CUDA_VISIBLE_DEVICES": "4,5"}
    out = single_process_env(env, "cuda", local_rank=1)
    assert out == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "5"}
    assert single_process_env({"RANK": "0"}, "cuda", 0) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "CUDA_VISIBLE_DEVICES" not in single_process_env({"RANK": "0"}, "cpu", 0)


# ------------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def tiny_data(tiny_setup):  # noqa: F811 (the fixture imported above)
    """test_train_run's tiny model + toy data, plus a minimal run config file for the CLI."""
    (tiny_setup / "run.yaml").write_text("name: dist\n", encoding="utf-8")
    return tiny_setup


def test_full_finetuning_saves_full_model_folders(tiny_data, tmp_path):
    import pandas as pd
    from safetensors.torch import load_file

    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config(None, tiny_overrides(tiny_data, **{"lora.enabled": "false",
                                                                "grpo.max_steps": 1}))
    run = train(config, tmp_path / "run", reward_funcs=[lambda completions, **k: [
        float(len(c) % 5) for c in completions]])
    for folder in ("last", "best"):
        assert (run / folder / "config.json").is_file(), folder
        assert not (run / folder / "adapter_config.json").exists()
    trained = load_file(run / "last" / "model.safetensors")
    start = load_file(tiny_data / "model" / "model.safetensors")
    assert any((trained[k].float() - start[k].float()).abs().max() > 0 for k in start)  # all weights
    assert json.loads((run / "run_info.json").read_text())["lora"] is False
    assert list(pd.read_csv(run / "validation.csv")["stage"]) == ["base", "final"]


def _toolrl_train(data: Path, out: Path, *extra: str, overrides: dict | None = None) -> str:
    sets = []
    for item in tiny_overrides(data, **(overrides or {})):
        sets += ["--set", item]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "toolrl_lib.cli", "train", "--config",
                           str(data / "run.yaml"), *sets, "--out", str(out), "--num-gpus", "2",
                           *extra], env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


@pytest.mark.timeout(900)  # one 2-process run: ~40 s on 2 idle cores
def test_two_gloo_processes_train_validate_and_save_once(tiny_data, tmp_path):
    import pandas as pd

    out = tmp_path / "run"
    overrides = {"validation.every_steps": 1, "priming.enabled": "true", "priming.max_steps": 2,
                 "priming.batch_size": 4, "priming.num_examples": 8, "checkpoint.save_steps": 1,
                 "fast.generation_times": "true"}
    log = _toolrl_train(tiny_data, out, overrides=overrides)
    assert log.count("GRPO (dapo, backend peft, LoRA") == 1, log[-3000:]  # rank 0 speaks alone
    assert log.count("format priming:") == 1 and log.count("  final (saved last/)") == 1
    info = json.loads((out / "run_info.json").read_text())
    assert info["processes"] == 2 and info["engine"] == "ddp"
    assert info["global_batch"] == 4 * 2  # per_device_train_batch_size x 2 processes
    assert (out / "primed_model" / "priming.json").is_file()
    assert (out / "last" / "adapter_model.safetensors").is_file()
    assert (out / "best" / "adapter_model.safetensors").is_file()
    assert list(pd.read_csv(out / "metrics.csv")["step"]) == [1, 2]
    validation = pd.read_csv(out / "validation.csv")
    assert list(zip(validation["step"], validation["stage"], strict=True)) == [
        (0, "base"), (0, "primed"), (1, "grpo"), (2, "grpo"), (2, "final")]
    # both ranks' RNG states are checkpointed, so --resume restores each rank (HF Trainer)
    assert {p.name for p in (out / "checkpoints" / "checkpoint-2").glob("rng_state_*.pth")} == {
        "rng_state_0.pth", "rng_state_1.pth"}
    from toolrl_lib.fast.gen_timing import read_generation_times, straggler_table

    rows = read_generation_times(out)  # each rank wrote its own rounds: 4 completions per step
    assert {(r["rank"], r["step"], r["completions"], r["method"]) for r in rows} == {
        (rank, step, 4, "_generate_single_turn") for rank in (0, 1) for step in (0, 1)}
    assert [(t["step"], t["ranks"]) for t in straggler_table(rows)] == [(0, 2), (1, 2)]


RESUME_SCRIPT = """
import json, sys
from toolrl_lib.train.config import load_run_config
from toolrl_lib.train.run import train

def length_reward(prompts, completions, **kwargs):  # varies: the random tiny model's real rewards are flat
    return [float(len(c) % 5) for c in completions]

overrides, out, resume = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3] == "resume"
train(load_run_config(None, overrides), out, resume=resume, reward_funcs=[length_reward])
"""


def _launch_two(script: Path, overrides: list[str], out: Path, resume: bool) -> str:
    """The script on 2 gloo processes, launched as `toolrl train --num-gpus 2` launches itself."""
    from toolrl_lib.train.distributed import free_port

    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--multi_gpu",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "--num_cpu_threads_per_process", "1",
           str(script), json.dumps(overrides), str(out), "resume" if resume else "start"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


@pytest.mark.timeout(1500)  # three 2-process runs
def test_two_process_resume_matches_an_uninterrupted_run(tiny_data, tmp_path):
    """2 steps, then resume to 3, equals 3 steps straight: optimizer, scheduler, both ranks'
    RNG and the data position come back (on CPU too: restore_optimizer_on_cpu)."""
    script = tmp_path / "train_two.py"
    script.write_text(RESUME_SCRIPT, encoding="utf-8")
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    every_step = {"checkpoint.save_steps": 1}
    _launch_two(script, tiny_overrides(tiny_data, **every_step, **{"grpo.max_steps": 3}), straight, False)
    _launch_two(script, tiny_overrides(tiny_data, **every_step, **{"grpo.max_steps": 2}), resumed, False)
    log = _launch_two(script, tiny_overrides(tiny_data, **every_step, **{"grpo.max_steps": 3}), resumed, True)
    assert "checkpoint-2" in log, log[-3000:]
    assert_same_training(straight, resumed, steps=3)  # rank 0 wrote each step once


def test_cpu_optimizer_restore_maps_cpu_n_to_cpu(monkeypatch):
    """transformers asks torch.load for map_location=args.device ("cpu:0") with several
    processes; the wrapper reads that as "cpu" and leaves GPUs and one process alone."""
    from types import SimpleNamespace

    import torch

    from toolrl_lib.train.distributed import restore_optimizer_on_cpu

    seen = []

    def fake_load(*args, **kwargs):
        seen.append(kwargs.get("map_location"))

    monkeypatch.setattr(torch, "load", fake_load)

    def make(world_size, device):
        trainer = SimpleNamespace(args=SimpleNamespace(world_size=world_size, device=torch.device(device)))
        trainer._load_optimizer_and_scheduler = lambda checkpoint: torch.load("optimizer.pt",
                                                                             map_location=trainer.args.device)
        restore_optimizer_on_cpu(trainer)
        return trainer

    make(2, "cpu:0")._load_optimizer_and_scheduler("ckpt")
    make(2, "cuda:1")._load_optimizer_and_scheduler("ckpt")
    make(1, "cpu")._load_optimizer_and_scheduler("ckpt")
    assert [str(m) for m in seen] == ["cpu", "cuda:1", "cpu"]
    assert torch.load is fake_load  # put back after the call


def test_final_validation_loads_outside_zero3():
    """After a ZeRO-3 run rank 0 alone loads last/: from_pretrained must no longer see a
    registered ZeRO-3 config (it would partition the weights over ranks that never come)."""
    import weakref

    from transformers.integrations import deepspeed as hf_deepspeed

    from toolrl_lib.train.run import leave_zero3_loading

    class Zero3Config:
        def is_zero3(self) -> bool:
            return True

    config = Zero3Config()
    hf_deepspeed._hf_deepspeed_config_weak_ref = weakref.ref(config)
    try:
        assert hf_deepspeed.is_deepspeed_zero3_enabled()
        leave_zero3_loading()
        assert not hf_deepspeed.is_deepspeed_zero3_enabled()
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = None
