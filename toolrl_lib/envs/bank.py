"""A bank account: two accounts, bill payments and a payment history; scheduling held back."""

from __future__ import annotations

import json
import random
from typing import Any

from toolrl_lib.envs.base import (
    Environment,
    ToolError,
    Turn,
    call,
    calls,
    ident,
    number,
    reply,
    string,
    tool,
)

ACCOUNTS = ["checking", "savings"]
PAYEES = ["electricity", "water", "internet", "phone", "rent", "gym"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]


def money(value: float) -> float:
    return round(float(value), 2)


def shown(value: float) -> str:
    """An amount as the results show it (JSON), so a reply can quote it."""
    return json.dumps(money(value))


class BankApp:
    """State: ``{"balances": {account: float}, "payments": [..], "scheduled": [..], "next": int}``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def _take(self, account: str, amount: float) -> float:
        if amount <= 0:
            raise ToolError("the amount must be positive")
        if self.state["balances"][account] < amount:
            raise ToolError(f"insufficient funds in {account}")
        self.state["balances"][account] = money(self.state["balances"][account] - amount)
        return self.state["balances"][account]

    def get_balance(self, account: str) -> dict[str, Any]:
        return {"account": account, "balance": self.state["balances"][account]}

    def transfer(self, from_account: str, to_account: str, amount: float) -> dict[str, Any]:
        if from_account == to_account:
            raise ToolError("the two accounts must differ")
        left = self._take(from_account, money(amount))
        self.state["balances"][to_account] = money(self.state["balances"][to_account] + amount)
        return {"from_balance": left, "to_balance": self.state["balances"][to_account]}

    def pay_bill(self, account: str, payee: str, amount: float) -> dict[str, Any]:
        if len(self.state["payments"]) >= 100:
            raise ToolError("too many payments")
        left = self._take(account, money(amount))
        payment_id = f"p{self.state['next']}"
        self.state["next"] += 1
        self.state["payments"].append({"id": payment_id, "account": account, "payee": payee,
                                       "amount": money(amount)})
        return {"id": payment_id, "balance": left}

    def list_payments(self, account: str) -> list[dict[str, Any]]:
        return [p for p in self.state["payments"] if p["account"] == account][-5:]

    def schedule_payment(self, account: str, payee: str, amount: float, day: str) -> dict[str, Any]:
        if len(self.state["scheduled"]) >= 50:
            raise ToolError("too many scheduled payments")
        self.state["scheduled"].append({"account": account, "payee": payee, "amount": money(amount),
                                        "day": day})
        return {"scheduled": len(self.state["scheduled"])}


_ACCOUNT = string("account", ACCOUNTS)
_PAYEE = string("payee", PAYEES)
_AMOUNT = number("amount in dollars")


class Bank(Environment):
    name = "bank"
    purpose = "You operate the user's bank accounts."
    app = BankApp
    tools = [
        tool("get_balance", "Balance of an account.", {"account": _ACCOUNT}),
        tool("transfer", "Move money between accounts.",
             {"from_account": _ACCOUNT, "to_account": _ACCOUNT, "amount": _AMOUNT}),
        tool("pay_bill", "Pay a payee.", {"account": _ACCOUNT, "payee": _PAYEE, "amount": _AMOUNT}),
        tool("list_payments", "Last payments of an account.", {"account": _ACCOUNT}),
        tool("schedule_payment", "Pay a payee on a later day.",
             {"account": _ACCOUNT, "payee": _PAYEE, "amount": _AMOUNT, "day": string("weekday", DAYS)}),
    ]

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        taken: set[str] = set()
        balances = {"checking": money(rng.randrange(60_000, 300_000) / 100),
                    "savings": money(rng.randrange(1_000, 5_000) * 2)}
        old = rng.sample(PAYEES, 2)
        payments = [{"id": ident(rng, "p", taken), "account": "checking", "payee": p,
                     "amount": money(rng.randrange(1_000, 20_000) / 100)} for p in old]
        state = {"balances": balances, "payments": payments, "scheduled": [], "next": 1}
        payee = rng.choice(PAYEES)
        amount = money(rng.randrange(500, 30_000) / 100)
        if kind == "dependent":
            half = money(balances["savings"] / 2)
            turns = [Turn("Move half of my savings balance to checking.",
                          [calls(call("get_balance", account="savings")),
                           calls(call("transfer", from_account="savings", to_account="checking", amount=half)),
                           reply(f"Moved {shown(half)} to checking.")])]
        elif kind == "facts":
            left = balances["checking"] - amount
            turns = [Turn(f"Pay {amount} to {payee} from checking and tell me the new balance.",
                          [calls(call("pay_bill", account="checking", payee=payee, amount=amount)),
                           reply(f"Paid. Checking now holds {shown(left)}.")], facts=[shown(left)])]
        elif kind == "missing_param":
            turns = [Turn(f"Pay my {payee} bill from checking.", [reply("How much should I pay?")]),
                     Turn(f"{amount} dollars.",
                          [calls(call("pay_bill", account="checking", payee=payee, amount=amount)),
                           reply("Paid.")])]
        elif kind == "missing_function":
            day = rng.choice(DAYS)
            wanted = call("schedule_payment", account="checking", payee=payee, amount=amount, day=day)
            turns = [Turn(f"Schedule {amount} to {payee} from checking on {day}.",
                          [reply("I have no function to schedule payments.")]),
                     Turn("I added a function for that. Please schedule it now.",
                          [calls(wanted), reply("Scheduled.")], reveal=["schedule_payment"])]
            return state, turns, ["schedule_payment"]
        else:  # multi_request
            repeat = payments[-1]
            after = balances["savings"] + amount
            turns = [Turn(f"Pay {repeat['payee']} the same amount as my last payment to them.",
                          [calls(call("list_payments", account="checking")),
                           calls(call("pay_bill", account="checking", payee=repeat["payee"],
                                      amount=repeat["amount"])), reply("Paid.")]),
                     Turn(f"Now move {amount} from checking to savings and tell me the savings balance.",
                          [calls(call("transfer", from_account="checking", to_account="savings", amount=amount)),
                           reply(f"Savings now holds {shown(after)}.")], facts=[shown(after)])]
        return state, turns, []
