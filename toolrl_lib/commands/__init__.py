"""One module per ``toolrl`` command group; each defines ``register(subparsers)``.

Handlers receive the parsed ``argparse.Namespace`` and return an exit code (or None = 0).
Raise ``ValueError``/``FileNotFoundError``/``toolrl_lib.cli.CommandError`` for user errors:
the CLI prints them as one line and exits with code 2.
"""
