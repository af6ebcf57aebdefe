"""Where things live. Notebooks run with cwd = notebooks/ (JupyterLab) or the repo root
(papermill via ``python -m tools.workbook run``), so every path goes through ``project_root()``."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout root: ``$TOOLRL_ROOT``, else the nearest parent with our pyproject.toml,
    else the current directory (an installed package used outside a checkout)."""
    env = os.environ.get("TOOLRL_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            pyproject = folder / "pyproject.toml"
            if pyproject.is_file() and "toolrl-workbook" in pyproject.read_text(encoding="utf-8"):
                return folder
    return Path.cwd()


def resolve(path: str | os.PathLike[str]) -> Path:
    """A path relative to the project root (absolute paths pass through)."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else project_root() / path


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a reader should see it: relative to the project root when it lies inside
    (``runs/20260101-120000/grpo``), so that printed outputs and executed notebooks carry no
    absolute path of the machine that ran them; other paths unchanged."""
    path = Path(path)
    try:
        return str(resolve(path).resolve().relative_to(project_root().resolve()))
    except ValueError:
        return str(path)


def figures_dir() -> Path:
    folder = project_root() / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def processed_data_dir(profile: str) -> Path:
    return project_root() / "data" / "processed" / profile


def configs_dir() -> Path:
    return project_root() / "configs"
