"""Training on several processes through accelerate: the launch command and who does what.

``toolrl train --num-gpus N`` re-runs the same ``toolrl train`` command under
``accelerate launch`` (torchrun underneath); nothing here is a distributed engine of its own.
Inside the launched processes ``Dist`` says which rank we are and whether parameters are
sharded (DeepSpeed ZeRO-3, FSDP), because that decides what rank 0 may do alone:

- DDP / ZeRO-2: every rank holds full weights, so rank 0 can generate (validation) and
  save alone while the others wait at the next collective.
- ZeRO-3 / FSDP: each rank holds a shard; a rank-0-only ``generate`` would wait forever
  for the other shards. Periodic validation is refused there (before/after validation
  loads the saved model fresh on rank 0 and is fine), and saving is a collective.

Accelerate 1.15 on CPU: ``--cpu --num_processes 2`` starts ONE process (it expects mpirun
for more), so CPU runs use ``--multi_gpu`` (torchrun) and the trainer's ``use_cpu`` picks gloo.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrl_lib.train.config import RunConfig, world_size

ACCELERATE_CONFIG_DIR = Path("configs/accelerate")


@dataclass(frozen=True)
class Dist:
    """This process's place in the run (world_size 1 = plain single-process training)."""

    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    engine: str = "single"  # single | ddp | deepspeed-zero<stage> | fsdp

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def sharded(self) -> bool:
        """Parameters split over ranks: no rank holds the whole model outside a collective."""
        return self.engine in ("deepspeed-zero3", "fsdp")

    def barrier(self) -> None:
        if self.world_size > 1:
            from accelerate import PartialState

            PartialState().wait_for_everyone()

    def say(self, *args: Any, **kwargs: Any) -> None:
        """print on rank 0 only: N processes must not print every line N times."""
        if self.main:
            print(*args, **kwargs, flush=True)


def engine_from_env(env: dict[str, str] | None = None) -> str:
    """Which engine ``accelerate launch`` set up, read from the variables it exports."""
    env = dict(os.environ) if env is None else env
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return f"deepspeed-zero{env.get('ACCELERATE_DEEPSPEED_ZERO_STAGE', '2')}"
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "fsdp"
    return "ddp" if world_size() > 1 else "single"


def init(device: str) -> Dist:
    """Join the process group (when launched with several processes) and describe this rank.

    Creating accelerate's ``PartialState`` now, before any model loads, sets the CUDA device
    of this rank, so ``model.to("cuda")`` lands on the rank's own GPU."""
    size = world_size()
    if size == 1:
        return Dist()
    from accelerate import PartialState

    state = PartialState(cpu=device == "cpu")
    return Dist(world_size=state.num_processes, rank=state.process_index,
                local_rank=state.local_process_index, engine=engine_from_env())


def check_supported(config: RunConfig, dist: Dist) -> None:
    """Refuse combinations that would deadlock or silently do the wrong thing on N ranks."""
    if dist.world_size == 1:
        return
    problems = []
    if config.backend == "unsloth":
        problems.append("backend 'unsloth' runs on one GPU only; use backend: peft (or auto) "
                        "for several processes")
    if dist.sharded:
        if config.lora.enabled:
            problems.append(f"{dist.engine} shards parameters, which this project supports for full "
                            "fine-tuning only: set lora.enabled=false, or train LoRA with "
                            "configs/accelerate/ddp.yaml or zero2.yaml")
        if config.validation.enabled and config.validation.every_steps > 0:
            problems.append(f"validation.every_steps={config.validation.every_steps}: periodic "
                            f"validation generates on rank 0 alone, which deadlocks when {dist.engine} "
                            "shards the weights; set validation.every_steps=0 (before/after "
                            "validation still runs, on the saved model)")
        if config.grpo.loss_type == "rlsd" and config.rlsd.teacher == "trust_region":
            problems.append("rlsd.teacher='trust_region' keeps an EMA copy of full parameters, "
                            f"which {dist.engine} does not hold; use rlsd.teacher=live or ddp.yaml")
    if problems:
        raise ValueError("not supported with several processes:\n  - " + "\n  - ".join(problems))


