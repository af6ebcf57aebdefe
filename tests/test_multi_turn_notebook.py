"""Notebook 06 (multi-turn RL): clean, parameterised, library calls only, configs that exist."""

import ast

import nbformat
import yaml

from toolrl_lib.paths import project_root

NB = project_root() / "notebooks" / "06_multi_turn_rl.ipynb"


def _parameters():
    nb = nbformat.read(NB, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    tree = ast.parse(cells[0].source)
    return nb, {t.id: ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) for t in node.targets}


def test_multi_turn_notebook_is_narrative_plus_library_calls():
    nb, params = _parameters()
    assert params["profile"] == "smoke" and params["workdir"] == "runs/interactive"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert not cell.get("outputs") and not cell.get("execution_count")
        assert len(cell.source.splitlines()) <= 30
        tree = ast.parse(cell.source)
        assert not any(isinstance(n, ast.FunctionDef | ast.Lambda | ast.ClassDef) for n in ast.walk(tree))
        assert "plt." not in cell.source and "matplotlib" not in cell.source  # plots via library helpers


def test_multi_turn_notebook_workbook_configs_match_parameters():
    _, params = _parameters()
    for profile in ("smoke", "full"):
        config = yaml.safe_load((project_root() / "configs" / "workbook" / profile / "06.yaml").read_text())
        assert set(config) <= set(params), set(config) - set(params)
    for name in ("multi_turn_smoke", "multi_turn_embedded_gpu"):
        from toolrl_lib.train.config import load_run_config

        config = load_run_config(project_root() / "configs" / f"{name}.yaml")
        assert config.multi_turn.enabled and config.backend == "peft"
