"""The official BFCL scorer lives in its own virtual environment, created on demand.

``bfcl-eval`` pins ``numpy==1.26.4`` and friends and pulls torch through
sentence-transformers, which clashes with the training stack. So it gets a venv of its own
(default ``<project root>/.bfcl-venv``, or ``$TOOLRL_BFCL_VENV``) holding the package
``--no-deps`` plus the minimal set its scorer imports (~60 s, ~550 MB, once). Creation is
idempotent (a marker file is written last) and lock-protected (parallel test workers or
notebooks wait for one builder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from toolrl_lib.data.bfcl import BFCL_PACKAGE, BFCL_VERSION
from toolrl_lib.paths import project_root

ENV_VAR = "TOOLRL_BFCL_VENV"
MARKER = ".toolrl_bfcl_ready.json"

# What the scorer imports at run time (its declared deps are heavier and clash with ours).
# qwen-agent imports soundfile without declaring it.
REQUIREMENTS: tuple[str, ...] = (
    "requests", "tqdm", "numpy==1.26.4", "pandas", "pydantic>=2.8.2", "python-dotenv",
    "tree_sitter==0.21.3", "tree-sitter-java==0.21.0", "tree-sitter-javascript==0.21.4",
    "openai", "mistralai==1.7.0", "anthropic", "cohere==5.18.0", "typer", "tabulate",
    "datamodel-code-generator==0.25.7", "google-genai", "qwen-agent", "soundfile",
    "mpmath==1.3.0", "tenacity", "writer-sdk", "overrides", "boto3", "filelock==3.20.0",
)  # fmt: skip


class BfclVenvError(RuntimeError):
    """The scorer venv could not be built; the message has pip's last lines."""


def bfcl_venv_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser().resolve() if env else project_root() / ".bfcl-venv"


def venv_python(venv: Path) -> Path:
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def is_ready(venv: Path | None = None) -> bool:
    venv = venv or bfcl_venv_dir()
    marker = venv / MARKER
    if not marker.is_file() or not venv_python(venv).exists():
        return False
    try:
        return json.loads(marker.read_text()).get("bfcl_eval") == BFCL_VERSION
    except (OSError, json.JSONDecodeError):
        return False


def ensure_bfcl_venv(venv: str | Path | None = None, verbose: bool = False) -> Path:
    """Create the scorer venv if needed; return its python executable."""
    from filelock import FileLock

    venv = Path(venv).resolve() if venv else bfcl_venv_dir()
    if is_ready(venv):
        return venv_python(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv) + ".lock", timeout=3600):
        if is_ready(venv):
            return venv_python(venv)
        if venv.exists():  # a half-built venv from an interrupted run
            shutil.rmtree(venv)
        if verbose:
            print(f"creating the BFCL scorer venv at {venv} (once, ~1 min, ~550 MB)")
        _run([sys.executable, "-m", "venv", str(venv)], verbose)
        python = str(venv_python(venv))
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
        if not verbose:
            pip.append("-q")
        _run([*pip, "--no-deps", f"{BFCL_PACKAGE}=={BFCL_VERSION}"], verbose)
        _run([*pip, *REQUIREMENTS], verbose)
        (venv / MARKER).write_text(json.dumps({"bfcl_eval": BFCL_VERSION}))
    return venv_python(venv)


def _run(command: list[str], verbose: bool) -> None:
    result = subprocess.run(command, capture_output=not verbose, text=True)
    if result.returncode != 0:
        tail = "\n".join(((result.stderr or "") + (result.stdout or "")).splitlines()[-15:])
        raise BfclVenvError(f"command failed ({result.returncode}): {' '.join(command)}\n{tail}")
