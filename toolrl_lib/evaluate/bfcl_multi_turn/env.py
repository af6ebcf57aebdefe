"""BFCL's multi-turn executor: BFCL's simulated APIs (file system, trading bot, ...), driven safely.

This is the environment of BFCL's multi-turn *benchmark* categories, used to evaluate and to
score. The environments we train in are ``toolrl_lib.envs`` (they reuse ``validate_call``).

BFCL runs a model's calls by building Python source (``name(key=repr(value), ...)``) and
``eval``-ing it, with class instances cached in module globals per model and entry id.
Here instead:

* every episode gets fresh instances of the entry's ``involved_classes``, loaded from a
  deep copy of its ``initial_config`` (``long_context`` for that category), in a worker
  process (``worker.py``) that only ever calls a method by name;
* a call is executed only when it passed ``validate_call``: the name is a public method
  of those instances, every argument key is a Python identifier, every value a finite
  JSON literal, the arguments are small; nothing is evaluated;
* each call runs under a time limit (the worker is killed and restarted, and the other
  open episodes are rebuilt by replaying their logged calls: the classes are
  deterministic), a memory limit and a result-size limit. A call that broke a limit is
  "refused": it is treated as never having run (its effects are rolled back by that
  replay) and it is never written as a call to a result file. ``MathAPI``'s precision
  changes are undone after every call;
* results are rendered as BFCL renders them and errors are returned as BFCL returns them
  (``"Error during execution: {e}"``).

The canonical step string of a step is what we write to BFCL result files: the
``<tool_call>`` JSON of the calls that executed, and ``REJECTED_NAME`` in place of any
call that did not (BFCL's decoder reads it as a call of an undefined name: an error
result, no effect, no code).
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import bfcl_data_dir

WORKER = Path(__file__).with_name("worker.py")
# Function-doc file per class (data/multi_turn_func_doc/).
DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
# What BFCL says when it reveals held-out functions (prompting handlers): the docs, then this.
HELD_OUT_MESSAGE = "I have updated some more functions you can choose from. What about now?"
# Stand-in for a call that was not executed; not a method of any class, nor a builtin.
REJECTED_NAME = "toolrl_rejected_call"

MAX_ARG_CHARS = 65_536  # JSON size of one call's arguments
MAX_ARG_DEPTH = 16
DEFAULT_CALL_TIMEOUT = 10.0  # seconds per call (generous: ground-truth calls take < 10 ms)
DEFAULT_MAX_BYTES = 4 << 30  # address space of the worker
DEFAULT_MAX_RESULT = 1 << 20  # characters of one result


class ExecutorError(RuntimeError):
    """The worker failed in a way that is not a model error (a bug or a broken install)."""


@dataclass
class CallOutcome:
    """What one call did: BFCL's result text, whether it executed, and why not if not."""

    name: Any
    arguments: Any
    result: str
    executed: bool
    refused: str | None = None  # invalid call or a broken limit (never written as a call)

    def canonical(self) -> dict[str, Any]:
        """The call as written to a result file (``REJECTED_NAME`` unless it executed)."""
        if self.executed:
            return {"name": self.name, "arguments": self.arguments}
        return {"name": REJECTED_NAME, "arguments": {}}


# -- validation ---------------------------------------------------------------------------
def _is_identifier(text: Any) -> bool:
    return isinstance(text, str) and text.isidentifier() and not keyword.iskeyword(text)


