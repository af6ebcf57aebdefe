"""GRPO throughput of the embedded model on one GPU: today's rollout path against vLLM, side by side.

The run is ``configs/embedded_gpu.yaml`` as the course trains it (LoRA r16 on all projections,
G=8, 128-token completions, optimizer steps of 64 completions) with rollouts generated in
rounds of 512 completions (64 prompts x 8), through the library's own ``toolrl_lib.train.train``.
Priming, validation and filtering are off: only the GRPO loop is timed, from the base model.

Every variant runs in its own process (a fresh GPU: vLLM's colocated engine keeps its memory
until the process ends), one after another, under one ``--budget-s``; a variant named ``*_mps`` runs
as a client of its own CUDA MPS server (``under_mps``), and one named ``*_mps_e<E>t<T>`` with the SMs
split between the engine process and the trainer (``mps_client``). Per variant:

- ``completions_per_s``: completions of the timed rounds / wall seconds from the end of the
  warm-up rounds to the end of the last timed step (rollouts, rewards, log-prob passes,
  forward/backward, optimizer and weight sync: everything a step does);
- ``generation_share``: seconds inside TRL's rollout method (``fast.generation_times``: vLLM's
  generate and its weight sync, or transformers' ``generate``) / those wall seconds;
- ``peak_gib``: the most GPU memory in use on the device (``cudaMemGetInfo``, vLLM's KV-cache
  reserve included) at any step end; ``torch_peak_gib`` the caching allocator's own peak;
- ``startup_s``: from process start to the first step (model load, vLLM engine, compile);
- ``round_s``: each timed round's wall seconds (the mean hides a round that recorded graphs);
- ``gpu_util`` (CUDA): over the same timed window, the driver's busy percent of the device and,
  per process on it (the trainer, vLLM's engine process), its SM percent and memory
  (``gpu_util.py``): whether the two halves together fill the GPU.

Rows go to ``<out>/grpo_throughput.json`` (and ``.csv``, ``.md``) as each variant ends; a variant
that fails or is cut by the budget is a row with its error. Each vLLM row carries
``baseline_path`` (``trl_generate``, today's path) and ``ratio`` when both ran in the same run.

    python -m benchmarks.gpu.grpo_throughput run --out $OUT --budget-s 540        # GPU host
    python -m benchmarks.gpu.grpo_throughput run --out /tmp/t --device cpu --variants trl_generate \\
        --rounds 1 --warmup-rounds 1 --set grpo.generation_batch_size=16 ...      # CPU smoke (tests)
    python -m benchmarks.gpu.grpo_throughput report --rows $OUT/grpo_throughput.json --out benchmarks/results
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

CONFIG = "configs/embedded_gpu.yaml"
ROUND = 512  # completions per rollout round (64 prompts x G=8)
BASELINE = "trl_generate"
# today's path per model: the embedded model's (this script's variants) and, for the rows of the
# Qwen3-8B-shapes harness (benchmarks/grpo_throughput.py), the full profile's default
BASELINES = {"embedded": BASELINE, "qwen3-8b shapes": "unsloth_merged_gen_batch64"}
VLLM = ["grpo.vllm.mode=colocate"]
ONE_MICRO_BATCH = ["grpo.per_device_train_batch_size=64", "grpo.gradient_accumulation_steps=1"]
NODETOK = "grpo.vllm.detokenize=false"
BF16_LORA = "fast.bf16_lora_inputs=true"
GROUPED_SHARED = ["fast.group_batches=true", "fast.shared_prompt=true"]
OVERLAP = "fast.overlap_generation=true"
FUSED = ["fast.fused_lora=true", "fast.round_logprob_rows=512"]
NOIS = "grpo.vllm.importance_sampling_correction=false"
PROCESS = "fast.generation_process=true"
GRAPHS = "fast.cuda_graphs=true"
# run 6's fastest recipe: the fused options, the overlap and the engine process (the later of two equal keys wins)
ENGINE_OVERLAP = VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED, *FUSED, OVERLAP, PROCESS]

# name -> (what it is, overrides of the config on top of the common ones)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "trl_generate": ("today's path: TRL's transformers generate, micro-batches of 16 x 4", []),
    "vllm": ("TRL's vLLM colocate engine (0.3 of the GPU), micro-batches of 16 x 4", VLLM),
    "vllm_mb64": ("vLLM colocate, each optimizer step one micro-batch of 64", VLLM + ONE_MICRO_BATCH),
    "vllm_mb64_shared": ("vLLM colocate, micro-batch 64, each prompt's forward shared by its 8 "
                         "completions (fast.shared_prompt)", VLLM + ONE_MICRO_BATCH + ["fast.shared_prompt=true"]),
    "vllm_mb64_nodetok": ("vLLM colocate, micro-batch 64, vLLM's detokenizer off (grpo.vllm.detokenize=false: "
                          "TRL decodes the ids itself)", VLLM + ONE_MICRO_BATCH + [NODETOK]),
    "trl_generate_mb64": ("transformers generate, micro-batch of 64", ONE_MICRO_BATCH),
    "vllm_fast": ("vllm_mb64_nodetok + LoRA branches on bf16 activations (fast.bf16_lora_inputs)",
                  VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA]),
    "vllm_fast_shared": ("vllm_fast + micro-batches of whole groups (fast.group_batches), each prompt's forward "
                         "shared by its 8 completions (fast.shared_prompt)",
                         VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED]),
    "vllm_fast_shared_nois": ("vllm_fast_shared without TRL's importance-sampling correction (grpo.vllm.importance_sampling_correction=false)",
                              VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED,
                                                        NOIS]),
    "vllm_lean_mb128": ("vllm_fast_shared_nois with optimizer steps of 128 completions (4 per round of 512): "
                        "a different recipe, fewer and larger steps", VLLM + [NODETOK, BF16_LORA, *GROUPED_SHARED,
                        NOIS, "grpo.per_device_train_batch_size=128",
                        "grpo.gradient_accumulation_steps=1"]),
    "vllm_fast_shared_compiled": ("vllm_fast_shared + the trainer's decoder layers compiled once for all layers "
                                  "(fast.compile_layers)", VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA,
                                  *GROUPED_SHARED, "fast.compile_layers=true"]),
    "vllm_fast_shared_nois_compiled": ("vllm_fast_shared_nois + compiled decoder layers (fast.compile_layers)",
                                       VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED,
                                       NOIS,
                                       "fast.compile_layers=true"]),
    "vllm_fast_shared_overlap": ("vllm_fast_shared + the next round generated while this one trains "
                                 "(fast.overlap_generation: each round one round staler, TRL's importance-sampling "
                                 "correction kept)", VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED,
                                                                             OVERLAP]),
    "vllm_fast_shared_nois_overlap": ("vllm_fast_shared_nois + the next round generated while this one trains "
                                      "(fast.overlap_generation; no correction for the staler rounds)",
                                      VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED, OVERLAP,
                                                                NOIS]),
    "vllm_lean_mb128_overlap": ("vllm_lean_mb128 + fast.overlap_generation (a different recipe: optimizer steps "
                                "of 128, no correction)", VLLM + [NODETOK, BF16_LORA, *GROUPED_SHARED, OVERLAP,
                                NOIS, "grpo.per_device_train_batch_size=128",
                                "grpo.gradient_accumulation_steps=1"]),
    "vllm_fast_shared_fused": ("vllm_fast_shared + each LoRA projection one autograd node (fast.fused_lora) and the "
                               "round's no-grad log-prob forward in one chunk of 512 (fast.round_logprob_rows)",
                               VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED, *FUSED]),
    "vllm_fast_shared_nois_fused": ("vllm_fast_shared_nois + fast.fused_lora and fast.round_logprob_rows=512",
                                    VLLM + ONE_MICRO_BATCH + [NODETOK, BF16_LORA, *GROUPED_SHARED, *FUSED, NOIS]),
    "vllm_fast_shared_fused_overlap": ("vllm_fast_shared_fused + fast.overlap_generation (each round one round "
                                       "staler, the correction kept)", VLLM + ONE_MICRO_BATCH
                                       + [NODETOK, BF16_LORA, *GROUPED_SHARED, *FUSED, OVERLAP]),
    "vllm_fast_shared_fused_engine_overlap": ("vllm_fast_shared_fused_overlap with TRL's engine in a process of its own "
                                              "(fast.generation_process): the next round generated outside the "
                                              "trainer's interpreter", ENGINE_OVERLAP),
    "vllm_fast_shared_nois_fused_engine_overlap": ("vllm_fast_shared_fused_engine_overlap without the correction",
                                                   ENGINE_OVERLAP + [NOIS]),
    "vllm_fast_shared_fused_engine_overlap_r128": ("vllm_fast_shared_fused_engine_overlap with the round's log-prob "
                                                   "forward in chunks of 128 rows, shortest prompts first (less "
                                                   "padding: benchmarks/results/round_logprob_padding.md)",
                                                   ENGINE_OVERLAP + ["fast.round_logprob_rows=128"]),
    "vllm_fast_shared_fused_engine_overlap_r256": ("vllm_fast_shared_fused_engine_overlap_r128 with chunks of 256 rows",
                                                   ENGINE_OVERLAP + ["fast.round_logprob_rows=256"]),
    "vllm_fast_shared_fused_engine_overlap_graphs": ("vllm_fast_shared_fused_engine_overlap with the loss forwards' "
                                                     "backbone passes replayed from CUDA graphs (fast.cuda_graphs)",
                                                     ENGINE_OVERLAP + [GRAPHS]),
    "vllm_fast_shared_fused_engine_overlap_graphs_r64": ("vllm_fast_shared_fused_engine_overlap_graphs with the "
                                                         "round's no-grad forward in chunks of 64 rows, shortest "
                                                         "prompts first (the training steps' shapes, less padding)",
                                                         ENGINE_OVERLAP + [GRAPHS, "fast.round_logprob_rows=64"]),
    "vllm_fast_shared_fused_engine_overlap_sampler": ("vllm_fast_shared_fused_engine_overlap with the round's old "
                                                      "log-probs from vLLM's sampler, no forward over the round "
                                                      "(fast.sampler_logps: a change of algorithm, PPO's ratio "
                                                      "against the sampling policy)",
                                                      ENGINE_OVERLAP + ["fast.sampler_logps=true"]),
    "vllm_fast_shared_fused_engine_overlap_graphs_sampler": ("vllm_fast_shared_fused_engine_overlap_graphs with "
                                                             "fast.sampler_logps",
                                                             ENGINE_OVERLAP + [GRAPHS, "fast.sampler_logps=true"]),
    "trl_generate_fast": ("transformers generate (no vLLM), micro-batch 64 of whole groups, shared prompts, "
                          "bf16 LoRA inputs", ONE_MICRO_BATCH + [BF16_LORA, *GROUPED_SHARED]),
    "vllm_fast_shared_full": ("vllm_fast_shared as full fine-tuning (lora.enabled=false): a different recipe; no "
                              "LoRA branches, whose ~200 small modules launch a good part of the step's kernels",
                              VLLM + ONE_MICRO_BATCH + [NODETOK, *GROUPED_SHARED, "lora.enabled=false",
                                                        "grpo.learning_rate=3e-6"]),
    "vllm_nodetok_shared": ("vllm_mb64_nodetok + each prompt's forward shared by its completions "
                            "(fast.shared_prompt)", VLLM + ONE_MICRO_BATCH + [NODETOK, "fast.shared_prompt=true"]),
    "vllm_nodetok_nois": ("vllm_mb64_nodetok without TRL's importance-sampling correction "
                          "(grpo.vllm.importance_sampling_correction=false)",
                          VLLM + ONE_MICRO_BATCH + [NODETOK, NOIS]),
}


def _derive(twin: str, suffix: str, what: str, *extra: str) -> None:
    """A variant named ``twin + suffix``: its twin's overrides and ``extra`` after them."""
    VARIANTS[twin + suffix] = (what, [*VARIANTS[twin][1], *extra])


