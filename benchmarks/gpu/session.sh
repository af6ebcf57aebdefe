#!/usr/bin/env bash
# One GPU session (nvidia-h200-x2) for issues 7, 8 and 9, as a chain of device calls made
# back to back (files outside the repo survive while the host stays warm). Each step is one
# call, run from the repo root; what to carry is in brackets. Results come back as tarballs.
#   1 [.whl/gguf1 .whl/base .whl/ds]  wheels (TRL, datasets, bfcl-eval, gguf, DeepSpeed) -> /tmp/site
#   2 [.whl/gguf2 data/processed/smoke] model from the GGUF (sha256 checked) + RL phase "prime"
#     ("model" alone: just the model, for step 6 in a session of its own)
#   3 [.whl/bnb]                      bitsandbytes (Unsloth needs it to load any model)
#   4 [.whl/unsloth data/processed/smoke] RL phase "train" on GPU 0 || GRPO throughput on GPU 1
#   5 [data/processed/smoke]          RL phase "bfcl" on GPU 0 || full-profile fit (80 GB cap) on GPU 1
#   6 [data/processed/smoke]          multi-GPU: 1 GPU vs DDP on 2, ZeRO-3 full fine-tuning
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD TOOLRL_CACHE=/tmp/toolrl-cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@"; }
pack() { local name=$1; shift; tar czf "$OUT/$name.tar.gz" "$@" 2>/dev/null; ls -la "$OUT/$name.tar.gz"; }
case "${1:?step}" in
  1) mkdir -p /tmp/m && cp .whl/gguf1/part1 /tmp/m/ && install .whl/base/*.whl .whl/ds/*.whl
     nvidia-smi -L; python3 -c "import torch, trl; print(torch.__version__, trl.__version__, torch.cuda.device_count())" ;;
  model) cat /tmp/m/part1 .whl/gguf2/part2 > /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
     python3 -m toolrl_lib.cli model prepare --gguf /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf 2>&1 | tail -1 ;;
  2) bash "$0" model || exit 1
     # one GPU visible: the priming SFT is a single-process run
     CUDA_VISIBLE_DEVICES=0 python3 benchmarks/rl_learning_gpu.py prime --work /tmp/rl 2>&1 | grep -v "it/s]" | tail -20 ;;
  3) install .whl/bnb/*.whl ;;
  4) install .whl/unsloth/*.whl
     CUDA_VISIBLE_DEVICES=0 python3 benchmarks/rl_learning_gpu.py train --work /tmp/rl --gpus 0 \
       --train-seconds "${TRAIN_S:-300}" --deadline-s 500 > /tmp/rl/train.log 2>&1 &
     CUDA_VISIBLE_DEVICES=1 python3 benchmarks/grpo_throughput.py --out /tmp/tp --time-budget-s 450 \
       --variants "${TP_VARIANTS:-peft_default,unsloth,peft_gen_batch64,peft_static_compile,peft_paged}" \
       > /tmp/tp.log 2>&1 &
     wait; tail -15 /tmp/rl/train.log; tail -15 /tmp/tp.log; cp /tmp/tp.log /tmp/tp/
     pack throughput -C /tmp tp ;;
  5) CUDA_VISIBLE_DEVICES=1 python3 benchmarks/full_profile_fit.py --out /tmp/fit --backend peft \
       --time-budget-s 380 > /tmp/fit.log 2>&1 &
     python3 benchmarks/rl_learning_gpu.py bfcl --work /tmp/rl --gpus 0 --out "$OUT" --deadline-s 380
     wait; tail -20 /tmp/fit.log; cp /tmp/fit.log /tmp/fit/ 2>/dev/null; pack fit -C /tmp fit ;;
  6) python3 benchmarks/multi_gpu.py --out /tmp/mg --work /tmp/mgw --steps "${MG_STEPS:-5}" --priming-steps 16 --time-budget-s "${MG_S:-240}" 2>&1 | tail -25
     pack multi_gpu -C /tmp mg ;;
esac
