"""A run's checkpoint, or a model folder, across fresh GPU machines: packed into parts small
enough to come back.

A device call returns at most 8 files of 16 MiB (64 MiB together) from ``$OUT``, and sends at
most 64 MiB of working tree; a host stays warm only 30 s between calls. A GRPO run that needs
more than one session resumes from its newest checkpoint, and from the model it started from,
so both travel as parts:

    python -m benchmarks.gpu.carry pack --src /tmp/rl/runs/grpo --out $OUT --name grpo   # on the GPU host
    python -m benchmarks.gpu.carry pack --src /tmp/ras/sft/full/model --folder --bf16 --out $OUT --name start \
        --first-part 4      # a 270 MB model: 18 parts, 4 per call (--first-part 0, 4, 8, 12, 16)
    # here: copy the parts + <name>.manifest.json into a carried folder, e.g. .whl/stage1/
    python -m benchmarks.gpu.carry unpack --parts .whl/stage1 --name grpo --dest /tmp/rl/runs/grpo

``pack`` takes the folder's newest complete ``checkpoints/checkpoint-N`` (``run_dir.latest_checkpoint``:
everything a resume reads: adapter or weights, optimizer, scheduler, RNG and trainer state) plus the
run's small files (``config.yaml``, ``run_info.json``, ``metrics.csv``, ``validation.csv``) and its
``best/`` adapter, or with
``--folder`` the whole folder (``--bf16``: float32 safetensors cast to bfloat16, the dtype training
loads them in, half the parts). The tar is deterministic (sorted members, no times or owners), so
every call that packs the same folder cuts the same parts: a call writes ``--max-parts`` of them
from ``--first-part`` on, with a manifest naming every part's size and sha256; ``unpack`` checks
every part against it before restoring anything.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

# What one device call brings back from $OUT: at most 8 files and 64 MiB together (16 MiB each).
CALL_FILES = 8
CALL_MIB = 62.0
PART_MIB = 15.0  # four parts and their manifests in one call
SMALL_FILES = ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "data_report.json")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)  # mtime, uid, gid 0: the same bytes on every call
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _file_bytes(path: Path, bf16: bool) -> bytes:
    if not (bf16 and path.suffix == ".safetensors"):
        return path.read_bytes()
    import torch
    from safetensors.torch import load_file, save

    tensors = {k: (v.to(torch.bfloat16) if v.dtype == torch.float32 else v) for k, v in load_file(path).items()}
    return save(dict(sorted(tensors.items())), metadata={"format": "pt"})


def packed_bytes(src: Path, folder: bool = False, bf16: bool = False) -> tuple[bytes, str]:
    """The deterministic tar of what travels, and what it holds (a checkpoint's name or "folder")."""
    from toolrl_lib.run_dir import latest_checkpoint

    members: list[tuple[str, Path]] = []
    if folder:
        if not src.is_dir():
            raise FileNotFoundError(f"{src} is not a folder to carry")
        members = [(str(path.relative_to(src)), path) for path in sorted(src.rglob("*")) if path.is_file()]
        holds = "folder"
    else:
        checkpoint = latest_checkpoint(src / "checkpoints")
        if checkpoint is None:
            raise FileNotFoundError(f"{src}/checkpoints has no checkpoint-N folder (complete: with trainer_state.json) to carry")
        members = [(f"checkpoints/{checkpoint.name}/{path.relative_to(checkpoint)}", path)
                   for path in sorted(checkpoint.rglob("*")) if path.is_file()]
        members += [(small, src / small) for small in SMALL_FILES if (src / small).is_file()]
        # best/ (the adapter of the best validation so far): a resumed run only overwrites it when
        # validation improves on the restored validation.csv, and the final merge reads it
        members += [(str(path.relative_to(src)), path) for path in sorted((src / "best").rglob("*")) if path.is_file()]
        holds = checkpoint.name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in members:
            _add_bytes(tar, name, _file_bytes(path, bf16))
    return buffer.getvalue(), holds


def pack(src: Path, out: Path, name: str, part_mib: float = 15.0, max_parts: int = 4, first_part: int = 0,
         folder: bool = False, bf16: bool = False) -> dict:
    """Parts ``first_part`` .. ``first_part + max_parts - 1`` of ``src`` and the manifest of all of
    them, under ``out``; the manifest's ``next_part`` says where the next call starts (None: done)."""
    data, holds = packed_bytes(src, folder, bf16)
    size = int(part_mib * 2**20)
    parts = [data[i:i + size] for i in range(0, len(data), size)]
    if not 0 <= first_part < len(parts):
        raise ValueError(f"--first-part {first_part}: {src} packs into parts 0..{len(parts) - 1}")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "checkpoint": holds, "folder": folder, "bf16": bf16, "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "parts": [{"file": f"{name}.part{i:02d}", "bytes": len(part), "sha256": hashlib.sha256(part).hexdigest()}
                          for i, part in enumerate(parts)]}
    stop = min(len(parts), first_part + max_parts)
    for i in range(first_part, stop):
        (out / manifest["parts"][i]["file"]).write_bytes(parts[i])
    manifest["written"] = [manifest["parts"][i]["file"] for i in range(first_part, stop)]
    manifest["next_part"] = stop if stop < len(parts) else None
    (out / f"{name}.manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def unpack(parts_dir: Path, name: str, dest: Path) -> Path:
    """Check the parts against their manifest, then restore them into ``dest`` (a run folder)."""
    manifest = json.loads((parts_dir / f"{name}.manifest.json").read_text())
    chunks = []
    for part in manifest["parts"]:
        path = parts_dir / part["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: carry every part named in {name}.manifest.json")
        chunk = path.read_bytes()
        if hashlib.sha256(chunk).hexdigest() != part["sha256"]:
            raise ValueError(f"{path}: sha256 differs from the manifest (a damaged or stale part)")
        chunks.append(chunk)
    data = b"".join(chunks)
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise ValueError(f"{name}: the joined parts differ from what was packed")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")  # no absolute paths, links or devices
    return dest if manifest.get("folder") else dest / "checkpoints" / manifest["checkpoint"]


def stage(files: list[Path], to: Path, mib: float = 60.0, max_files: int | None = None) -> list[Path]:
    """Spread ``files`` over folders ``to/stage1``, ``to/stage2``, ... of at most ``mib`` MiB (and
    ``max_files`` files) each: one device call carries one folder there (64 MiB at most), or
    brings one back from there (8 files, 64 MiB)."""
    limit = int(mib * 2**20)
    most = max_files or len(files)
    folders: list[tuple[Path, int, int]] = []  # folder, bytes, files
    for path in sorted(files, key=lambda f: f.name):
        size = path.stat().st_size
        if size > limit:
            raise ValueError(f"{path} ({size} bytes) is larger than a stage folder ({limit}); pack it in smaller parts")
        if not folders or folders[-1][1] + size > limit or folders[-1][2] >= most:
            folders.append((to / f"stage{len(folders) + 1}", 0, 0))
            folders[-1][0].mkdir(parents=True, exist_ok=False)
        folder, used, count = folders[-1]
        (folder / path.name).write_bytes(path.read_bytes())
        folders[-1] = (folder, used + size, count + 1)
    return [folder for folder, _, _ in folders]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--src", required=True, type=Path, help="a run folder with checkpoints/checkpoint-N")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--name", required=True)
    p.add_argument("--part-mib", type=float, default=15.0)
    p.add_argument("--max-parts", type=int, default=4,
                   help="a call brings back 64 MiB: 4 parts of 15 MiB + the manifest")
    p.add_argument("--first-part", type=int, default=0, help="the first part this call writes (see next_part)")
    p.add_argument("--folder", action="store_true", help="carry the whole folder (a model), not a run's checkpoint")
    p.add_argument("--bf16", action="store_true", help="cast float32 safetensors to bfloat16 on the way")
    u = sub.add_parser("unpack")
    u.add_argument("--parts", required=True, type=Path)
    u.add_argument("--name", required=True)
    u.add_argument("--dest", required=True, type=Path)
    s = sub.add_parser("stage", help="here: spread parts over carry folders <to>/stage1, stage2, ... (<= --mib each)")
    s.add_argument("files", nargs="+", type=Path)
    s.add_argument("--to", required=True, type=Path)
    s.add_argument("--mib", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.what == "stage":
        for folder in stage(args.files, args.to, args.mib):
            print(folder)
    elif args.what == "pack":
        manifest = pack(args.src, args.out, args.name, args.part_mib, args.max_parts, args.first_part,
                        args.folder, args.bf16)
        print(json.dumps({k: manifest[k] for k in ("name", "checkpoint", "bytes", "written", "next_part")}))
    else:
        print(unpack(args.parts, args.name, args.dest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
