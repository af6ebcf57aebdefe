#!/usr/bin/env bash
# One GPU session (nvidia-h200-x2) for issues 7, 8 and 9, as a chain of device calls made
# back to back (files outside the repo survive between calls while the host stays warm).
# Each step is one call, run from the repo root; what to carry is in brackets (the repo itself
# is ~1.7 MB, a call carries at most 64 MiB). Results come back as tarballs under $OUT.
#   1 [.whl/gguf1 .whl/base .whl/ds data/processed/smoke]  wheels (TRL, datasets, bfcl-eval,
#     gguf, DeepSpeed) -> /tmp/site; GGUF part 1 -> /tmp/m
#   2 [.whl/bnb]       bitsandbytes (Unsloth needs it to load any model)
#   3 [.whl/unsloth]   unsloth + unsloth_zoo
#   4 [.whl/gguf2 data/processed/smoke]  model from the GGUF (sha256 checked), RL phase "prime" on
#     GPU 0, then RL phase "train" over both GPUs until the call's budget (S4, default 570 s)
#   5 [data/processed/smoke]  RL "train" again: every variant resumes from its checkpoint
#     (repeat for more steps). Measured: four variants, two per GPU, reach ~53 optimizer steps
#     in step 4's ~6 minutes; one per GPU roughly doubles that. A longer run of the variant
#     selected on validation and its RLSD-TR twin, one per GPU:
#     RL_VARIANTS=dapo-weighted,rlsd-dapo-weighted for steps 4 and 5 (30 min of device time:
#     1, 4, 5, 6 fit with S6 <= 500); for the irrelevance regression instead:
#     RL_VARIANTS=dapo-weighted,dapo-weighted-nocall3 (no-call prompts 12% -> 29% of the mix)
#   6 [data/processed/smoke]  RL phase "bfcl" (one model per GPU at a time; repeat to finish)
#     -> rl_learning.tar.gz; then on this box:
#     python -m benchmarks.gpu.rl_learning_gpu report --archive rl_learning.tar.gz
#   7 [.whl/unsloth if step 3 was skipped]  GRPO throughput, all variants, both GPUs; repeat
#     with TP_RESUME=1 until every row is measured -> throughput.tar.gz
#   8 [data/processed/smoke]  multi-GPU: 1 GPU vs DDP on 2 (micro-batch layout), ZeRO-3 full FT;
#     every run records per-rank generation seconds (generation s/step, wait s/step columns);
#     MG_RUNS=zero3 MG_RESUME=1: only the ZeRO-3 run, merged into the committed multi_gpu.json;
#     MG_BATCH=128: a larger global batch (each rank then generates several 32-completion rounds)
#   9 []  rollouts through LoRA vs merged weights at Qwen3-8B shapes (random weights, no wheels,
#     ~70 s): results/merged_generation_cuda.md
#   model: just the embedded model (for a session that starts at step 8)
#   fit [data/processed/smoke]  configs/qwen3_8b_h100.yaml itself, its own backend (unsloth, so after
#     steps 2 and 3), 2 steps under an 80 GB cap (~5-7 min): results/full_profile_fit_unsloth.json
#   colabfit [.whl/gguf2 data/processed/smoke]  the colab profile (configs/qwen3_1p7b_colab.yaml: Qwen3-1.7B
#     shapes, fp16, unsloth; after steps 1-3) under a 15 GB cap (a T4's 16 GB less headroom): 3 GRPO
#     steps + validation + fp16 merge, <= SCOLAB (230) s: results/colab_profile_fit_unsloth.json
# Long run (issue 7 part 1, hundreds of steps; 30 min of device time): steps 1, 2, 3, then
#   RL_VARIANTS=dapo-weighted,dapo-weighted-nocall3 RL_GPUS=0
#   RL_SET="fast.merged_generation=true grpo.generation_batch_size=512" for 4 (SIDE=bfcl0: base and primed BFCL on GPU 1 meanwhile) and 5 (SIDE=fit: the full
#   profile's fit on GPU 1 meanwhile), then 6 with BFCL_ALSO=dapo-weighted,dapo-weighted-nocall3
#   (both variants, whichever validation selects); report with --tag long. Measured: ~145 steps
#   after 4 and 5; a further `RL_GPUS=0,1 ... train 245` (one per GPU) reached 185/189, then 6
#   again after removing the two variants' /tmp/rl/bfcl folders (benchmarks/README.md).
# Throughput (issue 7 part 2; measured 2026-11-30, ~1,350 s of device time with steps 1-3): steps 1, 2,
#   3, then `model` + 7 (S7=530) with the default TP_VARIANTS (unsloth_merged_gen_batch64 first: merged
#   rollouts with Unsloth's training; the worker first checks that Unsloth's layers honour the merged
#   path), then 7 again with TP_RESUME=1 (lanes CUDA_VISIBLE_DEVICES=0 while GPU 1 runs `full_profile_fit.py`,
#   the profile's fit with its new default), then once more with TP_RESUME=1 for best@1024.
# Issue 19 (one H200, kind nvidia-h200; ~10-20 min of device time): BFCL multi-turn, all 800 entries
#   1 [.whl/gguf1 .whl/base data/processed/smoke]  (wheels incl. bfcl-eval: its data and simulated APIs)
#   mt [.whl/gguf2 data/processed/smoke]  model, priming (LoRA SFT, merged, ~40 s) unless /tmp/rl has it,
#      then generate-only for base and primed side by side on the GPU until SMT (570) s; repeat `mt`
#      (nothing to carry) to resume what the deadline cut -> $OUT/bfcl_multi_turn.tar.gz; then here:
#      python -m benchmarks.gpu.bfcl_multi_turn report --archive bfcl_multi_turn.tar.gz --command ...
# Issue 20 (one H200, kind nvidia-h200; ~25 min of device time): 1 [.whl/gguf1 .whl/base data/processed/smoke],
#   then mtrl [.whl/gguf2 data/processed/smoke] (model; priming, then GRPO while BFCL of the primed model runs
#   beside it; own test tasks; BFCL of the GRPO model), then mtrl again (nothing to carry) until it says
#   "done" -> $OUT/rl_multi_turn.tar.gz; MTRL_ARGS="--set grpo.max_steps=12" for more GRPO steps; then here:
#   python -m benchmarks.gpu.rl_multi_turn_gpu report --archive rl_multi_turn.tar.gz --work runs/rl_multi_turn
# Issue 39 (one H200): the same mtrl chain after 1, vllm1, vllm2 (vLLM plays the episode steps: the config's
#   grpo.vllm.mode colocate); MTRL_VARIANTS=shaped-g8,success-g8 (default) or shaped-g16; each call resumes
#   every variant from its checkpoint; or detached in one session: mtrlbg (below, after issue 38's notes).
# Issue 18 (one H200, ~20 min of device time; kind nvidia-h200; backend peft, so no bnb/unsloth):
#   1 [.whl/gguf1 .whl/base .whl/ds data/processed/smoke], then
#   18 [.whl/gguf2 data/processed/smoke]  model, priming, I18_VARIANTS side by side on GPU 0 (same primed
#      model, seed and data order), BFCL of base and then primed on the same GPU meanwhile
#   18b [data/processed/smoke]  every variant resumes for S18B_TRAIN s, then BFCL of the variant selected on
#      validation binary_summary@16 (never BFCL); rl_learning.tar.gz + each variant's best/ adapter
#   report on this box: python -m benchmarks.gpu.rl_learning_gpu single-turn-report --archive rl_learning.tar.gz \
#      --work runs/rl_single_turn --out benchmarks/results
#   Second issue-18 session (the fixed reward, hard negatives): the same chain 1, 18, 18b with
#   I18_VARIANTS=i18f-binary,i18f-hardneg,i18f-hardneg-bal I18_SET="validation.hard_negatives=12"
#   (I18_SET: --set overrides for every phase, so that all models validate on one set); then here:
#     python -m benchmarks.gpu.rl_learning_gpu single-turn-report --archive rl_learning.tar.gz \
#       --work runs/rl_single_turn_fixed --out benchmarks/results --tag fixed
#     python -m benchmarks.history.rl_call_diagnosis --work runs/rl_single_turn_fixed --out benchmarks/results --tag fixed
#     python -m benchmarks.reward_vs_bfcl dirs runs/rl_single_turn_fixed/bfcl/{base,primed,grpo} --tag gpu_fixed
#   Dry run of this chain on CPU (tiny random model as primed_model, --device cpu, tiny --set sizes):
#   train + bfcl --only grpo,primed --limit 1 ran end to end (selection on validation, hard negatives, kind order).
# Issue 37 (one H200, kind nvidia-h200): vLLM 0.26.0 (the bundle of benchmarks/gpu/fetch_vllm.sh, two parts)
#   1 [.whl/gguf1 .whl/base data/processed/smoke], model [.whl/gguf2], vllm1 [.whl/vllm1],
#   vllm2 [.whl/vllm2] (unpacks to /tmp/vllm-site, on PYTHONPATH below), then in the same or later calls:
#   tp []   GRPO throughput, today's path against vLLM (benchmarks/gpu/grpo_throughput.py, <= STP s)
#           -> $OUT/throughput.tar.gz; then here: python -m benchmarks.gpu.grpo_throughput report --rows ...
#           Issue 37, next: STP=430 TP_ARGS="--variants vllm_fast_shared_compiled,trl_generate,vllm_fast_shared,vllm_fast_shared_nois_compiled"
#           (fast.compile_layers against the same recipe eager, never run on a GPU yet; its compile
#           happens in the warm-up round)
#   tpprof [] torch's profiler over optimizer steps PROF_STEPS ("9;10-11": a round's first step, with its
#           rollouts, then two of its later ones) of PROF_VARIANT, <= STPP s -> $OUT/profile.tar.gz
#           (benchmarks/gpu/step_profile.py: ops by GPU and CPU time, GPU busy share per window)
#   tp8b []  (after 2 and 3 too) Qwen3-8B shapes, random weights: unsloth_merged_gen_batch64 (today's default, 6.4/s on
#           the H200 in benchmarks/results/grpo_throughput_qwen3_8b.md) against TRL's vLLM colocate (peft_vllm_gen_batch64,
#           peft_vllm_gen_batch128; benchmarks/grpo_throughput.py), <= S8B s -> $OUT/throughput_8b.tar.gz, whose
#           tp8b/grpo_throughput.{json,csv,md} (the run writes its own table) go to benchmarks/results/ as
#           grpo_throughput_qwen3_8b_vllm.*; not run yet (no GPU in the session that wrote it, 2026-12-05)
#   bfclv [] BFCL single-turn generation of the embedded model, all 3,641 entries, vLLM then our
#           generator, each timed -> $OUT/bfcl_vllm.tar.gz; then here: python -m benchmarks.bfcl_backends ...
# Issue 38 (one H200, kind nvidia-h200): the learning experiment at scale (benchmarks/gpu/rl_at_scale.py)
#   1 [.whl/gguf1 .whl/base], vllm1 [.whl/vllm1], vllm2 [.whl/vllm2], then
#   38 [.whl/gguf2]  model; broad data on the host (20,000 examples, ~8 s); SFT LoRA and full side by side (one
#      epoch: --sft-set sft.epochs=1); the SFT start selected on validation; GRPO variants side by side
#      (RAS_VARIANTS, default g16-weighted,g16-binary; vLLM colocate at 0.12 of the GPU each) with the base and SFT
#      models' BFCL greedy + pass@k (vLLM, 0.1 of the GPU) beside them -> $OUT/rl_at_scale.tar.gz
#   38 again (nothing to carry), back to back, until it says "done" (each call resumes every part)
#   Not done when the session's device time runs out: `38carry` with CARRY_CALL=1, 2, ... (each call brings back
#      one folder of <= 8 files under 64 MiB: the SFT start, or before the selection each SFT model/checkpoint,
#      and each variant's checkpoint; the first call packs them all, ~10 s; it says how many calls there are;
#      CARRY_RUNS_ONLY=1: the variants only, when the start came back in an earlier session).
#      In the next session, here: python -m benchmarks.gpu.carry stage <every file brought back + the last
#      rl_at_scale.tar.gz> --to .whl; there: 1, vllm1, vllm2, `stage` with STAGE=1, 2, ... [.whl/stageN],
#      `38restore` [] (python -m benchmarks.gpu.rl_at_scale restore --work /tmp/ras --parts /tmp/carry), then 38.
#   Measured 2026-12-03 (first GPU run): SFT full 500 steps in 212 s of training alone; LoRA and full side by
#      side at batch 32 ran out of memory (full FT's process held 96 GiB), so SFT runs at batch 16 x 2 (~420 s
#      each side by side); every call re-tokenises the 16,000 rows (~50 s).
#   Without a restart each call (~90 s of vLLM start, checkpoint resume and re-tokenising per variant and call):
#   38bg with RAS_BUDGET=<seconds> [.whl/gguf2] starts the same chain detached (setsid), then `watch` calls back to
#      back (WATCH_S <= 575 each) keep the host warm and return $OUT/rl_at_scale.tar.gz once it ends; then 38carry.
#      A call that comes more than 30 s after the last one finds a fresh host: the detached run is gone.
#   One session, no carry (files outside the repo do not survive between sessions: the 2026-12-03 carry parts
#      kept beside the checkout were gone in the next one): 1, vllm1, vllm2, then
#      RAS_VARIANTS=g16-weighted,g16-full RAS_BUDGET=<device s left - ~150> RAS_ARGS="--sft-methods full
#      --sft-set sft.batch_size=32 --sft-set sft.gradient_accumulation_steps=1 --final-reserve-s 300
#      --stop-margin-s 60 --val-limit 256 --bfcl-limit 50" 38bg [.whl/gguf2], then watch calls: GRPO ends
#      --final-reserve-s before the budget, however far it got, and the selected variant is evaluated in the same run.
#   then here: python -m benchmarks.gpu.rl_at_scale report --archive rl_at_scale.tar.gz --work runs/rl_at_scale \
#      --command "python -m benchmarks.gpu.rl_at_scale run --work /tmp/ras --out \$OUT --sft-set sft.epochs=1 ..."
#   Run 3 (2026-12-04, the committed benchmarks/results/rl_at_scale.md; 1,585 s held, setup ~104 s): 1, vllm1,
#      vllm2, then RAS_VARIANTS=g16-full RAS_BUDGET=1560 RAS_ARGS="--sft-methods full --sft-set sft.batch_size=32
#      --sft-set sft.gradient_accumulation_steps=1 --final-reserve-s 270 --stop-margin-s 60 --val-limit 256
#      --bfcl-limit 50 --reuse-base runs/rl_at_scale_run2.tar.gz --set grpo.max_steps=1000
#      --set validation.every_steps=250 --set checkpoint.save_steps=500" 38bg [.whl/gguf2 runs/rl_at_scale_run2.tar.gz],
#      then WATCH_S=570 watch x3: SFT full 1 epoch 274 s, GRPO 1,000 steps in 923 s, chain 1,482 s.
#   Issue 39 likewise: 1, vllm1, vllm2, then MTRL_BUDGET=<device s left - ~120> MTRL_ARGS="--final-reserve-s <s>"
#      mtrlbg [.whl/gguf2], then WATCH_S=570 watch calls until it says "ended" -> $OUT/rl_multi_turn.tar.gz; GRPO ends
#      --final-reserve-s before the budget (selection, our test tasks, the merge, the GRPO model's BFCL after it).
#      Ran 2026-12-04 (benchmarks/results/rl_multi_turn.md; the session's time went mostly to a lost machine and two
#      failed launches): MTRL_BUDGET=740 MTRL_VARIANTS=shaped-g8 MTRL_ARGS="--stagger-s 120 --final-reserve-s 230
#      --stop-margin-s 80 --own-tasks 192 --bfcl-limit 50 --set grpo.max_steps=600 --set grpo.per_device_train_batch_size=16
#      --set grpo.gradient_accumulation_steps=2 --set validation.every_steps=50": 163 steps in 472 s; the reserve was
#      too short for the GRPO model's BFCL (vLLM start ~40 s, then ~1 s an entry). With a full session: both variants
#      (each its own MASTER_PORT, 120 s apart), MTRL_BUDGET ~1,500, --final-reserve-s ~450.
#   Run 2 (2026-12-05): the trainers' vLLM engines take a fixed KV cache (grpo.vllm.kv_cache_gib: 8 in the config),
#      so vLLM skips the start-up profiling that asserted and the variants start 30 s apart; the primed model's test
#      tasks run beside GRPO, the GRPO model's BFCL (all 800 entries, a 32 GiB KV cache) beside its test tasks:
#      1, vllm1, vllm2, then MTRL_BUDGET=<device s left - ~90> MTRL_VARIANTS=shaped-g8,success-g8
#      MTRL_ARGS="--stagger-s 30 --final-reserve-s 400 --stop-margin-s 80 --own-tasks 280 --set grpo.max_steps=600
#      --set grpo.per_device_train_batch_size=16 --set grpo.gradient_accumulation_steps=2" mtrlbg [.whl/gguf2],
#      then WATCH_S=<= 570 watch calls back to back until "ended".
#      Ran 2026-12-05 with MTRL_BUDGET=1490 (benchmarks/results/rl_multi_turn.md): 193 and 258 steps side by side
#      (~5.2 and ~3.9 s a step: the GPU was 95% busy), +0.025 on 280 test tasks; the bf16 merge for the GRPO model's
#      BFCL was refused (now fp32: --bfcl-dtype). Next: one variant alone reaches 300+ steps in a session (~2.9 s a
#      step in run 1): MTRL_VARIANTS=shaped-g8-fp32 (float32 engine fed by an exact merge; not yet run on a GPU),
#      same MTRL_ARGS without --stagger-s, plus --set multi_turn.val_tasks=112 (56 could not separate run 2's
#      variants) and --set grpo.max_steps=1000 (an --extend in a later session then needs no new max_steps).
#      Not run on 2026-12-05's second session (no machine could be started in eleven tries); ran in the third
#      (run 3, benchmarks/results/rl_multi_turn_run3.md) on an H100 80GB: MTRL_BUDGET=1505 and the MTRL_ARGS above
#      with --set grpo.per_device_train_batch_size=8 --set grpo.gradient_accumulation_steps=4 --final-eval-kv-gib 16:
#      192 steps at 4.3 s (300 not reached), +0.032 on 280 test tasks; the float32 engine ran (log-prob gap 0.00042
#      a token against bf16's 0.0083). The primed model's BFCL engine failed to start beside the trainer (8 of 79 GiB
#      free; it now resumes after GRPO, beside the GRPO model's) and 400 s of reserve cut the GRPO model's BFCL at
#      659/800 on the H100 (~2.8 entries/s): on an H100 give --final-reserve-s 600.
#      mtrlbg now picks the micro-batch, the final reserve and KV cache by the card's memory (above); leave them out
#      of MTRL_ARGS: MTRL_ARGS="--stop-margin-s 80 --own-tasks 280 --set multi_turn.val_tasks=112
#      --set grpo.max_steps=1000".
#      Next (two thirds of run 3's groups had no reward spread: the primed model never succeeds on six kinds):
#      `pmix` first (priming mixes with a share of hard-kind gold episodes side by side, primed success on 112
#      validation tasks -> $OUT/priming_mix.{json,md}; copy to benchmarks/results), then the run with the mix chosen on
#      validation (primed success well above run 3's 0.036 and at most 0.5) through MTRL_MIX=NAME=PARTS; at the
#      session's end `mtrlcarry` if under 300 steps, --extend after.
#      Next session (2026-12-05's fourth had no machine: none could be started, then loans paused), one chain of
#      calls: `1` [.whl/gguf1 .whl/base] alone (its reply gives the device time left when it began: budget_left_s +
#      wall_s), then in one batch vllm1 [.whl/vllm1], vllm2 [.whl/vllm2], pmix [.whl/gguf2], and
#      MTRL_MIX=auto MTRL_BUDGET=anchor:<that left - ~110> MTRL_VARIANTS=shaped-g8-fp32 MTRL_ARGS="--final-reserve-s 0
#      --stop-margin-s 80 --own-tasks 280 --set multi_turn.val_tasks=112 --set grpo.max_steps=1000" mtrlbg (GRPO to
#      the end, the primed model's test tasks and BFCL beside it; no selection), watch calls, then mtrlcarry
#      CARRY_CALL=1, 2, ...; the session after: stage, mtrlrestore (no --extend: nothing was evaluated), mtrlbg with
#      the same MTRL_MIX (it checks the priming kinds) and a final reserve: GRPO goes on, then selection and tests.
#      On an H100 the primed model's BFCL engine cannot start beside the trainer (run 3: 8 of 79 GiB free; without
#      gradient checkpointing the fp32 trainer's activations need the room), so both models' BFCL run side by side
#      after GRPO: give that session --final-reserve-s ~750 there (one model's 800 entries took ~290 s, ~2.8 a second).
#      On an H200 a second variant fits beside it: MTRL_VARIANTS=shaped-g8-fp32,shaped-g8-fp32-charge (the charge
#      for refused calls, toolrl_lib/envs/rewards.py; --stagger-s 30).
#      2026-12-05/06 (fifth session): no machine again (nine failed starts, 1,216 s spent). For the chain above use
#      MTRL_VARIANTS=shaped-g8-fp32-gen128 (rounds of 128 episodes feeding 4 optimizer steps: run 3's 4.3 s step was
#      ~2/3 a round of 32 episodes whose length is set by its longest episode; ran on CPU with the tiny model, not on
#      a GPU), with shaped-g8-fp32-charge beside it on an H200. A carried checkpoint resumes under the same variant.
#      Run 4 began 2026-12-06 (H100; benchmarks/results/rl_multi_turn_run4.md, priming_mix.md): pmix 173 s chose d3h2
#      (validation 0.420); mtrlbg anchor:1300 with shaped-g8-fp32-gen128 trained 124 steps (validation 0.429 -> 0.759;
#      the primed model's test tasks 0.389 and its BFCL, all 800, done beside it), then mtrlcarry CARRY_CALL=1,2 ->
#      .whl/stage1, .whl/stage2 (checkpoint-124, the primed LoRA, the archive; kept beside the checkout, ignored by git).
#      To finish it: `1` [.whl/gguf1 .whl/base] alone (L = its budget_left_s + wall_s), then in one batch vllm1
#      [.whl/vllm1], vllm2 [.whl/vllm2], STAGE=1 stage [.whl/stage1], STAGE=2 stage [.whl/stage2],
#      MTRL_VARIANTS=shaped-g8-fp32-gen128 mtrlrestore [.whl/gguf2] (no --extend: nothing was evaluated), then
#      MTRL_MIX=d3h2=default*3,hard*2 MTRL_BUDGET=anchor:<L - ~60> MTRL_VARIANTS=shaped-g8-fp32-gen128
#      MTRL_ARGS="--stop-margin-s 80 --own-tasks 280 --set multi_turn.val_tasks=112 --set grpo.max_steps=1000" mtrlbg []
#      (by the card an H100 keeps 600 s for the GRPO model's test tasks, merge and BFCL; the primed model's are done),
#      then watch calls until "ended"; here: report --archive <it> --work runs/rl_multi_turn_run4 --tag run4 (the
#      final rl_multi_turn_run4.*, replacing the progress files). Expected ~3.8 s a step without BFCL beside: ~230
#      more steps in ~880 s of GRPO. Not tried: TF32 matmuls in the float32 trainer (a round's 3 reuse steps are
#      forward/backward alone, 2.3 s each); it would change the recipe mid-run, so only for a fresh run.
#      Run 4 was never finished: the next session's checkout was new and .whl/stage1-2 were gone with it (ignored
#      files do not survive between sessions: the 2026-12-03 lesson above). A run must end in its session.
#      Run 5 (one session, fresh): `1` alone (L as above), then in one batch vllm1, vllm2 and
#      MTRL_MIX=d3h2=default*3,hard*2 MTRL_BUDGET=anchor:<L - 60> MTRL_VARIANTS=shaped-g8-fp32-gen128-tf32
#      MTRL_ARGS="--primed-bfcl after --final-reserve-s 650 --stop-margin-s 60 --own-tasks 280
#      --set multi_turn.val_tasks=112 --set grpo.max_steps=1000" mtrlbg [.whl/gguf2] (priming on d3h2 in the run,
#      ~45 s; TF32 matmuls in the trainer, model.tf32; both models' BFCL after GRPO, side by side), then watch
#      calls until "ended"; here: report --archive <it> --work runs/rl_multi_turn_run5 --tag run5.
#      Ran 2026-12-06 (H100, 1,755 s held; benchmarks/results/rl_multi_turn.md, now the main result): 156 steps in
#      932 s (~4.7 s a step), test tasks primed 0.371 -> GRPO 0.682 (+0.311 [+0.257, +0.364]); both BFCLs side by
#      side after GRPO were cut at 663 and 546 of 800 by the 650 s reserve (~1,000 s needed at those rates);
#      model.tf32 was not in effect (fixed after the run: backend.use_tf32). 300 steps (~1,400 s at this speed) and
#      both full BFCLs (~1,000 s) do not fit one 30-minute session of one GPU: on a two-GPU host the BFCLs could run
#      on the second GPU. Next on one GPU: the group-size arm, MTRL_VARIANTS=shaped-g16-fp32-gen128-tf32 in the same
#      chain (run 5 is its G=8 twin; one session each, each its own priming), which also measures the TF32 fix
#      (compare metrics.csv step_time with run 5's: reuse steps 2.75 s, a round's first step 10.2 s).
#      Run 6 (the G=16 arm at 300 steps over two sessions; this session's checkout kept .whl/ and runs/, earlier
#      ones did not): `1` alone (L), then in one batch vllm1, vllm2, MTRL_MIX=d3h2=default*3,hard*2
#      MTRL_BUDGET=anchor:<L - 200> MTRL_VARIANTS=shaped-g16-fp32-gen128-tf32 MTRL_ARGS="--primed-bfcl after
#      --continue-later --final-reserve-s 380 --stop-margin-s 60 --own-tasks 280 --set multi_turn.val_tasks=112
#      --set grpo.max_steps=300" mtrlbg [.whl/gguf2], watch x3, then mtrlcarry CARRY_CALL=1, 2, 3 (GRPO short of 300
#      is paused, not ended: the reserve goes to the primed model's BFCL alone). Here: carry stage <parts + archive>
#      --to .whl; next session: 1, vllm1, vllm2, stage x N, mtrlrestore (no --extend), then mtrlbg with the same
#      MTRL_MIX/VARIANTS and MTRL_ARGS less --continue-later (GRPO to 300, selection, test tasks, the GRPO model's BFCL).
#   pmix [.whl/gguf2]  priming mixes (benchmarks/priming_mix.py; PMIX_MIXES: NAME=PARTS separated by spaces, one
#      process each side by side; PMIX_VAL validation tasks) -> $OUT/priming_mix.{json,md}; then the run on the chosen
#      one: MTRL_MIX=NAME=PARTS for mtrlbg (--priming-mix PARTS, and --primed-from /tmp/pmix/NAME: pmix's model, no
#      second priming; a later session's mtrlbg after `mtrlrestore` passes the same MTRL_MIX, the run checks it);
#      MTRL_MIX=auto: the mix pmix's rule chose (`benchmarks.priming_mix --choice-of`), for calls back to back
#   Across sessions (a run longer than one session's device time): at the end of one, after the last `watch`,
#      `mtrlcarry` with CARRY_CALL=1, 2, ... (same MTRL_VARIANTS; each call brings back one folder: the primed
#      model's priming LoRA + weights digest, each variant's newest checkpoint and best/; the first call packs
#      them, it says how many calls there are). Here: python -m benchmarks.gpu.carry stage <every file brought
#      back + the last rl_multi_turn.tar.gz (or its parts)> --to .whl. In the next session: 1, vllm1, vllm2,
#      `stage` with STAGE=1, 2, ... [.whl/stageN], then `mtrlrestore` [.whl/gguf2] with MTRL_RESTORE_ARGS=--extend
#      when the run was already evaluated (the primed model is merged again from its LoRA; its digest is
#      checked), then mtrlbg as before: GRPO resumes from the checkpoint and is evaluated at the new end.
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
     nvidia-smi -L; python3 -c "import torch, trl; print(torch.__version__, trl.__version__, torch.cuda.device_count())" ;;
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
  tp8b) # issue 37: TRL's vLLM colocate at Qwen3-8B shapes against today's default (Unsloth + merged-weight rollouts)
     # in one run (after 1, 2, 3, vllm1, vllm2; ~1 min to build and save the random model, then ~2-3 min a job)
     python3 -m benchmarks.grpo_throughput --prepare-model > /tmp/tp8b-prepare.log 2>&1
     # Unsloth's job without the vLLM bundle on its path (unsloth_zoo patches a vLLM it finds), then the rest
     PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.grpo_throughput --out /tmp/tp8b --time-budget-s "$(left "${S8B:-560}")" \
       --variants unsloth_merged_gen_batch64 > /tmp/tp8b.log 2>&1
     python3 -m benchmarks.grpo_throughput --out /tmp/tp8b --resume --time-budget-s "$(left "${S8B:-560}")" \
       --variants "${TP8B_VARIANTS:-unsloth_merged_gen_batch64,peft_vllm_gen_batch64,peft_vllm_gen_batch128}" >> /tmp/tp8b.log 2>&1
     tail -14 /tmp/tp8b.log; cp /tmp/tp8b*.log /tmp/tp8b/; pack throughput_8b -C /tmp tp8b ;;
  vllm1) mkdir -p /tmp/vparts && cp .whl/vllm1/part.* /tmp/vparts/ && ls -la /tmp/vparts ;;
  vllm2) cat /tmp/vparts/part.* .whl/vllm2/part.* | xz -d | tar x -C /tmp && rm -rf /tmp/vparts
     python3 -c "import vllm, trl; print('vllm', vllm.__version__, 'trl', trl.__version__)" 2>&1 | tail -1 ;;
  tp) python3 -m benchmarks.gpu.grpo_throughput run --out /tmp/tp --budget-s "$(left "${STP:-540}")" \
       ${TP_ARGS:-} --command "python -m benchmarks.gpu.grpo_throughput run --out \$OUT ${TP_ARGS:-}"
     for f in /tmp/tp/*.log; do echo "== $f"; grep -v "it/s]" "$f" | grep -i "error\|fast:\|GRPO (" | tail -4; done
     pack throughput --exclude="*.safetensors" --exclude="*.pt" --exclude="*.bin" -C /tmp tp ;;
  tpprof) python3 -m benchmarks.gpu.grpo_throughput run --out /tmp/tpprof --budget-s "$(left "${STPP:-200}")" \
       --variants "${PROF_VARIANT:-vllm_mb64_nodetok}" --rounds 1 --profile-steps "${PROF_STEPS:-9;10-11}" \
       --command "python -m benchmarks.gpu.grpo_throughput run --out \$OUT --variants ${PROF_VARIANT:-vllm_mb64_nodetok} --rounds 1 --profile-steps '${PROF_STEPS:-9;10-11}'"
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
