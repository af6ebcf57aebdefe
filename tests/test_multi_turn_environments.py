"""Our environments: determinism, catalogue, gold trajectories, checker, safe execution."""

from __future__ import annotations

import copy

import pytest

from toolrl_lib.envs import KINDS, env_names, get_env, make_tasks, register, task_from_key, task_key
from toolrl_lib.envs.base import Environment
from toolrl_lib.envs.checker import check_episode, gold_states
from toolrl_lib.envs.episode import Episode, EpisodeSettings, play_gold
from toolrl_lib.envs.safety import Limits, Session
from toolrl_lib.prompts import get_adapter


@pytest.fixture(scope="module")
def tokenizer():
    from toolrl_lib.models import make_tiny_tokenizer

    return make_tiny_tokenizer()


def test_environment_registry_has_four_domains_and_catalogues_match_public_methods():
    assert set(env_names()) >= {"calendar", "bank", "files", "inbox"}
    for name in env_names():
        env = get_env(name)
        public = {n for n in dir(env.app) if not n.startswith("_") and callable(getattr(env.app, n))}
        assert {t["name"] for t in env.tools} == public
        for schema in env.tools:
            assert schema["parameters"]["type"] == "object"
            assert set(schema["parameters"]["required"]) <= set(schema["parameters"]["properties"])
    with pytest.raises(ValueError, match="already registered"):
        register(get_env("bank"))

    class Broken(Environment):
        name = "broken"
        app = type("App", (), {"secret": lambda self: 1})
        tools = []

    with pytest.raises(ValueError, match="public methods"):
        register(Broken())


def test_environment_tasks_are_deterministic_by_seed_and_splits_disjoint():
    first = [t.to_dict() for t in make_tasks("train", 40)]
    assert first == [t.to_dict() for t in make_tasks("train", 40)]
    val = {t.id for t in make_tasks("val", 40)}
    assert not val & {t["id"] for t in first}
    assert {t["kind"] for t in first} == set(KINDS) and {t["env"] for t in first} == set(env_names())
    task = make_tasks("test", 7)[6]
    assert task_from_key(task_key(task)).to_dict() == task.to_dict()
    assert get_env("bank").generate(3, "facts").to_dict() != get_env("bank").generate(4, "facts").to_dict()
    kinds = {t.kind: t for t in make_tasks("train", 40)}
    assert len(kinds["missing_param"].turns) == 2 and not kinds["missing_param"].turns[0].steps[0].calls
    assert kinds["missing_function"].hidden and kinds["missing_function"].turns[1].reveal
    assert sum(len(s.calls) > 0 for s in kinds["dependent"].turns[0].steps) >= 2


def test_environment_gold_trajectories_all_pass_the_checker(tokenizer):
    adapter = get_adapter("hermes")
    tasks = make_tasks("train", 60) + make_tasks("test", 20)
    results = [play_gold(Episode(get_env(t.env), t, adapter, tokenizer, EpisodeSettings(max_episode_tokens=8192)))
               .result() for t in tasks]
    assert [r["task_id"] for r in results if not r["success"]] == []
    assert all(r["call_credit"] == 1.0 and r["turns_passed"] == r["turns"] for r in results)


def test_environment_checker_fails_wrong_guessed_or_unanswered_episodes():
    env = get_env("calendar")
    task = env.generate(11, "missing_param")
    goal = gold_states(env, task)
    made = task.turns[1].steps[0].calls
    # asked for the time, then created the event: passes
    ok = check_episode(env, task, goal, [["What time?"], ["Added."]], [[], made], goal)
    assert ok.success and ok.call_credit == 1.0
    # guessed the time in turn 1 instead of asking: turn 1's state differs from the goal
    guessed = check_episode(env, task, [goal[1], goal[1]], [[], ["Added."]], [made, []], goal)
    assert not guessed.success and guessed.passed == [False, True]
    facts = env.generate(5, "facts")
    fgoal = gold_states(env, facts)
    assert check_episode(env, facts, fgoal, [[f"At {facts.turns[0].facts[0]}."]], [[]], fgoal).success
    assert not check_episode(env, facts, fgoal, [["I do not know."]], [[]], fgoal).success
    assert not check_episode(env, facts, [], [], [], fgoal).success  # never finished the turn


def test_environment_execution_is_safe_and_rolls_back():
    env = get_env("bank")
    task = env.generate(2, "missing_function")
    session = Session(env, task, Limits(max_result_chars=400))
    before = session.state()
    refusals = [
        {"name": "_take", "arguments": {"account": "checking", "amount": 1}},  # private
        {"name": "schedule_payment", "arguments": {"account": "checking", "payee": "gym", "amount": 1,
                                                   "day": "monday"}},  # not revealed yet
        {"name": "pay_bill", "arguments": {"account": "checking", "payee": "gym"}},  # missing argument
        {"name": "pay_bill", "arguments": {"account": "checking", "payee": "gym", "amount": "5"}},  # type
        {"name": "pay_bill", "arguments": {"account": "vault", "payee": "gym", "amount": 5}},  # enum
        {"name": "pay_bill", "arguments": {"account": "checking", "payee": "gym", "amount": float("nan")}},
        {"name": "pay_bill", "arguments": {"account": "checking", "payee": "gym", "amount": 5, "x": 1}},
        {"name": "pay_bill", "arguments": {"account": "checking", "payee": "gym", "amount": 10 ** 9}},  # app error
        {"name": "__import__('os').system", "arguments": {}},
        "pay_bill(account='checking')",
    ]
    for request in refusals:
        outcome = session.call(request)
        assert not outcome.executed and outcome.result.startswith("Error"), request
    assert session.state() == before and session.log == []
    session.reveal(["schedule_payment"])
    assert session.call(refusals[1]).executed
    fresh = Session(env, task)
    assert fresh.state() == task.state and fresh.app.state is not task.state  # fresh per episode
    files = get_env("files")
    big = Session(files, files.generate(0, "facts"), Limits(max_result_chars=60))
    path = sorted(big.state()["files"])[0]
    state = copy.deepcopy(big.state())
    long_read = big.call({"name": "read_file", "arguments": {"path": path}})  # result over 60 chars
    assert not long_read.executed and "result is longer" in long_read.result
    outcome = big.call({"name": "write_file", "arguments": {"path": "notes/x.txt", "content": "y" * 3000}})
    assert not outcome.executed and "longer than" in outcome.result and big.state() == state


def test_an_episode_keeps_its_step_texts_and_the_refusals_for_reading_later(tokenizer):
    from toolrl_lib.envs.episode import encode

    adapter = get_adapter("hermes")
    task = get_env("calendar").generate(3, "dependent")
    episode = Episode(get_env(task.env), task, adapter, tokenizer, EpisodeSettings(max_episode_tokens=8192))
    wrong = adapter.render_completion([{"name": "no_such_tool", "arguments": {"x": 1}}])
    episode.feed(encode(tokenizer, wrong) + [tokenizer.eos_token_id])
    kept = episode.transcript(max_chars=500)
    assert episode.refused == 1 and len(kept["refusals"]) == 1 and "no_such_tool" in kept["refusals"][0]
    assert kept["texts"] == [tokenizer.decode(encode(tokenizer, wrong), skip_special_tokens=True)]
    assert all(len(t) <= 10 for t in episode.transcript(max_chars=10)["texts"])
