"""Our multi-turn inference loop (scripted models: fast, exact) and the CLI path."""

import json
import re

import pytest

from toolrl_lib.data.bfcl import load_bfcl_entries, load_possible_answers
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.backends import LoadedModel
from toolrl_lib.evaluate.bfcl_multi_turn.env import EnvPool, parse_ground_truth_call
from toolrl_lib.evaluate.bfcl_multi_turn.report import transcript
from toolrl_lib.evaluate.bfcl_multi_turn.runner import (
    MultiTurnSettings,
    generate_multi_turn_pending,
    model_window,
)
from toolrl_lib.evaluate.bfcl_results import generations_file
from toolrl_lib.evaluate.runner import parse_categories
from toolrl_lib.prompts import get_adapter

HERMES = get_adapter("hermes")


def _tokenizer(tiny_model_dir):
    from toolrl_lib.models import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


class ScriptedModel:
    """Answers each prompt from BFCL's ground truth (a perfect model), or with a hostile
    call for entries in ``hostile``; counts its ``complete`` calls (one per step)."""

    def __init__(self, entries, hostile=(), marker=None):
        self.entries = entries
        self.hostile = set(hostile)
        self.marker = marker
        self.calls = 0
        self.batches = []
        with EnvPool() as pool:
            self.answers = {}
            for entry in entries:
                methods = pool.open("x", entry)
                gt = load_possible_answers(entry["id"].rsplit("_", 1)[0])[entry["id"]]
                self.answers[entry["id"]] = [[parse_ground_truth_call(c, methods) for c in turn] for turn in gt]
                pool.close("x")

    def _entry(self, prompt):
        for entry in self.entries:
            first = entry["question"][0][0]["content"]
            if first in prompt:
                return entry
        raise AssertionError("prompt of an unknown entry")

    def reply(self, prompt):
        entry = self._entry(prompt)
        users = re.findall(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", prompt, re.DOTALL)
        if entry["id"] in self.hostile:
            name = f"__import__('pathlib').Path({str(self.marker)!r}).write_text('x') or pwd"
            return HERMES.format_calls([{"name": name, "arguments": {}}])
        if users[-1].startswith("<tool_response>"):
            return "Done."
        turn = sum(not u.startswith("<tool_response>") for u in users) - 1
        calls = self.answers[entry["id"]][turn]
        return HERMES.format_calls(calls) if calls else "I cannot do that with these functions."

    def complete(self, prompts):
        self.calls += 1
        self.batches.append(len(prompts))
        return [self.reply(p) for p in prompts]


def test_parse_categories_knows_multi_turn():
    assert parse_categories("multi_turn") == [
        "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
    assert parse_categories("simple_python,multi_turn_base") == ["simple_python", "multi_turn_base"]
    assert "multi_turn_base" not in parse_categories("all")
    with pytest.raises(ValueError, match="memory_kv"):
        parse_categories("memory_kv")


def test_loop_batches_steps_and_resumes(tmp_path, tiny_model_dir):
    model = ScriptedModel(load_bfcl_entries("multi_turn_base")[:2])
    loaded = LoadedModel(_tokenizer(tiny_model_dir), model.complete, "scripted")
    settings = MultiTurnSettings(window=0)
    done = generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 2, settings)
    assert done == 2 and max(model.batches) == 2  # both episodes in one generate per step
    assert generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 2, settings) == 0
    row = next(r for r in results.read_results(generations_file(tmp_path, "multi_turn_base")))
    gt = load_possible_answers("multi_turn_base")[row["id"]]
    assert len(row["result"]) == len(gt) and row["n_refused"] == 0
    first_step = json.loads(row["result"][0][0].split("\n")[1])
    assert first_step["name"] == gt[0][0].split("(")[0]
    assert row["result"][0][-1] == "" and row["raw"][0][-1] == "Done."
    text = transcript(tmp_path, "multi_turn_base", row["id"])
    assert "## turn 0" in text and "-> " in text and "(no call: turn ends)" in text