def _literal_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is not a plain finite JSON value (None when it is)."""
    if depth > MAX_ARG_DEPTH:
        return f"arguments nested deeper than {MAX_ARG_DEPTH}"
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        # BFCL writes repr(value): inf/nan become undefined names in its eval.
        return None if math.isfinite(value) else f"name '{'nan' if math.isnan(value) else 'inf'}' is not defined"
    if isinstance(value, list):
        for item in value:
            problem = _literal_problem(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return "a dictionary key is not a string"
            problem = _literal_problem(item, depth + 1)
            if problem:
                return problem
        return None
    return f"argument of type {type(value).__name__} is not a JSON value"


def validate_call(call: Any, methods: dict[str, Any]) -> str | None:
    """Why ``call`` ({"name", "arguments"}) must not run here; None when it may.

    The message is what the model is told (``Error during execution: ...``); where BFCL
    would have produced a specific error (an undefined name) the text is the same.
    """
    if not isinstance(call, dict):
        return "a call must be an object with 'name' and 'arguments'"
    name, arguments = call.get("name"), call.get("arguments")
    if not isinstance(name, str) or len(name) > 256:
        return "the function name must be a string of at most 256 characters"
    if not _is_identifier(name):
        return f"invalid function name {name[:80]!r}"
    if name not in methods or name.startswith("_"):
        return f"name '{name}' is not defined"
    if not isinstance(arguments, dict):
        return "'arguments' must be an object"
    for key in arguments:
        if not _is_identifier(key):
            return f"invalid argument name {str(key)[:80]!r}"
    problem = _literal_problem(arguments)
    if problem:
        return problem
    try:
        size = len(json.dumps(arguments, allow_nan=False))
    except (ValueError, TypeError, RecursionError) as error:
        return f"arguments are not JSON: {error}"
    if size > MAX_ARG_CHARS:
        return f"arguments longer than {MAX_ARG_CHARS} characters"
    return None


# -- the worker ---------------------------------------------------------------------------
@dataclass
class _Episode:
    classes: list[str]
    config: dict[str, Any]
    long_context: bool
    methods: dict[str, Any] = field(default_factory=dict)
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class EnvPool:
    """Open episodes in one worker process; ``call`` runs one validated call under limits.

    Use as a context manager (the worker is stopped on exit)."""

    def __init__(
        self,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_result_chars: int = DEFAULT_MAX_RESULT,
        python: str | None = None,
    ) -> None:
        self.call_timeout = call_timeout
        self.max_bytes = max_bytes
        self.max_result_chars = max_result_chars
        self.python = python or sys.executable
        self.episodes: dict[str, _Episode] = {}
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._buffer = b""

    # process management
    def _start(self) -> None:
        env = dict(os.environ, TOOLRL_MT_MAX_BYTES=str(self.max_bytes),
                   TOOLRL_MT_MAX_RESULT=str(self.max_result_chars))  # fmt: skip
        self._proc = subprocess.Popen(
            [self.python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        self._buffer = b""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream:
                    stream.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _request(self, payload: dict[str, Any], timeout: float | None) -> dict[str, Any] | None:
        """Send one request; the reply, or None when the worker died or timed out."""
        if self._proc is None:
            self._start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(payload) + "\n").encode("utf-8"))
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None  # timed out
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None  # the worker died (e.g. killed by the memory limit)
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if reply.get("fatal"):
            raise ExecutorError(f"multi-turn worker: {reply['fatal']}")
        return reply

    def _open_in_worker(self, key: str, episode: _Episode) -> None:
        reply = self._request({"op": "open", "key": key, "classes": episode.classes,
                               "config": episode.config, "long_context": episode.long_context},
                              timeout=120)  # fmt: skip
        if reply is None or not reply.get("ok"):
            raise ExecutorError(f"could not open episode {key}: {reply}")
        episode.methods = reply["methods"]

    def _restart(self) -> None:
        """Kill the worker and rebuild every open episode from its log of executed calls."""
        self._kill()
        self.restarts += 1
        for key, episode in self.episodes.items():
            self._open_in_worker(key, episode)
            for name, arguments in episode.log:
                reply = self._request({"op": "call", "key": key, "name": name, "args": arguments},
                                      timeout=max(60.0, self.call_timeout * 3))
                if reply is None or not reply.get("ok"):
                    raise ExecutorError(f"replaying episode {key} failed at {name}")

    # episodes
    def open(self, key: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Fresh instances for one BFCL entry; returns ``method -> [class, parameters]``."""
        category = str(entry["id"]).rsplit("_", 1)[0]
        episode = _Episode(
            classes=list(entry["involved_classes"]),
            config=entry.get("initial_config") or {},
            long_context="long_context" in category or "composite" in category,
        )
        self.episodes[key] = episode
        self._open_in_worker(key, episode)
        return episode.methods

    def close(self, key: str) -> None:
        if self.episodes.pop(key, None) is not None and self._proc is not None:
            self._request({"op": "close", "key": key}, timeout=60)

    def call(self, key: str, call: Any) -> CallOutcome:
        """Validate and run one call of an open episode."""
        episode = self.episodes[key]
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments") if isinstance(call, dict) else None
        problem = validate_call(call, episode.methods)
        if problem:
            return CallOutcome(name, arguments, f"Error during execution: {problem}", False, problem)
        reply = self._request({"op": "call", "key": key, "name": name, "args": arguments},
                              timeout=self.call_timeout)
        if reply is None or not reply.get("ok"):
            why = (reply or {}).get("limit") or f"the call did not finish within {self.call_timeout:g} s"
            self._restart()  # the call is rolled back: the log does not hold it
            return CallOutcome(name, arguments, f"Error during execution: {why}", False, why)
        episode.log.append((name, arguments))
        return CallOutcome(name, arguments, reply["result"], True)


