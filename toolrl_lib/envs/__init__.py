"""Stateful tool environments of our own for multi-turn RL (calendar, bank, files, inbox).

One registration style: an environment is one ``Environment`` object, registered by its
``name`` (``register``); ``get_env(name)`` returns it. The four apps are what a config names
(``env_names``); composites (``cross_app``: two apps; ``<app>_decoys``: an app beside distractor
tools) are registered too and reached through their anchor app (``task_env``). ``make_tasks``
draws a split's tasks deterministically: train, validation and test seeds never overlap.
"""

from __future__ import annotations

from toolrl_lib.envs.bank import Bank
from toolrl_lib.envs.base import (
    ALL_KINDS,
    HARD_KINDS,
    KINDS,
    Environment,
    Step,
    Task,
    ToolError,
    Turn,
)
from toolrl_lib.envs.calendar import Calendar
from toolrl_lib.envs.cross_app import cross_app_envs
from toolrl_lib.envs.decoys import with_decoys
from toolrl_lib.envs.files import FileStore
from toolrl_lib.envs.hard import HARD_MAKERS  # registers the apps' hard-task makers
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
    """The apps (what ``multi_turn.environments`` names); composites are reached through them."""
    return [name for name, env in REGISTRY.items() if not env.anchor]


def task_env(app: str, kind: str) -> str | None:
    """The registered environment that generates ``kind`` for ``app``: the app itself, or a
    composite anchored on it; None when there is none."""
    if kind in get_env(app).kinds:
        return app
    return next((name for name, env in REGISTRY.items() if env.anchor == app and kind in env.kinds), None)


def make_tasks(split: str, n: int, envs: list[str] | None = None,
               kinds: list[str] | None = None) -> list[Task]:
    """``n`` tasks of ``split``, cycling over the (kind, app) pairs that exist -- apps fastest
    -- with ``envs`` (default: all apps) and ``kinds`` (default: ``KINDS``, the default set),
    so every pair is represented evenly. Seeds are ``split base + position``."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLIT_SEEDS)}")
    envs = list(envs or env_names())
    kinds = list(kinds or KINDS)
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown:
        raise ValueError(f"unknown task kinds {unknown}; expected some of {ALL_KINDS}")
    pairs = [(routed, kind) for kind in kinds for app in envs if (routed := task_env(app, kind))]
    if not pairs:
        raise ValueError(f"no environment of {envs} generates any of the kinds {kinds}")
    base = SPLIT_SEEDS[split]
    return [get_env(pairs[i % len(pairs)][0]).generate(base + i, pairs[i % len(pairs)][1]) for i in range(n)]


def task_key(task: Task) -> str:
    """The row a GRPO dataset holds: enough to rebuild the task (``task_from_key``)."""
    return f"{task.env}:{task.seed}:{task.kind}"


def task_from_key(key: str) -> Task:
    env, seed, kind = key.split(":")
    return get_env(env).generate(int(seed), kind)


_APPS: dict[str, Environment] = {e.name: e for e in (Calendar(), Bank(), FileStore(), Inbox())}
for _env in [*_APPS.values(), *cross_app_envs(_APPS), *(with_decoys(a) for a in _APPS.values())]:
    register(_env)

__all__ = ["ALL_KINDS", "HARD_KINDS", "HARD_MAKERS", "KINDS", "REGISTRY", "Environment", "Step", "Task", "ToolError", "Turn",
           "env_names", "get_env", "make_tasks", "register", "task_env", "task_from_key", "task_key"]
