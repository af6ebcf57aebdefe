"""``docs/LAYOUT.md`` is the module map of the project; this test keeps it true.

A map that names modules which are gone, or misses new ones, misleads the reader it was written
for. So: every module and subpackage under ``toolrl_lib/`` must be named in ``docs/LAYOUT.md`` as
a backticked path (``toolrl_lib/train/run.py``, a package with a trailing slash:
``toolrl_lib/train/rlsd/``), and every backticked path there under ``toolrl_lib/``, ``tools/``,
``tests/fixtures/`` or ``benchmarks/`` must exist. A failure lists the lines to add or remove.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "docs" / "LAYOUT.md"
CHECKED_ROOTS = ("toolrl_lib/", "tools/", "tests/fixtures/", "benchmarks/")
PATH_IN_BACKTICKS = re.compile(r"`((?:toolrl_lib|tools|tests/fixtures|benchmarks)/[^`\s]*)`")


def library_entries(package_dir: Path) -> set[str]:
    """``toolrl_lib/...`` paths of every module (``x.py``) and subpackage (``x/``), relative to the repo."""
    entries: set[str] = set()
    for path in package_dir.rglob("*.py"):
        relative = path.relative_to(package_dir.parent).as_posix()
        if path.name == "__init__.py":
            if path.parent != package_dir:
                entries.add(relative.removesuffix("__init__.py"))
        else:
            entries.add(relative)
    return entries


def named_paths(text: str) -> set[str]:
    """The repository paths a layout text names in backticks, under the checked roots."""
    return set(PATH_IN_BACKTICKS.findall(text))


def _exists(relative: str) -> bool:
    path = REPO / relative
    return path.is_dir() if relative.endswith("/") else path.exists()


def test_library_entries_and_named_paths_on_a_synthetic_tree(tmp_path: Path) -> None:
    package = tmp_path / "toolrl_lib"
    (package / "sub").mkdir(parents=True)
    for relative in ("__init__.py", "a.py", "sub/__init__.py", "sub/b.py"):
        (package / relative).write_text("", encoding="utf-8")
    assert library_entries(package) == {"toolrl_lib/a.py", "toolrl_lib/sub/", "toolrl_lib/sub/b.py"}
    text = "- `toolrl_lib/a.py` — a\n- `tools/site.py`, `configs/x.yaml`, `toolrl_lib/sub/` — b\n"
    assert named_paths(text) == {"toolrl_lib/a.py", "tools/site.py", "toolrl_lib/sub/"}


def test_every_library_module_is_in_the_layout() -> None:
    missing = sorted(library_entries(REPO / "toolrl_lib") - named_paths(LAYOUT.read_text("utf-8")))
    assert not missing, "docs/LAYOUT.md misses these (add one line each):\n" + "\n".join(
        f"- `{entry}` — ..." for entry in missing
    )


def test_every_path_in_the_layout_exists() -> None:
    named = named_paths(LAYOUT.read_text("utf-8"))
    assert any(entry.startswith(CHECKED_ROOTS[0]) for entry in named), "no toolrl_lib path named"
    extra = sorted(entry for entry in named if not _exists(entry))
    assert not extra, "docs/LAYOUT.md names paths that do not exist (fix or remove):\n" + "\n".join(
        f"  {entry}" for entry in extra
    )
