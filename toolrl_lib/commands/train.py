"""``toolrl train --config PATH [--set key=value ...] [--resume] [--out DIR] [--num-gpus N]``."""

from __future__ import annotations

import argparse
import os


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="GRPO-train a LoRA adapter or the full model (optional format priming first)",
        description="GRPO-train from a run config (configs/smoke.yaml, ...), on one or several GPUs.",
        add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-h", "--help", action=_HelpWithSettings, nargs=0,
                        help="show this help, with every config setting (--set KEY=VALUE), and exit")
    parser.add_argument("--config", required=True, help="run config YAML (e.g. configs/smoke.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set grpo.max_steps=10 (repeatable)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in the run directory")
    parser.add_argument("--out", default=None,
                        help="run directory (default: runs/<config name>)")
    parser.add_argument("--check", action="store_true",
                        help="only load and validate the config, print it, and exit")
    parser.add_argument("--num-gpus", type=int, default=1, metavar="N",
                        help="N > 1: re-launch this command on N processes through accelerate "
                             "(one per GPU; on a CPU-only config, N gloo processes)")
    parser.add_argument("--accelerate-config", default=None, metavar="YAML",
                        help="accelerate config for --num-gpus (configs/accelerate/ddp.yaml, "
                             "zero2.yaml, zero3.yaml, fsdp.yaml); default: plain DDP on this host")
    parser.set_defaults(handler=run)


class _HelpWithSettings(argparse.Action):
    """``--help`` that lists every run-config setting with its default and the help text kept
    in the config dataclasses' field metadata (read only when help is asked for)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from toolrl_lib.train.config import settings_help

        lines = [f"  {key} = {default}" + (f"\n      {text}" if text else "")
                 for key, default, text in settings_help()]
        parser.epilog = "run config settings (--set KEY=VALUE):\n" + "\n".join(lines)
        parser.print_help()
        parser.exit()


def run(args: argparse.Namespace) -> int:
    import yaml

    from toolrl_lib.train.config import load_run_config

    if args.num_gpus < 1:
        raise ValueError(f"--num-gpus must be >= 1, got {args.num_gpus}")
    if args.accelerate_config and args.num_gpus == 1:
        raise ValueError("--accelerate-config needs --num-gpus N (N >= 2)")
    # Batch rules depend on the number of processes: check them for the world we will launch.
    # (inside launched processes num_gpus is 1 and WORLD_SIZE says how many there are)
    processes = args.num_gpus if args.num_gpus > 1 else None
    config = load_run_config(args.config, args.overrides, processes=processes)
    if args.check:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
        return 0
    from toolrl_lib.cli import CommandError

    out = args.out or f"runs/{config.name}"
    if args.num_gpus > 1:
        from toolrl_lib.fast.vllm_engine import require_for_run
        from toolrl_lib.train.backend import resolve_device
        from toolrl_lib.train.distributed import launch, train_argv

        if config.backend == "unsloth":
            raise ValueError("backend 'unsloth' runs on one GPU only; use --set backend=peft "
                             "with --num-gpus")
        device = resolve_device(config.device)
        require_for_run(config, device)  # once here, not once per launched rank
        code = launch(train_argv(args.config, args.overrides, out, args.resume), args.num_gpus,
                      args.accelerate_config, device)
        if code != 0:
            raise CommandError(f"the {args.num_gpus}-process run failed (exit code {code}); "
                               f"its log is above, checkpoints in {out}/checkpoints")
        return 0  # rank 0 has printed the run directory
    from toolrl_lib.train import train
    from toolrl_lib.train.trainer import TrainingStopped

    try:
        run_dir = train(config, out, resume=args.resume)
    except TrainingStopped as error:
        raise CommandError(str(error)) from error
    if os.environ.get("RANK", "0") == "0":  # launched ranks: say it once
        print(f"run directory: {run_dir}")
    return 0


if __name__ == "__main__":  # what `toolrl train --num-gpus N` launches on each rank
    import sys

    from toolrl_lib.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
