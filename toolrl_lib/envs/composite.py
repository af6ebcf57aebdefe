"""An environment made of several parts: their tools side by side, their states side by side.

``Composite(name, parts, anchor, kinds, make)`` keeps the registration style of ``base``: its
``app`` is a class generated here whose public methods are exactly the parts' tools (each
delegates to its part's app over ``state[part name]``), so ``register`` checks it like any
app, ``safety.Session`` runs and rolls it back like any app, and the checker compares the
whole joint state. Tool names must not clash across parts.

A composite is reached through its ``anchor`` app: ``make_tasks`` asks the anchor for a kind
it does not generate itself (``cross_app``, ``distractors``) and is routed here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from toolrl_lib.envs.base import Environment, MakeTask, Turn


def _delegate(part: str, app: type, tool: str) -> Callable[..., Any]:
    def method(self: Any, **arguments: Any) -> Any:
        return getattr(app(self.state[part]), tool)(**arguments)  # the part's state, read each call

    method.__name__ = tool
    return method


def joint_app(parts: list[Environment]) -> type:
    """A class whose public methods are the parts' tools; state ``{part name: part state}``."""
    methods: dict[str, Any] = {}
    for part in parts:
        for schema in part.tools:
            if schema["name"] in methods:
                raise ValueError(f"tool {schema['name']!r} is in two parts")
            methods[schema["name"]] = _delegate(part.name, part.app, schema["name"])

    def __init__(self: Any, state: dict[str, Any]) -> None:
        self.state = state

    name = "".join(p.name.title() for p in parts) + "App"
    return type(name, (), {"__init__": __init__, "__doc__": f"The tools of {[p.name for p in parts]}.",
                           **methods})


class Composite(Environment):
    """Several parts as one environment; its tasks come from ``make``."""

    def __init__(self, name: str, parts: list[Environment], anchor: str, kinds: tuple[str, ...],
                 make: MakeTask) -> None:
        self.name, self.parts, self.anchor, self.kinds, self._make = name, parts, anchor, kinds, make
        self.app = joint_app(parts)
        self.tools = [t for part in parts for t in part.tool_schemas()]
        self.purpose = " ".join(p.purpose for p in parts if p.purpose)

    @property
    def apps(self) -> list[str]:
        return [app for part in self.parts for app in part.apps]

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        return self._make(rng, kind)

    make_hard_task = make_task