# The engine's KV cache fixed at 6 GiB (a round needs ~2-3 GiB) instead of 0.3 of the card: memory for the
# planned graphs on an 80 GB card (run 10: a planned width out of memory; run 11: every width recorded).
_twin = "vllm_fast_shared_fused_engine_overlap_graphs_sampler"
_derive(_twin, "_kv6", f"{_twin} with the engine's KV cache fixed at 6 GiB (grpo.vllm.kv_cache_gib)",
        "grpo.vllm.kv_cache_gib=6")
# The graphs' recipes with vLLM's engine core in a process of its own beneath the engine process, since with the
# graphs the next round's generation bounds a round (run 10); run 11 measured them no faster than their twins
_twin = "vllm_fast_shared_fused_engine_overlap_graphs_r64"
_derive(_twin, "_core", f"{_twin} with vLLM's engine core in a process of its own beneath the engine process "
        "(fast.engine_core_process): the step outputs handled beside the next model steps",
        "fast.engine_core_process=true")
_twin = "vllm_fast_shared_fused_engine_overlap_graphs_sampler"
_derive(_twin, "_core", f"{_twin} with fast.engine_core_process", "fast.engine_core_process=true")
# A variant named ``*_mps`` is its twin without the suffix run under CUDA MPS (``under_mps``): with the
# engine in a process of its own, trainer and engine otherwise take turns on the GPU (time slices), and
# neither fills it alone.
MPS_SUFFIX = "_mps"
for _twin in ("vllm_fast_shared_fused_engine_overlap", "vllm_fast_shared_fused_engine_overlap_graphs_r64",
              "vllm_fast_shared_fused_engine_overlap_sampler", "vllm_fast_shared_fused_engine_overlap_graphs_sampler",
              "vllm_fast_shared_fused_engine_overlap_graphs_sampler_kv6"):
    _derive(_twin, MPS_SUFFIX, f"{_twin} with the trainer and the engine process as clients of one CUDA MPS "
            f"server (under_mps)")