@pytest.fixture
def miss_func_only(monkeypatch):
    """Limit multi_turn_miss_func to one entry with a held-out turn (keeps the test fast)."""
    import toolrl_lib.evaluate.bfcl_multi_turn.runner as runner

    entry = next(e for e in load_bfcl_entries("multi_turn_miss_func") if e.get("missed_function"))
    real = runner.load_bfcl_entries
    monkeypatch.setattr(runner, "load_bfcl_entries",
                        lambda c: [entry] if c == "multi_turn_miss_func" else real(c))
    return entry


def test_held_out_functions_are_revealed_with_bfcls_message(tmp_path, tiny_model_dir, miss_func_only):
    model = ScriptedModel([miss_func_only])
    seen = []
    loaded = LoadedModel(_tokenizer(tiny_model_dir), lambda ps: (seen.extend(ps), model.complete(ps))[1], "s")
    generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_miss_func"], "hermes", None,
                                MultiTurnSettings(window=0))
    turn, names = next(iter(miss_func_only["missed_function"].items()))
    before = [p for p in seen if "What about now?" not in p]
    after = [p for p in seen if "What about now?" in p]
    assert before and after
    assert all(f'"name": "{names[0]}"' not in p.split("<|im_start|>user")[0] for p in seen)  # not in tools
    assert f"'name': '{names[0]}'" in after[0]  # revealed in the user message, as BFCL does
    row = results.read_results(generations_file(tmp_path, "multi_turn_miss_func"))[0]
    assert row["result"][int(turn)][0].count(names[0]) >= 1


def test_hostile_replies_execute_nothing_and_force_terminate(tmp_path, tiny_model_dir):
    entry = [e for e in load_bfcl_entries("multi_turn_base") if "GorillaFileSystem" in e["involved_classes"]][0]
    marker = tmp_path / "MARKER"
    model = ScriptedModel([entry], hostile=[entry["id"]], marker=marker)
    loaded = LoadedModel(_tokenizer(tiny_model_dir), model.complete, "scripted")
    generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 1, MultiTurnSettings(window=0))
    row = results.read_results(generations_file(tmp_path, "multi_turn_base"))[0]
    assert not marker.exists()
    assert row["force_terminated"] and len(row["result"]) == 1 and len(row["result"][0]) == 21
    assert row["n_refused"] == row["n_calls"] == 21
    assert "__import__" not in json.dumps(row["result"]) and "__import__" in json.dumps(row["raw"])


def test_prompts_over_the_window_are_inference_errors(tmp_path, tiny_model_dir):
    model = ScriptedModel(load_bfcl_entries("multi_turn_base")[:1])
    loaded = LoadedModel(_tokenizer(tiny_model_dir), model.complete, "scripted")
    generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 1,
                                MultiTurnSettings(window=model_window(str(tiny_model_dir))))
    row = results.read_results(generations_file(tmp_path, "multi_turn_base"))[0]
    assert model.calls == 0 and row["result"].startswith("Error during inference")
    assert row["max_prompt_tokens"] > 4096


@pytest.mark.slow
def test_cli_writes_bfcl_result_and_score_files(tmp_path, tiny_model_dir):
    from toolrl_lib.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "bfcl", "--model", str(tiny_model_dir), "--categories", "multi_turn_base",
                 "--limit", "1", "--out", str(out), "--label", "tiny"]) == 0
    assert results.result_file(out, "tiny", "multi_turn_base").is_file()
    score = results.score_file(out, "tiny", "multi_turn_base")
    header = json.loads(score.read_text().splitlines()[0])
    assert header["total_count"] == 1 and header["correct_count"] == 0
    table = (out / "multi_turn.csv").read_text()
    assert "multi_turn:inference_error" in table  # the tiny model's window is 4096 tokens
    run = json.loads((out / "run.json").read_text())
    assert "multi_turn" in run["aggregates"]["overall"]["parts_missing"]  # 1 of 4 categories ran


