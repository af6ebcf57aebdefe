"""Why did accuracy when called not rise? Measured from BFCL entry tables and GRPO metrics.

* ``transitions``: per entry of the AST categories, the outcome under model A and model B
  (``correct call``, ``wrong call``, ``no call``): which calls GRPO fixed, which it broke,
  and whether the calls it gave up were right or wrong ones. Accuracy when called changes
  only through the diagonal-off cells, so this table says which of them moved it.
* ``called_errors``: BFCL's error families among the *called* entries of each model (wrong
  function, wrong value, type, missing/unexpected parameter, wrong count).
* ``signal_by_kind``: from a GRPO run's metrics.csv, per prompt kind, the share of groups
  whose G rewards were all equal (no policy gradient: ``frac_reward_zero_std``) and the mean
  reward over the first and last logged steps. A kind whose groups are mostly constant
  teaches nothing, however often it is sampled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from toolrl_lib.evaluate.bfcl_summary import NON_LIVE_AST

OUTCOMES = ("correct call", "wrong call", "no call")


def outcome(entries: pd.DataFrame) -> pd.Series:
    """Each entry's outcome on a call category, indexed by id."""
    called = entries["called"].astype(bool)
    correct = entries["correct"].astype(bool)
    labels = pd.Series("no call", index=entries.index)
    labels[called & correct] = "correct call"
    labels[called & ~correct] = "wrong call"
    return pd.Series(labels.values, index=entries["id"].astype(str))


def transitions(a: pd.DataFrame, b: pd.DataFrame, categories: tuple[str, ...] = NON_LIVE_AST) -> pd.DataFrame:
    """Counts of (outcome under A, outcome under B) over the entries both models answered."""
    pick = [frame[frame["category"].isin(categories)] for frame in (a, b)]
    left, right = outcome(pick[0]), outcome(pick[1])
    shared = left.index.intersection(right.index)
    table = pd.crosstab(left[shared].rename("A"), right[shared].rename("B"))
    return table.reindex(index=list(OUTCOMES), columns=list(OUTCOMES), fill_value=0)


def when_called(table: pd.DataFrame) -> dict[str, float]:
    """Accuracy when called of A and B from a ``transitions`` table, and the cells behind the change."""
    a_called = table.loc[["correct call", "wrong call"]].to_numpy().sum()
    b_called = table[["correct call", "wrong call"]].to_numpy().sum()
    return {
        "a_accuracy_when_called": float(table.loc["correct call"].sum() / a_called) if a_called else float("nan"),
        "b_accuracy_when_called": float(table["correct call"].sum() / b_called) if b_called else float("nan"),
        "fixed (wrong -> correct)": int(table.loc["wrong call", "correct call"]),
        "broken (correct -> wrong)": int(table.loc["correct call", "wrong call"]),
        "right calls given up (correct -> no call)": int(table.loc["correct call", "no call"]),
        "wrong calls given up (wrong -> no call)": int(table.loc["wrong call", "no call"]),
        "new right calls (no call -> correct)": int(table.loc["no call", "correct call"]),
        "new wrong calls (no call -> wrong)": int(table.loc["no call", "wrong call"]),
    }


def called_errors(entries: dict[str, pd.DataFrame], categories: tuple[str, ...] = NON_LIVE_AST) -> pd.DataFrame:
    """Share of each BFCL error type among the called entries of each model (rows: error types)."""
    columns = {}
    for label, frame in entries.items():
        called = frame[frame["category"].isin(categories) & frame["called"].astype(bool)]
        wrong = called[~called["correct"].astype(bool)]
        kinds = wrong["error_type"].fillna("unknown").astype(str)
        columns[label] = (kinds.value_counts() / max(len(called), 1)).round(4)
    return pd.DataFrame(columns).fillna(0.0).sort_index()


def signal_by_kind(metrics_csv: str | Path, window: int = 5) -> pd.DataFrame:
    """Per kind: mean frac_reward_zero_std, mean reward over the first and last ``window`` rows."""
    frame = pd.read_csv(metrics_csv)
    kinds = sorted(c.split("/")[-1] for c in frame.columns if c.startswith("frac_reward_zero_std/kind/"))
    rows = []
    for kind in kinds:
        zero = frame[f"frac_reward_zero_std/kind/{kind}"].dropna()
        reward = frame[f"reward/kind/{kind}"].dropna() if f"reward/kind/{kind}" in frame else pd.Series(dtype=float)
        span = max(1, min(window, len(reward) // 2))  # first and last rows never overlap
        rows.append({"kind": kind, "rows": int(len(zero)), "frac_reward_zero_std": float(zero.mean()),
                     "reward_first": float(reward.head(span).mean()), "reward_last": float(reward.tail(span).mean())})
    return pd.DataFrame(rows).set_index("kind") if rows else pd.DataFrame()


def diagnosis(entries: dict[str, pd.DataFrame], metrics: dict[str, str | Path], a: str = "primed",
              b: str = "grpo") -> dict[str, Any]:
    """The three measurements as one JSON-ready dict."""
    table = transitions(entries[a], entries[b])
    return {
        "pair": [a, b], "categories": "non_live_ast", "transitions": table.to_dict(),
        "when_called": when_called(table), "called_errors": called_errors(entries).to_dict(),
        "signal_by_kind": {name: signal_by_kind(path).to_dict(orient="index") for name, path in metrics.items()},
    }
