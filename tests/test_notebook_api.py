"""What the notebooks rely on (``toolrl_lib.notebook``) and what they may say and import: only the
public library, no test fixtures, no tracker references, a shown verdict instead of a bare
``assert``, and every ``toolrl_lib`` name they import or cite existing."""

from __future__ import annotations

import ast
import importlib
import json
import logging
import re
from pathlib import Path

import pytest

from toolrl_lib.notebook import SETUP_CELL, CheckFailed, check, setup
from toolrl_lib.paths import project_root
from toolrl_lib.quiet import KNOWN_NOTICES

NOTEBOOKS = sorted((project_root() / "notebooks").glob("*.ipynb"))
TRACKER = re.compile(r"issue\s*#?\d+|(?<![\w&])#\d{2,}\b", re.IGNORECASE)
CITED = re.compile(r"`(toolrl_lib(?:[./]\w+)+)")


def _cells(path: Path) -> list[tuple[str, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def _code(path: Path) -> list[str]:
    return [source for kind, source in _cells(path) if kind == "code"]


def _resolves(dotted: str) -> bool:
    """True when ``a.b.c`` is a module or a module's attribute chain (``a.b`` + ``.c``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def test_check_prints_a_pass_verdict_and_returns_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("rows were kept", True, "train 5, val 1") is None
    assert capsys.readouterr().out == "PASS  rows were kept  (train 5, val 1)\n"


def test_failed_check_shows_its_verdict_then_stops_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CheckFailed, match=r"^FAIL  rows were kept  \(train 0, val 0\)$"):
        check("rows were kept", False, "train 0, val 0")
    assert capsys.readouterr().out == "FAIL  rows were kept  (train 0, val 0)\n"
    assert issubclass(CheckFailed, AssertionError)  # what a bare assert raised before


def test_setup_drops_exactly_the_known_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    logger_name, prefix, _why = KNOWN_NOTICES[0]
    logger = logging.getLogger(logger_name)
    monkeypatch.setattr(logger, "filters", list(logger.filters))  # other tests see no filter

    def record(message: str) -> logging.LogRecord:
        return logger.makeRecord(logger_name, logging.WARNING, __file__, 1, message, None, None)

    assert setup() is None  # a cell ending in setup() displays nothing
    assert not logger.filter(record(prefix + " (as transformers words it)"))
    assert logger.filter(record("an unexpected warning"))


def test_setup_cell_calls_the_library_setup() -> None:
    last = ast.parse(SETUP_CELL).body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last) == "setup()"
    assert "from toolrl_lib.notebook import setup" in SETUP_CELL
    assert "TOOLRL_SOURCE" in SETUP_CELL and "torch==" in SETUP_CELL  # the Colab path, torch kept


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_uses_the_public_library_only(path: Path) -> None:
    for index, source in enumerate(_code(path)):
        where = f"{path.name} code cell {index}"
        assert "toolrl_lib.testing" not in source and "tests.fixtures" not in source, \
            f"{where}: imports test fixtures"
        assert "__import__(" not in source, f"{where}: __import__ (write a plain import)"
        tree = ast.parse(source)
        asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert not asserts, f"{where}: bare assert on line {asserts[0]} (use toolrl_lib.notebook.check)"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolrl_lib"):
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                private = [n for n in names if any(p.startswith("_") for p in n.split("."))]
                assert not private, f"{where}: imports private {private}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_speaks_of_its_subject_not_the_tracker(path: Path) -> None:
    for index, (kind, source) in enumerate(_cells(path)):
        found = TRACKER.search(source)
        assert not found, f"{path.name} {kind} cell {index}: {found.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_library_name_a_notebook_imports_or_cites_exists(path: Path) -> None:
    """Moves inside the library must carry the notebooks along: imports and the names their
    text cites (`toolrl_lib.x.y`, `toolrl_lib/x/y.py`) resolve, without running a cell."""
    wanted: set[str] = set()
    imported: dict[str, str] = {}  # local name -> dotted library name, for `merge.merge_run` uses
    for kind, source in _cells(path):
        for cited in CITED.findall(source):
            wanted.add(cited.removesuffix(".py").replace("/", ".") if "/" in cited else cited)
        if kind != "code":
            continue
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolrl_lib"):
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in imported:
                wanted.add(f"{imported[node.value.id]}.{node.attr}")
    wanted.update(imported.values())
    missing = sorted(name for name in wanted if not _resolves(name))
    assert not missing, f"{path.name} names what the library lacks: {missing}"
