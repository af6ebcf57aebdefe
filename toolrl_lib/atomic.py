"""Atomic saves: a folder or file is written under a staging name next to its final place and
renamed into place only when complete, so a crash never leaves half a checkpoint that looks whole.
The one implementation behind every save of the run directory, priming and merge."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def staging_path(folder: Path) -> Path:
    """The staging sibling of ``folder`` (``<name>.tmp``), emptied."""
    staging = Path(folder).parent / (Path(folder).name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def replace_dir(staging: Path, folder: Path) -> Path:
    """Move the complete ``staging`` folder to ``folder``; an old ``folder`` is renamed aside
    first and removed only after the new one is in place."""
    folder = Path(folder)
    old = None
    if folder.exists():
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        folder.rename(old)
    Path(staging).rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return folder


@contextmanager
def staged_dir(folder: str | Path) -> Iterator[Path]:
    """``with staged_dir(out) as tmp: <write into tmp>``: on success ``tmp`` replaces ``out``;
    on an exception ``out`` is untouched and ``tmp`` is removed. ``tmp`` does not exist yet
    (``save_pretrained`` and ``copytree`` create it)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_path(folder)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_dir(staging, folder)


def copy_dir(src: str | Path, dst: str | Path) -> Path:
    """Copy the folder ``src`` to ``dst`` through a staging folder (``dst`` is replaced whole)."""
    with staged_dir(dst) as staging:
        shutil.copytree(src, staging)
    return Path(dst)


def write_text(path: str | Path, text: str) -> Path:
    """Write a text file through ``<name>.tmp`` + rename (readers never see a partial file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