def test_prefix_cache_and_slot_paths_match_batched_generate(tmp_path, tiny_model_dir):
    """On a CPU each episode keeps its cache between steps (TranscriptCache); on a GPU every live
    episode keeps it in a device slot (SlotEngine, run here on the CPU, with one slot reused
    after its entry finished). The generations are the same as with a full pre-fill per step,
    and the timing per episode is recorded."""
    from toolrl_lib.evaluate.backends import load_for_eval

    loaded = load_for_eval(str(tiny_model_dir), backend="hf", max_new_tokens=4)
    rows = {}
    for mode, (cached, slots) in {"prefix": (True, None), "slots": (False, True), "batched": (False, False)}.items():
        settings = MultiTurnSettings(max_new_tokens=4, window=0, compact=True, step_limit=1, prefix_cache=cached,
                                     slots=slots, max_live=1)  # fmt: skip
        out = tmp_path / mode
        generate_multi_turn_pending(loaded, out, ["multi_turn_base"], "hermes", 2, settings)
        rows[mode] = {r["id"]: r for r in results.read_results(generations_file(out, "multi_turn_base"))}
    for mode in ("prefix", "slots"):
        for key, row in rows["batched"].items():
            assert rows[mode][key]["raw"] == row["raw"] and rows[mode][key]["result"] == row["result"], (mode, key)
    first = rows["slots"][load_bfcl_entries("multi_turn_base")[0]["id"]]
    assert first["steps"] >= len(load_bfcl_entries("multi_turn_base")[0]["question"])
    assert first["generate_seconds"] > 0


@pytest.mark.slow
def test_cli_generates_multi_turn_and_writes_result_and_score_files(tmp_path, tiny_model_dir):
    """The acceptance command's path with real generation (the tiny model; no window check)."""
    from toolrl_lib.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "bfcl", "--model", str(tiny_model_dir), "--categories", "multi_turn_base",
                 "--limit", "1", "--out", str(out), "--label", "tiny", "--window", "0", "--compact-docs",
                 "--multi-turn-max-new-tokens", "4", "--multi-turn-step-limit", "1"]) == 0
    row = results.read_results(results.result_file(out, "tiny", "multi_turn_base"))[0]
    assert isinstance(row["result"], list) and row["raw"][0]  # generated, not an inference error
    header = json.loads(results.score_file(out, "tiny", "multi_turn_base").read_text().splitlines()[0])
    assert header["total_count"] == 1
    assert json.loads((out / "generation_multi_turn.json").read_text())["step_limit"] == 1


def test_entry_ids_pick_a_subset(tmp_path, tiny_model_dir):
    entries = load_bfcl_entries("multi_turn_base")
    model = ScriptedModel([entries[3]])
    loaded = LoadedModel(_tokenizer(tiny_model_dir), model.complete, "scripted")
    settings = MultiTurnSettings(window=0, entry_ids=(entries[3]["id"],))
    assert generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", None, settings) == 1
    assert [r["id"] for r in results.read_results(generations_file(tmp_path, "multi_turn_base"))] == [entries[3]["id"]]


def test_max_live_refills_finished_episodes(tmp_path, tiny_model_dir):
    entries = load_bfcl_entries("multi_turn_base")[:3]
    model = ScriptedModel(entries)
    loaded = LoadedModel(_tokenizer(tiny_model_dir), model.complete, "scripted")
    settings = MultiTurnSettings(window=0, max_live=2)
    assert generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 3, settings) == 3
    assert max(model.batches) == 2 and model.batches[-1] == 1
    rows = results.read_results(generations_file(tmp_path, "multi_turn_base"))
    assert sorted(r["id"] for r in rows) == sorted(e["id"] for e in entries) and all(r["n_refused"] == 0 for r in rows)


