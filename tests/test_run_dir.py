"""The run directory's owner: RunInfo round trip, clear errors, base and checkpoint resolution
(also for a run copied elsewhere), and the atomic folder save every writer uses."""

import json
from pathlib import Path

import pytest

from toolrl_lib import atomic
from toolrl_lib.run_dir import (
    RunDir,
    RunInfo,
    checkpoint_dir,
    checkpoint_step,
    prepare_run_dir,
    read_run_info,
    resolve_base,
    run_base,
    run_of,
    update_run_info,
    write_run_info,
)


def test_run_info_round_trip_keeps_unknown_keys(tmp_path):
    info = RunInfo(base_model="/x/primed_model", model_name="embedded", family="hermes",
                   backend="peft", seed=3, primed=True, extra={"note": "kept"})
    write_run_info(tmp_path, info)
    data = json.loads((tmp_path / "run_info.json").read_text())
    assert data["lora"] is True and data["note"] == "kept" and "processes" not in data
    back = read_run_info(tmp_path)
    assert back == info
    update_run_info(tmp_path, processes=2, custom=1)
    again = read_run_info(tmp_path)
    assert again.processes == 2 and again.extra == {"note": "kept", "custom": 1}


def test_read_run_info_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="notebook 03"):
        read_run_info(tmp_path)
    (tmp_path / "run_info.json").write_text("[1]")
    with pytest.raises(ValueError, match="run_info.json: expected a JSON object"):
        read_run_info(tmp_path)
    (tmp_path / "run_info.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_run_info(tmp_path)
    (tmp_path / "run_info.json").write_text(json.dumps({"family": 3}))
    with pytest.raises(ValueError, match="'family' must be a string"):
        read_run_info(tmp_path)


def test_run_base_finds_a_moved_primed_model_and_start_model(tmp_path):
    run = tmp_path / "run"
    (run / "primed_model").mkdir(parents=True)
    (run / "primed_model" / "config.json").write_text("{}")  # a model folder, as far as paths go
    write_run_info(run, RunInfo(base_model="/gone/box/run/primed_model", primed=True))
    assert run_base(run) == str(run / "primed_model")
    assert resolve_base("primed_model", run) == str(run / "primed_model")
    start = tmp_path / "start"
    start.mkdir()
    (start / "config.json").write_text("{}")
    write_run_info(run, RunInfo(base_model="/gone/cache/model", model_name=str(start)))
    assert run_base(run) == str(start)  # not primed: the configured start model
    write_run_info(run, RunInfo())
    assert run_base(run) is None


def test_checkpoint_dir_and_run_of(tmp_path):
    run = RunDir(tmp_path / "run")
    run.last.mkdir(parents=True)
    write_run_info(run.root, RunInfo())
    assert checkpoint_dir(run.root, "auto") == run.last
    assert run_of(run.last) == run.root and run_of(tmp_path / "x" / "y") is None
    with pytest.raises(FileNotFoundError, match="available in .*: last"):
        checkpoint_dir(run.root, "best")


def test_staged_dir_replaces_only_on_success(tmp_path):
    out = tmp_path / "out"
    with atomic.staged_dir(out) as staging:
        staging.mkdir()  # staged_dir hands out a fresh path: the writer creates it
        (staging / "a").write_text("1")
    assert (out / "a").read_text() == "1"
    with pytest.raises(RuntimeError), atomic.staged_dir(out) as staging:
        staging.mkdir()  # staged_dir hands out a fresh path: the writer creates it
        (staging / "a").write_text("2")
        raise RuntimeError("crash mid-save")
    assert (out / "a").read_text() == "1"  # the old folder is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left behind
    with atomic.staged_dir(out) as staging:
        staging.mkdir()  # staged_dir hands out a fresh path: the writer creates it
        (staging / "b").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == ["b"]
    assert Path(atomic.write_text(tmp_path / "f.json", "{}")).read_text() == "{}"


def test_prepare_run_dir_starts_resumes_and_refuses_to_overwrite(tmp_path):
    paths = RunDir(tmp_path / "run")
    checks = []
    assert prepare_run_dir(paths, resume=False, barrier=lambda: checks.append(paths.root.exists())) is None
    assert paths.root.is_dir() and checks == [False]  # every rank checked before the folder appeared
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        prepare_run_dir(paths, resume=True)
    (paths.checkpoints / "checkpoint-3").mkdir(parents=True)
    (paths.checkpoints / "checkpoint-3" / "trainer_state.json").write_text("{}")
    resumed = prepare_run_dir(paths, resume=True)
    assert resumed == paths.checkpoints / "checkpoint-3" and checkpoint_step(resumed) == 3
    with pytest.raises(ValueError, match="--resume"):
        prepare_run_dir(paths, resume=False)  # a run is there: never started over by mistake
    other = RunDir(tmp_path / "finished")
    other.last.mkdir(parents=True)
    with pytest.raises(ValueError, match="already holds a run"):
        prepare_run_dir(other, resume=False)


def test_copy_dir_replaces_the_destination_whole(tmp_path):
    src, dst = tmp_path / "last", tmp_path / "best"
    src.mkdir()
    (src / "adapter.bin").write_text("new")
    dst.mkdir()
    (dst / "stale.bin").write_text("old")
    assert atomic.copy_dir(src, dst) == dst
    assert sorted(p.name for p in dst.iterdir()) == ["adapter.bin"]
    assert (dst / "adapter.bin").read_text() == "new" and (src / "adapter.bin").is_file()
