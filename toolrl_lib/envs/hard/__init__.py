"""The single-app hard task kinds (``SINGLE_APP_HARD_KINDS``), one module per app.

Each module's ``hard_task(rng, kind)`` returns ``(state, turns, hidden)`` like an app's
``make_task``, from its own state (drawn afresh, so the default kinds' draws never change):

* ``chain`` -- 3 to 6 calls in sequence, each needing a value read from an earlier result;
* ``recover`` -- the first call is rejected with an informative error; retry corrected;
* ``ask_user`` -- a value is missing: ask, then use the user's answer in a lookup and a write;
* ``confirm`` -- the user asks to confirm a destructive action first: look, ask, then act;
* ``report`` -- the reply must quote values from several results.
"""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import Turn

HardTask = tuple[dict[str, Any], list[Turn], list[str]]


def hard_task(app: str, rng: random.Random, kind: str) -> HardTask:
    from toolrl_lib.envs.hard import bank, calendar, files, inbox

    modules = {"calendar": calendar, "bank": bank, "files": files, "inbox": inbox}
    if app not in modules:
        raise ValueError(f"no hard tasks for {app!r}; apps with hard tasks: {sorted(modules)}")
    return modules[app].hard_task(rng, kind)
