"""Build workbook notebooks from cell sources (used when authoring notebooks, and in tests).

Every notebook starts with the same set-up cell (``toolrl_lib.notebook.SETUP_CELL``: installs
this package from the checkout, or from the address in ``TOOLRL_SOURCE``, when it is not
importable; a no-op where it is installed), then a cell tagged ``parameters`` for papermill.
"""

from __future__ import annotations

from pathlib import Path

from toolrl_lib.notebook import SETUP_CELL


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
