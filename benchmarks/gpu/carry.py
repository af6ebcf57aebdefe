"""A run's checkpoint across fresh GPU machines: packed into parts small enough to come back.

A device call returns at most 8 files of 16 MiB (64 MiB together) from ``$OUT``, and sends at
most 64 MiB of working tree; a host stays warm only 30 s between calls. A GRPO run that needs
more than one session resumes from its newest checkpoint, so the checkpoint travels as parts:

    python -m benchmarks.gpu.carry pack --src /tmp/rl/runs/grpo --out $OUT --name grpo   # on the GPU host
    # here: copy $OUT's grpo.part* + grpo.manifest.json into a carried folder, e.g. .whl/ckpt/
    python -m benchmarks.gpu.carry unpack --parts .whl/ckpt --name grpo --dest /tmp/rl/runs/grpo

``pack`` takes the folder's newest complete ``checkpoints/checkpoint-N`` (``run_dir.latest_checkpoint``) (everything a resume reads:
adapter or weights, optimizer, scheduler, RNG and trainer state) plus the run's small files
(``config.yaml``, ``run_info.json``, ``metrics.csv``, ``validation.csv``), tars them, splits the
tar into ``--part-mib`` parts and writes a manifest with each part's size and sha256; ``unpack``
checks every part against it before restoring anything. It refuses what would not come back
(more than ``--max-parts`` parts) instead of losing it silently.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

SMALL_FILES = ("config.yaml", "run_info.json", "metrics.csv", "validation.csv", "data_report.json")


def pack(src: Path, out: Path, name: str, part_mib: float = 15.0, max_parts: int = 7) -> dict:
    """Parts + manifest of ``src``'s newest checkpoint and small files, under ``out``."""
    from toolrl_lib.run_dir import latest_checkpoint

    checkpoint = latest_checkpoint(src / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"{src}/checkpoints has no checkpoint-N folder (complete: with trainer_state.json) to carry")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(checkpoint, arcname=f"checkpoints/{checkpoint.name}")
        for small in SMALL_FILES:
            if (src / small).is_file():
                tar.add(src / small, arcname=small)
    data = buffer.getvalue()
    size = int(part_mib * 2**20)
    parts = [data[i:i + size] for i in range(0, len(data), size)]
    if len(parts) > max_parts:
        raise ValueError(f"{checkpoint} packs into {len(parts)} parts of {part_mib} MiB: more than the "
                         f"{max_parts} a call can bring back (save less: an adapter, no optimizer state)")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "checkpoint": checkpoint.name, "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(), "parts": []}
    for i, part in enumerate(parts):
        path = out / f"{name}.part{i:02d}"
        path.write_bytes(part)
        manifest["parts"].append({"file": path.name, "bytes": len(part), "sha256": hashlib.sha256(part).hexdigest()})
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
    return dest / "checkpoints" / manifest["checkpoint"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--src", required=True, type=Path, help="a run folder with checkpoints/checkpoint-N")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--name", required=True)
    p.add_argument("--part-mib", type=float, default=15.0)
    p.add_argument("--max-parts", type=int, default=7, help="a call brings back 8 files: parts + the manifest")
    u = sub.add_parser("unpack")
    u.add_argument("--parts", required=True, type=Path)
    u.add_argument("--name", required=True)
    u.add_argument("--dest", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.what == "pack":
        print(json.dumps(pack(args.src, args.out, args.name, args.part_mib, args.max_parts)))
    else:
        print(unpack(args.parts, args.name, args.dest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