# The sampler path with each distinct prompt tokenised once (fast.prompt_token_cache: ~0.2 s of a round's first step
# in run 12's profile), alone and under MPS
_twin = "vllm_fast_shared_fused_engine_overlap_graphs_sampler"
_derive(_twin, "_tok", f"{_twin} with each distinct prompt tokenised once (fast.prompt_token_cache)",
        "fast.prompt_token_cache=true")
_derive(_twin + "_tok", MPS_SUFFIX, f"{_twin}_tok with the trainer and the engine process as clients of one CUDA MPS "
        f"server (under_mps)")
# The sampler path with each group's copies of a prompt sent to vLLM as one request of n = G
# (fast.engine_prompt_groups), since the engine's own round bounds the overlapped round (run 13)
_derive(_twin, "_groups", f"{_twin} with each group's prompt sent to vLLM once, n = G (fast.engine_prompt_groups)",
        "fast.engine_prompt_groups=true")
_derive(_twin + "_groups", "_tok", f"{_twin}_groups with fast.prompt_token_cache", "fast.prompt_token_cache=true")
# ... and with vLLM's scheduler given 32,768 tokens a model step instead of TRL's 4,096 (a round's 512 prompts of ~400
# tokens are ~50 steps of prefill at 4,096)
for _name in (_twin, _twin + "_groups"):
    _derive(_name, "_b32k", f"{_name} with vLLM's scheduler taking up to 32,768 tokens a model step "
            "(grpo.vllm.max_num_batched_tokens; TRL passes 4,096)", "grpo.vllm.max_num_batched_tokens=32768")
# ... and every cut to the engine's round and the trainer's tokenising at once, the candidate for the fastest path
_derive(_twin + "_groups_b32k", "_tok", f"{_twin}_groups_b32k with fast.prompt_token_cache",
        "fast.prompt_token_cache=true")
