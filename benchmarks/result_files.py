"""The two files a CPU benchmark leaves in ``benchmarks/results``: its figures as JSON, and a
markdown table with a note and the command that reproduces it (one owner for that layout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_result(out: Path, name: str, data: dict[str, Any], table: list[str], note: str, command: str) -> None:
    """``out/<name>.json`` (``data``) and ``out/<name>.md`` (``table``, then ``note``, then ``command``).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_result(Path(folder), "x", {"a": 1}, ["| a |", "| --- |", "| 1 |"], "One row.", "python -m x")
    ...     print((Path(folder) / "x.md").read_text())
    | a |
    | --- |
    | 1 |
    <BLANKLINE>
    One row.
    <BLANKLINE>
    ```bash
    python -m x
    ```
    <BLANKLINE>
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / f"{name}.md").write_text("\n".join([*table, "", note, "", "```bash", command, "```", ""]))


__all__ = ["write_result"]
