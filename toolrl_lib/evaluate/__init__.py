"""Evaluation: mean@k on our own splits, and BFCL v4 with its official scorer.

In-distribution:
  ``mean_at_k``       mean reward of k samples per example (training validation uses it too)
  ``compare_models``  the models notebook 05 compares, and their mean@k table
BFCL, single-turn (and the entry point for all of BFCL):
  ``runner``          ``evaluate_bfcl``: generate (resumably) -> result files -> score -> tables
  ``backends``        greedy generation: transformers everywhere, vLLM on a GPU
  ``bfcl_results``    evaluation-folder file names, result lines, batching of prompts
  ``scorer``          BFCL's official scorer, run in its own venv (``bfcl_venv``, ``bfcl_driver``)
  ``rescore``         ``score_folder``: sanitise and score a folder of result files from anywhere
  ``replay``          BFCL's ground truth fed back to its scorer (a check of the whole pipeline)
BFCL, multi-turn:
  ``bfcl_multi_turn`` BFCL's executor, our inference loop, sanitiser and tables (a subpackage;
                      our own multi-turn training environments are ``toolrl_lib.envs``)
Reading the numbers:
  ``analysis``        tidy tables, call rates, error taxonomy, comparisons
  ``bfcl_summary``    BFCL's Overall and single-turn summary formulas, paired bootstrap CIs
  ``stats``           paired bootstrap and McNemar for two models on the same entries
  ``plots``, ``single_turn_figures``  figures for the notebooks

The names a notebook types are importable from here (loaded on first use, so that
``import toolrl_lib.evaluate`` stays cheap): ``evaluate_bfcl``, ``parse_categories``,
``MultiTurnSettings``, ``score_folder``, ``replay_ground_truth``, ``paired_bootstrap``
(``mean_at_k`` is also a module name here: import it from ``evaluate.mean_at_k``).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (imported lazily by ``__getattr__``)
_PUBLIC = {
    "evaluate_bfcl": "toolrl_lib.evaluate.runner",
    "parse_categories": "toolrl_lib.evaluate.runner",
    "MultiTurnSettings": "toolrl_lib.evaluate.bfcl_multi_turn.runner",
    "score_folder": "toolrl_lib.evaluate.rescore",
    "replay_ground_truth": "toolrl_lib.evaluate.replay",
    "paired_bootstrap": "toolrl_lib.evaluate.stats",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