# ... and with each round split between two engine processes (fast.engine_processes): vLLM's round is bound by its host-side
# work per model step for this model (run 13: the GPU busy ~35% without the overlap), which two engines share
for _name in (_twin, _twin + "_groups_b32k", _twin + "_groups_b32k_tok"):
    _derive(_name, "_x2", f"{_name} with each round split between two engine processes (fast.engine_processes=2)",
            "fast.engine_processes=2", "grpo.vllm.kv_cache_gib=6")
    # ... under CUDA MPS: with two engines the generation ends well inside a round and the trainer, slowed by the
    # engines' time slices, bounds it (run 14), so the engines' small kernels may now run beside the trainer's
    _derive(_name + "_x2", MPS_SUFFIX, f"{_name}_x2 with the trainer and both engine processes as clients of one CUDA "
            "MPS server (under_mps)")
# CUDA MPS with the SMs split (``*_mps_e<E>t<T>``): the engine process capped at E% of the SMs (fast.engine_sm_percent)
# and the trainer at T% (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE in its environment; 100: no cap), so that the trainer's
# large kernels cannot take every SM from the engine's decode steps, as under MPS without caps (run 12: the engine's
# round 4.45 s against 3.50 s without MPS, 122.7 against 150.0/s); run 13: 50/50 slower, 30/70 wrong
# generations (benchmarks/results/grpo_throughput.md)
MPS_SPLITS = {"e30t70": (30, 70), "e50t50": (50, 50), "e40t100": (40, 100), "e20t80": (20, 80)}
for _twin in ("vllm_fast_shared_fused_engine_overlap_graphs_sampler",
              "vllm_fast_shared_fused_engine_overlap_graphs_sampler_tok"):
    for _split, (_engine, _trainer) in MPS_SPLITS.items():
        _derive(_twin + MPS_SUFFIX, f"_{_split}", f"{_twin}{MPS_SUFFIX} with the engine process capped at {_engine}% of "
                f"the SMs (fast.engine_sm_percent) and the trainer at {_trainer}% (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)",
                f"fast.engine_sm_percent={_engine}")


def mps_client(variant: str) -> tuple[bool, int]:
    """Whether ``variant`` runs under CUDA MPS, and the trainer's SM cap in percent (100: none).

    >>> mps_client("x_mps"), mps_client("x_mps_e30t70"), mps_client("x")
    ((True, 100), (True, 70), (False, 100))
    """
    if variant.endswith(MPS_SUFFIX):
        return True, 100
    head, _, split = variant.rpartition("_")
    if head.endswith(MPS_SUFFIX) and split in MPS_SPLITS:
        return True, MPS_SPLITS[split][1]
    return False, 100


# The sampler path without the overlap (run 12's diagnosis): each round generated by the engine process while the
# trainer waits, so one row splits a round into the engine's time with the GPU to itself (generation_s_per_round)
# and the trainer's alone (the rest), the two bounds an overlapped round cannot beat
VARIANTS["vllm_fast_shared_fused_engine_graphs_sampler"] = (
    "vllm_fast_shared_fused_engine_overlap_graphs_sampler without the overlap: each round generated while the "
    "trainer waits (the two halves' times apart)",
    [o for o in VARIANTS["vllm_fast_shared_fused_engine_overlap_graphs_sampler"][1] if o != OVERLAP])
_derive("vllm_fast_shared_fused_engine_graphs_sampler", "_x2", "vllm_fast_shared_fused_engine_graphs_sampler with each "
        "round split between two engine processes (fast.engine_processes=2): the two engines' round with the GPU to "
        "themselves", "fast.engine_processes=2", "grpo.vllm.kv_cache_gib=6")
DEFAULT_VARIANTS = "trl_generate,vllm,vllm_mb64,vllm_mb64_nodetok,vllm_mb64_shared"
FIELDS = ["model", "path", "completions_per_s", "generation_share", "peak_gib", "steps", "baseline_path",
          "ratio", "seconds_per_step", "generation_s_per_round", "torch_peak_gib", "startup_s",
          "completions", "mean_completion_tokens", "overlap_rounds_prefetched", "overlap_wait_s_per_round",
          "overlap_worker_s_per_round", "logp_difference_mean", "is_ratio_mean", "what", "error"]


# the config's vLLM settings when these variants were defined (runs 0-9): TRL's transformers generate, which
# is still today's path of the comparison; a variant's own overrides come after these and win
BEFORE_VLLM_DEFAULT = ["grpo.vllm.mode=off", "grpo.vllm.detokenize=true"]


def common_overrides(round_size: int, steps: int) -> list[str]:
    """What every variant shares: rounds of ``round_size``, ``steps`` optimizer steps, nothing but GRPO."""
    return [*BEFORE_VLLM_DEFAULT, f"grpo.generation_batch_size={round_size}", f"grpo.max_steps={steps}",
            "priming.enabled=false",
            "validation.enabled=false", "filtering.enabled=false", "checkpoint.save_steps=100000",
            "fast.generation_times=true", "logging.progress_bar=false", "logging.logging_steps=1"]


def steps_per_round(config: Any) -> int:
    g = config.grpo
    per_step = g.per_device_train_batch_size * g.gradient_accumulation_steps
    if g.generation_batch_size % per_step:
        raise ValueError(f"a round of {g.generation_batch_size} is not a whole number of optimizer steps "
                         f"of {per_step} completions")
    return g.generation_batch_size // per_step


