#!/usr/bin/env bash
# One GPU session (nvidia-h200-x2) for issues 7, 8 and 9, as a chain of device calls made
# back to back (files outside the repo survive between calls while the host stays warm).
# Each step is one call, run from the repo root; what to carry is in brackets (the repo itself
# is ~1.7 MB, a call carries at most 64 MiB). Results come back as tarballs under $OUT.
#   1 [.whl/gguf1 .whl/base .whl/ds data/processed/smoke]  wheels (TRL, datasets, bfcl-eval,
#     gguf, DeepSpeed) -> /tmp/site; GGUF part 1 -> /tmp/m
#   2 [.whl/bnb]       bitsandbytes (Unsloth needs it to load any model)
#   3 [.whl/unsloth]   unsloth + unsloth_zoo
#   4 [.whl/gguf2 data/processed/smoke]  GPU 0: model from the GGUF (sha256 checked), RL phase
#     "prime", then RL phase "train" (TRAIN_S seconds);  GPU 1: random Qwen3-8B saved once, then
#     the GRPO throughput variants until the call's budget (S4, default 570 s) is spent
#   5 [data/processed/smoke]  GPU 0: RL phase "bfcl" (4 models) -> rl_learning.tar.gz;
#     GPU 1: the remaining throughput variants (--resume: one table) -> throughput.tar.gz
#   6 [data/processed/smoke]  multi-GPU: 1 GPU vs DDP on 2 (micro-batch layout), ZeRO-3 full FT
#   model: just the embedded model (for a session that starts at step 6)
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD TOOLRL_CACHE=/tmp/toolrl-cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
T0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - T0) )); }   # seconds left of a step's budget
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@"; }
pack() { local name=$1; shift; tar czf "$OUT/$name.tar.gz" "$@" 2>/dev/null; ls -la "$OUT/$name.tar.gz"; }
TP_VARIANTS=${TP_VARIANTS:-peft_default,unsloth,unsloth_gen_batch64,peft_paged,peft_static_compile,peft_gen_batch64}
case "${1:?step}" in
  1) mkdir -p /tmp/m && cp .whl/gguf1/part1 /tmp/m/ && install .whl/base/*.whl .whl/ds/*.whl
     nvidia-smi -L; python3 -c "import torch, trl; print(torch.__version__, trl.__version__, torch.cuda.device_count())" ;;
  2) install .whl/bnb/*.whl && python3 -c "import bitsandbytes; print('bnb', bitsandbytes.__version__)" ;;
  3) install .whl/unsloth/*.whl && ls /tmp/site | grep -i unsloth ;;
  model) cat /tmp/m/part1 .whl/gguf2/part2 > /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
     python3 -m toolrl_lib.cli model prepare --gguf /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf 2>&1 | tail -1 ;;
  4) S4=${S4:-570}
     (  # GPU 1: the throughput benchmark (the random 8B model is built once, ~1-2 min)
       export CUDA_VISIBLE_DEVICES=1
       python3 benchmarks/grpo_throughput.py --prepare-model > /tmp/tp-prepare.log 2>&1
       python3 benchmarks/grpo_throughput.py --out /tmp/tp --time-budget-s "$(left $((S4 - 25)))" \
         --variants "$TP_VARIANTS" > /tmp/tp.log 2>&1 ) &
     mkdir -p /tmp/rl
     bash "$0" model || exit 1
     # one GPU visible: the priming SFT is a single-process run
     CUDA_VISIBLE_DEVICES=0 python3 benchmarks/rl_learning_gpu.py prime --work /tmp/rl > /tmp/rl/prime.log 2>&1
     grep -v "it/s]" /tmp/rl/prime.log | tail -6
     D=$(left $((S4 - 15)))
     CUDA_VISIBLE_DEVICES=0 python3 benchmarks/rl_learning_gpu.py train --work /tmp/rl --gpus 0 \
       --train-seconds "${TRAIN_S:-$((D - 100))}" --deadline-s "$D" > /tmp/rl/train.log 2>&1
     tail -8 /tmp/rl/train.log
     wait; tail -4 /tmp/tp-prepare.log; tail -12 /tmp/tp.log; cp /tmp/tp*.log /tmp/tp/ 2>/dev/null
     pack throughput -C /tmp tp ;;
  5) S5=${S5:-420}
     CUDA_VISIBLE_DEVICES=1 python3 benchmarks/grpo_throughput.py --out /tmp/tp --resume \
       --time-budget-s "$(left $((S5 - 25)))" --variants "$TP_VARIANTS" > /tmp/tp2.log 2>&1 &
     python3 benchmarks/rl_learning_gpu.py bfcl --work /tmp/rl --gpus 0 --out "$OUT" --deadline-s "$(left $((S5 - 40)))"
     wait; tail -12 /tmp/tp2.log; cp /tmp/tp2.log /tmp/tp/; pack throughput -C /tmp tp ;;
  6) python3 benchmarks/multi_gpu.py --out /tmp/mg --work /tmp/mgw --steps "${MG_STEPS:-5}" \
       --global-batch 64 --micro-batch 32 --completion-tokens 64 --priming-steps 8 --val-examples 8 \
       --time-budget-s "${MG_S:-330}" 2>&1 | tail -25
     pack multi_gpu -C /tmp mg ;;
esac
