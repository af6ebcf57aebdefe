"""A messaging inbox: received messages by sender, sending to contacts; forwarding held back."""

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

CONTACTS = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus"]
TEXTS = ["lunch at noon?", "the keys are under the mat", "meeting moved to 3pm", "see you at the gym",
         "can you call me back", "the parcel arrived", "happy birthday!", "train is late again"]


class InboxApp:
    """State: ``{"messages": {id: {"sender", "text", "read"}}, "sent": [{"to", "text"}]}``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def _message(self, message_id: str) -> dict[str, Any]:
        if message_id not in self.state["messages"]:
            raise ToolError(f"no message with id {message_id}")
        return self.state["messages"][message_id]

    def _send(self, to: str, text: str) -> dict[str, Any]:
        if len(self.state["sent"]) >= 50:
            raise ToolError("too many messages sent")
        self.state["sent"].append({"to": to, "text": text})
        return {"sent_to": to}

    def list_messages(self, sender: str) -> list[dict[str, Any]]:
        return [{"id": i, "text": m["text"], "read": m["read"]}
                for i, m in sorted(self.state["messages"].items()) if m["sender"] == sender]

    def send_message(self, to: str, text: str) -> dict[str, Any]:
        return self._send(to, text)

    def mark_read(self, message_id: str) -> dict[str, Any]:
        self._message(message_id)["read"] = True
        return {"read": message_id}

    def delete_message(self, message_id: str) -> dict[str, Any]:
        self._message(message_id)
        del self.state["messages"][message_id]
        return {"deleted": message_id}

    def forward_message(self, message_id: str, to: str) -> dict[str, Any]:
        return self._send(to, self._message(message_id)["text"])


_CONTACT = string("contact name", CONTACTS)
_ID = string("message id, from list_messages")


class Inbox(Environment):
    name = "inbox"
    purpose = "You handle the user's messages."
    app = InboxApp
    tools = [
        tool("list_messages", "Messages received from a contact.", {"sender": _CONTACT}),
        tool("send_message", "Send a message.", {"to": _CONTACT, "text": string("text")}),
        tool("mark_read", "Mark a message as read.", {"message_id": _ID}),
        tool("delete_message", "Delete a message.", {"message_id": _ID}),
        tool("forward_message", "Forward a message.", {"message_id": _ID, "to": _CONTACT}),
    ]

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        taken: set[str] = set()
        senders = rng.sample(CONTACTS, 4)
        messages = {ident(rng, "m", taken): {"sender": s, "text": rng.choice(TEXTS), "read": False}
                    for s in senders}
        state = {"messages": messages, "sent": []}
        target = rng.choice(sorted(messages))
        who, text = messages[target]["sender"], messages[target]["text"]
        look = call("list_messages", sender=who)
        other = rng.choice([c for c in CONTACTS if c != who])
        hidden = ["forward_message"]
        if kind == "dependent":
            turns = [Turn(f"Mark the message from {who} as read.",
                          [calls(look), calls(call("mark_read", message_id=target)), reply("Done.")])]
        elif kind == "facts":
            turns = [Turn(f"What did {who} write to me?", [calls(look), reply(f"{who} wrote: {text}")],
                          facts=[text])]
        elif kind == "missing_param":
            new = rng.choice(TEXTS)
            turns = [Turn(f"Send a message to {other}.", [reply("What should it say?")]),
                     Turn(f"Say: {new}", [calls(call("send_message", to=other, text=new)), reply("Sent.")])]
        elif kind == "missing_function":
            turns = [Turn(f"Forward {who}'s message to {other}.",
                          [reply("I have no function to forward messages.")]),
                     Turn("I added a function for that. Please forward it now.",
                          [calls(look), calls(call("forward_message", message_id=target, to=other)),
                           reply("Forwarded.")], reveal=["forward_message"])]
        else:  # multi_request
            new = rng.choice(TEXTS)
            turns = [Turn(f"Delete the message from {who}.",
                          [calls(look), calls(call("delete_message", message_id=target)), reply("Deleted.")]),
                     Turn(f"Then tell {other}: {new}",
                          [calls(call("send_message", to=other, text=new)), reply("Sent.")])]
        return state, turns, hidden
