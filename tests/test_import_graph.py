"""The import graph of ``toolrl_lib``: no circles, and the environments stand without the trainer.

Why this test exists. A circle of imports means none of its modules can be read, tested or reused
without all the others, and which one Python imports first starts to matter (a half-initialised
module). ``toolrl_lib/envs`` is the world a multi-turn policy acts in; a learner must be able to
read it, and a test to run it, without the training code, so it imports nothing from
``toolrl_lib.train``.

The graph is built from the sources with ``ast``, never by importing them: that is fast, needs no
torch, and sees the imports inside functions too (a lazy import hides a circle from Python at
start-up, not from a reader). What counts as an edge:

- ``import toolrl_lib.a.b`` and ``from toolrl_lib.a.b import name`` point at ``toolrl_lib.a.b``;
  ``from toolrl_lib.a import b`` points at the submodule ``toolrl_lib.a.b`` when that is a module
  or package, else at ``toolrl_lib.a`` (``b`` is then a name defined in its ``__init__``).
- Relative imports are resolved against the importing module (a package's ``__init__`` is the
  package itself).
- Imports in the body of ``if TYPE_CHECKING:`` are left out: they never run.
- The parent packages Python initialises on the way to a submodule are not edges: every submodule
  of a package that re-exports its modules would otherwise form a circle with it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO / "toolrl_lib"

Graph = dict[str, set[str]]


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module and package under ``package_dir``."""
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (or any ``<module>.TYPE_CHECKING``)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.Module) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: anywhere in the file, except ``if TYPE_CHECKING:`` bodies."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:  # the `else:` branch does run
                skipped.update(id(inner) for inner in ast.walk(statement))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            yield node


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement reads from."""
    if node.level == 0:
        return node.module or ""
    anchor = module.split(".") if is_package else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (None: not ours)."""
    while name not in modules:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def import_graph(package_dir: Path) -> Graph:
    """Module -> the modules of the same package it imports (see the module docstring)."""
    modules = module_files(package_dir)
    graph: Graph = {name: set() for name in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _source_module(module, is_package, node)
                targets = [f"{source}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _known(target, modules)
                if resolved is not None and resolved != module:
                    graph[module].add(resolved)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of two or more modules (Tarjan, iterative).

    Each group is every module that can reach every other one through imports, sorted; see
    ``shortest_circle`` for one path through it that a reader can follow.
    """
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = lowlink[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = lowlink[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    lowlink[node] = min(lowlink[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[node])
            if lowlink[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def shortest_circle(group: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest circle from the group's first module back to it, inside the group (breadth first)."""
    members = set(group)
    start = group[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, ())):
                if successor not in members:
                    continue
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
                if successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise ValueError(f"not a circle: {group}")


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


# --- the graph builder on synthetic packages (these must pass before and after any refactor) ---


def test_a_lazy_relative_import_closes_a_circle(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def later():\n    from .a import thing\n    return thing\n",
        "pkg/c.py": "import pkg.a\n",
    })
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"}  # `from pkg import b` names the submodule
    assert graph["pkg.b"] == {"pkg.a"}  # the import inside a function counts
    assert circles(graph) == [["pkg.a", "pkg.b"]]
    assert shortest_circle(["pkg.a", "pkg.b"], graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_type_checking_imports_are_ignored_but_their_else_branch_is_not(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "pkg/__init__.py": "VERSION = 1\n",
        "pkg/a.py": (
            "from typing import TYPE_CHECKING\n"
            "import typing\n"
            "if TYPE_CHECKING:\n    from pkg.b import B\n"
            "if typing.TYPE_CHECKING:\n    import pkg.b\n"
            "else:\n    from pkg import VERSION\n"
        ),
        "pkg/b.py": "from pkg.a import helper\n",
    })
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg"}  # `VERSION` is a name in pkg/__init__.py, not a module
    assert graph["pkg.b"] == {"pkg.a"}
    assert circles(graph) == []


def test_a_longer_circle_is_found_whole_and_followed_as_a_path(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from ..c import go\n",
        "pkg/c.py": "from pkg.d import x\n",
        "pkg/d.py": "from . import sub\n",
        "pkg/e.py": "import os\nimport pkg.c\n",
    })
    graph = import_graph(package)
    assert circles(graph) == [["pkg.c", "pkg.d", "pkg.sub"]]  # pkg.e only leads into it
    assert shortest_circle(["pkg.c", "pkg.d", "pkg.sub"], graph) == [
        "pkg.c", "pkg.d", "pkg.sub", "pkg.c"
    ]


# --- the acceptance checks on toolrl_lib itself ---


def test_toolrl_lib_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE_DIR)
    found = circles(graph)
    assert not found, "import circles in toolrl_lib:\n" + "\n".join(
        f"  {len(group)} modules: {', '.join(group)}\n"
        f"    e.g. {' -> '.join(shortest_circle(group, graph))}"
        for group in found
    )


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_envs_import_nothing_from_train() -> None:
    graph = import_graph(PACKAGE_DIR)
    envs = [module for module in graph if _within(module, "toolrl_lib.envs")]
    if not envs:
        pytest.fail("toolrl_lib/envs is gone: this test and docs/LAYOUT.md need a look")
    offending = sorted(
        f"{module} -> {target}"
        for module in envs
        for target in graph[module]
        if _within(target, "toolrl_lib.train")
    )
    assert not offending, "toolrl_lib.envs imports toolrl_lib.train:\n  " + "\n  ".join(offending)
