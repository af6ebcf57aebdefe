"""Build workbook notebooks from cell sources (used when authoring notebooks, and in tests).

Every notebook starts with the same set-up cell (installs this package on Colab or a fresh
GPU box, a no-op where it is installed), then a cell tagged ``parameters`` for papermill.
"""

from __future__ import annotations

from pathlib import Path

SETUP_CELL = '''\
# Set-up: on Colab or a fresh GPU box, install toolrl_lib from this repository.
# Where the package is already installed (README commands, CI) it installs nothing.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("toolrl_lib") is None:
    checkout = os.path.abspath("..")
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        target = f"{checkout}[notebooks]"
    else:  # e.g. Colab with only the notebook uploaded
        repo = os.environ.get("TOOLRL_REPO", "https://github.com/toolrl/toolrl-workbook")
        target = f"toolrl-workbook[notebooks] @ git+{repo}"
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", target])
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
