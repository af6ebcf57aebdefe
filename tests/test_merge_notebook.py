"""Notebook 04: parameters agree with the workbook configs; it runs on a tiny run directory
and fails with a pointer to notebook 03 when there is no run."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from toolrl_lib.paths import project_root

NOTEBOOK = project_root() / "notebooks" / "04_lora_merge.ipynb"


def parameters() -> dict:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged parameters"
    tree = ast.parse("".join(cells[0]["source"]))
    return {node.targets[0].id: ast.literal_eval(node.value)
            for node in tree.body if isinstance(node, ast.Assign)}


def test_parameters_and_workbook_configs_agree() -> None:
    params = parameters()
    assert params["profile"] == "smoke" and params["workdir"] == "runs/interactive"
    for profile in ("smoke", "full"):
        config = yaml.safe_load((project_root() / f"configs/workbook/{profile}/04.yaml").read_text())
        unknown = set(config) - set(params)
        assert not unknown, f"{profile}/04.yaml sets parameters the notebook lacks: {unknown}"
        assert config["dtype"] in ("bf16", "fp16", "fp32")


def test_notebook_is_saved_without_outputs() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None


@pytest.mark.slow
def test_notebook_runs_on_a_tiny_run_and_fails_clearly_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    papermill = pytest.importorskip("papermill")
    root = project_root()
    monkeypatch.setenv("TOOLRL_ROOT", str(tmp_path))  # the kernel writes figures under tmp_path
    from toolrl_lib import merge
    from toolrl_lib.merge import make_demo_run
    from toolrl_lib.models import make_tiny_model

    make_tiny_model(tmp_path / "base")
    make_demo_run(tmp_path / "base", tmp_path / "wd" / "grpo", init_std=0.05)
    # gguf_types []: llama.cpp's converter does not know the tiny byte tokenizer's pre-tokenizer;
    # the export runs on the embedded model's tokenizer in tests/test_gguf_export.py.
    common = {"n_generations": 2, "max_new_tokens": 4, "device": "cpu", "gguf_types": []}
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), cwd=str(root), progress_bar=False,
        parameters={"workdir": str(tmp_path / "wd"), "dtype": "fp32", **common},
    )
    assert merge.is_complete_merge(tmp_path / "wd" / "merged")
    assert (tmp_path / "figures" / "04_merge_verification.png").is_file()
    with pytest.raises(papermill.PapermillExecutionError, match="run notebook 03"):
        papermill.execute_notebook(
            str(NOTEBOOK), str(tmp_path / "missing.ipynb"), cwd=str(root),
            progress_bar=False, parameters={"workdir": str(tmp_path / "empty"), **common},
        )
    assert not (tmp_path / "empty" / "merged").exists()
