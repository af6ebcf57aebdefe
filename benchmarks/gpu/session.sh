#!/usr/bin/env bash
# The GPU session: one step per device call, run from the repository root on the GPU host
# (`bash benchmarks/gpu/session.sh STEP`, with the variables a step reads). Files outside the repo
# survive between calls only while the host stays warm (30 s), so a chain's calls go back to back in
# one batch; results come back as tarballs under $OUT. What each call must carry is in brackets (a call
# carries at most 64 MiB). Which chains ran, with which variables, what they measured and what is next:
# benchmarks/gpu/SESSIONS.md (the log; read its "Next" section first).
#
# Set-up (every session starts bare):
#   1 [.whl/gguf1 .whl/base]  wheels (TRL, datasets, bfcl-eval, gguf; DeepSpeed if .whl/ds) -> /tmp/site,
#       GGUF part 1 -> /tmp/m; its reply's budget_left_s + wall_s is the anchor (L) for MTRL_BUDGET=anchor:N
#   2 [.whl/bnb]  bitsandbytes      3 [.whl/unsloth]  unsloth + unsloth_zoo
#   vllm1 [.whl/vllm1], vllm2 [.whl/vllm2]  the vLLM 0.26.0 bundle (benchmarks/gpu/fetch_vllm.sh) -> /tmp/vllm-site
#   model [.whl/gguf2]  the embedded model from its GGUF (sha256 checked); steps that need it call it
# Issue 39, multi-turn RL (rl_multi_turn_gpu.py):
#   mtrlbg [.whl/gguf2]  the run detached (MTRL_BUDGET, MTRL_VARIANTS, MTRL_MIX, MTRL_ARGS), then
#   watch []  back to back (WATCH_S each) until it says "ended" -> $OUT/rl_multi_turn.tar.gz
#   mtrl  the same run attached, one call at a time (SMTRL s)
#   mtrlcarry (CARRY_CALL=1, 2, ...), stage (STAGE=N) [.whl/stageN], mtrlrestore: a run across sessions
#   pmix [.whl/gguf2]  priming mixes side by side (PMIX_MIXES, PMIX_VAL) -> $OUT/priming_mix.{json,md}
# Issue 38, the learning experiment at scale (rl_at_scale.py): 38, 38bg (RAS_BUDGET), 38carry, 38restore
# Issue 37, fast rollouts: tp (STP, TP_ARGS) GRPO throughput, tpprof (PROF_STEPS, PROF_VARIANT) the step's
#   profile, tpq [.whl/gguf2] a short side by side returned row by row, tp8b (after 2 and 3) Qwen3-8B shapes,
#   bfclv BFCL single-turn generation vLLM vs ours
#   bfclkv  BFCL multi-turn generation, live episodes by count vs by the KV cache (BKV_CATS, BKV_LIMIT, BKV_GIB)
#   shipped [.whl/gguf2]  configs/embedded_gpu.yaml as shipped (vLLM colocate), a few steps (SSHIP, SHIP_STEPS)
# Earlier issues: 4, 5, train, 6 (issue 7's RL phases), 7 (GRPO throughput), 8 (multi-GPU), 9 (merged
#   rollouts at 8B shapes), fit and colabfit (the full and colab profiles' fit), 18 and 18b (issue 18),
#   mt (issue 19: BFCL multi-turn of base and primed)
set -uo pipefail
export PYTHONPATH=/tmp/site:/tmp/vllm-site:$PWD TOOLRL_CACHE=/tmp/toolrl-cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export VLLM_USE_FLASHINFER_SAMPLER=0  # flashinfer is not in the bundle: vLLM's own sampler
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
T0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - T0) )); }   # seconds left of a step's budget
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@"; }
small_card() { [ "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)" -lt 102400 ]; }  # < 100 GiB: an H100
pack() { local name=$1; shift; tar czf "$OUT/$name.tar.gz" "$@" 2>/dev/null; ls -la "$OUT/$name.tar.gz"; }
# A command in its own process session (setsid): it outlives the device call that starts it, for as
# long as the host stays warm (calls back to back, `watch` among them); its pid in /tmp/bg.pid.
detach() { mkdir -p /tmp/bg-out; (setsid bash -c 'echo $$ > /tmp/bg.pid; exec "$@"' _ "$@" > /tmp/bg.log 2>&1 < /dev/null &)
           sleep 10; tail -n 5 /tmp/bg.log; }
