"""Function signatures: every (domain, entity, verb) becomes one function with its schema.

A verb decides the shape (``get`` takes an id, ``create`` two or three domain fields, ``export``
a format and an array of ids, ...); which domain slots fill it, the naming style and the
description wording are drawn from a generator seeded by the function's own words, so the
catalogue is the same on every run and for every example seed. 48 domains x 6 entities x 8
of the 12 verbs give 2,304 signatures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Any

from toolrl_lib.data.toolset.domains import DOMAINS, SLOTS, Domain, Slot
from toolrl_lib.data.toolset.naming import STYLES, function_name, parameter_name
from toolrl_lib.data.toolset.values import KINDS

VERBS = ("get", "list", "create", "update", "cancel", "search", "count", "export", "schedule",
         "share", "estimate", "archive")
VERBS_PER_ENTITY = 8
EXPORT_FORMATS = ("csv", "json", "pdf", "xlsx")
PERMISSIONS = ("view", "comment", "edit")
DESCRIPTIONS = {
    "get": ("Fetch one {e} by its identifier.", "Returns the details of a single {e} in the {d} system.",
            "Look up a {e} record."),
    "list": ("List {e} records matching a filter.", "Returns {e} entries from {d}, newest first.",
             "Enumerate the {e} items that fit the given criteria."),
    "create": ("Create a new {e}.", "Registers a {e} in the {d} system and returns its id.",
               "Add one {e} record."),
    "update": ("Change fields of an existing {e}.", "Updates a {e} in {d}; unspecified fields stay as they are.",
               "Modify a {e} record."),
    "cancel": ("Cancel a {e}.", "Withdraws an existing {e} in {d}.", "Call off a {e} that was set up earlier."),
    "search": ("Search {e} records by their fields.", "Full search over {d} {e} entries.",
               "Find {e} items that match several criteria."),
    "count": ("Count {e} records in a period.", "How many {e} entries {d} holds for a filter.",
              "Tally {e} items."),
    "export": ("Export {e} records to a file.", "Writes the chosen {e} entries of {d} to a downloadable file.",
               "Download {e} data in a chosen format."),
    "schedule": ("Schedule a {e} for a date and time.", "Books a time for a {e} in {d}.",
                 "Put a {e} on the calendar."),
    "share": ("Share a {e} with other people.", "Grants access to a {e} in {d}.",
              "Give collaborators access to one {e}."),
    "estimate": ("Estimate the cost of a {e}.", "Quote for a {e} in {d}, computed from its figures.",
                 "Work out what a {e} would take."),
    "archive": ("Archive a {e} so it no longer shows up.", "Moves a {e} in {d} to the archive.",
                "Retire an old {e}."),
}


@dataclass(frozen=True)
class Param:
    """One parameter of one function: how it is named, typed and phrased."""

    name: str
    kind: str  # a values.KINDS key, "flag", "enum", "array:<kind>" or "array:enum"
    description: str
    phrase: str
    required: bool
    default: Any = None
    choices: tuple[str, ...] = ()  # enum values
    off_phrase: str = ""  # a required flag's "no"

    def schema(self) -> dict[str, Any]:
        """The JSON Schema property (what the model sees)."""
        out = {**item_schema(self.kind.removeprefix("array:"), self.choices)}
        if self.kind.startswith("array:"):
            out = {"type": "array", "items": out}
        unit = KINDS[self.kind].unit if self.kind in KINDS else ""
        out["description"] = self.description + (f" ({unit})" if unit and unit not in self.description else "")
        if self.default is not None:
            out["default"] = self.default
        return out


def item_schema(kind: str, choices: tuple[str, ...] = ()) -> dict[str, Any]:
    """The schema of one value of ``kind``."""
    if kind == "flag":
        return {"type": "boolean"}
    if kind == "enum":
        return {"type": "string", "enum": list(choices)}
    if kind not in KINDS:
        raise ValueError(f"unknown value kind {kind!r}; expected flag, enum or one of {sorted(KINDS)}")
    return dict(KINDS[kind].schema)


@dataclass(frozen=True)
class Signature:
    """One function: name, domain, verb, entity, style, description and parameters."""

    name: str
    domain: str
    verb: str
    entity: str
    style: str
    description: str
    params: tuple[Param, ...]

    def schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` as ``Example.tools`` holds it."""
        return {"name": self.name, "description": self.description,
                "parameters": {"type": "object",
                               "properties": {p.name: p.schema() for p in self.params},
                               "required": [p.name for p in self.params if p.required]}}

    @property
    def key(self) -> str:
        """What makes two signatures the same: name and typed parameter list."""
        return self.name + "(" + ", ".join(f"{p.name}:{p.kind}" for p in self.params) + ")"


def _param(slot: Slot, style: str, required: bool) -> Param:
    """A domain slot as a parameter (an optional flag defaults to false)."""
    default = False if slot.kind == "flag" and not required else None
    return Param(parameter_name(slot.words.split(), style), slot.kind, slot.description, slot.phrase,
                 required, default, off_phrase=slot.off_phrase)


def _enum(domain: Domain, style: str, required: bool, array: bool = False) -> Param:
    words, values = domain.enum
    name_words = words.split() + (["list"] if array else [])
    description = f"{words.capitalize()}{' values' if array else ''}: one of {', '.join(values)}"
    phrase = f"for {words} {{}}" if not array else f"covering the {words} values {{}}"
    return Param(parameter_name(name_words, style), "array:enum" if array else "enum", description,
                 phrase, required, None, values)


