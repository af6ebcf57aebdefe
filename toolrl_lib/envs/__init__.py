"""Stateful tool environments of our own for multi-turn RL (calendar, bank, files, inbox).

One registration style: an environment is one ``Environment`` object, registered by its
``name`` (``register``); ``get_env(name)`` returns it. ``make_tasks`` draws a split's tasks
deterministically: train, validation and test seeds never overlap.
"""

from __future__ import annotations

from toolrl_lib.envs.bank import Bank
from toolrl_lib.envs.base import KINDS, Environment, Step, Task, ToolError, Turn
from toolrl_lib.envs.calendar import Calendar
from toolrl_lib.envs.files import FileStore
from toolrl_lib.envs.inbox import Inbox

REGISTRY: dict[str, Environment] = {}
SPLIT_SEEDS = {"train": 0, "val": 1_000_000, "test": 2_000_000}  # disjoint seed ranges


def register(env: Environment) -> Environment:
    if not env.name or env.name in REGISTRY:
        raise ValueError(f"environment name {env.name!r} is empty or already registered")
    public = {n for n in dir(env.app) if not n.startswith("_") and callable(getattr(env.app, n))}
    catalogue = {t["name"] for t in env.tools}
    if public != catalogue:
        raise ValueError(f"{env.name}: the catalogue {sorted(catalogue)} must equal the app's public "
                         f"methods {sorted(public)}")
    REGISTRY[env.name] = env
    return env


def get_env(name: str) -> Environment:
    if name not in REGISTRY:
        raise KeyError(f"unknown environment {name!r}; registered: {sorted(REGISTRY)}")
    return REGISTRY[name]


def env_names() -> list[str]:
    return list(REGISTRY)


def make_tasks(split: str, n: int, envs: list[str] | None = None,
               kinds: list[str] | None = None) -> list[Task]:
    """``n`` tasks of ``split``, cycling over ``envs`` (default: all) and ``kinds`` (default:
    all, so every kind is represented evenly)."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLIT_SEEDS)}")
    envs = list(envs or env_names())
    kinds = list(kinds or KINDS)
    base = SPLIT_SEEDS[split]
    return [get_env(envs[i % len(envs)]).generate(base + i, kinds[(i // len(envs)) % len(kinds)])
            for i in range(n)]


def task_key(task: Task) -> str:
    """The row a GRPO dataset holds: enough to rebuild the task (``task_from_key``)."""
    return f"{task.env}:{task.seed}:{task.kind}"


def task_from_key(key: str) -> Task:
    env, seed, kind = key.split(":")
    return get_env(env).generate(int(seed), kind)


for _env in (Calendar(), Bank(), FileStore(), Inbox()):
    register(_env)

__all__ = ["KINDS", "REGISTRY", "Environment", "Step", "Task", "ToolError", "Turn", "env_names",
           "get_env", "make_tasks", "register", "task_from_key", "task_key"]
