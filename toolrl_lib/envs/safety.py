"""Running a model's calls against one episode's app, safely.

The rules of the BFCL multi-turn executor (``toolrl_lib.evaluate.bfcl_multi_turn.env``), applied
in-process because the apps are ours (pure Python over a small JSON state):

* only names in the tools on offer *and* public methods of the app run (never ``_...``);
* arguments must be finite JSON literals with identifier keys (``validate_call``), match the
  tool's JSON Schema (required present, no unknown keys, types, enums) and stay small;
  nothing is ever evaluated;
* each call runs on the live state with a snapshot taken first: a refused call (an app
  error, a call over the time limit, a result or a state over its size limit) is rolled
  back, so it has no effect. The apps do bounded work per call (state size is capped), so
  the time limit is checked after the call rather than enforced by preemption;
* every episode opens a fresh app over a deep copy of the task's initial state.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

from toolrl_lib.envs.base import Environment, Task, ToolError
from toolrl_lib.evaluate.bfcl_multi_turn.env import validate_call

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,),
}


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 1.0  # a call slower than this is refused (and rolled back)
    max_string: int = 2_000  # characters of one string argument
    max_result_chars: int = 4_000  # characters of one rendered result
    max_state_chars: int = 200_000  # JSON size of the whole app state


@dataclass
class Outcome:
    """One call: the text fed back, whether it changed/read the state, and why not if not."""

    name: Any
    arguments: Any
    result: str
    executed: bool
    error: str | None = None


def schema_problem(arguments: dict[str, Any], schema: dict[str, Any], limits: Limits) -> str | None:
    """Why ``arguments`` do not fit the tool's parameter schema (None when they do)."""
    properties = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in arguments:
            return f"missing required argument '{key}'"
    for key, value in arguments.items():
        if key not in properties:
            return f"unexpected argument '{key}'"
        spec = properties[key]
        kinds = _TYPES.get(spec.get("type", ""), ())
        if kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            return f"argument '{key}' must be of type {spec['type']}"
        if "enum" in spec and value not in spec["enum"]:
            return f"argument '{key}' must be one of {spec['enum']}"
        if isinstance(value, str) and len(value) > limits.max_string:
            return f"argument '{key}' is longer than {limits.max_string} characters"
    return None


def render(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass
class Session:
    """One episode's live app, the tools on offer so far, and the executed calls."""

    env: Environment
    task: Task
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        self.app = self.env.open(self.task.state)
        self.offered = [t["name"] for t in self.env.tools if t["name"] not in self.task.hidden]
        self.schemas = {t["name"]: t["parameters"] for t in self.env.tools}
        self.log: list[dict[str, Any]] = []

    def reveal(self, names: list[str]) -> None:
        self.offered += [n for n in names if n not in self.offered]

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self.app.state)

    def call(self, request: Any) -> Outcome:
        name = request.get("name") if isinstance(request, dict) else None
        arguments = request.get("arguments") if isinstance(request, dict) else None
        methods = {n: None for n in self.offered if not n.startswith("_") and callable(getattr(self.app, n, None))}
        problem = validate_call(request, methods)
        if problem is None:
            problem = schema_problem(arguments, self.schemas[name], self.limits)
        if problem is not None:
            return Outcome(name, arguments, f"Error: {problem}", False, problem)
        snapshot = copy.deepcopy(self.app.state)
        start = time.perf_counter()
        try:
            value = getattr(self.app, name)(**arguments)
            text = render(value)
        except ToolError as error:
            self.app.state = snapshot
            return Outcome(name, arguments, f"Error: {error}", False, str(error))
        except (TypeError, ValueError, KeyError) as error:  # an app bug must not end the episode
            self.app.state = snapshot
            return Outcome(name, arguments, f"Error: {type(error).__name__}", False, repr(error))
        problem = None
        if time.perf_counter() - start > self.limits.call_seconds:
            problem = f"the call took longer than {self.limits.call_seconds:g} s"
        elif len(text) > self.limits.max_result_chars:
            problem = f"the result is longer than {self.limits.max_result_chars} characters"
        elif len(render(self.app.state)) > self.limits.max_state_chars:
            problem = "the call would make the store too large"
        if problem is not None:
            self.app.state = snapshot
            return Outcome(name, arguments, f"Error: {problem}", False, problem)
        self.log.append({"name": name, "arguments": arguments})
        return Outcome(name, arguments, text, True)
