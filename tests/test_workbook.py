"""The workbook runner (papermill) on throwaway notebooks, and the hygiene of the real ones."""

import ast
import json
import subprocess
import sys

import nbformat
import pytest

from tests.fixtures.nbbuild import build_notebook
from toolrl_lib.notebook import SETUP_CELL
from toolrl_lib.paths import project_root
from tools import workbook


def _make(folder, name, body):
    build_notebook(
        folder / name,
        [("md", f"# {name}"), ("params", 'profile = "smoke"\nworkdir = "runs/interactive"'),
         ("code", body)],
    )


def test_runs_in_order_and_injects_parameters(tmp_path):
    nbs = tmp_path / "nbs"
    _make(nbs, "97_first.ipynb", "from pathlib import Path\nPath(workdir, 'first.txt').write_text(profile)")
    _make(nbs, "98_second.ipynb", "from pathlib import Path\nassert Path(workdir, 'first.txt').read_text() == 'smoke'")
    results = workbook.run_workbook("smoke", notebooks_dir=nbs, workdir=tmp_path / "run", log=lambda *_: None)
    assert [r.notebook for r in results] == ["97_first.ipynb", "98_second.ipynb"]
    executed = nbformat.read(tmp_path / "run" / "98_second.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and str(tmp_path / "run") in injected[0].source  # outside the project: as given


def test_workdir_inside_the_project_is_injected_relative(tmp_path, monkeypatch):
    """Papermill writes the injected parameters and its own metadata into the executed copy, which
    the site publishes: a workdir inside the project goes in relative to the project root, and
    the notebook still finds it (``resolve``) from the kernel's working directory."""
    monkeypatch.setenv("TOOLRL_ROOT", str(tmp_path))
    nbs = tmp_path / "notebooks"
    _make(nbs, "97_write.ipynb", "from toolrl_lib.paths import resolve\n"
                                 "(resolve(workdir) / 'out.txt').write_text(workdir)")
    results = workbook.run_workbook("smoke", notebooks_dir=nbs, workdir=tmp_path / "runs" / "r1",
                                    log=lambda *_: None)
    assert results[0].parameters["workdir"] == "runs/r1"
    assert (tmp_path / "runs" / "r1" / "out.txt").read_text() == "runs/r1"
    executed = (tmp_path / "runs" / "r1" / "97_write.ipynb").read_text()
    assert str(tmp_path) not in executed
    papermill = json.loads(executed)["metadata"]["papermill"]
    assert (papermill["input_path"], papermill["output_path"]) == (
        "notebooks/97_write.ipynb", "runs/r1/97_write.ipynb")


def test_display_path_is_relative_inside_the_project_only(tmp_path, monkeypatch):
    from toolrl_lib.paths import display_path

    monkeypatch.setenv("TOOLRL_ROOT", str(tmp_path / "checkout"))
    assert display_path(tmp_path / "checkout" / "runs" / "r1" / "grpo") == "runs/r1/grpo"
    assert display_path("runs/r1") == "runs/r1"  # already relative to the project root
    assert display_path(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")


def test_failure_names_notebook_and_cell_and_keeps_partial(tmp_path):
    nbs = tmp_path / "nbs"
    _make(nbs, "97_ok.ipynb", "x = 1")
    _make(nbs, "98_broken.ipynb", "print('before')\nraise RuntimeError('boom in cell')")
    _make(nbs, "99_never.ipynb", "x = 2")
    with pytest.raises(workbook.NotebookFailed) as info:
        workbook.run_workbook("smoke", notebooks_dir=nbs, workdir=tmp_path / "run", log=lambda *_: None)
    message = str(info.value)
    assert "98_broken.ipynb" in message and "RuntimeError: boom in cell" in message
    assert info.value.cell_index is not None and f"cell {info.value.cell_index}" in message
    partial = nbformat.read(tmp_path / "run" / "98_broken.ipynb", as_version=4)
    outputs = [o for c in partial.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("before" in o.get("text", "") for o in outputs)
    assert not (tmp_path / "run" / "99_never.ipynb").exists()


def test_cli_exit_code_on_failure(tmp_path, monkeypatch):
    def fail(**kwargs):
        raise workbook.NotebookFailed(tmp_path / "03_x.ipynb", tmp_path / "o.ipynb", 4, "ValueError: bad")

    monkeypatch.setattr(workbook, "run_workbook", fail)
    assert workbook.main(["run", "--only", "03"]) == 1


def test_select_and_profiles():
    paths = [project_root() / "notebooks" / n for n in ("01_a.ipynb", "03_b.ipynb")]
    assert workbook.select_notebooks(paths, ["3"]) == paths[1:]
    with pytest.raises(ValueError, match="no notebook numbered 07"):
        workbook.select_notebooks(paths, ["07"])
    with pytest.raises(ValueError, match="unknown profile"):
        workbook.profile_parameters("huge", "01")


def test_cli_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "toolrl_lib.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "model" in out.stdout and "workbook" not in out.stdout  # course tooling: tools.workbook


def test_workbook_module_lists_the_notebooks():
    out = subprocess.run([sys.executable, "-m", "tools.workbook", "list"], capture_output=True,
                         text=True, cwd=project_root())
    assert out.returncode == 0, out.stderr
    assert [line.split(":")[0] for line in out.stdout.splitlines()] == [p.name for p in NOTEBOOKS]


# --- hygiene of the committed notebooks ----------------------------------------------------

NOTEBOOKS = workbook.list_notebooks()


def _assigned_names(source: str) -> set[str]:
    return {t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_clean_and_parameterised(path):
    nb = json.loads(path.read_text())
    ids = [c.get("id") for c in nb["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), "every cell needs a unique id (nbformat 4.5)"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in code), "commit without outputs"
    assert "".join(code[0]["source"]).strip() == SETUP_CELL.strip(), "first code cell must be the set-up cell"
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    names = _assigned_names("".join(params[0]["source"]))
    assert {"profile", "workdir"} <= names
    for profile in workbook.PROFILES:
        injected = set(workbook.profile_parameters(profile, path.name[:2]))
        assert injected <= names, f"configs/workbook/{profile}/{path.name[:2]}.yaml sets unknown {injected - names}"
    text = path.read_text().lower()
    for secret in ("hf_token =", "wandb_api_key =", "api_key ="):
        assert secret not in text, f"secrets come from the environment, not parameters ({secret})"


@pytest.mark.notebooks
@pytest.mark.timeout(3600)
def test_whole_workbook_runs_in_smoke_profile(tmp_path):
    results = workbook.run_workbook("smoke", workdir=tmp_path / "run")
    assert [r.notebook for r in results] == [p.name for p in NOTEBOOKS]


def _code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_code_is_calls_into_the_library(path):
    """Notebook code cells stay short and hold no function definitions or plotting code:
    logic and figures live in toolrl_lib (the set-up cell, which installs it, excepted)."""
    for index, cell in enumerate(_code_cells(path)):
        lines = cell.source.splitlines()
        where = f"{path.name} code cell {index}"
        assert len(lines) <= 30, f"{where}: {len(lines)} lines (at most 30)"
        tree = ast.parse(cell.source)
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                          | ast.ClassDef | ast.Lambda)]
        assert not defs, f"{where}: defines {type(defs[0]).__name__} (move it into toolrl_lib)"
        imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                    for alias in n.names} | {n.module for n in ast.walk(tree)
                                             if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(name.startswith(("matplotlib", "seaborn")) for name in imported), \
            f"{where}: plots inline (use a toolrl_lib plotting helper)"


def test_setup_cell_without_checkout_or_address_says_what_to_set(tmp_path):
    """Outside a checkout and without TOOLRL_SOURCE the set-up cell installs nothing from a
    made-up address: it stops and names the variable to set."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    work = tmp_path / "nb"
    work.mkdir()
    # -I -S: no site-packages, so toolrl_lib is not importable, as on a bare Colab runtime
    out = subprocess.run([sys.executable, "-I", "-S", "-c", SETUP_CELL], cwd=work, env=env,
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "RuntimeError" in out.stderr and "TOOLRL_SOURCE" in out.stderr
    assert "installing" not in out.stdout
