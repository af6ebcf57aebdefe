"""The single-app hard task kinds (``SINGLE_APP_HARD_KINDS``), one module per app.

Each module's ``hard_task(rng, kind)`` (registered here in ``base.HARD_MAKERS`` under its
app's name, which ``Environment.make_hard_task`` reads) returns ``(state, turns, hidden)`` like an app's
``make_task``, from its own state (drawn afresh, so the default kinds' draws never change):

* ``chain`` -- 3 to 6 calls in sequence, each needing a value read from an earlier result;
* ``recover`` -- the first call is rejected with an informative error; retry corrected;
* ``ask_user`` -- a value is missing: ask, then resolve the user's answer by a lookup and act
  on it (three steps with calls after the answer);
* ``confirm`` -- the user asks to confirm a destructive action first: look, ask, then act;
* ``report`` -- the reply must quote values from several results.
"""

from __future__ import annotations

from toolrl_lib.envs.base import HARD_MAKERS
from toolrl_lib.envs.hard import bank, calendar, files, inbox

for _module in (calendar, bank, files, inbox):
    HARD_MAKERS[_module.__name__.rsplit(".", 1)[1]] = _module.hard_task
