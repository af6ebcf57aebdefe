"""Notebook 05 is saved without outputs and its workbook configs only set real parameters."""

import ast

import nbformat
import yaml

from toolrl_lib.paths import project_root

NB = project_root() / "notebooks" / "05_bfcl_analysis.ipynb"


def _parameters():
    nb = nbformat.read(NB, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    tree = ast.parse(cells[0].source)
    names = {t.id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) for t in node.targets}
    return nb, names


def test_parameters_cell_and_no_outputs():
    nb, params = _parameters()
    assert params["profile"] == "smoke" and params["workdir"] == "runs/interactive"
    assert params["models"][-1] == "merged"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_workbook_configs_match_parameters():
    _, params = _parameters()
    for profile in ("smoke", "full"):
        config = yaml.safe_load((project_root() / "configs" / "workbook" / profile / "05.yaml").read_text())
        assert set(config) <= set(params), set(config) - set(params)
        assert len(config["models"]) == len(config["labels"])
