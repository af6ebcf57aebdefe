"""GRPO training: run config, datasets, format priming, difficulty filtering, the run itself.

``from toolrl_lib.train import RunConfig, load_run_config, train`` is the public surface;
heavy imports (torch, TRL) happen inside ``train``. A run is single-turn (``run``: prompts
from data files) or multi-turn (``multi_turn``: episodes in ``toolrl_lib.envs``); both share
one trainer assembly (``trainer``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.train.config import RunConfig, load_run_config, validate


def train(config: RunConfig, out_dir: str | Path, resume: bool = False,
          callbacks: list[Any] | None = None, reward_funcs: list[Any] | None = None) -> Path:
    """Train one run into ``out_dir``; return the run directory.

    ``multi_turn.enabled`` picks the multi-turn run (``multi_turn.train_multi_turn``), else
    the single-turn one (``run.train``, whose docstring describes the arguments)."""
    if config.multi_turn.enabled:
        from toolrl_lib.train.multi_turn import train_multi_turn

        return train_multi_turn(config, out_dir, resume, callbacks, reward_funcs)
    from toolrl_lib.train.run import train as train_single_turn

    return train_single_turn(config, out_dir, resume, callbacks, reward_funcs)


__all__ = ["RunConfig", "load_run_config", "train", "validate"]
