"""Run the workbook headless: every ``notebooks/NN_*.ipynb`` in order, with papermill.

    python -m tools.workbook run [--profile smoke|full|colab] [--only NN] [--workdir DIR]
    python -m tools.workbook list [--profile NAME]

Each notebook gets ``profile``, ``workdir`` (one fresh ``runs/<timestamp>/`` shared by the
whole run, so notebook 04 finds what 03 trained) and the parameters in
``configs/workbook/<profile>/<NN>.yaml``. The ``workdir`` is injected relative to the project
root (papermill writes injected parameters into the executed copy, and the site publishes it:
no absolute path of this machine should show there); the notebooks resolve it against the
project root whatever their working directory. Executed copies are written into the workdir;
on failure the partial executed notebook is kept and the error names notebook and cell.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolrl_lib.config import ConfigError, load_yaml
from toolrl_lib.fast.profiling import stage
from toolrl_lib.paths import display_path, project_root

PROFILES = ("smoke", "full", "colab")
NOTEBOOK_PATTERN = re.compile(r"^(\d\d)_[A-Za-z0-9_]+\.ipynb$")


class NotebookFailed(RuntimeError):
    """A notebook raised; carries where, so the CLI can print one precise line."""

    def __init__(self, notebook: Path, executed: Path, cell_index: int | None, error: str):
        where = f"cell {cell_index}" if cell_index is not None else "before any cell ran"
        super().__init__(
            f"{notebook.name} failed at {where}: {error}\n"
            f"  partial executed notebook kept at {executed}"
        )
        self.notebook = notebook
        self.executed = executed
        self.cell_index = cell_index


@dataclass
class NotebookResult:
    notebook: str
    executed: str
    seconds: float
    parameters: dict[str, Any] = field(default_factory=dict)


def list_notebooks(notebooks_dir: Path | None = None) -> list[Path]:
    """Workbook notebooks (``NN_name.ipynb``) sorted by number."""
    folder = notebooks_dir or project_root() / "notebooks"
    found = [p for p in folder.glob("*.ipynb") if NOTEBOOK_PATTERN.match(p.name)]
    return sorted(found, key=lambda p: p.name)


def select_notebooks(notebooks: list[Path], only: list[str] | None) -> list[Path]:
    """Keep the notebooks whose number is in ``only`` (``["03"]``, ``["3", "04"]``)."""
    if not only:
        return notebooks
    wanted = {f"{int(n):02d}" for item in only for n in str(item).split(",") if n.strip()}
    chosen = [p for p in notebooks if p.name[:2] in wanted]
    missing = wanted - {p.name[:2] for p in chosen}
    if missing:
        available = ", ".join(p.name for p in notebooks) or "none"
        raise ValueError(f"no notebook numbered {', '.join(sorted(missing))}; available: {available}")
    return chosen


def profile_parameters(profile: str, number: str, configs_dir: Path | None = None) -> dict[str, Any]:
    """The parameters a profile injects into notebook ``number`` (``{}`` if none are set)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    path = (configs_dir or project_root() / "configs") / "workbook" / profile / f"{number}.yaml"
    if not path.is_file():
        return {}
    data = load_yaml(path)
    for key, value in data.items():
        if isinstance(value, dict):
            raise ConfigError(f"{path}: parameter {key!r} must be a plain value or list, not a mapping")
    return data


def new_workdir(root: Path | None = None) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = (root or project_root()) / "runs"
    workdir = base / stamp
    suffix = 1
    while workdir.exists():
        suffix += 1
        workdir = base / f"{stamp}-{suffix}"
    workdir.mkdir(parents=True)
    return workdir


def _record_relative_paths(executed: Path) -> None:
    """Papermill records the absolute input and output paths in the executed copy's metadata;
    rewrite them relative to the project root (a partial copy of a failed run included)."""
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):  # none written, or cut short: the run's own error says why
        return
    recorded = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if recorded.get(key):
            recorded[key] = display_path(recorded[key])
    nbformat.write(nb, executed)


