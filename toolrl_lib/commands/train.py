"""``toolrl train --config PATH [--set key=value ...] [--resume] [--out DIR]``."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="GRPO-train a LoRA adapter (optional format priming first)",
        description="GRPO-train a LoRA adapter from a run config (configs/smoke.yaml, ...).",
    )
    parser.add_argument("--config", required=True, help="run config YAML (e.g. configs/smoke.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set grpo.max_steps=10 (repeatable)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in the run directory")
    parser.add_argument("--out", default=None,
                        help="run directory (default: runs/<config name>)")
    parser.add_argument("--check", action="store_true",
                        help="only load and validate the config, print it, and exit")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from toolrl_lib.train.config import load_run_config

    config = load_run_config(args.config, args.overrides)  # ConfigError is a ValueError
    if args.check:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
        return 0
    from toolrl_lib.cli import CommandError
    from toolrl_lib.train.run import TrainingStopped, train

    out = args.out or f"runs/{config.name}"
    try:
        run_dir = train(config, out, resume=args.resume)
    except TrainingStopped as error:
        raise CommandError(str(error)) from error
    print(f"run directory: {run_dir}")
    return 0
