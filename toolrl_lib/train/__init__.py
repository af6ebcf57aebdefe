"""GRPO training: run config, datasets, format priming, difficulty filtering, the run itself.

``from toolrl_lib.train import RunConfig, load_run_config, train`` is the public surface;
heavy imports (torch, TRL) happen inside ``train``.
"""

from toolrl_lib.train.config import RunConfig, load_run_config, validate


def train(*args, **kwargs):
    """See ``toolrl_lib.train.run.train`` (imported lazily: it pulls in TRL)."""
    from toolrl_lib.train.run import train as _train

    return _train(*args, **kwargs)


__all__ = ["RunConfig", "load_run_config", "train", "validate"]
