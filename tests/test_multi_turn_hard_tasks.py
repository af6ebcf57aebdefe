"""The opt-in hard task kinds (issue 39): default tasks unchanged, every gold trajectory passes,
sensible wrong trajectories fail, composites route and record their apps, reports split by app."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from toolrl_lib.envs import (
    HARD_KINDS,
    KINDS,
    env_names,
    get_env,
    make_tasks,
    task_env,
    task_from_key,
    task_key,
)
from toolrl_lib.envs.base import CALL_STEPS, Task
from toolrl_lib.envs.checker import EpisodeCheck, check_episode, gold_states
from toolrl_lib.envs.safety import Session

# sha256 of make_tasks("train", 512) + ("val", 64) + ("test", 96) before the hard kinds existed,
# with the fields added since (Task.apps, Step.expect_error) left out
DEFAULT_TASKS_SHA = "c48ea548302415aa461050aa714c0771949eddb99c96f37dbedd105e48e7723a"


def _without_new_fields(row: dict[str, Any]) -> dict[str, Any]:
    row = copy.deepcopy(row)
    row.pop("apps")
    for turn in row["turns"]:
        for step in turn["steps"]:
            step.pop("expect_error")
    return row


def test_default_tasks_are_unchanged_by_the_hard_kinds():
    rows = [_without_new_fields(t.to_dict()) for split, n in (("train", 512), ("val", 64), ("test", 96))
            for t in make_tasks(split, n)]
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest() == DEFAULT_TASKS_SHA
    assert env_names() == ["calendar", "bank", "files", "inbox"]  # composites are not listed as apps
    assert {t.kind for t in make_tasks("val", 64)} == set(KINDS)


def play(task: Task, turns: list[tuple[list[dict[str, Any]], list[str]]]) -> EpisodeCheck:
    """A scripted episode: per turn, the calls made (refused ones roll back, as in an episode)
    and the plain replies; checked against the gold."""
    env = get_env(task.env)
    session = Session(env, task)
    states, replies, executed = [], [], []
    for number, (made, said) in enumerate(turns):
        session.reveal(task.turns[number].reveal)
        executed.append([c for c in made if session.call(c).executed])
        states.append(session.state())
        replies.append(said)
    return check_episode(env, task, states, replies, executed, gold_states(env, task))


def gold_script(task: Task) -> list[tuple[list[dict[str, Any]], list[str]]]:
    return [([c for s in turn.steps for c in s.calls], [s.text for s in turn.steps if not s.calls])
            for turn in task.turns]


HARD = make_tasks("train", 7 * 4 * 12, kinds=list(HARD_KINDS)) + make_tasks("test", 7 * 4 * 3, kinds=list(HARD_KINDS))


def test_hard_tasks_route_through_their_apps_and_record_kind_and_apps():
    tasks = make_tasks("val", 56, kinds=list(HARD_KINDS))
    assert {(t.kind, tuple(sorted(t.apps))) for t in tasks} >= {("chain", ("bank",)), ("cross_app", ("calendar", "inbox"))}
    for task in tasks:
        assert task.kind in HARD_KINDS and task.env == task_env(task.apps[0], task.kind)
        assert len(task.apps) == (2 if task.kind == "cross_app" else 1)
        assert task_from_key(task_key(task)).to_dict() == task.to_dict()
        assert Task.from_dict(json.loads(json.dumps(task.to_dict()))).to_dict() == task.to_dict()
    for kind in HARD_KINDS:
        assert sorted(a for t in tasks if t.kind == kind for a in t.apps[:1]) == sorted(env_names() * 2)
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in make_tasks("val", 56, kinds=list(HARD_KINDS))]
    decoys = get_env("bank_decoys")
    assert "request_money" in {t["name"] for t in decoys.tools} and decoys.apps == ["bank"]
    assert task_env("bank", "cross_app") == "bank_files" and task_env("bank", "easy") is None


def test_every_hard_gold_trajectory_passes_the_checker():
    for task in HARD:
        check = play(task, gold_script(task))
        assert check.success and check.call_credit == 1.0, task.id
        calls_per_turn = [sum(bool(s.calls) for s in turn.steps) for turn in task.turns]
        assert max(calls_per_turn) <= CALL_STEPS[task.kind], task.id
    chains = [t for t in HARD if t.kind == "chain"]
    assert {sum(bool(s.calls) for s in t.turns[0].steps) for t in chains} == {3, 4, 5, 6}
    for kind in KINDS:
        assert max(sum(bool(s.calls) for s in turn.steps) for t in make_tasks("train", 80, kinds=[kind])
                   for turn in t.turns) == CALL_STEPS[kind]


def test_hard_gold_episodes_play_through_the_token_transcript_within_step_limit_7():
    from toolrl_lib.envs.episode import Episode, EpisodeSettings, play_gold
    from toolrl_lib.models import make_tiny_tokenizer
    from toolrl_lib.prompts import get_adapter

    tokenizer, adapter = make_tiny_tokenizer(), get_adapter("hermes")
    settings = EpisodeSettings(step_limit=7, max_episode_tokens=16384)
    for task in make_tasks("val", 28, kinds=list(HARD_KINDS)):
        result = play_gold(Episode(get_env(task.env), task, adapter, tokenizer, settings)).result()
        assert result["success"] and result["forced"] == 0 and result["call_credit"] == 1.0, task.id
        assert result["apps"] == task.apps


def _writes_depend_on_results(task: Task) -> list[bool]:
    """Per gold write call: does an argument carry a value seen only in an earlier result?"""
    session = Session(get_env(task.env), task)
    seen, told, out = "", "", []
    for turn in task.turns:
        told += turn.user
        for step in turn.steps:
            for request in step.calls:
                before = session.state()
                outcome = session.call(request)
                if outcome.executed and session.state() != before:
                    values = [str(v) for v in request["arguments"].values()]
                    out.append(any(v in seen and v not in told for v in values))
                seen += outcome.result
    return out


def test_chains_and_asked_values_are_used_from_earlier_results():
    for task in HARD:
        depends = _writes_depend_on_results(task)
        if task.kind in ("chain", "distractors"):
            assert depends and all(depends), task.id
        if task.kind in ("cross_app", "ask_user"):
            assert depends and depends[0], task.id


def _first(kind: str, app: str) -> Task:
    return next(t for t in HARD if t.kind == kind and app in t.apps[:1])


@pytest.mark.parametrize("app", ["calendar", "bank", "files", "inbox"])
def test_wrong_hard_trajectories_fail(app):
    # confirmation skipped: the destructive calls made in the first turn
    task = _first("confirm", app)
    gold = gold_script(task)
    assert play(task, gold).success
    rushed = [(gold[0][0] + gold[1][0], gold[0][1]), ([], ["Done."])]
    assert not play(task, rushed).success
    mute = [(gold[0][0], ["Shall I go ahead?"]), gold[1]]  # asked, but did not say what would go
    assert not play(task, mute).success

    # no retry: the rejected call, then a reply
    task = _first("recover", app)
    refused = [c for s in task.turns[0].steps if s.expect_error for c in s.calls]
    assert refused and not play(task, [(refused, ["Done."])]).success
    assert play(task, gold_script(task)).success

    # the missing value guessed instead of asked: the second turn's calls made at once
    task = _first("ask_user", app)
    gold = gold_script(task)
    guessed = [(gold[1][0], ["Done."]), ([], ["Done."])]
    assert not play(task, guessed).success and play(task, gold).success

    # a wrong value in a chain: the value the last write carries over from a result changed
    for kind in ("chain", "distractors"):
        task = _first(kind, app)
        gold = gold_script(task)
        made = copy.deepcopy(gold[0][0])
        last = made[-1] if made[-1]["name"] != "get_balance" else made[-2]
        key = next(k for k in ("amount", "event_id", "content", "text") if k in last["arguments"])
        value = last["arguments"][key]
        last["arguments"][key] = value + 1 if isinstance(value, (int, float)) else f"{value}x"
        assert not play(task, [(made, gold[0][1])]).success, task.id

    # a distractor called beside the gold calls
    task = _first("distractors", app)
    gold = gold_script(task)
    decoy = {"name": "add_reminder", "arguments": {"text": "x", "day": "monday"}}
    assert not play(task, [(gold[0][0] + [decoy], gold[0][1])]).success

    # several facts asked for, one reported
    task = _first("report", app)
    gold = gold_script(task)
    assert len(task.turns[0].facts) >= 2
    assert not play(task, [(gold[0][0], [task.turns[0].facts[0]])]).success

    # across two apps: the second app never written
    task = _first("cross_app", app)
    gold = gold_script(task)
    second = [name for name in task.apps if name != app][0]
    own = {t["name"] for t in get_env(app).tools}
    assert second and not play(task, [([c for c in gold[0][0] if c["name"] in own], gold[0][1])]).success


def test_success_is_summarised_by_kind_and_by_app():
    from toolrl_lib.envs.evaluate import summarise
    from toolrl_lib.envs.report import success_breakdown

    def row(task: Task, success: bool) -> dict[str, Any]:
        return {"task_id": task.id, "env": task.env, "kind": task.kind, "apps": task.apps, "success": success,
                "turns_passed": int(success), "turns": 1, "call_credit": 1.0, "steps": 1, "valid_steps": 1,
                "forced": 0, "truncated": False}

    tasks = make_tasks("val", 16, kinds=["cross_app", "report"], envs=["inbox", "calendar"])
    rows = [row(t, t.kind == "cross_app") for t in tasks]  # 8 cross-app (both apps), 4 report per app
    out = summarise(rows)
    assert out["success_cross_app"] == 1.0 and out["success_report"] == 0.0
    assert out["success_app_inbox"] == out["success_app_calendar"] == 8 / 12  # cross-app counts for both
    table = success_breakdown(rows)
    assert table.loc[("app", "inbox"), "tasks"] == 12 and table.loc[("kind", "cross_app"), "tasks"] == 8
    plain = summarise([row(t, True) for t in make_tasks("val", 8)])
    assert not any(k.startswith("success_app_") for k in plain)  # runs on the default kinds keep their columns


def test_config_opts_in_to_hard_kinds_and_primes_on_other_kinds():
    from toolrl_lib.config import ConfigError
    from toolrl_lib.envs.priming import priming_tasks
    from toolrl_lib.train.config import load_run_config

    mt = load_run_config("configs/multi_turn_embedded_gpu.yaml").multi_turn
    assert mt.kinds == list(HARD_KINDS) and mt.priming_kinds == list(KINDS)
    primed = priming_tasks(make_tasks("train", 20, mt.environments, mt.kinds), 20, mt.environments, mt.priming_kinds)
    held_out = make_tasks("val", 56, mt.environments, mt.kinds)
    assert {t.kind for t in primed} == set(KINDS) and not {t.kind for t in primed} & {t.kind for t in held_out}
    default = load_run_config("configs/multi_turn_smoke.yaml").multi_turn
    assert default.kinds is None and default.priming_kinds is None
    train = make_tasks("train", 40, default.environments, default.kinds)
    assert priming_tasks(train, 8, default.environments, default.priming_kinds) == train[:8]
    for overrides, message in ((["multi_turn.step_limit=6"], "step_limit >= 7"),
                               (["multi_turn.kinds=[confirm,recover]", "multi_turn.step_limit=3"], "step_limit >= 4"),
                               (["multi_turn.priming_kinds=[hard]"], "unknown task kind")):
        with pytest.raises(ConfigError, match=message):
            load_run_config("configs/multi_turn_embedded_gpu.yaml", overrides)
    load_run_config("configs/multi_turn_embedded_gpu.yaml", ["multi_turn.kinds=[confirm,recover]",
                                                             "multi_turn.step_limit=4"])


def test_a_policy_with_only_the_default_habits_solves_the_default_kinds_not_the_hard_ones():
    from toolrl_lib.envs.naive import naive_success_by_kind

    default = naive_success_by_kind(make_tasks("test", 80), asks=True)
    hard = naive_success_by_kind(make_tasks("test", 112, kinds=list(HARD_KINDS)), asks=True)
    assert min(default.values()) >= 0.9, default
    assert set(hard) == set(HARD_KINDS) and max(hard.values()) <= 0.5, hard
    assert naive_success_by_kind(make_tasks("test", 20, kinds=["missing_param"]))["missing_param"] == 0.0
