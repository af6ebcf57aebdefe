"""A merge's output folder: written to a hidden staging sibling and published by rename only
when every check passed, its provenance (hashes, library versions) and the optional hub upload."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from toolrl_lib import atomic
from toolrl_lib.merge.checks import ADAPTER_WEIGHTS
from toolrl_lib.merge.inputs import adapter_base_name
from toolrl_lib.merge.report import MERGE_INFO, MergeError
from toolrl_lib.run_dir import RUN_INFO, read_run_info


def is_complete_merge(folder: str | Path) -> bool:
    """True only for a folder this module finished: it carries a passing ``toolrl_merge.json``."""
    path = Path(folder) / MERGE_INFO
    if not path.is_file():
        return False
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("passed"))
    except (json.JSONDecodeError, AttributeError):
        return False


def folder_size(folder: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


# ---------------------------------------------------------------- provenance


def sha256_of(path: str | Path) -> str | None:
    path = Path(path)
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    names = ("toolrl-workbook", "torch", "transformers", "peft", "trl", "safetensors",
             "accelerate", "unsloth")
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def provenance(adapter_dir: Path, base: str, run_dir: Path | None) -> dict[str, Any]:
    weights = next((adapter_dir / n for n in ADAPTER_WEIGHTS if (adapter_dir / n).is_file()), None)
    info: dict[str, Any] = {
        "base_model": base,
        "adapter": str(adapter_dir.resolve()),
        "adapter_sha256": sha256_of(weights) if weights else None,
        "adapter_config_base": adapter_base_name(adapter_dir),
        "run_dir": str(run_dir.resolve()) if run_dir else None,
        "run_config_sha256": sha256_of(run_dir / "config.yaml") if run_dir else None,
        "run_info": (read_run_info(run_dir).to_dict()
                     if run_dir and (run_dir / RUN_INFO).is_file() else None),
        "libraries": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return info



def staging_dir(out_dir: Path) -> Path:
    """A hidden sibling of ``out_dir``; renamed into place when everything passed."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.parent.glob(f".{out_dir.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))


def publish(staging: Path, out_dir: Path, overwrite: bool) -> None:
    """Rename the verified staging folder to ``out_dir`` (replacing an old one if allowed)."""
    if out_dir.exists() and not overwrite:
        raise MergeError(f"{out_dir} already exists; pass overwrite=True / --overwrite")
    staging.chmod(0o755)  # mkdtemp creates it private; the published folder is a normal one
    atomic.replace_dir(staging, out_dir)



def push_to_hub(folder: str | Path, repo_id: str, private: bool = True) -> str:
    """Upload a verified merged folder; the token comes only from ``$HF_TOKEN``."""
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise MergeError("hub upload needs a token in the HF_TOKEN environment variable")
    if not is_complete_merge(folder):
        raise MergeError(f"{folder} is not a verified merge (no passing {MERGE_INFO}); not uploading")
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo_id,
                      commit_message="Upload merged model (toolrl merge)")
    return f"https://huggingface.co/{repo_id}"
