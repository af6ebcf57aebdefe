"""Did an episode do what the user asked? State check plus response check, turn by turn.

The goal state of each turn comes from *executing* the task's gold calls on a fresh app
(``gold_states``), never from a hand-written copy. A turn passes when the app state after
the model's turn equals the gold state after that turn (so a guessed argument, an extra
write or a missing write fails it; reads are free) and every fact the user asked for in
that turn appears in the model's plain replies of that turn (case-insensitive). An episode
succeeds when every turn passes. ``call_credit`` (for shaped rewards) is the share of gold
calls the model made exactly (name and arguments, matched as multisets, per turn); a gold
step marked ``expect_error`` (a call the app rejects on purpose, to be retried) is not a call
the model owes, and only the calls an episode *executed* count.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from toolrl_lib.envs.base import Environment, Task
from toolrl_lib.envs.safety import Limits, Session


@dataclass
class EpisodeCheck:
    success: bool
    turns_passed: int
    turns: int
    call_credit: float
    passed: list[bool]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def canonical_call(call: Any) -> str:
    """A call as a comparable string (1.0 and 1 are the same number)."""
    def norm(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {str(k): norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    if not isinstance(call, dict):
        return repr(call)
    return json.dumps({"name": call.get("name"), "arguments": norm(call.get("arguments"))}, sort_keys=True)


def gold_states(env: Environment, task: Task, limits: Limits | None = None) -> list[dict[str, Any]]:
    """The app state after each turn when the gold calls run (a gold call that fails, or an
    ``expect_error`` one that runs, is a bug in the task generator, so it raises)."""
    session = Session(env, task, limits or Limits())
    states = []
    for number, turn in enumerate(task.turns):
        session.reveal(turn.reveal)
        for step in turn.steps:
            for request in step.calls:
                outcome = session.call(request)
                if outcome.executed == step.expect_error:
                    raise ValueError(f"{task.id}: gold call {request} of turn {number}: executed "
                                     f"{outcome.executed}, expected {not step.expect_error} ({outcome.error})")
        states.append(session.state())
    return states


def check_episode(
    env: Environment, task: Task, states: list[dict[str, Any]], replies: list[list[str]],
    executed: list[list[dict[str, Any]]], goal: list[dict[str, Any]] | None = None,
) -> EpisodeCheck:
    """Compare what the model did (state after each of its turns, its plain replies and its
    executed calls per turn) with the task's gold."""
    goal = goal if goal is not None else gold_states(env, task)
    passed, matched, total = [], 0, 0
    for number, turn in enumerate(task.turns):
        state_ok = number < len(states) and states[number] == goal[number]
        said = " ".join(replies[number]).lower() if number < len(replies) else ""
        facts_ok = all(fact.lower() in said for fact in turn.facts)
        passed.append(bool(state_ok and facts_ok))
        wanted = Counter(canonical_call(c) for step in turn.steps if not step.expect_error for c in step.calls)
        made = Counter(canonical_call(c) for c in (executed[number] if number < len(executed) else []))
        matched += sum((wanted & made).values())
        total += sum(wanted.values())
    credit = matched / total if total else float(all(passed))
    return EpisodeCheck(success=all(passed), turns_passed=sum(passed), turns=len(task.turns),
                        call_credit=credit, passed=passed)