def test_a_token_budget_admits_only_what_fits_and_changes_no_reply(tmp_path, tiny_model_dir):
    """max_live_tokens: a queued episode joins only while the live transcripts fit the budget (the
    first always joins); "kv" reads the engine's capacity; the generations are those of an
    unlimited run, entry for entry."""
    entries = load_bfcl_entries("multi_turn_base")[:3]
    tokenizer = _tokenizer(tiny_model_dir)

    def run(folder, settings, kv_tokens=None):
        model = ScriptedModel(entries)
        loaded = LoadedModel(tokenizer, model.complete, "scripted", kv_tokens=kv_tokens)
        assert generate_multi_turn_pending(loaded, folder, ["multi_turn_base"], "hermes", 3, settings) == 3
        rows = {r["id"]: r for r in results.read_results(generations_file(folder, "multi_turn_base"))}
        return model.batches, {i: (r["result"], r["raw"]) for i, r in rows.items()}

    free_batches, free = run(tmp_path / "free", MultiTurnSettings(window=0))
    one_batches, one = run(tmp_path / "one", MultiTurnSettings(window=0, max_live_tokens="kv"), kv_tokens=1)
    assert max(free_batches) == 3 and max(one_batches) == 1 and one == free
    roomy_batches, roomy = run(tmp_path / "roomy", MultiTurnSettings(window=0, max_live_tokens=10**7))
    assert roomy_batches == free_batches and roomy == free
    unknown_batches, _ = run(tmp_path / "unknown", MultiTurnSettings(window=0, max_live_tokens="kv"))
    assert unknown_batches == free_batches  # no capacity known: no limit
    with pytest.raises(ValueError, match="max_live_tokens"):
        run(tmp_path / "bad", MultiTurnSettings(window=0, max_live_tokens=0))


def test_a_budget_between_one_and_all_episodes_runs_some_together(tmp_path, tiny_model_dir):
    from toolrl_lib.evaluate.bfcl_multi_turn.runner import new_episode, prompt_for

    entries = load_bfcl_entries("multi_turn_base")[:3]
    tokenizer = _tokenizer(tiny_model_dir)
    with EnvPool() as pool:
        first = [len(tokenizer(prompt_for(new_episode(e, "multi_turn_base", pool, False), HERMES, tokenizer),
                               add_special_tokens=False)["input_ids"]) for e in entries]
    budget = first[0] + first[1] + 2 * 128  # the first two fit, the third waits
    model = ScriptedModel(entries)
    loaded = LoadedModel(tokenizer, model.complete, "scripted")
    settings = MultiTurnSettings(window=0, max_live_tokens=budget)
    assert generate_multi_turn_pending(loaded, tmp_path, ["multi_turn_base"], "hermes", 3, settings) == 3
    assert model.batches[0] == 2 and max(model.batches) <= 2


def test_kv_bytes_per_token_and_the_cli_budget_flag(embedded_model_dir):
    import argparse
    import doctest

    from toolrl_lib.commands.eval import _live_tokens
    from toolrl_lib.evaluate import backends

    assert doctest.testmod(backends).failed == 0
    assert backends.kv_bytes_per_token(str(embedded_model_dir), "fp32") == 46080  # 2 x 30 x 3 x 64 x 4
    assert _live_tokens("kv") == "kv" and _live_tokens("370000") == 370000
    for bad in ("0", "-5", "lots"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive number of tokens or 'kv'"):
            _live_tokens(bad)


def test_the_gpu_scripts_pass_the_live_token_budget_to_the_cli(tmp_path):
    """benchmarks/gpu/bfcl_multi_turn's generation command (which rl_multi_turn_gpu builds its BFCL
    settings for) carries --max-live-tokens to ``toolrl eval bfcl``, whose parser takes it."""
    import argparse

    from benchmarks.gpu import bfcl_multi_turn
    from benchmarks.gpu.rl_multi_turn_gpu import bfcl_settings
    from toolrl_lib.cli import build_parser

    run_args = argparse.Namespace(bfcl_batch_size=256, bfcl_max_new_tokens=128, bfcl_limit=2, bfcl_compact_docs=False,
                                  bfcl_max_live=200, bfcl_max_live_tokens="kv")
    command = bfcl_multi_turn.generate_command("primed", "/m", tmp_path, bfcl_settings(run_args, "hermes", "fp32"))
    assert command[command.index("--multi-turn-max-live-tokens") + 1] == "kv"
    parsed = build_parser().parse_args(command[command.index("eval"):])
    assert parsed.multi_turn_max_live_tokens == "kv" and parsed.multi_turn_max_live == 200
    plain = bfcl_settings(argparse.Namespace(**{**vars(run_args), "bfcl_max_live_tokens": None}), "hermes", "fp32")
    assert "--multi-turn-max-live-tokens" not in bfcl_multi_turn.generate_command("primed", "/m", tmp_path, plain)
