"""A checkpoint packed into parts and restored: byte for byte, damage refused, too big refused."""

import json

import pytest

from benchmarks.gpu.carry import main, pack, unpack


def _run(root, sizes=(3000, 5000)):
    run = root / "run"
    for step in (50, 100):  # the newest is the one that travels
        folder = run / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        for i, size in enumerate(sizes):
            (folder / f"file{i}.bin").write_bytes(bytes([step % 251, i]) * (size // 2))
        (folder / "trainer_state.json").write_text(f'{{"global_step": {step}}}')  # a complete checkpoint
    (run / "config.yaml").write_text("name: x\n")
    (run / "metrics.csv").write_text("step,loss\n1,0.5\n")
    return run


def test_round_trip_through_parts(tmp_path):
    run = _run(tmp_path)
    manifest = pack(run, tmp_path / "out", "grpo", part_mib=0.004)  # ~4 KB parts: several of them
    assert manifest["checkpoint"] == "checkpoint-100" and len(manifest["parts"]) >= 2
    assert main(["unpack", "--parts", str(tmp_path / "out"), "--name", "grpo", "--dest", str(tmp_path / "back")]) == 0
    for name in ("file0.bin", "file1.bin"):
        assert (tmp_path / "back/checkpoints/checkpoint-100" / name).read_bytes() == \
            (run / "checkpoints/checkpoint-100" / name).read_bytes()
    assert (tmp_path / "back/metrics.csv").read_text() == "step,loss\n1,0.5\n"
    assert not (tmp_path / "back/checkpoints/checkpoint-50").exists()


def test_damaged_or_missing_part_is_refused(tmp_path):
    run = _run(tmp_path)
    out = tmp_path / "out"
    pack(run, out, "grpo", part_mib=0.004)
    first = out / "grpo.part00"
    first.write_bytes(b"x" + first.read_bytes()[1:])
    with pytest.raises(ValueError, match="sha256 differs"):
        unpack(out, "grpo", tmp_path / "back")
    parts = json.loads((out / "grpo.manifest.json").read_text())["parts"]
    (out / parts[-1]["file"]).unlink()
    pack(run, out, "grpo", part_mib=0.004)  # fresh parts, then one goes missing
    (out / parts[-1]["file"]).unlink()
    with pytest.raises(FileNotFoundError, match="carry every part"):
        unpack(out, "grpo", tmp_path / "back")


def test_what_would_not_come_back_is_refused(tmp_path):
    run = _run(tmp_path, sizes=(40_000,))
    with pytest.raises(ValueError, match="more than the 3 a call can bring back"):
        pack(run, tmp_path / "out", "grpo", part_mib=0.005, max_parts=3)
    with pytest.raises(FileNotFoundError, match="no checkpoint-N"):
        pack(tmp_path / "empty", tmp_path / "out", "x")
