"""Named stage timings for the workbook profile (``benchmarks/workbook_profile.py``).

``with stage("priming"): ...`` appends one JSON line ``{"stage", "start", "end", "pid"}`` to the
file named by ``$TOOLRL_PROFILE_LOG`` (wall-clock seconds since the epoch, so a sampler in
another process can attribute its RSS samples to stages). Without that variable it is a no-op:
the library pays nothing outside a profiling run.

>>> import os; os.environ.pop("TOOLRL_PROFILE_LOG", None) and None
>>> with stage("nothing is written"):
...     pass
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOG_ENV = "TOOLRL_PROFILE_LOG"


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Record how long the body takes under ``name`` (also when it raises)."""
    path = os.environ.get(LOG_ENV)
    if not path:
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        line = json.dumps({"stage": name, "start": start, "end": time.time(), "pid": os.getpid()})
        with open(path, "a", encoding="utf-8") as handle:  # one short append per stage
            handle.write(line + "\n")
