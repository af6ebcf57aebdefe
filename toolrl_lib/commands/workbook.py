"""``toolrl workbook run``: execute the notebooks headless, in order."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from toolrl_lib.workbook import PROFILES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workbook", help="run the notebooks headless (papermill)")
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


def _run(args: argparse.Namespace) -> int:
    from toolrl_lib.workbook import NotebookFailed, run_workbook

    try:
        results = run_workbook(profile=args.profile, only=args.only, workdir=args.workdir)
    except NotebookFailed as error:
        print(f"toolrl workbook: FAILED: {error}", file=sys.stderr)
        return 1
    total = sum(r.seconds for r in results)
    print(f"workbook OK: {len(results)} notebook(s) in {total:.0f} s; executed copies in "
          f"{Path(results[0].executed).parent}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from toolrl_lib.workbook import list_notebooks, profile_parameters

    for notebook in list_notebooks():
        params = profile_parameters(args.profile, notebook.name[:2])
        print(f"{notebook.name}: {json.dumps(params)}")
    return 0