RAS_RUN=(--variants "${RAS_VARIANTS:-g16-weighted,g16-binary}" --sft-set sft.epochs=1 --sft-set sft.batch_size=16
         --sft-set sft.gradient_accumulation_steps=2 --set grpo.vllm.gpu_memory_utilization=0.12 --eval-memory 0.1
         ${RAS_ARGS:-})
TP_VARIANTS=${TP_VARIANTS:-unsloth_merged_gen_batch64,unsloth_gen_batch64,peft_merged_gen_batch64,peft_gen_batch64,unsloth,peft_default,peft_paged,peft_static_compile,best@1024}
case "${1:?step}" in
  1) date +%s > /tmp/anchor   # MTRL_BUDGET=anchor:N (mtrlbg): the chain ends N s after this call began
     mkdir -p /tmp/m && cp .whl/gguf1/part1 /tmp/m/ && install .whl/base/*.whl $(ls .whl/ds/*.whl 2>/dev/null)  # DeepSpeed: only issue 9's ZeRO runs need it
     nvidia-smi -L; python3 -c "import torch, trl; print(torch.__version__, trl.__version__, torch.cuda.device_count())"
     # notebook 01's smoke set, which the benchmarks train on: git-ignored, so a checkout that never ran the
     # workbook has none (2026-12-06: three tp calls failed on it); ~1 s, skipped when carried
     python3 -m toolrl_lib.cli data smoke ;;
  2) install .whl/bnb/*.whl && python3 -c "import bitsandbytes; print('bnb', bitsandbytes.__version__)" ;;
  3) install .whl/unsloth/*.whl && ls /tmp/site | grep -i unsloth ;;
  model) cat /tmp/m/part1 .whl/gguf2/part2 > /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
     python3 -m toolrl_lib.cli model prepare --gguf /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf 2>&1 | tail -1 ;;
  4) S4=${S4:-570}
     mkdir -p /tmp/rl
     bash "$0" model || exit 1
     if [ "${SIDE:-}" = bfcl0 ]; then  # GPU 1: BFCL of base, then of primed once it exists
       ( python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 1 --only base --out "$OUT" \
           --deadline-s "$(left $((S4 - 25)))"
         until [ -f /tmp/rl/start_validation.json ] || [ "$(left "$S4")" -lt 90 ]; do sleep 5; done
         python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 1 --only primed --out "$OUT" \
           --deadline-s "$(left $((S4 - 25)))" ) > /tmp/rl/side.log 2>&1 &
     fi
     # one GPU visible: the priming SFT is a single-process run
     CUDA_VISIBLE_DEVICES=0 python3 -m benchmarks.gpu.rl_learning_gpu prime --work /tmp/rl > /tmp/rl/prime.log 2>&1
     grep -v "it/s]" /tmp/rl/prime.log | tail -4
     bash "$0" train "$(left $((S4 - 15)))"
     wait; [ -f /tmp/rl/side.log ] && grep -v "it/s]" /tmp/rl/side.log | tail -6 ;;
  18) S=${S18:-575}; mkdir -p /tmp/rl
     bash "$0" model || exit 1
     SEL=(--set=validation.best_metric=summary); for item in ${I18_SET:-}; do SEL+=("--set=$item"); done
     ( python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 0 --only base --out "$OUT" "${SEL[@]}" \
         --deadline-s "$(left $((S - 25)))"
       until [ -f /tmp/rl/start_validation.json ] || [ "$(left "$S")" -lt 90 ]; do sleep 5; done
       python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 0 --only primed --out "$OUT" "${SEL[@]}" \
         --deadline-s "$(left $((S - 25)))" ) > /tmp/rl/side.log 2>&1 &
     python3 -m benchmarks.gpu.rl_learning_gpu prime --work /tmp/rl "${SEL[@]}" > /tmp/rl/prime.log 2>&1
     grep -v "it/s]" /tmp/rl/prime.log | tail -3
     RL_GPUS=0 RL_SET="${RL_SET:-} ${I18_SET:-}" RL_VARIANTS=${I18_VARIANTS:-i18-weighted,i18-binary,i18-spurious,i18-sharp} \
       bash "$0" train "$(left $((S - 15)))"
     wait; grep -v "it/s]" /tmp/rl/side.log | tail -4 ;;
  18b) S=${S18B:-480}
     SEL=(--set=validation.best_metric=summary); for item in ${I18_SET:-}; do SEL+=("--set=$item"); done
     RL_GPUS=0 RL_SET="${RL_SET:-} ${I18_SET:-}" RL_VARIANTS=${I18_VARIANTS:-i18-weighted,i18-binary,i18-spurious,i18-sharp} \
       bash "$0" train "${S18B_TRAIN:-300}"
     python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 0 --out "$OUT" "${SEL[@]}" \
       --deadline-s "$(left $((S - 20)))"
     for run in /tmp/rl/runs/*/; do [ -d "$run/best" ] && tar czf "$OUT/adapter-$(basename "$run").tar.gz" -C "$run" best; done
     cat /tmp/rl/selection.json; ls -la "$OUT" ;;
  mt) S=${SMT:-570}; mkdir -p /tmp/rl   # issue 19: BFCL multi-turn, base and primed, generate only
     [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1
     if [ ! -f /tmp/rl/primed_model/config.json ]; then
       python3 -m benchmarks.gpu.rl_learning_gpu prime --work /tmp/rl > /tmp/rl/prime.log 2>&1
       grep -v "it/s]" /tmp/rl/prime.log | tail -3
     fi
     python3 -m benchmarks.gpu.bfcl_multi_turn generate --model base=embedded --model primed=/tmp/rl/primed_model \
       --work /tmp/mt --pack "$OUT" --deadline-s "$(left $((S - 20)))" ${MT_ARGS:-}
     tail -3 /tmp/mt/*.log ;;
  mtrl) S=${SMTRL:-575}   # issues 20/39: priming, GRPO variants (MTRL_VARIANTS), own tasks, BFCL multi-turn
     [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1
     python3 -m benchmarks.gpu.rl_multi_turn_gpu run --work /tmp/mtrl --out "$OUT" --budget-s "$(left "$S")" \
       --variants "${MTRL_VARIANTS:-shaped-g8,success-g8}" ${MTRL_ARGS:-}
     tail -n 2 /tmp/mtrl/keep/bfcl/*.log ;;
  38) S=${S38:-575}
     [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1
     python3 -m benchmarks.gpu.rl_at_scale run --work /tmp/ras --out "$OUT" --budget-s "$(left "$S")" "${RAS_RUN[@]}" \
       2>&1 | grep -v "it/s]" | tail -40
     ls -la "$OUT" ;;
  38bg) B=${RAS_BUDGET:?seconds the detached chain may take}   # the same chain, detached: it outlives this call
     [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1
     detach python3 -m benchmarks.gpu.rl_at_scale run --work /tmp/ras --out /tmp/bg-out --budget-s "$B" "${RAS_RUN[@]}" ;;
  mtrlbg) B=${MTRL_BUDGET:?seconds the detached chain may take}
     # anchor:N -> N less the seconds since call 1 began (N: the device time left when it began, less what the calls
     # after the chain need), so that calls made back to back in one batch need no estimate of the ones between
     case $B in anchor:*) B=$(( ${B#anchor:} - ($(date +%s) - $(cat /tmp/anchor)) )); echo "budget ${B} s";; esac
     [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1
     # by the card (MTRL_ARGS come after, so they still decide): an H200 takes 16 episodes a micro-batch x 2 and
     # 400 s of final reserve (run 2); a card under 100 GiB (an H100, run 3) half the micro-batch x 4, a smaller
     # final KV cache and 600 s (the GRPO model's BFCL ran ~2.8 entries/s there)
     CARD=(--final-reserve-s 400 --set grpo.per_device_train_batch_size=16 --set grpo.gradient_accumulation_steps=2)
     small_card && CARD=(--final-reserve-s 600 --final-eval-kv-gib 16 \
       --set grpo.per_device_train_batch_size=8 --set grpo.gradient_accumulation_steps=4)
     echo "by the card: ${CARD[*]}"
     # MTRL_MIX=NAME=PARTS (a pmix mix): prime on it, and adopt pmix's model when this host has it;
     # MTRL_MIX=auto: the mix pmix's rule chooses (highest validation success <= 0.5), so no pause between calls
     [ "${MTRL_MIX:-}" = auto ] && { MTRL_MIX=$(python3 -m benchmarks.priming_mix --choice-of /tmp/pmix) || exit 1; }
     MIX=(); if [ -n "${MTRL_MIX:-}" ]; then MIX=(--priming-mix "${MTRL_MIX#*=}"); echo "priming mix ${MTRL_MIX}"
       [ -f "/tmp/pmix/${MTRL_MIX%%=*}/result.json" ] && MIX+=(--primed-from "/tmp/pmix/${MTRL_MIX%%=*}"); fi
     detach python3 -m benchmarks.gpu.rl_multi_turn_gpu run --work /tmp/mtrl --out /tmp/bg-out --budget-s "$B" \
       --variants "${MTRL_VARIANTS:-shaped-g8,success-g8}" "${CARD[@]}" "${MIX[@]}" ${MTRL_ARGS:-} ;;
  watch) S=${WATCH_S:-570}   # keeps the host (and the detached chain) alive; returns its results once it ends
     pid=$(cat /tmp/bg.pid)
     while kill -0 "$pid" 2>/dev/null && [ "$(left "$S")" -gt 0 ]; do sleep 5; done
     grep -v "it/s]" /tmp/bg.log | tail -30
     if kill -0 "$pid" 2>/dev/null; then echo "still running"; else echo "ended"; cp /tmp/bg-out/* "$OUT"/ 2>/dev/null; ls -la "$OUT"; fi ;;
  38carry) N=${CARRY_CALL:?1-based call}   # what a later session resumes from: one folder of <= 8 files, < 64 MiB a call
     [ -d /tmp/carryall ] || python3 -m benchmarks.gpu.rl_at_scale carry --work /tmp/ras --to /tmp/carryall \
       --variants "${RAS_VARIANTS:-g16-weighted,g16-binary}" ${CARRY_RUNS_ONLY:+--runs-only} || exit 1
     [ -d /tmp/carryall/stage"$N" ] && cp /tmp/carryall/stage"$N"/* "$OUT"/
     echo "carry call $N of $(ls -d /tmp/carryall/stage* | wc -l)"; ls -la "$OUT" ;;
  mtrlcarry) N=${CARRY_CALL:?1-based call}   # issue 39: what a later session resumes from (as 38carry)
     [ -d /tmp/mtrlcarry ] || python3 -m benchmarks.gpu.rl_multi_turn_gpu carry --work /tmp/mtrl --to /tmp/mtrlcarry \
       --variants "${MTRL_VARIANTS:-shaped-g8,success-g8}" || exit 1
     [ -d /tmp/mtrlcarry/stage"$N" ] && cp /tmp/mtrlcarry/stage"$N"/* "$OUT"/
     echo "carry call $N of $(ls -d /tmp/mtrlcarry/stage* | wc -l)"; ls -la "$OUT" ;;
  mtrlrestore) [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1   # after `stage` calls
     python3 -m benchmarks.gpu.rl_multi_turn_gpu restore --work /tmp/mtrl --parts /tmp/carry \
       --variants "${MTRL_VARIANTS:-shaped-g8,success-g8}" ${MTRL_RESTORE_ARGS:-} ;;
  pmix) [ -f /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash "$0" model || exit 1   # issue 39: priming mixes
     # one process a mix, PMIX_JOBS side by side (a 135M model leaves the GPU mostly idle, but each priming SFT,
     # batch 8 of up to 2,048 tokens without gradient checkpointing, may hold ~15-20 GB: 2 at once on a card under
     # 100 GiB, 4 on an H200), then the table from their kept results; `read` so a mix's `*` is never a glob
     read -r -a MIXES <<< "${PMIX_MIXES:-default=default d4h1=default*4,hard d3h2=default*3,hard*2 d1h1=default,hard}"
     JOBS=${PMIX_JOBS:-$(small_card && echo 2 || echo 4)}
     COMMON=(--device cuda --dtype bf16 --val-tasks "${PMIX_VAL:-112}" --work /tmp/pmix); mkdir -p /tmp/pmix
     n=0; for m in "${MIXES[@]}"; do
       python3 -m benchmarks.priming_mix --mix "$m" "${COMMON[@]}" > "/tmp/pmix/${m%%=*}.log" 2>&1 &
       n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait
     done; wait
     for m in "${MIXES[@]}"; do grep -v "it/s]" "/tmp/pmix/${m%%=*}.log" | grep -i "error\|val success" | tail -3; done
     python3 -m benchmarks.priming_mix $(for m in "${MIXES[@]}"; do printf -- '--mix %s ' "$m"; done) "${COMMON[@]}" \
       --out "$OUT" 2>&1 | grep -v "it/s]" | tail -14 ;;
  stage) mkdir -p /tmp/carry && cp .whl/stage"${STAGE:?}"/* /tmp/carry/ && ls /tmp/carry ;;
  38restore) python3 -m benchmarks.gpu.rl_at_scale restore --work /tmp/ras --parts /tmp/carry \
       --variants "${RAS_VARIANTS:-g16-weighted,g16-binary}" ;;
  5) S5=${S5:-555}
     if [ "${SIDE:-}" = fit ]; then  # GPU 1: the full profile's fit while GPU 0 trains
       CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.gpu.full_profile_fit --out "$OUT" \
         --time-budget-s "$((S5 - 20))" > /tmp/fit.log 2>&1 &
     fi
     bash "$0" train "$S5"
     wait; [ -f /tmp/fit.log ] && tail -22 /tmp/fit.log ;;
  train) D=${2:?seconds}   # workers stop at D-120 s (checkpoint, final validation), killed at D
     SETS=(); for item in ${RL_SET:-}; do SETS+=("--set=$item"); done
     python3 -m benchmarks.gpu.rl_learning_gpu train --work /tmp/rl --gpus "${RL_GPUS:-0,1}" \
       --variants "${RL_VARIANTS:-grpo-weighted,rlsd-weighted,grpo-binary,dapo-weighted}" "${SETS[@]}" \
       --train-seconds "$((D - 120))" --deadline-s "$D" > /tmp/rl/train.log 2>&1
     tail -8 /tmp/rl/train.log ;;
  6) python3 -m benchmarks.gpu.rl_learning_gpu bfcl --work /tmp/rl --gpus 0,1 --out "$OUT" --deadline-s "${S6:-540}" \
       ${BFCL_ALSO:+--also "$BFCL_ALSO"} ;;
  7) python3 -m benchmarks.grpo_throughput --prepare-model > /tmp/tp-prepare.log 2>&1
     python3 -m benchmarks.grpo_throughput --out /tmp/tp ${TP_RESUME:+--resume} --time-budget-s "$(left ${S7:-560})" \
       --variants "$TP_VARIANTS" > /tmp/tp.log 2>&1
     tail -12 /tmp/tp.log; cp /tmp/tp*.log /tmp/tp/; pack throughput -C /tmp tp ;;
  8) if [ -n "${MG_RESUME:-}" ]; then mkdir -p /tmp/mg && cp benchmarks/results/multi_gpu.json /tmp/mg/; fi
     python3 -m benchmarks.gpu.multi_gpu --out /tmp/mg --work /tmp/mgw --steps "${MG_STEPS:-5}" \
       --global-batch "${MG_BATCH:-64}" --micro-batch 32 --completion-tokens "${MG_TOKENS:-64}" --priming-steps 8 --val-examples 8 \
       --runs "${MG_RUNS:-1gpu,ddp2,zero3}" ${MG_RESUME:+--resume} --time-budget-s "${MG_S:-330}" 2>&1 | tail -25
     pack multi_gpu -C /tmp mg ;;
  fit) python3 -m benchmarks.gpu.full_profile_fit --out "$OUT" --time-budget-s "${SFIT:-540}" 2>&1 | tail -20 ;;
  colabfit) bash "$0" model || exit 1   # the random model borrows the embedded tokenizer
     python3 -m benchmarks.gpu.full_profile_fit --config configs/qwen3_1p7b_colab.yaml --shapes qwen3-1.7b \
       --memory-cap-gb 15 --merge --label colab_profile_fit --max-steps 3 --out "$OUT" \
       --time-budget-s "${SCOLAB:-230}" 2>&1 | tail -24 ;;
  bfclkv) # issues 37/39: BFCL multi-turn generation of one model, live episodes by count (200) against a live set
     # sized to the engine's fixed KV cache (--max-live-tokens kv), one after the other -> $OUT/bfcl_kv.tar.gz
     for mode in count kv; do
       extra=(); [ "$mode" = kv ] && extra=(--max-live-tokens kv)
       TOOLRL_VLLM_KV_CACHE_GIB=${BKV_GIB:-16} python3 -m benchmarks.gpu.bfcl_multi_turn generate \
         --model "primed=${BKV_MODEL:-/tmp/mtrl/primed_model}" --work "/tmp/bkv/$mode" --categories "${BKV_CATS:-multi_turn_base}" \
         --limit "${BKV_LIMIT:-100}" --dtype fp32 --deadline-s "${SBKV:-240}" "${extra[@]}" 2>&1 | tail -2
       cat "/tmp/bkv/$mode/primed/timing.json" 2>/dev/null; echo
     done
     pack bfcl_kv -C /tmp bkv ;;
  tp8b) # issue 37: TRL's vLLM colocate at Qwen3-8B shapes against today's default (Unsloth + merged-weight rollouts)
     # in one run (after 1, 2, 3, vllm1, vllm2; ~1 min to build and save the random model, then ~2-3 min a job)
     python3 -m benchmarks.grpo_throughput --prepare-model > /tmp/tp8b-prepare.log 2>&1
     # Unsloth's job without the vLLM bundle on its path (unsloth_zoo patches a vLLM it finds), then the rest
     PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.grpo_throughput --out /tmp/tp8b --time-budget-s "$(left "${S8B:-560}")" \
       --variants unsloth_merged_gen_batch64 > /tmp/tp8b.log 2>&1
     python3 -m benchmarks.grpo_throughput --out /tmp/tp8b --resume --time-budget-s "$(left "${S8B:-560}")" \
       --variants "${TP8B_VARIANTS:-unsloth_merged_gen_batch64,peft_vllm_gen_batch64,peft_vllm_gen_batch128}" >> /tmp/tp8b.log 2>&1
     tail -14 /tmp/tp8b.log; cp /tmp/tp8b*.log /tmp/tp8b/; pack throughput_8b -C /tmp tp8b ;;
  shipped) # issue 37: configs/embedded_gpu.yaml as it ships (vLLM colocate by default): priming, GRPO rounds and
     # validation through the colocated engine, a checkpoint, under SSHIP s (after 1, vllm1, vllm2) -> $OUT/shipped.tar.gz;
     # then here: python -m benchmarks.gpu.shipped report --archive shipped.tar.gz --device ... --command ...
     bash "$0" model || exit 1
     timeout "$(left "${SSHIP:-300}")" python3 -m toolrl_lib.cli train --config configs/embedded_gpu.yaml --out /tmp/shipped \
       --set grpo.max_steps="${SHIP_STEPS:-16}" --set validation.every_steps=8 --set checkpoint.save_steps=8 2>&1 \
       | grep -v "it/s]" | tail -15
     pack shipped --exclude="*.safetensors" --exclude="*.pt" --exclude="*.bin" -C /tmp shipped ;;
  vllm1) mkdir -p /tmp/vparts && cp .whl/vllm1/part.* /tmp/vparts/ && ls -la /tmp/vparts ;;
  vllm2) cat /tmp/vparts/part.* .whl/vllm2/part.* | xz -d | tar x -C /tmp && rm -rf /tmp/vparts
     python3 -c "import vllm, trl; print('vllm', vllm.__version__, 'trl', trl.__version__)" 2>&1 | tail -1 ;;
  tp) python3 -m benchmarks.gpu.grpo_throughput run --out /tmp/tp --budget-s "$(left "${STP:-540}")" \
       ${TP_ARGS:-} --command "python -m benchmarks.gpu.grpo_throughput run --out \$OUT ${TP_ARGS:-}"
     for f in /tmp/tp/*.log; do echo "== $f"; grep -v "it/s]" "$f" | grep -i "error\|fast:\|GRPO (" | tail -4; done
     pack throughput --exclude="*.safetensors" --exclude="*.pt" --exclude="*.bin" -C /tmp tp ;;
  cgcheck) # issue 37: fast.cuda_graphs' recorded graphs against eager on the embedded model (numbers, then ms per
     # call; ~60 s; after 1, carries .whl/gguf2 for the model; CG_ARGS: more arguments) -> $OUT/cuda_graphs_check.json
     bash "$0" model || exit 1
     python3 -m benchmarks.gpu.cuda_graphs_check --out "$OUT/cuda_graphs_check.json" \
       --model /tmp/toolrl-cache/models/smollm2-135m-instruct ${CG_ARGS:-} 2>&1 | grep -v "it/s]" | tail -20 ;;
  tpq) # issue 37: a short side by side at a session's end (after 1, vllm1, vllm2; carries .whl/gguf2 for the model):
     # rows and logs straight under $OUT/tp as each variant ends, so a call cut by the device's limit still returns
     # what finished; weights dropped. TPQ_S: the call's seconds, TP_ARGS: variants, --rounds. The runner's own
     # deadline comes 8 s before the timeout's, so a variant cut by it still leaves a row saying so (run 9's did not)
     bash "$0" model || exit 1
     timeout "$(left "${TPQ_S:-180}")" python3 -m benchmarks.gpu.grpo_throughput run --out "$OUT/tp" \
       --budget-s "$(( $(left "${TPQ_S:-180}") - 8 ))" --min-start-s 30 ${TP_ARGS:-} \
       --command "python -m benchmarks.gpu.grpo_throughput run --out \$OUT ${TP_ARGS:-}"
     find "$OUT/tp" \( -name "*.safetensors" -o -name "*.pt" -o -name "*.bin" \) -delete
     # a device call returns at most 8 files: the rows, logs and each run's metrics.csv as one archive
     tar czf "$OUT/tp_all.tar.gz" -C "$OUT" tp && rm -rf "$OUT/tp/runs" "$OUT/tp/rows" "$OUT/tp/profile" "$OUT"/tp/*.log; ls "$OUT/tp" ;;
  tpprof) # PROF_STEPS: torch profiler windows; SAMPLE_STEPS: Python stack-sampling windows (PROF_ROUNDS 2: '17;18-24')
     prof=(--variants "${PROF_VARIANT:-vllm_mb64_nodetok}" --rounds "${PROF_ROUNDS:-1}" --profile-steps "${PROF_STEPS-9;10-11}"
           ${SAMPLE_STEPS:+--sample-steps "$SAMPLE_STEPS"})
     python3 -m benchmarks.gpu.grpo_throughput run --out /tmp/tpprof --budget-s "$(left "${STPP:-200}")" "${prof[@]}" \
       --command "python -m benchmarks.gpu.grpo_throughput run --out \$OUT ${prof[*]}"
     cat /tmp/tpprof/profile/*.jsonl; grep -v "it/s]" /tmp/tpprof/*.log | grep -i "error\|fast:" | tail -4
     pack profile --exclude="*.safetensors" --exclude="*.pt" --exclude="*.bin" -C /tmp tpprof ;;
  bfclv) S=${SBV:-560}; mkdir -p /tmp/bv
     for backend in vllm hf; do
       extra=(--batch-size 4096); [ "$backend" = hf ] && extra=(--batch-size 512 --max-batch-tokens 1048576)
       start=$(date +%s)
       timeout "$(left $((S - 15)))" python3 -m toolrl_lib.cli eval bfcl --model embedded --backend "$backend" \
         --dtype bf16 --no-score --out "/tmp/bv/$backend" "${extra[@]}" > "/tmp/bv/$backend.log" 2>&1
       echo "{\"backend\": \"$backend\", \"rc\": $?, \"seconds\": $(( $(date +%s) - start ))}" | tee -a /tmp/bv/times.jsonl
       grep -v "it/s]" "/tmp/bv/$backend.log" | tail -3
     done
     pack bfcl_vllm -C /tmp bv ;;
  9) python3 -m benchmarks.gpu.merged_generation --device cuda --shapes qwen3-8b --batch 32 --new-tokens 128 \
       --repeats 1 --out "$OUT" 2>&1 | tail -8 ;;
esac