def summarize(step_ends: list[float], memory: list[float], generation: list[dict[str, Any]],
              spr: int, warmup_rounds: int, round_size: int) -> dict[str, Any]:
    """The row's figures from the step-end clock (``step_ends[i]``: end of step i+1), the device
    memory samples (GiB) and the rollout timings (one per round, in order).

    >>> summarize([1, 2, 4, 6], [1.0, 2.5], [{"seconds": 0.5}, {"seconds": 1.0}], 2, 1, 8)["completions_per_s"]
    2.0
    """
    start = warmup_rounds * spr
    if len(step_ends) < start + spr:
        raise RuntimeError(f"{len(step_ends)} steps ended; the timing needs at least {start + spr}")
    rounds = (len(step_ends) - start) // spr
    end = start + rounds * spr
    # the timed rounds' boundaries: the warm-up's last step end (0 without a warm-up), then each round's
    marks = [step_ends[start - 1] if start else 0.0] + [step_ends[start + (k + 1) * spr - 1] for k in range(rounds)]
    seconds = marks[-1] - marks[0]
    timed = generation[warmup_rounds:warmup_rounds + rounds]
    gen_s = sum(r["seconds"] for r in timed)
    return {"steps": end - start, "completions": rounds * round_size,
            # each timed round's wall seconds: a round that recorded graphs or waited shows here
            "round_s": [round(b - a, 3) for a, b in pairwise(marks)],
            "completions_per_s": round(rounds * round_size / seconds, 2),
            "seconds_per_step": round(seconds / (end - start), 3),
            "generation_share": round(gen_s / seconds, 3),
            "generation_s_per_round": round(gen_s / max(len(timed), 1), 3),
            "peak_gib": round(max(memory, default=0.0), 2)}


def _mean(values: list[Any]) -> float | None:
    values = [float(v) for v in values if v not in (None, "")]
    return round(sum(values) / len(values), 4) if values else None


def overlap_figures(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the timed steps' metrics.csv rows: rounds whose completions were generated while the
    round before trained (``overlap/prefetched``), the trainer's wait for them and the worker's
    seconds per round (``toolrl_lib/fast/overlap.py``).

    >>> overlap_figures([{"overlap/prefetched": 1.0, "overlap/wait_s": 0.5, "overlap/generate_s": 2.0},
    ...                  {"loss": 0.1}, {"overlap/prefetched": 0.0, "overlap/wait_s": 0.0}])
    {'overlap_rounds_prefetched': 1, 'overlap_rounds': 2, 'overlap_wait_s_per_round': 0.25, 'overlap_worker_s_per_round': 2.0}
    """
    rounds = [m for m in metrics if m.get("overlap/prefetched") not in (None, "")]
    return {"overlap_rounds_prefetched": sum(float(m["overlap/prefetched"]) == 1.0 for m in rounds),
            "overlap_rounds": len(rounds),
            "overlap_wait_s_per_round": _mean([m.get("overlap/wait_s") for m in rounds]),
            "overlap_worker_s_per_round": _mean([m.get("overlap/generate_s") for m in rounds])}


def sampling_figures(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """TRL's vLLM-against-trainer figures over the timed steps (present with the importance-sampling
    correction on): the mean per-token log-prob difference and the mean importance ratio. With the
    overlap they measure the staler rounds as well as the engine's numerics."""
    out = {}
    for key, column in (("logp_difference_mean", "sampling/sampling_logp_difference/mean"),
                        ("is_ratio_mean", "sampling/importance_sampling_ratio/mean")):
        value = _mean([m.get(column) for m in metrics])
        if value is not None:
            out[key] = value
    return out


def profile_key(windows_text: str, warmup_steps: int, last_timed_step: int) -> str:
    """The row field that records profiling windows: ``profiled_steps`` when one reaches into the
    timed steps (the row's figures then carry the profiler's cost and its table cell says so),
    ``warmup_profiled_steps`` when all lie in the warm-up rounds or past the timed steps.

    >>> profile_key("2-8", 8, 32), profile_key("9;10-11", 8, 32), profile_key("33", 8, 32)
    ('warmup_profiled_steps', 'profiled_steps', 'warmup_profiled_steps')
    """
    from benchmarks.gpu.step_profile import parse_windows

    timed = any(last > warmup_steps and first <= last_timed_step for first, last in parse_windows(windows_text))
    return "profiled_steps" if timed else "warmup_profiled_steps"


def gpu_util_figures(sampler: Any, step_ends: list[float], first_begin: float, warmup_steps: int,
                     timed_steps: int, epoch: float) -> dict[str, Any]:
    """NVML's busy figures over the timed steps (from the warm-up's last step end, or the first
    step's start, to the last timed step's end; the clock's perf_counter readings, ``epoch`` their
    offset to wall-clock seconds), or why there are none.

    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(error=None, busy=[(100.5, 20), (102.5, 90), (104.5, 10)], processes={}, memory_gib={})
    >>> gpu_util_figures(s, [1.0, 2.0, 3.0, 4.0], 0.5, 2, 4, 100.0)["busy_percent"]  # steps 3-4: 102-104
    90.0
    """
    from benchmarks.gpu.gpu_util import summarize_util

    if sampler.error and not sampler.busy:
        return {"error": sampler.error}
    start = step_ends[warmup_steps - 1] if warmup_steps else first_begin
    end = step_ends[min(timed_steps, len(step_ends)) - 1]
    out = summarize_util(sampler.busy, sampler.processes, sampler.memory_gib, start + epoch, end + epoch)
    return {**out, "error": sampler.error} if sampler.error else out


