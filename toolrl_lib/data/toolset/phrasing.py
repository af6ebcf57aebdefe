"""Calls and the user text that asks for them.

``sample_call`` draws one call of a signature: every required parameter and some optional
ones get a value; each is written into the query as people write it (``values.py``) while
the call holds the canonical value, with BFCL-style accepted lists (``ACCEPTED``) for the
reward: each mentioned argument lists its canonical spellings, each unmentioned optional
one ``""`` (may be omitted) plus its default when it has one.
"""

from __future__ import annotations

import random
import re
from typing import Any

from toolrl_lib.data.toolset.signatures import Param, Signature
from toolrl_lib.data.toolset.values import KINDS
from toolrl_lib.rewards.matching import ACCEPTED

OPTIONAL_SHARE = 0.4  # how often an optional parameter is set
CLAUSES = {
    "get": ("Show me the {e}", "Can you pull up the {e}", "I need the details of the {e}", "Look up the {e}",
            "Fetch the {e}"),
    "list": ("List the {e} records", "Show all {e} entries", "Give me the {e} list", "Which {e} items are there"),
    "create": ("Create a {e}", "Please add a new {e}", "I'd like to register a {e}", "Set up a {e}",
               "Could you make a new {e}"),
    "update": ("Update the {e}", "Change the {e}", "Please edit the {e}", "Modify the {e}"),
    "cancel": ("Cancel the {e}", "Please call off the {e}", "I want to withdraw the {e}", "Drop the {e}"),
    "search": ("Search for {e} entries", "Find any {e}", "Look for {e} records", "Can you search the {e} records"),
    "count": ("How many {e} records are there", "Count the {e} entries", "Give me a count of {e} items",
              "Tally the {e} records"),
    "export": ("Export the {e} data", "Download the {e} records", "Save the {e} entries to a file",
               "Give me an export of the {e}"),
    "schedule": ("Schedule a {e}", "Book a {e}", "Put a {e} on the calendar", "Plan a {e}"),
    "share": ("Share the {e}", "Give access to the {e}", "Please share the {e}", "Send the {e}"),
    "estimate": ("Estimate a {e}", "What would a {e} cost", "Quote me a {e}", "Work out the cost of a {e}"),
    "archive": ("Archive the {e}", "Move the {e} to the archive", "Retire the {e}", "Put away the {e}"),
}
QUESTION_STARTS = ("Can", "Could", "How", "Which", "What")
_ARTICLE = re.compile(r"\ba ([aeiou])")


def articles(text: str) -> str:
    """"an" before a vowel.

    >>> articles("Create a image batch, a tank")
    'Create an image batch, a tank'
    """
    return _ARTICLE.sub(r"an \1", text)


def clause_for(sig: Signature, rng: random.Random) -> str:
    """The request's verb clause for the signature's entity."""
    return articles(rng.choice(CLAUSES[sig.verb]).format(e=sig.entity))


def join_words(items: list[str]) -> str:
    """People's lists.

    >>> join_words(["a"]), join_words(["a", "b", "c"])
    ('a', 'a, b and c')
    """
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def sample_value(param: Param, rng: random.Random) -> tuple[Any, str, list[Any]]:
    """``(canonical value, how the query writes it, accepted values)`` for one parameter."""
    kind = param.kind
    if kind == "flag":
        value = True if not param.required else rng.random() < 0.5
        return value, "", [value]
    if kind == "enum":
        value = rng.choice(param.choices)
        return value, value, [value]
    if kind.startswith("array:"):
        item = kind.removeprefix("array:")
        values: list[Any] = []
        texts: list[str] = []
        for _ in range(rng.randint(2, 3) * 3):
            if len(values) == 3 or (len(values) == 2 and rng.random() < 0.5):
                break
            value = rng.choice(param.choices) if item == "enum" else KINDS[item].sample(rng)
            if value not in values:
                values.append(value)
                texts.append(value if item == "enum" else KINDS[item].render(value, rng))
        return values, join_words(texts), [values]
    value_kind = KINDS[kind]
    value = value_kind.sample(rng)
    return value, value_kind.render(value, rng), value_kind.accepted(value)


def phrase_for(param: Param, value: Any, text: str) -> str:
    """How the query mentions one argument (a required flag says yes or no)."""
    if param.kind == "flag":
        if value:
            return param.phrase
        return param.off_phrase if param.required else ""
    return param.phrase.format(text)


def omitted(param: Param) -> list[Any]:
    """Accepted values of an optional argument the query does not mention."""
    return ["", param.default] if param.default is not None else [""]


def sample_call(sig: Signature, rng: random.Random) -> tuple[dict[str, Any], str]:
    """One call of ``sig`` (with ``ACCEPTED`` lists) and a query stating exactly its arguments."""
    arguments: dict[str, Any] = {}
    accepted: dict[str, list[Any]] = {}
    phrases = []
    for param in sig.params:
        if not param.required and rng.random() >= OPTIONAL_SHARE:
            accepted[param.name] = omitted(param)
            continue
        value, text, ok = sample_value(param, rng)
        arguments[param.name], accepted[param.name] = value, ok
        phrases.append(phrase_for(param, value, text))
    rng.shuffle(phrases)
    clause = clause_for(sig, rng)
    body = clause + "".join((" " if i == 0 or rng.random() < 0.7 else ", ") + p for i, p in enumerate(phrases) if p)
    end = "?" if clause.split()[0] in QUESTION_STARTS else rng.choice((".", ".", "!"))
    return {"name": sig.name, "arguments": arguments, ACCEPTED: accepted}, body + end


def missing_query(sig: Signature, rng: random.Random) -> str:
    """The request without its required values: the right answer is to ask, not to call."""
    clause = clause_for(sig, rng)
    end = "?" if clause.split()[0] in QUESTION_STARTS else "."
    tails = ("", " for me", " when you get a chance") + (() if clause.startswith("Please") else (" please",))
    return clause + rng.choice(tails) + end
