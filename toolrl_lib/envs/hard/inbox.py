"""Hard inbox tasks: messages that send you on to other contacts (see ``hard``)."""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import Turn, call, calls, failing, ident, reply
from toolrl_lib.envs.inbox import CONTACTS, TEXTS

FULL_NAMES = {"Ana": "Anastasia", "Ben": "Benjamin", "Chloe": "Chloe Martin", "Dev": "Devendra",
              "Eli": "Elijah", "Fay": "Fayola", "Gus": "Gustavo"}


def hard_task(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
    taken: set[str] = set()
    senders = rng.sample(CONTACTS, 6)
    texts = rng.sample(TEXTS, 6)
    messages = {ident(rng, "m", taken): {"sender": s, "text": t, "read": False}
                for s, t in zip(senders, texts, strict=True)}
    state = {"messages": messages, "sent": []}
    ids = list(messages)
    hidden = ["forward_message"]
    spare = rng.choice([c for c in CONTACTS if c not in senders])  # wrote nothing

    def look(who: str) -> dict[str, Any]:
        return call("list_messages", sender=who)

    if kind == "chain":
        hops = rng.randint(1, 4)  # senders who only point on: hops + 2 calls in all
        trail = senders[: hops + 1]
        for there, message in zip(trail[1:], ids, strict=False):
            messages[message]["text"] = f"ask {there}, they have the code"
        code = str(rng.randrange(1000, 10000))
        messages[ids[hops]]["text"] = f"the code is {code}"
        steps = [calls(look(s)) for s in trail] + [calls(call("send_message", to=spare, text=code)), reply("Sent.")]
        return state, [Turn(f"{trail[0]} knows who has the door code. Find the code and send just the code "
                            f"to {spare}.", steps)], hidden
    if kind == "report":
        asked = senders[: rng.choice([2, 3])]
        said = "; ".join(f"{s} wrote: {messages[i]['text']}" for s, i in zip(asked, ids, strict=False))
        return state, [Turn(f"What did {' and '.join(asked)} write to me?",
                            [calls(look(s)) for s in asked] + [reply(said)],
                            facts=[messages[i]["text"] for i in ids[: len(asked)]])], hidden
    text = rng.choice(TEXTS)
    who, first = senders[0], ids[0]
    if kind == "recover":  # a full name is not a contact: the schema error lists the contacts
        return state, [Turn(f"Send {FULL_NAMES[spare]} this: {text}",
                            [failing(call("send_message", to=FULL_NAMES[spare], text=text)),
                             calls(call("send_message", to=spare, text=text)), reply(f"Sent to {spare}.")])], hidden
    if kind == "ask_user":
        return state, [Turn(f"Pass on to someone what {who} wrote to me, word for word, then delete {who}'s "
                            "message.", [reply("Who should I send it to?")]),
                       Turn(f"To {spare}.", [calls(look(who)),
                                             calls(call("send_message", to=spare, text=messages[first]["text"])),
                                             calls(call("delete_message", message_id=first)),
                                             reply("Sent and deleted.")])], hidden
    if kind == "confirm":
        return state, [Turn(f"Delete the message from {who}, but tell me what it says and wait for my yes first.",
                            [calls(look(who)), reply(f"It says: {messages[first]['text']}. Delete it?")],
                            facts=[messages[first]["text"]]),
                       Turn("Yes, delete it.", [calls(call("delete_message", message_id=first)), reply("Deleted.")])], hidden
    raise ValueError(f"inbox: no hard task kind {kind!r}")