# ------------------------------------------------------------------------- launching


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train_argv(config_path: str, overrides: list[str], out: str, resume: bool) -> list[str]:
    """The ``toolrl train`` arguments each launched process gets (no --num-gpus: no re-launch)."""
    argv = ["--config", config_path]
    for item in overrides:
        argv += ["--set", item]
    argv += ["--out", out]
    return argv + (["--resume"] if resume else [])


def config_machines(accelerate_config: str | None) -> int:
    if accelerate_config is None:
        return 1
    import yaml

    data = yaml.safe_load(Path(accelerate_config).read_text(encoding="utf-8")) or {}
    return int(data.get("num_machines", 1) or 1)


def launch_command(
    argv: list[str], num_processes: int, accelerate_config: str | None = None, cpu: bool = False,
    port: int | None = None,
) -> list[str]:
    """``python -m accelerate.commands.launch ... -m toolrl_lib.commands.train <argv>``.

    The entry is ``toolrl_lib.commands.train`` (= ``toolrl train``), not ``-m toolrl_lib.cli``:
    run as ``__main__``, cli.py's ``CommandError`` would be a second class that its own
    handler does not catch, so user errors would end in tracebacks on every rank.
    Without a config file: plain DDP on this host (``--multi_gpu``; on CPU that is gloo).
    ``num_processes`` is the total over all machines, as accelerate counts it."""
    if num_processes < 2:
        raise ValueError(f"--num-gpus must be >= 2 to launch several processes, got {num_processes}")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(num_processes)]
    if accelerate_config is not None:
        if not Path(accelerate_config).is_file():
            raise FileNotFoundError(f"--accelerate-config {accelerate_config}: no such file "
                                    f"(ready ones are in {ACCELERATE_CONFIG_DIR}/)")
        cmd += ["--config_file", str(accelerate_config)]
    else:
        # Defaults spelled out so accelerate neither warns nor reads ~/.cache/huggingface configs;
        # precision comes from the run config (the trainer sets it), hence "no" here.
        cmd += ["--multi_gpu", "--num_machines", "1", "--mixed_precision", "no",
                "--dynamo_backend", "no", "--main_process_port", str(port or free_port())]
    if cpu:
        cmd += ["--num_cpu_threads_per_process", "1"]
    return cmd + ["-m", "toolrl_lib.commands.train", *argv]


def launch(
    argv: list[str], num_processes: int, accelerate_config: str | None, device: str,
) -> int:
    """Run ``toolrl train`` on ``num_processes`` processes; return accelerate's exit code."""
    import subprocess

    cpu = device == "cpu"
    if not cpu and config_machines(accelerate_config) == 1:
        import torch

        found = torch.cuda.device_count()
        if num_processes > found:
            raise ValueError(f"--num-gpus {num_processes} but this host has {found} CUDA device(s)")
    cmd = launch_command(argv, num_processes, accelerate_config, cpu=cpu)
    print("launching:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


def restore_optimizer_on_cpu(trainer: Any) -> None:
    """Let ``--resume`` work for several CPU processes (gloo: the CI test, a laptop).

    With more than one process, transformers loads the optimizer state with
    ``map_location=args.device``; on CPU that device is ``cpu:0``, a location ``torch.load``
    cannot restore to ("don't know how to restore data location ... cpu:0"). While the trainer
    loads its optimizer and scheduler, such a location is read as plain ``"cpu"``. GPUs (``cuda:N``)
    and single-process runs are left alone."""
    from toolrl_lib.fast.trl_compat import hook, torch_load_on_plain_cpu

    def load(call: Any, checkpoint: Any) -> Any:
        if checkpoint is None or trainer.args.world_size <= 1 or trainer.args.device.type != "cpu":
            return call(checkpoint)
        with torch_load_on_plain_cpu():
            return call(checkpoint)

    hook(trainer, "_load_optimizer_and_scheduler", load)