# -- BFCL's function docs and ground truth ------------------------------------------------
@cache
def _class_docs(class_name: str) -> tuple[str, ...]:
    if class_name not in DOC_FILES:
        raise ValueError(f"unknown BFCL multi-turn class {class_name!r}")
    path = bfcl_data_dir() / "multi_turn_func_doc" / DOC_FILES[class_name]
    return tuple(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def entry_functions(entry: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The entry's function docs as BFCL builds them, and the held-out ones per turn.

    The involved classes' docs are joined in order; ``missed_function`` docs are taken out
    and revealed at their turn. As in BFCL, only the docs in the prompt get the Python
    language hint (the held-out ones are shown without it).
    """
    docs = [json.loads(line) for name in entry["involved_classes"] for line in _class_docs(name)]
    held_out: dict[int, list[dict[str, Any]]] = {}
    for turn, names in (entry.get("missed_function") or {}).items():
        held_out[int(turn)] = []
        for name in names:
            for index, doc in enumerate(docs):
                if doc["name"] == name:
                    held_out[int(turn)].append(docs.pop(index))
                    break
    for doc in docs:
        doc["description"] = str(doc.get("description", "")) + PYTHON_HINT
    return docs, held_out


def held_out_message(functions: list[dict[str, Any]]) -> str:
    """BFCL's user message for a held-out turn (prompting handlers): Python's ``str`` of
    the docs list, a newline, then ``HELD_OUT_MESSAGE``."""
    return f"{functions}\n{HELD_OUT_MESSAGE}"


def compact_docs(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A shorter rendering for small-window models (a deviation from BFCL): no
    ``response`` schemas and no repeated "This tool belongs to ..." class preamble."""
    out = []
    for doc in functions:
        doc = {k: v for k, v in doc.items() if k != "response"}
        description = str(doc.get("description", ""))
        marker = "Tool description: "
        if marker in description:
            description = description.split(marker, 1)[1]
        doc["description"] = description
        out.append(doc)
    return out


def parse_ground_truth_call(text: str, methods: dict[str, Any]) -> dict[str, Any]:
    """One BFCL ground-truth call string -> ``{"name", "arguments"}`` (literals via ``ast``;
    positional arguments mapped to the method's parameters in order)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise ValueError(f"ground-truth call {text[:80]!r} is not Python: {error}") from error
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"ground-truth call {text[:80]!r} is not a plain call")
    name = node.func.id
    if name not in methods:
        raise ValueError(f"ground-truth call {text[:80]!r}: {name} is not a method of the entry's classes")
    params = list(methods[name][1])
    if len(node.args) > len(params):
        raise ValueError(f"ground-truth call {text[:80]!r}: too many positional arguments")
    arguments = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"ground-truth call {text[:80]!r} uses **kwargs")
        arguments[kw.arg] = ast.literal_eval(kw.value)
    return {"name": name, "arguments": _jsonable(arguments)}


def _jsonable(value: Any) -> Any:
    """Tuples (Python literals in BFCL's answers) as lists, the way JSON carries them."""
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
