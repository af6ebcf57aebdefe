"""``toolrl sft --config PATH --out DIR [--set key=value ...] [--resume]``: the SFT warm start."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sft", help="supervised warm start: SFT on the ground truth (assistant tokens only), resumable",
        description=(
            "SFT over data.train_files (loss on the assistant's tokens only), LoRA or full "
            "fine-tuning (sft.method), evaluated on data.val_files every sft.eval_steps steps; the "
            "model with the lowest eval loss goes to DIR/model (a full folder for model.name), "
            "the record to DIR/sft.json. With sft.time_budget_s it saves and stops in time, and "
            "--resume continues from DIR/checkpoints. The sft.* settings: `toolrl train --help`."),
    )
    parser.add_argument("--config", required=True, help="run config YAML (its sft: section)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (checkpoints/, model/, sft.json)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set sft.method=full (repeatable)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in DIR/checkpoints (a finished "
                             "run is left as it is)")
    parser.add_argument("--check", action="store_true",
                        help="only load and validate the config, print its sft section, and exit")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import json

    import yaml

    from toolrl_lib.train.config import load_run_config, validate_sft

    config = validate_sft(load_run_config(args.config, args.overrides, check=False))
    if args.check:
        print(yaml.safe_dump({"sft": config.to_dict()["sft"]}, sort_keys=False), end="")
        return 0
    from toolrl_lib.train.sft import sft

    info = sft(config, args.out, resume=args.resume)
    summary = {k: info[k] for k in ("finished", "steps", "max_steps", "epochs_done", "best_step",
                                    "best_eval_loss", "seconds")}
    print(json.dumps(summary))
    if not info["finished"]:
        print(f"stopped at step {info['steps']} of {info['max_steps']}: continue with --resume")
    return 0
