"""Build workbook notebooks from cell sources (used when authoring notebooks, and in tests).

Every notebook starts with the same set-up cell (installs this package from the checkout, or
from the address in ``TOOLRL_SOURCE``, when it is not importable; a no-op where it is installed),
then a cell tagged ``parameters`` for papermill.
"""

from __future__ import annotations

from pathlib import Path

SETUP_CELL = '''\
# Set-up. Where toolrl_lib is importable (README commands, CI) this cell installs nothing.
# Otherwise it pip-installs this workbook from the checkout the notebook sits in (../pyproject.toml)
# or, with only the notebook at hand (e.g. Colab), from the pip address YOU set in the environment
# variable TOOLRL_SOURCE (a git URL such as "git+https://github.com/<owner>/<repo>", or a path).
# An installed torch (Colab's CUDA build) is pinned to its version, so it is never replaced.
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile

if importlib.util.find_spec("toolrl_lib") is None:
    checkout = os.path.abspath("..")
    in_checkout = os.path.isfile(os.path.join(checkout, "pyproject.toml"))
    source = checkout if in_checkout else os.environ.get("TOOLRL_SOURCE", "")
    if not source:
        raise RuntimeError("toolrl_lib is not installed and this notebook is not in a checkout: set "
                           "TOOLRL_SOURCE to this repository's pip address (git+https://... or a path)")
    local = os.path.isdir(source)
    target = f"{source}[notebooks]" if local else f"toolrl-workbook[notebooks] @ {source}"
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
        if importlib.util.find_spec("torch") is not None:
            pins.write(f"torch=={importlib.metadata.version('torch')}\\n")
    print("installing", target)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "-c", pins.name, target])

from toolrl_lib.quiet import quiet_known_warnings

quiet_known_warnings()  # hides only the known-benign library notices listed in toolrl_lib/quiet.py
'''


def build_notebook(path: str | Path, cells: list[tuple[str, str]]) -> Path:
    """Write a notebook. ``cells`` are ``(kind, source)`` with kind ``md``, ``code`` or
    ``params`` (the papermill parameters cell); the set-up cell is inserted after the
    first markdown cell. No outputs are written."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    out = []
    setup_added = False
    for kind, source in cells:
        source = source.strip("\n")
        if kind == "md":
            out.append(nbformat.v4.new_markdown_cell(source))
        elif kind in ("code", "params"):
            if not setup_added:
                out.append(nbformat.v4.new_code_cell(SETUP_CELL.strip("\n")))
                setup_added = True
            cell = nbformat.v4.new_code_cell(source)
            if kind == "params":
                cell.metadata["tags"] = ["parameters"]
            out.append(cell)
        else:
            raise ValueError(f"unknown cell kind {kind!r}; use md, code or params")
    nb.cells = out
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index:02d}"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
