"""What one of our environments is: an app with a typed catalogue, and tasks over it.

An environment is a single object (``Environment``) that knows

* ``app`` -- the class whose *public methods* are the tools (each one reads/changes a plain
  JSON state dict; private helpers start with ``_`` and are never callable);
* ``tools`` -- the catalogue: one JSON Schema per public method, the same tool format as a
  single-turn ``Example`` (``{"name", "description", "parameters"}``);
* ``generate(seed)`` -- a procedural, seeded ``Task``: an initial state, one or more user
  turns, the gold steps of each turn (calls or a plain reply) and the facts the user asked
  for. Goal states are never written by hand: the checker executes the gold calls.

Registered by name in ``toolrl_lib.envs`` (``register``/``get_env``).
"""

from __future__ import annotations

import copy
import random
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("dependent", "facts", "missing_param", "missing_function", "multi_request")


class ToolError(Exception):
    """A call the app refuses (unknown id, bad value): its text is shown to the model."""


@dataclass
class Step:
    """One gold assistant step: calls to make, or (no calls) a plain reply that ends the turn."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""


@dataclass
class Turn:
    """One user turn: the message, tools revealed before it, gold steps and asked-for facts."""

    user: str
    steps: list[Step]
    facts: list[str] = field(default_factory=list)  # substrings the turn's replies must contain
    reveal: list[str] = field(default_factory=list)  # tool names offered from this turn on


@dataclass
class Task:
    """A generated episode: deterministic in (env, seed)."""

    id: str
    env: str
    seed: int
    kind: str
    state: dict[str, Any]
    turns: list[Turn]
    hidden: list[str] = field(default_factory=list)  # tools not offered at the start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Task:
        turns = [Turn(user=t["user"], steps=[Step(**s) for s in t["steps"]], facts=list(t["facts"]),
                      reveal=list(t["reveal"])) for t in row["turns"]]
        return cls(id=row["id"], env=row["env"], seed=int(row["seed"]), kind=row["kind"],
                   state=row["state"], turns=turns, hidden=list(row.get("hidden") or []))


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A gold call in the catalogue's ``{"name", "arguments"}`` form."""
    return {"name": name, "arguments": arguments}


def reply(text: str) -> Step:
    return Step(calls=[], text=text)


def calls(*items: dict[str, Any]) -> Step:
    return Step(calls=list(items))


def tool(name: str, description: str, required: dict[str, dict[str, Any]],
         optional: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A catalogue entry; ``required``/``optional`` map parameter names to JSON Schemas."""
    properties = {**required, **(optional or {})}
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(required)}}


def string(description: str, enum: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "description": description}
    if enum:
        out["enum"] = list(enum)
    return out


def number(description: str, integer: bool = False) -> dict[str, Any]:
    return {"type": "integer" if integer else "number", "description": description}


class Environment:
    """Base class: subclasses set ``name``, ``purpose``, ``app``, ``tools`` and ``make_task``."""

    name: str = ""
    purpose: str = ""  # first line of the system prompt
    app: type = object
    tools: list[dict[str, Any]] = []

    def system_prompt(self) -> str:
        return (f"{self.purpose} Use the functions to act; read each result before the next "
                "step. If a needed detail is missing, ask the user instead of guessing. When a "
                "request is done, answer the user in plain text.")

    def tool_schemas(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        wanted = None if names is None else set(names)
        return [copy.deepcopy(t) for t in self.tools if wanted is None or t["name"] in wanted]

    def generate(self, seed: int, kind: str | None = None) -> Task:
        """The task of ``seed`` (kind chosen by the seed unless given); deterministic."""
        rng = random.Random(f"{self.name}:{seed}")
        kind = kind or KINDS[rng.randrange(len(KINDS))]
        if kind not in KINDS:
            raise ValueError(f"unknown task kind {kind!r}; expected one of {KINDS}")
        state, turns, hidden = self.make_task(rng, kind)
        return Task(id=f"{self.name}-{seed}-{kind}", env=self.name, seed=seed, kind=kind,
                    state=state, turns=turns, hidden=hidden)

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        raise NotImplementedError

    def open(self, state: dict[str, Any]) -> Any:
        """A fresh app over a deep copy of ``state`` (never shared between episodes)."""
        return self.app(copy.deepcopy(state))


def ident(rng: random.Random, prefix: str, taken: set[str]) -> str:
    """A fresh id like ``ev4821``: the model must read it from a result, not guess it."""
    while True:
        value = f"{prefix}{rng.randrange(1000, 10000)}"
        if value not in taken:
            taken.add(value)
            return value
