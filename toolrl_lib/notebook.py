"""What the workbook notebooks call on every page: ``setup()`` once, ``check()`` for a verdict.

The install step cannot live here: on a bare runtime (Colab) this package is what it installs.
So each notebook starts with the same short cell, ``SETUP_CELL``, that pip-installs the
workbook only where ``toolrl_lib`` is missing and then calls ``setup()``; the tests compare
every notebook's first code cell with it.
"""

from __future__ import annotations

from toolrl_lib.quiet import quiet_known_warnings

SETUP_CELL = '''\
# Set-up. Only where toolrl_lib is missing (a bare Colab runtime) this pip-installs the workbook from
# the checkout around this notebook, else from the pip address YOU set in TOOLRL_SOURCE (git+https://...
# or a path), keeping an installed torch (Colab's CUDA build) at its version. These lines sit in every
# notebook, not in the library, because they are what installs the library.
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("toolrl_lib") is None:
    source = os.path.abspath("..") if os.path.isfile("../pyproject.toml") else os.environ.get("TOOLRL_SOURCE")
    if not source:
        raise RuntimeError("toolrl_lib is not installed and this notebook is not in a checkout: set "
                           "TOOLRL_SOURCE to this repository's pip address (git+https://... or a path)")
    target = f"{source}[notebooks]" if os.path.isdir(source) else f"toolrl-workbook[notebooks] @ {source}"
    keep_torch = [f"torch=={importlib.metadata.version('torch')}"] if importlib.util.find_spec("torch") else []
    print("installing", target)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", target, *keep_torch])

from toolrl_lib.notebook import setup

setup()  # hides only the known-benign library notices listed in toolrl_lib/quiet.py
'''


class CheckFailed(AssertionError):
    """A notebook's check of its own results did not hold (raised after the verdict is shown)."""


def setup() -> None:
    """What every notebook needs once the library is importable: the known-benign library
    notices filtered (``toolrl_lib.quiet``), so executed pages show only what matters.
    Returns nothing, so a notebook cell ending in ``setup()`` displays nothing."""
    quiet_known_warnings()


def check(what: str, passed: bool, detail: str = "") -> None:
    """Print one verdict line, ``PASS  what  (detail)``, and raise ``CheckFailed`` when the
    check did not pass, so a headless run (papermill, ``python -m tools.workbook run``) stops there
    with the same line as its message instead of going on with a broken result.

    ``detail`` says what was expected and what was found, e.g. ``"train 812, val 91 (both > 0)"``.
    """
    verdict = f"{'PASS' if passed else 'FAIL'}  {what}" + (f"  ({detail})" if detail else "")
    print(verdict)
    if not passed:
        raise CheckFailed(verdict)
