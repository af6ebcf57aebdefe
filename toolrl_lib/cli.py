"""The ``toolrl`` command: the same steps the notebooks take, for scripted runs.

Each command group lives in its own module under ``toolrl_lib.commands`` and exposes
``register(subparsers)``; this file only discovers and dispatches them. Heavy imports
(torch, transformers) happen inside the handlers, so ``toolrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import toolrl_lib.commands as commands


class CommandError(RuntimeError):
    """A user-facing failure: printed as one line, exit code 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolrl", description="ToolRL Workbook: RL for LLM tool calling, step by step."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
    except BrokenPipeError:  # `toolrl ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (CommandError, FileNotFoundError, ValueError) as error:
        print(f"toolrl {args.command}: error: {error}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    # Run the importable module's main: under `python -m` this file is __main__, and the
    # CommandError that commands import from toolrl_lib.cli would be a different class.
    from toolrl_lib.cli import main as package_main

    sys.exit(package_main())
