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
    (run / "best").mkdir()
    (run / "best" / "adapter_model.safetensors").write_bytes(b"best adapter")
    (run / "config.yaml").write_text("name: x\n")
    (run / "metrics.csv").write_text("step,loss\n1,0.5\n")
    return run


def test_round_trip_through_parts(tmp_path):
    run = _run(tmp_path)
    manifest = pack(run, tmp_path / "out", "grpo", part_mib=0.004, max_parts=100)  # ~4 KB parts: several of them
    assert manifest["checkpoint"] == "checkpoint-100" and len(manifest["parts"]) >= 2
    assert main(["unpack", "--parts", str(tmp_path / "out"), "--name", "grpo", "--dest", str(tmp_path / "back")]) == 0
    for name in ("file0.bin", "file1.bin"):
        assert (tmp_path / "back/checkpoints/checkpoint-100" / name).read_bytes() == \
            (run / "checkpoints/checkpoint-100" / name).read_bytes()
    assert (tmp_path / "back/metrics.csv").read_text() == "step,loss\n1,0.5\n"
    assert (tmp_path / "back/best/adapter_model.safetensors").read_bytes() == b"best adapter"
    assert not (tmp_path / "back/checkpoints/checkpoint-50").exists()


def test_damaged_or_missing_part_is_refused(tmp_path):
    run = _run(tmp_path)
    out = tmp_path / "out"
    pack(run, out, "grpo", part_mib=0.004, max_parts=100)
    first = out / "grpo.part00"
    first.write_bytes(b"x" + first.read_bytes()[1:])
    with pytest.raises(ValueError, match="sha256 differs"):
        unpack(out, "grpo", tmp_path / "back")
    parts = json.loads((out / "grpo.manifest.json").read_text())["parts"]
    (out / parts[-1]["file"]).unlink()
    pack(run, out, "grpo", part_mib=0.004, max_parts=100)  # fresh parts, then one goes missing
    (out / parts[-1]["file"]).unlink()
    with pytest.raises(FileNotFoundError, match="carry every part"):
        unpack(out, "grpo", tmp_path / "back")


def test_a_large_pack_comes_back_over_several_calls(tmp_path):
    run = _run(tmp_path, sizes=(40_000,))
    out = tmp_path / "out"
    first = pack(run, out, "grpo", part_mib=0.005, max_parts=3)
    assert len(first["parts"]) > 6 and first["written"] == ["grpo.part00", "grpo.part01", "grpo.part02"]
    assert not (out / "grpo.part03").exists() and first["next_part"] == 3
    part = first["next_part"]
    while part is not None:  # later calls cut the very same parts (a deterministic tar)
        again = pack(run, out, "grpo", part_mib=0.005, max_parts=3, first_part=part)
        assert again["parts"] == first["parts"]
        part = again["next_part"]
    unpack(out, "grpo", tmp_path / "back")
    assert (tmp_path / "back/checkpoints/checkpoint-100/file0.bin").read_bytes() == \
        (run / "checkpoints/checkpoint-100/file0.bin").read_bytes()
    with pytest.raises(ValueError, match="packs into parts 0"):
        pack(run, out, "grpo", part_mib=0.005, first_part=99)
    with pytest.raises(FileNotFoundError, match="no checkpoint-N"):
        pack(tmp_path / "empty", tmp_path / "out", "x")


def test_a_model_folder_travels_in_bfloat16(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    model = tmp_path / "model"
    model.mkdir()
    weights = {"w": torch.randn(64, 8), "ids": torch.arange(5)}
    save_file(weights, model / "model.safetensors")
    (model / "config.json").write_text('{"x": 1}')
    manifest = pack(model, tmp_path / "out", "start", part_mib=0.01, folder=True, bf16=True)
    assert manifest["folder"] and manifest["next_part"] is None
    assert unpack(tmp_path / "out", "start", tmp_path / "back") == tmp_path / "back"
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert back["w"].dtype == torch.bfloat16 and torch.equal(back["w"], weights["w"].to(torch.bfloat16))
    assert torch.equal(back["ids"], weights["ids"])  # integers stay as they are
    assert (tmp_path / "back" / "config.json").read_text() == '{"x": 1}'


def test_stage_spreads_files_over_carry_folders(tmp_path):
    from benchmarks.gpu.carry import stage

    files = []
    for i, size in enumerate((600, 500, 300, 900)):
        files.append(tmp_path / f"f{i}")
        files[-1].write_bytes(b"x" * size)
    folders = stage(files, tmp_path / "whl", mib=1000 / 2**20)
    assert [sorted(p.name for p in folder.iterdir()) for folder in folders] == [["f0"], ["f1", "f2"], ["f3"]]
    with pytest.raises(ValueError, match="larger than a stage folder"):
        stage(files, tmp_path / "other", mib=800 / 2**20)
