"""A scripted policy with only the default kinds' habits: how much headroom each kind leaves.

It writes gold calls (right names, right values: a perfect reader of results) but behaves the
way the default kinds teach, and no better:

* at most two steps with calls per turn (the default kinds' longest turn: look, then act),
  then a plain reply;
* it never asks for confirmation, and (``asks=False``) never asks for a missing value either:
  where the gold turn ends on a question, it goes on at once with the next turn's gold calls
  (a lucky guess) and then has nothing left to do. ``asks=True`` keeps the default kind
  ``missing_param``'s habit: a gold turn that only asks (no calls) is played as the gold
  plays it; a turn that looks something up and then asks is still rushed. A turn that
  reveals new tools is always played as the gold plays it (also a default habit);
* it never retries: after a refused call it stops and replies;
* its reply quotes the last result only.

No model runs here: the episode is played on a ``Session`` and judged by the checker, so this
is cheap enough for tests and for sizing task mixes on a CPU.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from toolrl_lib.envs.base import Task
from toolrl_lib.envs.checker import EpisodeCheck, check_episode, gold_states
from toolrl_lib.envs.safety import Session

MAX_CALL_STEPS = 2  # the default kinds' longest turn


def naive_episode(task: Task, asks: bool = False) -> EpisodeCheck:
    """The checker's verdict on the naive policy's episode of ``task``."""
    from toolrl_lib.envs import get_env

    env = get_env(task.env)
    session = Session(env, task)
    states: list[dict[str, Any]] = []
    replies: list[list[str]] = []
    executed: list[list[dict[str, Any]]] = []
    acted_early = False
    for number, turn in enumerate(task.turns):
        session.reveal(turn.reveal)
        steps = [s.calls for s in turn.steps if s.calls]
        upcoming = task.turns[number + 1] if number + 1 < len(task.turns) else None
        question = turn.steps[-1].text.rstrip().endswith("?")
        if acted_early:
            steps, acted_early = [], False
        elif question and upcoming is not None and not upcoming.reveal and not (asks and not steps):
            steps, acted_early = steps + [s.calls for s in upcoming.steps if s.calls], True
        made, last = [], "OK."
        for step in steps[:MAX_CALL_STEPS]:
            outcomes = [session.call(c) for c in step]
            made += [c for c, o in zip(step, outcomes, strict=True) if o.executed]
            last = outcomes[-1].result
            if not all(o.executed for o in outcomes):
                break  # never retries
        states.append(session.state())
        replies.append([last])
        executed.append(made)
    return check_episode(env, task, states, replies, executed, gold_states(env, task))


def naive_success_by_kind(tasks: list[Task], asks: bool = False) -> dict[str, float]:
    """The naive policy's episode success per task kind."""
    groups: dict[str, list[float]] = defaultdict(list)
    for task in tasks:
        groups[task.kind].append(float(naive_episode(task, asks).success))
    return {kind: sum(v) / len(v) for kind, v in groups.items()}