def worker(args: argparse.Namespace) -> int:
    """One variant in this process: train, clock the steps, write ``<out>/rows/<variant>.json``."""
    began = time.perf_counter()
    import torch
    from transformers import TrainerCallback

    from toolrl_lib.fast.gen_timing import read_generation_times
    from toolrl_lib.run_dir import read_run_info
    from toolrl_lib.train import load_run_config, train, validate
    from toolrl_lib.train.callbacks import read_csv_rows

    what, own = VARIANTS[args.variant]
    config = load_run_config(args.config, [*common_overrides(args.round, 1), *own, *args.set,
                                           f"device={args.device}"])
    spr = steps_per_round(config)
    timed_steps = (args.warmup_rounds + args.rounds) * spr
    # overlapped generation: every timed round must hold one round's generation, the last one's next
    # round included (the library does not prefetch past max_steps), so one more round runs, untimed
    overlapped = config.fast.overlap_generation
    config.grpo.max_steps = timed_steps + (spr if overlapped else 0)
    validate(config)
    cuda = args.device == "cuda"

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[float] = []
            self.memory: list[float] = []
            self.first: float | None = None

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            if self.first is None:
                self.first = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
                free, total = torch.cuda.mem_get_info()
                self.memory.append((total - free) / 2**30)
            self.ends.append(time.perf_counter())

    clock = Clock()
    callbacks: list[Any] = [clock]
    # the driver's busy counters for both processes on the GPU (trainer, engine), kept for the timed window
    sampler = None
    if cuda:
        from benchmarks.gpu.gpu_util import NvmlSampler, nvml_index

        sampler = NvmlSampler(nvml_index())
        sampler.start()  # False where NVML refuses: the row then says why, the run goes on
    epoch = time.time() - time.perf_counter()  # the clock's perf_counter readings as epoch seconds
    if args.profile_steps:  # a profiling run: its rows are marked, its timings carry the profiler's cost
        from benchmarks.gpu.step_profile import make_callback
        callbacks.append(make_callback(args.profile_steps, Path(args.out), args.variant))
    if args.sample_steps:  # the main thread's Python stacks over these steps (step_profile.StackSampler)
        from benchmarks.gpu.step_profile import make_sampler_callback
        callbacks.append(make_sampler_callback(args.sample_steps, Path(args.out), args.variant))
    run = Path(args.out) / "runs" / args.variant
    row: dict[str, Any] = {"model": "embedded", "path": args.variant, "what": what}
    if args.profile_steps or args.sample_steps:
        windows_text = ";".join(filter(None, (args.profile_steps, args.sample_steps)))
        row[profile_key(windows_text, args.warmup_rounds * spr, timed_steps)] = windows_text
    try:
        try:
            train(config, run, callbacks=callbacks)
        finally:
            if sampler is not None:
                sampler.stop()
        row.update(summarize(clock.ends[:timed_steps], clock.memory[:timed_steps], read_generation_times(run),
                             spr, args.warmup_rounds, args.round))
        if sampler is not None:
            try:  # a diagnostic: it never costs the row its figures
                row["gpu_util"] = gpu_util_figures(sampler, clock.ends, clock.first or 0.0,
                                                   args.warmup_rounds * spr, timed_steps, epoch)
            except Exception as error:  # noqa: BLE001
                row["gpu_util"] = {"error": f"{type(error).__name__}: {error}"}
        logged = [m for m in read_csv_rows(run / "metrics.csv") if (m.get("step") or 0) <= timed_steps]
        metrics = [m for m in logged if m["step"] > args.warmup_rounds * spr]
        row.update(overlap_figures(metrics) if overlapped else {})
        row.update(sampling_figures(metrics))
        row["startup_s"] = round((clock.first or began) - began, 1)
        info = read_run_info(run).extra
        # what the option covered, where it fell back (quoted); the engine process's own seconds
        for option in ("cuda_graphs", "sampler_logps", "prompt_token_cache", "generation_process"):
            if info.get(option):
                row[option] = info[option]
        if cuda:
            row["torch_peak_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
        lengths = [r["completions/mean_length"] for r in logged if r.get("completions/mean_length") is not None]
        if lengths:
            row["mean_completion_tokens"] = round(sum(lengths) / len(lengths), 1)
    except Exception as error:  # a failed variant is a row with its error, the next one still runs
        row["error"] = f"{type(error).__name__}: {error}"[:600]
        row["steps"] = len(clock.ends)
    (Path(args.out) / "rows").mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "rows" / f"{args.variant}.json").write_text(json.dumps(row, indent=1))
    print(json.dumps(row))
    return 0 if "error" not in row else 1


