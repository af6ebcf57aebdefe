"""Tasks across two apps (kind ``cross_app``): read in one app, write what was read in the other.

Four composites, each anchored on the app the task reads from, each task three dependent
steps with calls: ``inbox_calendar`` (a message proposes a meeting: book it, reply),
``files_inbox`` (send a file's note to a contact, then archive the file), ``calendar_inbox``
(tell a contact when an event starts, then invite them) and ``bank_files`` (repeat a payment,
write the new balance into a file). Each part's state is drawn by that app's hard-task helpers.
"""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.bank import shown
from toolrl_lib.envs.base import Environment, Turn, call, calls, ident, reply
from toolrl_lib.envs.calendar import DAYS, TIMES, TITLES
from toolrl_lib.envs.composite import Composite
from toolrl_lib.envs.hard import bank as hard_bank
from toolrl_lib.envs.hard import calendar as hard_calendar
from toolrl_lib.envs.hard import files as hard_files
from toolrl_lib.envs.inbox import CONTACTS, TEXTS

Made = tuple[dict[str, Any], list[Turn], list[str]]


def inbox(rng: random.Random, senders: list[str]) -> dict[str, Any]:
    taken: set[str] = set()
    return {"messages": {ident(rng, "m", taken): {"sender": s, "text": t, "read": False}
                         for s, t in zip(senders, rng.sample(TEXTS, len(senders)), strict=True)},
            "sent": []}


def inbox_to_calendar(rng: random.Random, kind: str) -> Made:
    calendar, _ = hard_calendar.week(rng)
    senders = rng.sample(CONTACTS, 4)
    messages = inbox(rng, senders)
    who = senders[0]
    title = rng.choice([t for t in TITLES if t not in {e["title"] for e in calendar["events"].values()}])
    day, start = rng.choice(DAYS), rng.choice(TIMES)
    next(iter(messages["messages"].values()))["text"] = f"let's put '{title}' on {day} at {start}"
    turn = Turn(f"{who} proposed a meeting in a message. Put it in my calendar with the title, day and time "
                f"{who} gave, then reply 'booked' to {who}.",
                [calls(call("list_messages", sender=who)), calls(call("create_event", title=title, day=day, start=start)),
                 calls(call("send_message", to=who, text="booked")), reply("Booked and replied.")])
    return {"inbox": messages, "calendar": calendar}, [turn], ["forward_message"]


def files_to_inbox(rng: random.Random, kind: str) -> Made:
    files, paths = hard_files.store(rng)
    messages = inbox(rng, rng.sample(CONTACTS, 3))
    path, person = paths[0], rng.choice(CONTACTS)
    name = path.split("/")[1]
    turn = Turn(f"Send {person} the note in {path}, word for word, then move the file to archive.",
                [calls(call("read_file", path=path)), calls(call("send_message", to=person, text=files[path])),
                 calls(call("move_file", source=path, destination=f"archive/{name}")), reply("Sent and archived.")])
    return {"files": {"files": files}, "inbox": messages}, [turn], ["copy_file", "forward_message"]


def calendar_to_inbox(rng: random.Random, kind: str) -> Made:
    calendar, ids = hard_calendar.week(rng)
    messages = inbox(rng, rng.sample(CONTACTS, 3))
    target = rng.choice(ids)
    event, person = calendar["events"][target], rng.choice(CONTACTS)
    turn = Turn(f"Tell {person} when my '{event['title']}' on {event['day']} starts (send only the time, "
                f"as HH:MM), then invite {person} to it.",
                [calls(call("list_events", day=event["day"])),
                 calls(call("send_message", to=person, text=event["start"])),
                 calls(call("invite", event_id=target, person=person)), reply("Sent and invited.")])
    return {"calendar": calendar, "inbox": messages}, [turn], ["forward_message"]


def bank_to_files(rng: random.Random, kind: str) -> Made:
    bank = hard_bank.accounts(rng, round(rng.randrange(60_000, 300_000) / 100, 2))
    files, _ = hard_files.store(rng)
    last = rng.choice(bank["payments"])
    path = "notes/checking_balance.txt"
    left = shown(bank["balances"]["checking"] - last["amount"])
    turn = Turn(f"Pay {last['payee']} again the amount of my last payment to them, from checking, then write "
                f"the new checking balance into {path}: just the number, as the bank shows it.",
                [calls(call("list_payments", account="checking")),
                 calls(call("pay_bill", account="checking", payee=last["payee"], amount=last["amount"])),
                 calls(call("write_file", path=path, content=left)), reply("Paid and written.")])
    return {"bank": bank, "files": {"files": files}}, [turn], ["copy_file", "schedule_payment"]


def cross_app_envs(apps: dict[str, Environment]) -> list[Composite]:
    """The four cross-app composites over the registered apps."""
    pairs = [("inbox", "calendar", inbox_to_calendar), ("files", "inbox", files_to_inbox),
             ("calendar", "inbox", calendar_to_inbox), ("bank", "files", bank_to_files)]
    return [Composite(f"{a}_{b}", [apps[a], apps[b]], a, ("cross_app",), make) for a, b, make in pairs]
