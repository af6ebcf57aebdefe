"""llama.cpp's own Hugging Face -> GGUF converter, taken from the llama-cpp-python sdist on PyPI.

Why this converter and not a writer of ours: llama.cpp (and Ollama, LM Studio, which embed it)
decide what a GGUF means — tensor names, the tokenizer's pre-tokenizer id, special tokens,
rope settings. Its ``convert_hf_to_gguf.py`` is the reference for that, and its source ships
inside the ``llama-cpp-python`` source distribution (``vendor/llama.cpp/``), so pip alone
brings it (pinned version + sha256; nothing is built or compiled). We extract only the
converter script, its ``conversion/`` package, the matching ``gguf-py`` and the licence into
the toolrl cache, once, under a file lock; the folder appears complete or not at all.

``$TOOLRL_LLAMA_CPP_SDIST`` may name a local copy of that sdist (an offline or GPU host).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from toolrl_lib.models import cache_dir, sha256_file

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SCRIPT = "convert_hf_to_gguf.py"
# What the converter needs from vendor/llama.cpp/ (the rest of the 76 MB sdist is C++).
MEMBERS = (SCRIPT, "conversion/", "gguf-py/gguf/", "LICENSE")
MARKER = "toolrl_converter.json"


class ConverterError(RuntimeError):
    """The converter cannot be fetched or unpacked; the message says how to fix it."""


def converter_dir(root: str | Path | None = None) -> Path:
    return Path(root or cache_dir()) / f"llama.cpp-converter-{VERSION}"


def is_ready(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / SCRIPT).is_file()


def ensure_converter(root: str | Path | None = None, sdist: str | Path | None = None) -> Path:
    """The converter script's path, fetching and unpacking it on first use (idempotent)."""
    from filelock import FileLock

    target = converter_dir(root)
    if is_ready(target):
        return target / SCRIPT
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=1800):
        if is_ready(target):
            return target / SCRIPT
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            archive = Path(sdist or os.environ.get("TOOLRL_LLAMA_CPP_SDIST") or "")
            if not archive.is_file():
                archive = _download(staging / "download")
            actual = sha256_file(archive)
            if actual != SDIST_SHA256:
                raise ConverterError(
                    f"{archive}: sha256 {actual}, expected {SDIST_SHA256} ({PACKAGE}=={VERSION} sdist)"
                )
            _extract(archive, staging / "tree")
            (staging / "tree" / MARKER).write_text(json.dumps(
                {"package": PACKAGE, "version": VERSION, "sha256": actual}, indent=2))
            if target.exists():
                shutil.rmtree(target)
            (staging / "tree").rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target / SCRIPT


def _download(folder: Path) -> Path:
    """pip download of the pinned sdist, hash-checked by pip itself (no build, no install)."""
    folder.mkdir(parents=True)
    requirement = folder / "requirement.txt"
    requirement.write_text(f"{PACKAGE}=={VERSION} --hash=sha256:{SDIST_SHA256}\n")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--no-binary", ":all:", "--require-hashes", "-r", str(requirement),
               "-d", str(folder)]
    done = subprocess.run(command, capture_output=True, text=True)
    archive = folder / SDIST
    if done.returncode != 0 or not archive.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ConverterError(
            f"could not download {PACKAGE}=={VERSION} from PyPI ({' | '.join(tail)}); "
            f"set TOOLRL_LLAMA_CPP_SDIST to a local copy of {SDIST}"
        )
    return archive


def _extract(archive: Path, out: Path) -> None:
    prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
    with tarfile.open(archive, "r:gz") as tar:
        chosen = []
        for member in tar.getmembers():
            name = member.name.removeprefix(prefix)
            if name == member.name or not member.isfile() or ".." in Path(name).parts:
                continue
            if any(name == m or (m.endswith("/") and name.startswith(m)) for m in MEMBERS):
                member.name = name
                chosen.append(member)
        if not any(m.name == SCRIPT for m in chosen):
            raise ConverterError(f"{archive}: no vendor/llama.cpp/{SCRIPT} inside")
        tar.extractall(out, members=chosen, filter="data")


def main() -> int:
    """``python -m toolrl_lib.export.converter``: fetch the converter now (the set-up does)."""
    try:
        print(ensure_converter())
    except ConverterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
