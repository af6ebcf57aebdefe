"""Hard bank tasks: three past payments to distinct payees (see ``hard``)."""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.bank import PAYEES, money, shown
from toolrl_lib.envs.base import Turn, call, calls, failing, ident, reply


def accounts(rng: random.Random, checking: float) -> dict[str, Any]:
    taken: set[str] = set()
    payments = [{"id": ident(rng, "p", taken), "account": "checking", "payee": p,
                 "amount": money(rng.randrange(1_000, 20_000) / 100)} for p in rng.sample(PAYEES, 3)]
    return {"balances": {"checking": checking, "savings": money(rng.randrange(1_000, 5_000) * 2)},
            "payments": payments, "scheduled": [], "next": 1}


def hard_task(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
    state = accounts(rng, money(rng.randrange(60_000, 300_000) / 100))
    balances, payments = state["balances"], state["payments"]
    first, second = rng.sample(payments, 2)
    history = call("list_payments", account="checking")
    if kind == "chain":
        chosen = [first] + ([second] if rng.random() < 0.5 else [])
        steps = [calls(history)]
        for p in chosen:
            steps += [calls(call("transfer", from_account="savings", to_account="checking", amount=p["amount"])),
                      calls(call("pay_bill", account="checking", payee=p["payee"], amount=p["amount"]))]
        names = " and ".join(p["payee"] for p in chosen)
        ask = (f"Pay {names} again, each the amount of my last payment to them, from checking; before each "
               "payment move that same amount from savings to checking")
        facts: list[str] = []
        if len(chosen) == 1 or rng.random() < 0.5:
            left = shown(balances["savings"] - sum(p["amount"] for p in chosen))
            ask += ". Then tell me what is left in savings"
            steps += [calls(call("get_balance", account="savings")), reply(f"Savings holds {left}.")]
            facts = [left]
        else:
            steps.append(reply("Paid."))
        return state, [Turn(ask + ".", steps, facts=facts)], []
    if kind == "report":
        wanted = [shown(balances["checking"]), shown(balances["savings"]), shown(first["amount"])]
        return state, [Turn(f"What are my checking and savings balances, and how much was my last payment "
                            f"to {first['payee']}?",
                            [calls(call("get_balance", account="checking")),
                             calls(call("get_balance", account="savings")), calls(history),
                             reply(f"Checking {wanted[0]}, savings {wanted[1]}, last {first['payee']} "
                                   f"payment {wanted[2]}.")], facts=wanted)], []
    if kind == "recover":
        amount = money(rng.randrange(500, 1_000))
        state = accounts(rng, money(rng.randrange(5_000, 40_000) / 100))  # checking cannot cover it
        payee = rng.choice(PAYEES)
        return state, [Turn(f"Pay {amount} to {payee} from checking; if checking cannot cover it, "
                            "pay from savings instead.",
                            [failing(call("pay_bill", account="checking", payee=payee, amount=amount)),
                             calls(call("pay_bill", account="savings", payee=payee, amount=amount)),
                             reply("Checking was short, so I paid from savings.")])], []
    if kind == "ask_user":
        payee, amount = first["payee"], first["amount"]
        return state, [Turn(f"Move some money from savings to checking, then pay {payee} that same amount "
                            "from checking.", [reply("How much should I move?")]),
                       Turn(f"The amount of my last {payee} payment.",
                            [calls(history), calls(call("transfer", from_account="savings", to_account="checking",
                                                        amount=amount)),
                             calls(call("pay_bill", account="checking", payee=payee, amount=amount)),
                             reply("Moved and paid.")])], []
    if kind == "confirm":
        everything = shown(balances["savings"])
        return state, [Turn("Move everything in savings to checking, but confirm the amount with me first.",
                            [calls(call("get_balance", account="savings")),
                             reply(f"That is {everything}. Move it?")], facts=[everything]),
                       Turn("Yes, move it.",
                            [calls(call("transfer", from_account="savings", to_account="checking",
                                        amount=balances["savings"])), reply("Moved.")])], []
    raise ValueError(f"bank: no hard task kind {kind!r}")
