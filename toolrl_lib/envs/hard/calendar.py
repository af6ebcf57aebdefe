"""Hard calendar tasks: five events on five distinct days, starts distinct (see ``hard``)."""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import Turn, call, calls, failing, ident, reply
from toolrl_lib.envs.calendar import DAYS, PEOPLE, TIMES, TITLES


def week(rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    """A calendar state and its event ids in day order (one event a day, no start at 17:00 or later)."""
    taken: set[str] = set()
    events = {}
    for title, day, start in zip(rng.sample(TITLES, 5), DAYS, rng.sample(TIMES[:-2], 5), strict=True):
        events[ident(rng, "ev", taken)] = {"title": title, "day": day, "start": start, "guests": []}
    return {"events": events, "next": 1}, list(events)


def hard_task(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
    state, ids = week(rng)
    events = state["events"]
    a, b, c = rng.sample(ids, 3)
    ea, eb, ec = events[a], events[b], events[c]

    def look(event: dict[str, Any]) -> dict[str, Any]:
        return call("list_events", day=event["day"])

    if kind == "chain":
        later = TIMES[TIMES.index(eb["start"]) + 1]
        steps = [calls(look(ea)), calls(look(eb)), calls(call("move_event", event_id=a, day=eb["day"], start=later))]
        ask = f"Move '{ea['title']}' from {ea['day']} to {eb['day']}, 30 minutes after '{eb['title']}' starts"
        if rng.random() < 0.5:
            person = rng.choice(PEOPLE)
            ask += f", then invite {person} to it"
            steps.append(calls(call("invite", event_id=a, person=person)))
        if rng.random() < 0.6:
            ask += f", and cancel '{ec['title']}' on {ec['day']}"
            steps += [calls(look(ec)), calls(call("cancel_event", event_id=c))]
        return state, [Turn(ask + ".", steps + [reply("Done.")])], []
    if kind == "report":
        asked = [ea, eb] + ([ec] if rng.random() < 0.5 else [])
        named = " and ".join(f"'{e['title']}' on {e['day']}" for e in asked)
        said = ", ".join(f"'{e['title']}' at {e['start']}" for e in asked)
        return state, [Turn(f"When do {named} start?", [calls(look(e)) for e in asked] + [reply(said + ".")],
                            facts=[e["start"] for e in asked])], []
    if kind == "recover":
        stale = ident(rng, "ev", set(ids))
        return state, [Turn(f"Cancel event {stale}, my '{ea['title']}' on {ea['day']}.",
                            [failing(call("cancel_event", event_id=stale)), calls(look(ea)),
                             calls(call("cancel_event", event_id=a)), reply("That id was stale; cancelled.")])], []
    new_day, when = rng.choice(DAYS), rng.choice(TIMES)
    if kind == "ask_user":
        person = rng.choice(PEOPLE)
        return state, [Turn(f"Move one of my events to {new_day} at {when} and invite {person} to it.",
                            [reply("Which event?")]),
                       Turn(f"'{ea['title']}' on {ea['day']}.",
                            [calls(look(ea)), calls(call("move_event", event_id=a, day=new_day, start=when)),
                             calls(call("invite", event_id=a, person=person)), reply("Moved and invited.")])], []
    if kind == "confirm":
        return state, [Turn(f"Cancel '{ea['title']}' on {ea['day']}, but confirm with me before you delete it.",
                            [calls(look(ea)), reply(f"'{ea['title']}' starts at {ea['start']}. Cancel it?")],
                            facts=[ea["start"]]),
                       Turn("Yes, cancel it.", [calls(call("cancel_event", event_id=a)), reply("Cancelled.")])], []
    raise ValueError(f"calendar: no hard task kind {kind!r}")
