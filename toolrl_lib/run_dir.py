"""The training run directory: the one owner of its file names, of what ``run_info.json`` holds
(``RunInfo``) and of how a reader finds the base model and a checkpoint in it.

Training writes it (``prepare_run_dir`` starts or resumes one); merge, evaluation, the report and the notebooks read it. A run directory
may be copied to another machine: paths recorded at training time (``base_model`` is absolute)
are then resolved against where the directory is now, so every reader finds the same base.

    config.yaml        the resolved RunConfig
    run_info.json      RunInfo: base_model, model_name, family, backend, seed, primed, lora, ...
    data_report.json   examples kept/dropped on the way into the dataset (and the filter report)
    metrics.csv        one row per logging step
    validation.csv     mean@k rows: stage base/primed (before), grpo (periodic), final (saved last/)
    checkpoints/       resumable HF Trainer checkpoints (optimizer, scheduler, RNG, data position)
    primed_model/      the merged primed model, when priming is on
    best/ last/        PEFT adapter folders (+ tokenizer); full model folders when lora.enabled
                       is false (full fine-tuning)
    tensorboard/       TensorBoard event files
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from toolrl_lib import atomic

RUN_INFO = "run_info.json"
CONFIG = "config.yaml"
PRIMED_MODEL = "primed_model"
ADAPTER_CONFIG = "adapter_config.json"
CHECKPOINT_NAMES = ("best", "last")


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    config = property(lambda self: self.root / CONFIG)
    run_info = property(lambda self: self.root / RUN_INFO)
    data_report = property(lambda self: self.root / "data_report.json")
    metrics = property(lambda self: self.root / "metrics.csv")
    validation = property(lambda self: self.root / "validation.csv")
    checkpoints = property(lambda self: self.root / "checkpoints")
    primed_model = property(lambda self: self.root / PRIMED_MODEL)
    best = property(lambda self: self.root / "best")
    last = property(lambda self: self.root / "last")
    tensorboard = property(lambda self: self.root / "tensorboard")


@dataclass
class RunInfo:
    """What ``run_info.json`` records. Readers tolerate hand-written or older files: every field
    has a default, and unknown keys are kept in ``extra`` and written back unchanged."""

    base_model: str | None = field(default=None, metadata={"help": "what the adapter sits on: the start model, or <run>/primed_model when primed (as recorded at training time)"})
    model_name: str | None = field(default=None, metadata={"help": "the configured start model (model.name)"})
    family: str = field(default="auto", metadata={"help": "prompt family used in training"})
    backend: str | None = field(default=None, metadata={"help": "peft or unsloth"})
    seed: int = 0
    primed: bool = False
    lora: bool = field(default=True, metadata={"help": "False: best/ and last/ are full model folders"})
    processes: int | None = None
    engine: str | None = None
    global_batch: int | None = None
    merged_check: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = RUN_INFO) -> RunInfo:
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        for name, kind in (("base_model", str), ("model_name", str), ("family", str),
                           ("backend", str)):
            if kwargs.get(name) is not None and not isinstance(kwargs[name], kind):
                raise ValueError(f"{source}: field {name!r} must be a string, got {kwargs[name]!r}")
        return cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})


def read_run_info(run_dir: str | Path) -> RunInfo:
    """``run_info.json`` of ``run_dir``; a missing file says what to run, a bad one names it."""
    path = RunDir(run_dir).run_info
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: {run_dir} is not a training run directory "
            "(run notebook 03 / `toolrl train` first)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return RunInfo.from_dict(data, str(path))


def write_run_info(run_dir: str | Path, info: RunInfo) -> Path:
    """Write ``run_info.json`` atomically (the only writer, for training and test runs alike)."""
    return atomic.write_text(RunDir(run_dir).run_info,
                             json.dumps(info.to_dict(), indent=2, ensure_ascii=False))


def update_run_info(run_dir: str | Path, **values: Any) -> RunInfo:
    """Set fields of an existing ``run_info.json`` (unknown names go to ``extra``)."""
    info = read_run_info(run_dir)
    for name, value in values.items():
        if name in {f.name for f in fields(RunInfo)} - {"extra"}:
            setattr(info, name, value)
        else:
            info.extra[name] = value
    write_run_info(run_dir, info)
    return info


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The newest complete ``checkpoint-<step>`` (one with trainer_state.json), or None."""
    folder = Path(folder)
    done = [p for p in folder.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    done = [p for p in done if p.name.split("-")[-1].isdigit()]
    return max(done, key=checkpoint_step) if done else None


def checkpoint_step(path: Path) -> int:
    """The optimizer step a ``checkpoint-<step>`` folder was saved at."""
    return int(path.name.split("-")[-1])


def prepare_run_dir(paths: RunDir, resume: bool,
                    barrier: Callable[[], None] | None = None) -> Path | None:
    """Start a run in ``paths.root`` or find where to resume it; return the checkpoint to resume.

    ``resume=False`` refuses a folder that already holds a run (so a finished run is never
    overwritten by mistake); ``resume=True`` needs a complete checkpoint. Under several
    processes ``barrier`` lets every rank check before rank 0 creates anything."""
    if resume:
        checkpoint = latest_checkpoint(paths.checkpoints)
        if checkpoint is None:
            raise FileNotFoundError(
                f"--resume: no complete checkpoint under {paths.checkpoints}; start the run without --resume"
            )
        return checkpoint
    if latest_checkpoint(paths.checkpoints) is not None or paths.last.exists():
        raise ValueError(
            f"{paths.root} already holds a run (checkpoints or last/); pass --resume to continue it "
            f"or choose another --out"
        )
    if barrier is not None:
        barrier()
    paths.root.mkdir(parents=True, exist_ok=True)
    return None


def run_of(folder: str | Path) -> Path | None:
    """The run directory a checkpoint folder (``<run>/best``, ``<run>/last``) belongs to, if any."""
    parent = Path(folder).expanduser().parent
    return parent if (parent / RUN_INFO).is_file() else None


def resolve_base(base: str, run_dir: str | Path | None = None) -> str:
    """A base recorded in ``run_info.json`` -> a loadable model path or name: ``embedded``, a hub
    id, or a folder (absolute, relative to the cwd, or relative to the run directory). A folder
    recorded on another machine is looked up inside the run directory by name (``primed_model``)."""
    from toolrl_lib.models import resolve_model

    path = Path(base).expanduser()
    if run_dir is not None and not path.exists():
        inside = Path(run_dir) / base
        moved = Path(run_dir) / path.name  # a run copied from another machine
        if not path.is_absolute() and inside.exists():
            base = str(inside)
        elif path.name == PRIMED_MODEL and moved.exists():
            base = str(moved)
    return resolve_model(base)


def run_base(run_dir: str | Path, info: RunInfo | None = None) -> str | None:
    """The base model a run's checkpoints sit on, found where the run directory is now (None
    when ``run_info.json`` names none)."""
    info = info or read_run_info(run_dir)
    if not info.base_model:
        return None
    recorded = Path(info.base_model).expanduser()
    if (recorded.is_absolute() and not recorded.exists() and recorded.name != PRIMED_MODEL
            and not info.primed and info.model_name):
        return resolve_base(info.model_name, run_dir)  # the start model, named as configured
    return resolve_base(info.base_model, run_dir)


def checkpoint_dir(run_dir: str | Path, checkpoint: str = "best") -> Path:
    """``best`` | ``last`` | ``auto`` (best if saved, else last) | ``checkpoint-<step>`` | a
    path -> that folder of the run. A missing one lists what the run has."""
    run = RunDir(run_dir)
    if checkpoint == "auto":
        checkpoint = "best" if (run.best / ADAPTER_CONFIG).is_file() else "last"
    if checkpoint in CHECKPOINT_NAMES:
        candidate = run.root / checkpoint
    elif checkpoint.startswith("checkpoint-") and not Path(checkpoint).exists():
        candidate = run.checkpoints / checkpoint
    else:
        candidate = Path(checkpoint).expanduser()
        if not candidate.is_absolute() and not candidate.exists():
            candidate = run.root / candidate
    if not candidate.is_dir():
        available = [p.name for p in (run.best, run.last) if p.is_dir()]
        steps = sorted(p.name for p in run.checkpoints.glob("checkpoint-*"))
        raise FileNotFoundError(
            f"checkpoint {checkpoint!r} not found at {candidate}; available in {run.root}: "
            f"{', '.join(available + steps) or 'none (did training finish?)'}"
        )
    return candidate
