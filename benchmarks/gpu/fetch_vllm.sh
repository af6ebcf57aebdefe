#!/usr/bin/env bash
# Build the vLLM 0.26.0 bundle for the GPU host (no network there) in parts that fit a device call.
#
# vLLM 0.26.0 pins torch 2.11.0, the host's torch (2.11.0+cu130), so only vLLM and the 89 wheels
# of its dependency tree that the host lacks travel (benchmarks/gpu/vllm-host-wheels.txt); never
# torch, triton, nvidia-*, numpy or numba. The wheels are installed here into one folder
# (`pip install --target` for cp312 / manylinux x86_64), three optional binaries are deleted
# (FlashAttention 2: Hopper uses FlashAttention 3; the MoE kernels; the Rust front end), and
# the folder is tarred, xz-compressed and split into parts of 52 MiB (a call carries 64 MiB, the repo included): .whl/vllm1, .whl/vllm2.
# On the host (session.sh step `vllm`, which also needs VLLM_USE_FLASHINFER_SAMPLER=0):
#   cat .whl/vllm*/part.* | xz -d | tar x -C /tmp      # -> /tmp/vllm-site on PYTHONPATH
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
work=${VLLM_BUNDLE_WORK:-/tmp/vllm-bundle}
platform=()
for tag in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 \
           manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do platform+=(--platform "${tag}_x86_64"); done
mkdir -p "$work/wheels"
mapfile -t wanted < <(sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' benchmarks/gpu/vllm-host-wheels.txt)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platform[@]}" -d "$work/wheels" vllm==0.26.0 "${wanted[@]}"
rm -rf "$work/vllm-site"
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platform[@]}" --target "$work/vllm-site" "$work"/wheels/vllm-0.26.0-*.whl \
  $(sed "s|^|$work/wheels/|" benchmarks/gpu/vllm-host-wheels.txt)   # the listed builds (pip may fetch two of one)
rm -rf "$work/vllm-site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" \
       "$work/vllm-site/vllm/_moe_C_stable_libtorch.abi3.so" "$work/vllm-site/vllm/vllm-rs" \
       "$work/vllm-site/bin"
rm -rf .whl/vllm1 .whl/vllm2 && mkdir -p .whl/vllm1 .whl/vllm2
tar cf - -C "$work" vllm-site | xz -T0 -6 | split -b 52M -d - "$work/part."
ls "$work"/part.* | sort | head -1 | xargs -I{} mv {} .whl/vllm1/
mv "$work"/part.* .whl/vllm2/
du -sh .whl/vllm1 .whl/vllm2
