"""A week calendar: events with a title, a day and a start time; invitations held back."""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import (
    Environment,
    ToolError,
    Turn,
    call,
    calls,
    ident,
    reply,
    string,
    tool,
)

DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]
TIMES = [f"{h:02d}:{m:02d}" for h in range(8, 18) for m in (0, 30)]
TITLES = ["standup", "budget review", "dentist", "team lunch", "1:1 with Sam", "design sync",
          "yoga", "client call", "code review", "planning"]
PEOPLE = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay"]


class CalendarApp:
    """State: ``{"events": {id: {"title", "day", "start", "guests"}}, "next": int}``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def _event(self, event_id: str) -> dict[str, Any]:
        if event_id not in self.state["events"]:
            raise ToolError(f"no event with id {event_id}")
        return self.state["events"][event_id]

    def list_events(self, day: str) -> list[dict[str, Any]]:
        found = [{"id": i, "title": e["title"], "start": e["start"]}
                 for i, e in self.state["events"].items() if e["day"] == day]
        return sorted(found, key=lambda e: (e["start"], e["id"]))

    def create_event(self, title: str, day: str, start: str) -> dict[str, Any]:
        if len(self.state["events"]) >= 50:
            raise ToolError("the calendar is full")
        event_id = f"ev{self.state['next']}"
        self.state["next"] += 1
        self.state["events"][event_id] = {"title": title, "day": day, "start": start, "guests": []}
        return {"id": event_id}

    def move_event(self, event_id: str, day: str, start: str) -> dict[str, Any]:
        event = self._event(event_id)
        event["day"], event["start"] = day, start
        return {"id": event_id, "day": day, "start": start}

    def cancel_event(self, event_id: str) -> dict[str, Any]:
        self._event(event_id)
        del self.state["events"][event_id]
        return {"cancelled": event_id}

    def invite(self, event_id: str, person: str) -> dict[str, Any]:
        guests = self._event(event_id)["guests"]
        if person not in guests:
            guests.append(person)
        return {"id": event_id, "guests": list(guests)}


_DAY = string("weekday", DAYS)
_START = string("start time, HH:MM", TIMES)
_ID = string("event id, from list_events")


class Calendar(Environment):
    name = "calendar"
    purpose = "You manage the user's calendar for this week."
    app = CalendarApp
    tools = [
        tool("list_events", "Events of a day, by start time.", {"day": _DAY}),
        tool("create_event", "Add an event.", {"title": string("title"), "day": _DAY, "start": _START}),
        tool("move_event", "Move an event.", {"event_id": _ID, "day": _DAY, "start": _START}),
        tool("cancel_event", "Delete an event.", {"event_id": _ID}),
        tool("invite", "Invite a person to an event.", {"event_id": _ID, "person": string("name")}),
    ]

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        taken: set[str] = set()
        events = {}
        for title in rng.sample(TITLES, 4):
            events[ident(rng, "ev", taken)] = {"title": title, "day": rng.choice(DAYS),
                                               "start": rng.choice(TIMES), "guests": []}
        state = {"events": events, "next": 1}
        target = rng.choice(sorted(events))
        ev = events[target]
        title, day = ev["title"], ev["day"]
        look = call("list_events", day=day)
        other = rng.choice([t for t in TITLES if t not in {e["title"] for e in events.values()}])
        when, new_day = rng.choice([t for t in TIMES if t != ev["start"]]), rng.choice(DAYS)
        if kind == "dependent":
            turns = [Turn(f"Move my '{title}' on {day} to {new_day} at {when}.",
                          [calls(look), calls(call("move_event", event_id=target, day=new_day, start=when)),
                           reply("Moved.")])]
        elif kind == "facts":
            turns = [Turn(f"What time is '{title}' on {day}?",
                          [calls(look), reply(f"It starts at {ev['start']}.")], facts=[ev["start"]])]
        elif kind == "missing_param":
            turns = [Turn(f"Add '{other}' on {new_day}.", [reply("What time should it start?")]),
                     Turn(f"At {when}.", [calls(call("create_event", title=other, day=new_day, start=when)),
                                          reply("Added.")])]
        elif kind == "missing_function":
            person = rng.choice(PEOPLE)
            turns = [Turn(f"Invite {person} to '{title}' on {day}.",
                          [reply("I have no function to invite people.")]),
                     Turn(f"I added a function for that. Please invite {person} now.",
                          [calls(look), calls(call("invite", event_id=target, person=person)), reply("Invited.")],
                          reveal=["invite"])]
            return state, turns, ["invite"]
        else:  # multi_request
            turns = [Turn(f"Cancel '{title}' on {day}.",
                          [calls(look), calls(call("cancel_event", event_id=target)), reply("Cancelled.")]),
                     Turn(f"Now add '{other}' on {new_day} at {when}.",
                          [calls(call("create_event", title=other, day=new_day, start=when)), reply("Added.")])]
        return state, turns, []
