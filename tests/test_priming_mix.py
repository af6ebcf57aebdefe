"""benchmarks/priming_mix.py: a mix's kinds, its priming on a share of hard-kind gold episodes, and the
validation table (tiny random model on CPU; the real measurement runs on a GPU)."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.priming_mix import main, mix_kinds, parse_mix
from toolrl_lib.envs.base import HARD_KINDS, KINDS


def test_a_mix_weights_its_parts():
    kinds = mix_kinds("default*3,hard")
    assert kinds.count("facts") == 3 and kinds.count("recover") == 1 and len(kinds) == 3 * len(KINDS) + len(HARD_KINDS)
    assert mix_kinds("chain*2") == ["chain", "chain"]


@pytest.mark.parametrize("bad", ["nomix", "x=default*two", "x="])
def test_a_malformed_mix_is_refused_with_its_text(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="--mix"):
        parse_mix(bad)


def test_two_mixes_prime_and_are_tabulated(tmp_path, tiny_model_dir, capsys):
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--mix", "default=default", "--mix", "half=default,hard*2", "--episodes", "160", "--val-tasks", "2",
            "--work", str(work), "--out", str(out), "--set", f"model.name={tiny_model_dir}",
            "--set", "priming.max_steps=1", "--set", "priming.batch_size=2", "--set", "priming.max_length=4096"]
    assert main(argv) == 0
    results = json.loads((out / "priming_mix.json").read_text())["results"]
    assert [r["mix"] for r in results] == ["default", "half"]
    assert results[0]["hard_share"] == 0 and not set(results[0]["episodes_by_kind"]) & set(HARD_KINDS)
    # make_tasks cycles over the (kind, app) pairs: 160 episodes hold two whole cycles of 5 + 2 x 7 kinds
    assert 0.5 < results[1]["hard_share"] < 0.85
    assert all(r["val_tasks"] == 2 and 0 <= r["scores"]["success"] <= 1 for r in results)
    assert "| half |" in (out / "priming_mix.md").read_text()
    assert main(argv) == 0  # resumes: both kept
    assert main(["--choice-of", str(work), "--max-success", "1"]) == 0
    chosen = json.loads((out / "priming_mix.json").read_text())["chosen"]
    printed = capsys.readouterr().out.strip().splitlines()[-1]  # NAME=PARTS, for the shell
    assert printed in {"default=default", "half=default,hard*2"} and printed.startswith(f"{chosen}=")
    assert f"**{chosen}**" in (out / "priming_mix.md").read_text()
    with pytest.raises(SystemExit, match="no mix under"):
        main(["--choice-of", str(work), "--max-success", "-1"])
    assert (work / "half" / "val_rows.jsonl").is_file()
    # the GPU run adopts the mix chosen on validation instead of priming it again, on the same kinds only
    from benchmarks.gpu.rl_multi_turn_gpu import adopt_primed, priming_mix_override

    with pytest.raises(SystemExit, match="mix 'half'.*pass --priming-mix"):
        adopt_primed(work / "half", tmp_path / "refused", mix_kinds("default"))
    assert not (tmp_path / "refused").exists()
    adopted = adopt_primed(work / "half", tmp_path / "primed", mix_kinds("default,hard*2"))
    assert adopted["mix"] == "half" and adopted["val_success"] == results[1]["scores"]["success"]
    assert (tmp_path / "primed" / "priming.json").is_file()
    assert priming_mix_override("default,hard*2").endswith(json.dumps(mix_kinds("default,hard*2"), separators=(",", ":")))
    with pytest.raises(SystemExit, match="expected a priming_mix folder"):
        adopt_primed(work / "missing", tmp_path / "other", mix_kinds("default"))