def run_workbook(
    profile: str = "smoke",
    only: list[str] | None = None,
    workdir: Path | None = None,
    notebooks_dir: Path | None = None,
    extra_parameters: dict[str, Any] | None = None,
    log=print,
) -> list[NotebookResult]:
    """Execute the selected notebooks in order; raise ``NotebookFailed`` at the first failure."""
    import papermill as pm

    root = project_root()
    notebooks = select_notebooks(list_notebooks(notebooks_dir), only)
    if not notebooks:
        raise FileNotFoundError(f"no NN_*.ipynb notebooks in {notebooks_dir or root / 'notebooks'}")
    workdir = Path(workdir).absolute() if workdir else new_workdir(root)
    workdir.mkdir(parents=True, exist_ok=True)
    env_backup = dict(os.environ)
    os.environ.setdefault("TOOLRL_ROOT", str(root))
    os.environ.setdefault("MPLBACKEND", "Agg")
    if profile == "smoke":  # the embedded default must never reach for the hub
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    results: list[NotebookResult] = []
    try:
        for index, notebook in enumerate(notebooks, start=1):
            number = notebook.name[:2]
            parameters = {"profile": profile, "workdir": display_path(workdir)}
            parameters.update(profile_parameters(profile, number))
            parameters.update(extra_parameters or {})
            executed = workdir / notebook.name
            log(f"[{index}/{len(notebooks)}] {notebook.name} (profile={profile}) -> {display_path(executed)}")
            start = time.perf_counter()
            try:
                with stage(f"notebook {number}"):
                    pm.execute_notebook(
                        str(notebook),
                        str(executed),
                        parameters=parameters,
                        cwd=str(root),
                        kernel_name="python3",
                        progress_bar=True,
                        log_output=False,
                    )
            except pm.PapermillExecutionError as error:
                raise NotebookFailed(
                    notebook, executed, error.cell_index, f"{error.ename}: {error.evalue}"
                ) from error
            except Exception as error:  # kernel died, bad notebook JSON, ...
                raise NotebookFailed(notebook, executed, None, f"{type(error).__name__}: {error}") from error
            finally:
                _record_relative_paths(executed)
            seconds = time.perf_counter() - start
            log(f"      done in {seconds:.1f} s")
            results.append(NotebookResult(notebook.name, str(executed), seconds, parameters))
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    return results


def _run(args: argparse.Namespace) -> int:
    try:
        results = run_workbook(profile=args.profile, only=args.only, workdir=args.workdir)
    except NotebookFailed as error:
        print(f"workbook: FAILED: {error}", file=sys.stderr)
        return 1
    total = sum(r.seconds for r in results)
    print(f"workbook OK: {len(results)} notebook(s) in {total:.0f} s; executed copies in "
          f"{display_path(Path(results[0].executed).parent)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    for notebook in list_notebooks():
        params = profile_parameters(args.profile, notebook.name[:2])
        print(f"{notebook.name}: {json.dumps(params)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.workbook",
                                     description="run the notebooks headless (papermill)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = sub.add_parser("run", help="execute notebooks/NN_*.ipynb in order")
    run.add_argument("--profile", default="smoke", choices=list(PROFILES))
    run.add_argument(
        "--only", action="append", metavar="NN", help="run only these notebooks (repeat or 01,03)"
    )
    run.add_argument(
        "--workdir", type=Path, help="reuse this run folder (default: a new runs/<timestamp>/)"
    )
    run.set_defaults(handler=_run)
    listing = sub.add_parser("list", help="list the notebooks and their profile parameters")
    listing.add_argument("--profile", default="smoke", choices=list(PROFILES))
    listing.set_defaults(handler=_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (FileNotFoundError, ValueError) as error:  # one line, as ``toolrl`` reports them
        print(f"workbook: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
