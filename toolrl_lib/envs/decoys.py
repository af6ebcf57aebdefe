"""Distractor tools: near-misses of the apps' tools, offered beside them (kind ``distractors``).

``Decoys`` is a part, never an app of its own (its ``apps`` is empty): its tools sound like
what a task needs (a reminder instead of an event, an e-mail instead of a message) but each
only writes to the decoys' own log. That log is state, so an episode that calls a decoy
fails the checker's state comparison. A ``distractors`` task is the anchor app's ``chain``
task with the decoys offered too: same gold calls, more tools to choose from.
"""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import Environment, ToolError, Turn, number, string, tool
from toolrl_lib.envs.composite import Composite


class DecoyApp:
    """State: ``{"log": [{"tool", "arguments"}]}`` -- what was called, nothing else."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def _log(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if len(self.state["log"]) >= 20:
            raise ToolError("too many requests")
        self.state["log"].append({"tool": name, "arguments": arguments})
        return {"ok": True}

    def add_reminder(self, text: str, day: str) -> dict[str, Any]:
        return self._log("add_reminder", {"text": text, "day": day})

    def request_money(self, contact: str, amount: float) -> dict[str, Any]:
        return self._log("request_money", {"contact": contact, "amount": amount})

    def share_link(self, path: str, person: str) -> dict[str, Any]:
        return self._log("share_link", {"path": path, "person": person})

    def send_email(self, address: str, body: str) -> dict[str, Any]:
        return self._log("send_email", {"address": address, "body": body})

    def archive_item(self, item_id: str) -> dict[str, Any]:
        return self._log("archive_item", {"item_id": item_id})


class Decoys(Environment):
    name = "decoys"
    purpose = ""
    app = DecoyApp
    tools = [
        tool("add_reminder", "Set a phone reminder (not a calendar event).", {"text": string("text"),
                                                                              "day": string("weekday")}),
        tool("request_money", "Ask a contact to pay you.", {"contact": string("name"),
                                                            "amount": number("amount in dollars")}),
        tool("share_link", "Share a read-only link to a file.", {"path": string("path"),
                                                                 "person": string("name")}),
        tool("send_email", "Send an e-mail to an address.", {"address": string("e-mail address"),
                                                             "body": string("text")}),
        tool("archive_item", "Archive an item of a shared drive.", {"item_id": string("item id")}),
    ]

    @property
    def apps(self) -> list[str]:
        return []


def with_decoys(app: Environment) -> Composite:
    """``<app>_decoys``: the app's ``chain`` tasks with the decoy tools offered too."""

    def make(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        state, turns, hidden = app.make_hard_task(rng, "chain")
        return {app.name: state, "decoys": {"log": []}}, turns, hidden

    return Composite(f"{app.name}_decoys", [app, Decoys()], app.name, ("distractors",), make)