def with_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each measured row other than the baseline gets ``baseline_path`` and ``ratio`` (its
    completions/s over the baseline's) when the baseline was measured in the same run (rows of
    several runs carry ``run``; a ratio never crosses runs). The first baseline row of a run is the
    one; a repeat of the baseline in a later call of that run gets no ratio to it."""
    for run, model in dict.fromkeys((r.get("run"), r.get("model")) for r in rows):
        same = [r for r in rows if r.get("run") == run and r.get("model") == model]
        baseline = BASELINES.get(model, BASELINE)
        base = next((r for r in same if r["path"] == baseline and r.get("completions_per_s")), None)
        for row in same:
            if base is not None and row["path"] != baseline and row.get("completions_per_s"):
                row["baseline_path"] = baseline
                row["ratio"] = round(row["completions_per_s"] / base["completions_per_s"], 2)
    return rows


def write_tables(rows: list[dict[str, Any]], out: Path, command: str = "", note: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = with_ratios(rows)
    (out / "grpo_throughput.json").write_text(json.dumps({"rows": rows, "command": command, "note": note}, indent=1))
    with (out / "grpo_throughput.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    runs = any(r.get("run") for r in rows)
    models = len({r.get("model") for r in rows}) > 1  # a model column only where the table mixes models
    lines = [("| run " if runs else "") + ("| model " if models else "") + "| path | completions/s | "
             "x today's path (same run) | generation share | s/step | generation s/round | peak GiB (device) | "
             "steps timed | startup s | mean tokens |",
             "|" + " --- |" * (10 + runs + models)]
    for r in rows:
        run = (f"| {r.get('run', '')} " if runs else "") + (f"| {r.get('model', '')} " if models else "")
        if r.get("error"):
            lines.append(f"{run}| {r['path']} | failed: {r['error'][:160]} |" + " |" * 8)
            continue
        path = f"{r['path']} (profiled: steps {r['profiled_steps']})" if r.get("profiled_steps") else r["path"]
        lines.append(f"{run}| {path} | {r['completions_per_s']} | {r.get('ratio', '')} | "
                     f"{r['generation_share']:.0%} | {r['seconds_per_step']} | {_cell(r.get('generation_s_per_round'))} | "
                     f"{r['peak_gib']} | {r['steps']} | {_cell(r.get('startup_s'))} | "
                     f"{_cell(r.get('mean_completion_tokens'))} |")
    lines += ["", *(f"- `{path}`: {what}" for path, what in dict.fromkeys((r["path"], r["what"]) for r in rows))]
    if note:
        lines += ["", note]
    if command:
        lines += ["", "```bash", command, "```"]
    (out / "grpo_throughput.md").write_text("\n".join(lines) + "\n")


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def variant_command(variant: str, common: list[str], out: Path) -> list[str]:
    """The command of one variant's worker process: under its own MPS server for an MPS variant,
    with the trainer's SM cap in its environment for a split one (``mps_client``).

    >>> variant_command("x_mps_e30t70", [], Path("/o"))[3:7]
    ['mps', '/o/mps/x_mps_e30t70', 'env', 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=70']
    >>> variant_command("x_mps", [], Path("/o"))[5] == sys.executable, variant_command("x", [], Path("/o"))[0] == sys.executable
    (True, True)
    """
    command = [sys.executable, "-m", "benchmarks.gpu.grpo_throughput", "worker", "--variant", variant, *common]
    mps, trainer_percent = mps_client(variant)
    if not mps:
        return command
    if trainer_percent < 100:  # read when the trainer creates its CUDA context; its engine process sets its own
        command = ["env", f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={trainer_percent}", *command]
    return under_mps(command, out / "mps" / variant)


def run_all(args: argparse.Namespace) -> int:
    """Every variant in its own subprocess, one at a time (``lanes.run_lanes`` on one lane),
    within ``--budget-s``; the tables are rewritten as each one ends."""
    from benchmarks.gpu.lanes import Job, Outcome, run_lanes

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    common = ["--out", str(out), "--config", args.config, "--device", args.device, "--rounds", str(args.rounds),
              "--warmup-rounds", str(args.warmup_rounds), "--round", str(args.round),
              *(f"--set={s}" for s in args.set), *(["--profile-steps", args.profile_steps] if args.profile_steps else []),
              *(["--sample-steps", args.sample_steps] if args.sample_steps else [])]
    jobs = [Job(v, variant_command(v, common, out), log=out / f"{v}.log") for v in variants]
    rows: list[dict[str, Any]] = []

    def ended(outcome: Outcome) -> None:
        variant = outcome.job.name
        path = out / "rows" / f"{variant}.json"
        row = json.loads(path.read_text()) if outcome.status == "exit" and path.is_file() else {
            "model": "embedded", "path": variant, "what": VARIANTS[variant][0],
            "error": f"no result ({outcome.describe()}): {_tail(outcome.job.log)}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_tables(rows, out, args.command)

    run_lanes(jobs, [None], time.time() + args.budget_s, min_start_s=args.min_start_s, on_end=ended)
    return 0


MPS_WRAPPER = r"""
# the pipe folder holds the daemon's Unix sockets, whose paths may not exceed 107 bytes: a short private folder
# of its own (run 13: under $OUT/tp/mps/<variant>/pipe a 108-byte path, and the daemon did not start)
export CUDA_MPS_PIPE_DIRECTORY="$(mktemp -d /tmp/mps.XXXXXX)" CUDA_MPS_LOG_DIRECTORY="$1/log"; shift
mkdir -p "$CUDA_MPS_LOG_DIRECTORY"
command -v nvidia-cuda-mps-control > /dev/null || { echo "MPS: nvidia-cuda-mps-control is not on this host's PATH" >&2; exit 97; }
nvidia-cuda-mps-control -d || { echo "MPS: the control daemon did not start: $(tail -c 300 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null)" >&2; exit 97; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$CUDA_MPS_PIPE_DIRECTORY"; exit 143' TERM INT  # a timeout's TERM: the daemon goes too
"$@"; rc=$?
echo quit | nvidia-cuda-mps-control
rm -rf "$CUDA_MPS_PIPE_DIRECTORY"
exit $rc
"""


def under_mps(command: list[str], folder: Path) -> list[str]:
    """``command`` as a client of its own CUDA MPS server, so the kernels of the trainer and of
    vLLM's engine process (which inherits the environment) can run on the GPU at the same time.

    The control daemon is a process, not a setting of the card (compute mode, clocks and the rest
    are left alone); its log folder lives under ``folder`` and its pipe folder is a fresh one of its
    own under /tmp (short: socket paths are limited to 107 bytes), so no other process on the host
    becomes its client, and it is asked to quit when the command ends, or when a TERM (the
    session step's ``timeout``) ends it. A job killed outright (``lanes`` at its deadline) leaves
    its daemon to the host's end. Without ``nvidia-cuda-mps-control`` the job
    exits 97 with a line saying so, and its row carries that line.

    >>> under_mps(["python", "-m", "x"], Path("/tmp/m"))[:2]
    ['bash', '-c']
    >>> under_mps(["python", "-m", "x"], Path("/tmp/m"))[3:]
    ['mps', '/tmp/m', 'python', '-m', 'x']
    """
    return ["bash", "-c", MPS_WRAPPER, "mps", str(folder), *command]


def _tail(log: Path | None, lines: int = 3) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log is not None and log.is_file() else []
    return " / ".join(text[-lines:])[-400:]


def shapes_rows(data: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The rows of a ``benchmarks/grpo_throughput.py`` run (random weights at a real model's shapes,
    fixed-length completions) in this table's shape, labelled ``label``: generation share = its
    generation seconds per step over its seconds per step, peak = the allocator's reserved peak.

    >>> shapes_rows({"meta": {"shapes": "qwen3-8b"}, "rows": [{"job": "a", "status": "ok", "note": "n",
    ...     "completions_per_s": 2.0, "s_per_step": 4.0, "gen_s_per_step": 1.0, "peak_reserved_gib": 9.5,
    ...     "timed_steps": 2, "mean_completion_tokens": 256.0}]}, "4")[0]["generation_share"]
    0.25
    """
    model = f"{data['meta']['shapes']} shapes"
    out = []
    for r in data["rows"]:
        row = {"model": model, "path": r["job"], "what": r.get("note", ""), "run": label}
        if r.get("status") != "ok":
            row["error"] = str(r.get("error") or r.get("status"))[:600]
        else:
            row.update(completions_per_s=r["completions_per_s"], seconds_per_step=r["s_per_step"],
                       generation_share=round(r["gen_s_per_step"] / r["s_per_step"], 3),
                       generation_s_per_round=None, peak_gib=r["peak_reserved_gib"], steps=r["timed_steps"],
                       mean_completion_tokens=r.get("mean_completion_tokens"))
        out.append(row)
    return out


def report(args: argparse.Namespace) -> int:
    """One table from one run's rows, or from several (``--rows FILE=LABEL`` each: the rows get
    ``run: LABEL``, failed rows of a run that measured nothing for that path are dropped)."""
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {}
    for item in args.rows:
        path, _, label = item.partition("=")
        data = json.loads(Path(path).read_text())
        for row in data["rows"]:
            if label:
                if row.get("error") and "not started" in row["error"]:
                    continue
                row["run"] = label
            rows.append(row)
    for item in args.shapes_rows:
        path, _, label = item.partition("=")
        rows += shapes_rows(json.loads(Path(path).read_text()), label or path)
    single = len(args.rows) == 1 and not args.shapes_rows
    write_tables(rows, Path(args.out), args.command or (data.get("command", "") if single else ""),
                 args.note or (data.get("note", "") if single else ""))
    print((Path(args.out) / "grpo_throughput.md").read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("run", "worker"):
        p = sub.add_parser(name)
        p.add_argument("--out", required=True)
        p.add_argument("--config", default=CONFIG)
        p.add_argument("--device", default="cuda")
        p.add_argument("--rounds", type=int, default=3, help="timed rounds (8 optimizer steps each)")
        p.add_argument("--warmup-rounds", type=int, default=1)
        p.add_argument("--round", type=int, default=ROUND, help="completions per rollout round")
        p.add_argument("--set", action="append", default=[], help="extra KEY=VALUE for every variant")
        p.add_argument("--profile-steps", default="", help="torch profiler over these optimizer steps, e.g. "
                       "'9;10-11' (benchmarks/gpu/step_profile.py); the rows then carry the profiler's cost")
        p.add_argument("--sample-steps", default="", help="the main thread's Python stacks sampled over these "
                       "optimizer steps, e.g. '17;18-24' (step_profile.StackSampler); the rows then carry its cost")
        if name == "run":
            p.add_argument("--variants", default=DEFAULT_VARIANTS)
            p.add_argument("--budget-s", type=float, default=540)
            p.add_argument("--min-start-s", type=float, default=60)
            p.add_argument("--command", default="", help="the command line to record in the tables")
        else:
            p.add_argument("--variant", required=True, choices=list(VARIANTS))
    p = sub.add_parser("report")
    p.add_argument("--rows", required=True, action="append",
                   help="a run's grpo_throughput.json; several as FILE=LABEL, one table with a run column")
    p.add_argument("--shapes-rows", action="append", default=[],
                   help="FILE=LABEL: a benchmarks/grpo_throughput.py run's grpo_throughput.json (random weights at "
                        "a model's shapes), its rows added under run LABEL with that model's own baseline")
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--command", default="")
    p.add_argument("--note", default="", help="what the logs say beyond the rows (kept in the .md and .json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return {"run": run_all, "worker": worker, "report": report}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
