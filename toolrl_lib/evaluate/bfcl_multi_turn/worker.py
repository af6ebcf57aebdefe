"""The process that hosts BFCL's simulated APIs for multi-turn episodes (stdlib only).

Started by ``toolrl_lib.evaluate.bfcl_multi_turn.env`` as ``python worker.py``; it
never imports ``toolrl_lib``. It speaks JSON lines on its stdin/stdout (BFCL's classes
may print, so their output goes to stderr) and keeps one set of fresh class instances per
open episode. Calls are made by method name with keyword arguments that are already plain
JSON values: nothing here evaluates text. The parent enforces the time limit (it kills
this process); the worker enforces the memory limit (``RLIMIT_AS``) and the result size.

Requests and replies (one JSON object a line):

* ``{"op": "open", "key", "classes", "config", "long_context"}`` ->
  ``{"ok": true, "methods": {name: [class, [parameter, ...]]}}``
* ``{"op": "call", "key", "name", "args"}`` -> ``{"ok": true, "result": str, "error": bool}``
  or ``{"ok": false, "limit": why}`` (the call broke a limit; the parent restarts us)
* ``{"op": "close", "key"}`` -> ``{"ok": true}``
"""

from __future__ import annotations

import copy
import decimal
import importlib
import inspect
import json
import os
import sys
from typing import Any

PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# BFCL class -> module of func_source_code (the multi-turn categories' classes).
CLASS_MODULES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = ("MathAPI",)  # BFCL loads no scenario into these
# Names BFCL refuses to run before it evaluates a call, with its own message.
BLOCKED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")


def render_result(value: Any) -> str:
    """A method's return value as BFCL feeds it back: str as is, dict as JSON when it can
    be (else ``str``), anything else ``str``."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class Host:
    """Open episodes: ``key -> {class name: instance}`` and ``key -> {method: instance}``."""

    def __init__(self, max_result_chars: int) -> None:
        self.instances: dict[str, dict[str, Any]] = {}
        self.methods: dict[str, dict[str, Any]] = {}
        self.max_result_chars = max_result_chars

    def open(self, key: str, classes: list[str], config: dict, long_context: bool) -> dict:
        instances, methods = {}, {}
        for name in classes:
            if name not in CLASS_MODULES:
                raise ValueError(f"unknown BFCL class {name!r}")
            cls = getattr(importlib.import_module(f"{PACKAGE}.{CLASS_MODULES[name]}"), name)
            instance = cls()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy(config.get(name, {})), long_context=long_context)
            instances[name] = instance
            for method, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method.startswith("_"):
                    methods[method] = instance  # a later class wins, as in BFCL
        self.instances[key], self.methods[key] = instances, methods
        return {"ok": True, "methods": {m: [type(i).__name__, _parameters(getattr(i, m))]
                                        for m, i in methods.items()}}

    def call(self, key: str, name: str, args: dict) -> dict:
        if name in BLOCKED:
            return {"ok": True, "result": f"Error during execution: Function call {name} is not allowed.",
                    "error": True}
        instance = self.methods[key].get(name)
        if instance is None or name.startswith("_") or not isinstance(args, dict):
            return {"ok": True, "result": f"Error during execution: name '{name}' is not defined",
                    "error": True}
        context = decimal.getcontext().copy()
        mp = sys.modules.get("mpmath")
        dps = mp.mp.dps if mp is not None else None
        try:
            try:
                text, error = render_result(getattr(instance, name)(**args)), False
            except (MemoryError, RecursionError) as exc:
                return {"ok": False, "limit": f"{type(exc).__name__} during the call"}
            except Exception as exc:  # noqa: BLE001 - BFCL returns every error as text
                text, error = f"Error during execution: {exc}", True
        finally:  # power/log/sqrt change global precision: undo it after rendering
            decimal.setcontext(context)
            mp = sys.modules.get("mpmath")
            if mp is not None and dps is not None:
                mp.mp.dps = dps
        if len(text) > self.max_result_chars:
            return {"ok": False, "limit": f"result longer than {self.max_result_chars} characters"}
        return {"ok": True, "result": text, "error": error}

    def close(self, key: str) -> dict:
        self.instances.pop(key, None)
        self.methods.pop(key, None)
        return {"ok": True}


def _parameters(method: Any) -> list[str]:
    """Parameter names in order (to map BFCL's positional ground-truth arguments)."""
    try:
        return [p.name for p in inspect.signature(method).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []


def _limit_memory(max_bytes: int) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    except (ImportError, ValueError, OSError):  # not on this platform: the time limit remains
        pass


def main() -> int:
    max_bytes = int(os.environ.get("TOOLRL_MT_MAX_BYTES", str(4 << 30)))
    max_result = int(os.environ.get("TOOLRL_MT_MAX_RESULT", str(1 << 20)))
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # class methods that print must not break the protocol
    sys.set_int_max_str_digits(4300)
    _limit_memory(max_bytes)
    host = Host(max_result)
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        try:
            if op == "open":
                reply = host.open(request["key"], request["classes"], request["config"],
                                  bool(request.get("long_context")))
            elif op == "call":
                reply = host.call(request["key"], request["name"], request["args"])
            elif op == "close":
                reply = host.close(request["key"])
            else:
                reply = {"ok": False, "fatal": f"unknown op {op!r}"}
        except (MemoryError, RecursionError) as exc:
            reply = {"ok": False, "limit": f"{type(exc).__name__}"}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
            reply = {"ok": False, "fatal": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
