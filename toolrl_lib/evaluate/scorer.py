"""Call BFCL's official scorer (subprocess in its own venv) and read its score files.

``score(root, model_name, categories)`` runs ``bfcl_driver.py`` with the scorer venv's
python on the result files under ``root/result/<model_name>/`` and returns, per category,
BFCL's accuracy/correct/total plus the failing entries with their ``error_type``. Each
call uses a fresh ``root/score`` (a stale score dir of another name breaks BFCL's CSVs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import check_category
from toolrl_lib.evaluate.bfcl_results import result_file, score_file

DRIVER = Path(__file__).with_name("bfcl_driver.py")


class ScorerError(RuntimeError):
    """BFCL's evaluator failed; the message carries its output's tail."""


@dataclass
class CategoryScore:
    """BFCL's verdict on one category (``failures`` keep BFCL's own fields)."""

    category: str
    accuracy: float
    correct: int
    total: int
    failures: list[dict[str, Any]] = field(default_factory=list)

    def failed_ids(self) -> set[str]:
        return {str(f["id"]) for f in self.failures}


def score(
    root: str | Path,
    model_name: str,
    categories: list[str],
    python: str | Path | None = None,
    timeout: float = 1800,
) -> dict[str, CategoryScore]:
    """Score the result files of ``categories``; returns ``category -> CategoryScore``."""
    return score_models(root, [model_name], categories, python, timeout)[model_name]


def score_models(
    root: str | Path,
    model_names: list[str],
    categories: list[str],
    python: str | Path | None = None,
    timeout: float = 1800,
) -> dict[str, dict[str, CategoryScore]]:
    """Score several models' result files under one ``root`` in one scorer process (BFCL
    loads its data once; pass@k scores 64 samples per entry as 64 "models");
    returns ``model -> category -> CategoryScore``."""
    from toolrl_lib.evaluate.bfcl_venv import ensure_bfcl_venv

    root = Path(root).resolve()
    if not model_names:
        raise ValueError("score_models needs at least one model name")
    for name in model_names:
        if "," in name:
            raise ValueError(f"model name {name!r} must not contain ','")
        for category in categories:
            check_category(category)
            if not result_file(root, name, category).is_file():
                raise FileNotFoundError(f"no result file for {category}: {result_file(root, name, category)}")
    python = Path(python) if python else ensure_bfcl_venv()
    score_dir = root / "score"
    if score_dir.exists():
        shutil.rmtree(score_dir)
    command = [
        str(python), str(DRIVER), "--root", str(root), "--model", ",".join(model_names),
        "--categories", ",".join(categories),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=root)
    (root / "scorer.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise ScorerError(f"BFCL evaluator failed (exit {proc.returncode}):\n{tail}")
    return {name: {c: read_score_file(score_file(root, name, c), c) for c in categories}
            for name in model_names}


def read_score_file(path: str | Path, category: str) -> CategoryScore:
    """BFCL's score file: a header line (accuracy, counts), then one line per failure."""
    path = Path(path)
    if not path.is_file():
        raise ScorerError(f"BFCL wrote no score file for {category} (expected {path})")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    header, failures = lines[0], lines[1:]
    return CategoryScore(
        category=category,
        accuracy=float(header["accuracy"]),
        correct=int(header["correct_count"]),
        total=int(header["total_count"]),
        failures=failures,
    )


def read_bfcl_summaries(root: str | Path) -> dict[str, float | None]:
    """BFCL's own "AST Summary" columns (non-live, live) from its CSVs; N/A -> None.

    BFCL shows N/A when a part is missing (its "Overall Acc" columns count missing parts
    as 0, so we never report those).
    """
    import csv

    out: dict[str, float | None] = {}
    for key, name in (("non_live_ast", "data_non_live.csv"), ("live_ast", "data_live.csv")):
        path = Path(root) / "score" / name
        out[key] = None
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            if rows and rows[0].get("AST Summary", "N/A") not in ("N/A", ""):
                out[key] = float(rows[0]["AST Summary"].rstrip("%")) / 100
    return out
