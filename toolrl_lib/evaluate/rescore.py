"""``toolrl eval score DIR``: sanitise the BFCL result files of a folder, then score them.

A folder written by ``toolrl eval bfcl`` here, on another machine, by vLLM or by hand is
scored the same safe way: every result file under ``DIR/result/<name>/`` is first passed
through the sanitiser (``bfcl_multi_turn.results``; single-turn lines are re-rendered
canonically too), in place, the original lines kept in ``unsanitised_result``; only then
does BFCL's official scorer see it. Lines with ids that are not in the category, or
repeated ids, are dropped (and counted).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import MULTI_TURN, PREFIX, SCORED_SINGLE_TURN
from toolrl_lib.evaluate.bfcl_multi_turn.results import SanitiseReport, sanitise_folder


@dataclass
class ScoredFolder:
    """``score_folder``'s outcome: per category BFCL's accuracy, plus the sanitiser's counts."""

    root: str
    name: str
    categories: list[str]
    sanitised: list[SanitiseReport] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    overall: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def result_categories(root: str | Path, name: str) -> list[str]:
    """Categories with a result file under ``root/result/name/`` (BFCL's file names)."""
    folder = Path(root) / "result" / name
    found = []
    for path in sorted(folder.glob(f"*/{PREFIX}_*_result.json")):
        category = path.name[len(PREFIX) + 1 : -len("_result.json")]
        if category in SCORED_SINGLE_TURN or category in MULTI_TURN:
            found.append(category)
    return [c for c in (*SCORED_SINGLE_TURN, *MULTI_TURN) if c in found]


def model_names(root: str | Path) -> list[str]:
    folder = Path(root) / "result"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def score_folder(root: str | Path, name: str | None = None) -> ScoredFolder:
    """Sanitise and score every BFCL result file of ``root``; writes ``entries.csv``,
    ``summary.csv``, ``multi_turn.csv`` (when multi-turn ran) and ``score.json``."""
    from toolrl_lib.evaluate.analysis import entries_table, summary_table
    from toolrl_lib.evaluate.bfcl_multi_turn.report import multi_turn_table
    from toolrl_lib.evaluate.bfcl_summary import bfcl_overall
    from toolrl_lib.evaluate.scorer import score

    root = Path(root).resolve()
    names = model_names(root)
    if name is None:
        if len(names) != 1:
            raise ValueError(f"{root}/result holds {len(names)} model folders {names}; pass one name")
        name = names[0]
    elif name not in names:
        raise FileNotFoundError(f"no result folder {root / 'result' / name}")
    categories = result_categories(root, name)
    if not categories:
        raise FileNotFoundError(f"no BFCL result files under {root / 'result' / name}")
    out = ScoredFolder(str(root), name, categories)
    out.sanitised = sanitise_folder(root, name, categories)
    scores = score(root, name, categories)
    entries = entries_table(root, name, categories, scores, label=name)
    entries.to_csv(root / "entries.csv", index=False)
    summary = summary_table(entries)
    summary.to_csv(root / "summary.csv", index=False)
    out.summary = summary.to_dict(orient="records")
    multi = [c for c in categories if c in MULTI_TURN]
    if multi:
        multi_turn_table(root, name, multi, scores).to_csv(root / "multi_turn.csv", index=False)
    out.overall = bfcl_overall(summary)
    (root / "score.json").write_text(json.dumps(out.to_dict(), indent=2, default=str))
    return out