def _generic(words: str, kind: str, description: str, phrase: str, style: str, required: bool,
             default: Any = None, choices: tuple[str, ...] = ()) -> Param:
    return Param(parameter_name(words.split(), style), kind, description, phrase, required, default, choices)


def _pick(domain: Domain, rng: random.Random, n: int, taken: set[str], flags: bool = False) -> list[Slot]:
    """``n`` domain slots not yet used, flags only when asked; no two with the same phrase start."""
    pool = [SLOTS[s] for s in domain.slots if (SLOTS[s].kind == "flag") == flags]
    rng.shuffle(pool)
    out = []
    for slot in pool:
        lead = slot.phrase.split()[0]
        if slot.words in taken or lead in {s.phrase.split()[0] for s in out}:
            continue
        out.append(slot)
        taken.add(slot.words)
        if len(out) == n:
            break
    return out


def _params(verb: str, domain: Domain, entity: str, style: str, rng: random.Random) -> list[Param]:
    """The verb's parameter recipe, filled from the domain's slots."""
    ident = _generic(f"{entity} id", "identifier", f"Identifier of the {entity}", "with ID {}", style, True)
    limit = _generic("max results", "count", "Largest number of results to return", "showing at most {}",
                     style, False, 20)
    taken: set[str] = set()
    out: list[Param] = []
    if verb == "get":
        out = [ident] + [_param(s, style, False) for s in _pick(domain, rng, 1, taken, flags=True)]
    elif verb == "list":
        out = [_param(s, style, True) for s in _pick(domain, rng, 1, taken)] + [limit, _enum(domain, style, False)]
    elif verb == "create":
        out = [_param(s, style, True) for s in _pick(domain, rng, rng.randint(2, 3), taken)]
        out += [_enum(domain, style, rng.random() < 0.5)]
        flag = rng.random() < 0.5
        out += [_param(s, style, flag and rng.random() < 0.4) for s in _pick(domain, rng, 1, taken, flags=flag)]
    elif verb == "update":
        out = [ident] + [_param(s, style, i == 0) for i, s in enumerate(_pick(domain, rng, 2, taken))]
    elif verb == "cancel":
        reason = _generic("reason", "title", "Why it is cancelled, in a few words", "with the reason {}", style, False)
        out = [ident] + [_param(s, style, False) for s in _pick(domain, rng, 1, taken, flags=True)] + [reason]
    elif verb == "search":
        out = [_param(s, style, True) for s in _pick(domain, rng, rng.randint(1, 2), taken)]
        out += [_enum(domain, style, False, array=True), limit]
    elif verb == "count":
        since = _generic("since date", "date", "Count from this day on, YYYY-MM-DD", "since {}", style, True)
        out = [since, _enum(domain, style, rng.random() < 0.3)]
    elif verb == "export":
        fmt = _generic("file format", "enum", "Output file format", "as {}", style, True, None, EXPORT_FORMATS)
        ids = _generic(f"{entity} ids", "array:identifier", f"Identifiers of the {entity} records",
                       "with the IDs {}", style, True)
        out = [fmt, ids] + [_param(s, style, False) for s in _pick(domain, rng, 1, taken)]
    elif verb == "schedule":
        day = _generic("scheduled date", "date", "Day, YYYY-MM-DD", "on {}", style, True)
        hour = _generic("scheduled time", "time", "Time of day, 24-hour HH:MM", "at {}", style, True)
        taken |= {"date", "time", "start time", "start date"}
        out = [day, hour] + [_param(s, style, rng.random() < 0.5) for s in _pick(domain, rng, 1, taken)]
    elif verb == "share":
        people = _generic("recipient emails", "array:email", "Email addresses to share with", "with {}", style, True)
        perm = _generic("permission", "enum", "Access level granted", "giving {} access", style, False,
                        "view", PERMISSIONS)
        out = [ident, people, perm]
    elif verb == "estimate":
        numeric = [s for s in _pick(domain, rng, 6, taken) if s.kind in ("count", "amount", "money", "percent",
                   "weight", "distance", "duration", "volume", "temperature", "year")]
        out = [_param(s, style, True) for s in numeric[:2]] or [ident]
        out += [_generic("currency code", "currency", "ISO 4217 code of the answer", "in {}", style, False, "EUR")]
    elif verb == "archive":
        out = [ident] + [_param(s, style, rng.random() < 0.5) for s in _pick(domain, rng, 1, taken, flags=True)]
    else:
        raise ValueError(f"unknown verb {verb!r}; expected one of {VERBS}")
    return out


def make_signature(domain: Domain, entity: str, verb: str) -> Signature:
    """The one signature of (domain, entity, verb) — the same on every run."""
    rng = random.Random(f"{domain.name}/{entity}/{verb}")
    style = rng.choice(STYLES)
    words = [verb, *entity.split()]
    description = rng.choice(DESCRIPTIONS[verb]).format(e=entity, d=domain.name)
    params = tuple(_params(verb, domain, entity, style, rng))
    return Signature(function_name(words, style, domain.namespace), domain.name, verb, entity, style,
                     description, params)


@cache
def all_signatures() -> tuple[Signature, ...]:
    """Every signature of every domain (each entity takes ``VERBS_PER_ENTITY`` verbs)."""
    out = []
    for domain in DOMAINS:
        for entity in domain.entities:
            verbs = random.Random(f"{domain.name}/{entity}").sample(VERBS, VERBS_PER_ENTITY)
            out.extend(make_signature(domain, entity, verb) for verb in sorted(verbs, key=VERBS.index))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ValueError("two signatures share a name; make the domains' entities distinct")
    return tuple(out)
