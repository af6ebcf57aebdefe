"""Benchmark: GRPO throughput and peak memory at Qwen3-8B shapes, several settings side by side.

Issue #7 part 2. Each variant trains a random-weight Qwen3-8B-shaped model (bf16, built on
the GPU, never on the CPU) with LoRA r16/alpha32 on all 7 projections, 8 generations per
prompt, 32 completions per optimizer step, prompts of exactly 1024 tokens and completions
of exactly 256 (or 1024) tokens: EOS is suppressed (``generation_kwargs.suppress_tokens``,
which both the regular and the continuous-batching generate honour), so every completion
has the same length and nothing is masked as truncated. ``loss_type="grpo"`` everywhere
(with ``dapo`` Unsloth masks truncated completions; see ../shared/ENVIRONMENT.md).

Per variant: seconds per optimizer step in steady state (after whole warm-up generation
rounds), completions/s, generated tokens/s, the generation/training split (the trainer's
``_generate_single_turn`` is wrapped with CUDA-synchronised timers; training = step - that)
and peak GPU memory (allocated and reserved) under a per-process cap
(``--memory-cap-gb``, decimal GB: 80 GB = 74.5 GiB, below the 79.2 GiB an H100 exposes).

Every variant runs in its own subprocess (clean memory; Unsloth patches TRL process-wide),
one per GPU at a time, under one ``--time-budget-s`` for the whole run. Rows are appended to
``<out>/grpo_throughput.{json,csv}`` as each variant ends (a failure is a row with its error);
``<out>/grpo_throughput.md`` is the table. A worker also keeps ``<out>/rows/<job>.json`` up to
date after every step, so a killed run still leaves its partial numbers.

    python -m benchmarks.grpo_throughput --out $OUT                       # GPU, all variants
    python -m benchmarks.grpo_throughput --out $OUT --variants peft_default@1024,best@1024
    python -m benchmarks.grpo_throughput --prepare-model                  # save the random model
    python -m benchmarks.grpo_throughput --out /tmp/t --shapes tiny       # CPU smoke, same code

A job is ``VARIANT[@COMPLETION_TOKENS]``; ``best`` is the fastest variant measured earlier in
the same run (it waits for all earlier jobs).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.gpu import lanes  # the shared GPU-lane scheduler
from toolrl_lib.train.config import ALL_PROJECTIONS

MARKER = "grpo_throughput_model.json"

# Qwen3-8B's architecture (Qwen3ForCausalLM); "tiny" keeps the code path, not the cost.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, intermediate_size=12288,
                     vocab_size=151936, max_position_embeddings=40960, rope_theta=1_000_000.0,
                     rms_norm_eps=1e-6, tie_word_embeddings=False),
    # Qwen/Qwen3-1.7B's config.json (the colab profile): tied embeddings, head_dim 128.
    "qwen3-1.7b": dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, intermediate_size=6144,
                       vocab_size=151936, max_position_embeddings=40960, rope_theta=1_000_000.0,
                       rms_norm_eps=1e-6, tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, intermediate_size=128, vocab_size=49152, max_position_embeddings=4096,
                 rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=False),
}


@dataclass(frozen=True)
class Workload:
    """The GRPO batch geometry; only the token lengths shrink for the CPU smoke run."""

    prompt_tokens: int
    completion_tokens: int
    num_generations: int = 8
    completions_per_step: int = 32  # per optimizer step
    micro_batch: int = 8  # per_device_train_batch_size; GA = completions_per_step / micro_batch


WORKLOADS = {"qwen3-8b": Workload(1024, 256), "qwen3-1.7b": Workload(1024, 256), "tiny": Workload(32, 8)}


@dataclass(frozen=True)
class Variant:
    backend: str = "peft"  # "peft" (TRL + PEFT) or "unsloth" (FastLanguageModel + patched TRL)
    grpo: dict[str, Any] = field(default_factory=dict)  # extra GRPOConfig fields
    micro_batch: int | None = None  # None = the workload's
    compile_generation: bool = False  # re-enable generate()'s auto-compile (TRL disables it)
    merged_generation: bool = False  # roll out with W + sBA, adapters off (toolrl_lib.fast.merged_generation)
    # grpo.vllm fields (toolrl_lib's VLLMSection, mode colocate): rollouts from TRL's colocated vLLM engine,
    # through the library's own plumbing (grpo_vllm_kwargs, colocated_engine); the model is loaded from the
    # saved random model, since vLLM reads its weights from disk before TRL syncs the policy's in
    vllm: dict[str, Any] | None = None
    note: str = ""


VARIANTS: dict[str, Variant] = {
    "peft_default": Variant(note="TRL defaults: HF generate, dynamic cache, gradient checkpointing"),
    "peft_gen_batch64": Variant(grpo={"generation_batch_size": 64},
                                note="64 completions per generate call = 2 optimizer steps"),
    "peft_gen_batch128": Variant(grpo={"generation_batch_size": 128},
                                 note="128 completions per generate call = 4 optimizer steps"),
    "peft_paged": Variant(grpo={"use_transformers_continuous_batching": True},
                          note="transformers continuous batching (generate_batch, paged KV cache)"),
    "peft_static_compile": Variant(grpo={"cache_implementation": "static"}, compile_generation=True,
                                   note="static KV cache + torch.compile of the decode step"),
    "peft_merged_gen_batch64": Variant(grpo={"generation_batch_size": 64}, merged_generation=True,
                                       note="LoRA merged into a weight copy for rollouts, 64 per generate call"),
    "peft_no_gc": Variant(grpo={"gradient_checkpointing": False}, note="no gradient checkpointing"),
    "peft_micro32": Variant(micro_batch=32, note="one 32-completion micro-batch per optimizer step"),
    "unsloth": Variant(backend="unsloth", note="FastLanguageModel + get_peft_model, Unsloth-patched TRL"),
    "unsloth_gen_batch64": Variant(backend="unsloth", grpo={"generation_batch_size": 64},
                                   note="Unsloth + 64 completions per generate call"),
    "unsloth_gen_batch128": Variant(backend="unsloth", grpo={"generation_batch_size": 128},
                                    note="Unsloth + 128 completions per generate call = 4 optimizer steps"),
    "unsloth_gen_batch64_micro32": Variant(backend="unsloth", grpo={"generation_batch_size": 64}, micro_batch=32,
                                           note="Unsloth + 64 per generate call + one 32-completion micro-batch"),
    # The full profile's setting (backend unsloth + fast.merged_generation); like the run, the
    # worker first checks (merged_path_check) that Unsloth's patched layers honour the merged path.
    "unsloth_merged_gen_batch64": Variant(backend="unsloth", grpo={"generation_batch_size": 64},
                                          merged_generation=True,
                                          note="Unsloth training + merged-weight rollouts, 64 per generate call"),
    # Issue 37: vLLM at 8B against today's default (unsloth_merged_gen_batch64). Each round TRL merges the LoRA
    # into the trainer's weights and copies all 8B into the engine; the engine's KV cache is fixed (vLLM then
    # skips its memory profiling) and prefix caching shares each prompt among its 8 completions.
    "peft_vllm_gen_batch64": Variant(grpo={"generation_batch_size": 64},
                                     vllm={"kv_cache_gib": 12, "detokenize": False},
                                     note="TRL's vLLM colocate engine, 64 completions a round, LoRA synced each round"),
    "peft_vllm_gen_batch128": Variant(grpo={"generation_batch_size": 128},
                                      vllm={"kv_cache_gib": 16, "detokenize": False},
                                      note="TRL's vLLM colocate engine, 128 completions a round (4 optimizer steps)"),
    # ...and Unsloth's own vLLM engine (FastLanguageModel.from_pretrained(fast_inference=True), the library's
    # unsloth backend with grpo.vllm.mode colocate): Unsloth's training half, which decided run 4, with vLLM rollouts
    "unsloth_vllm_gen_batch64": Variant(backend="unsloth", grpo={"generation_batch_size": 64},
                                        vllm={"gpu_memory_utilization": 0.45},
                                        note="Unsloth training + its own vLLM engine (fast_inference), 64 a round"),
}
DEFAULT_JOBS = ("peft_default,unsloth,peft_gen_batch64,peft_paged,peft_static_compile,"
                "peft_gen_batch128,peft_no_gc,peft_micro32")



# ---------------------------------------------------------------------------------------
# jobs
@dataclass(frozen=True)
class Job:
    variant: str
    completion_tokens: int | None = None  # None = the workload's

    @property
    def name(self) -> str:
        return self.variant if self.completion_tokens is None else f"{self.variant}@{self.completion_tokens}"


def parse_jobs(spec: str) -> list[Job]:
    """``"a,b@1024,best@1024"`` -> jobs; unknown variants are an error naming the choices."""
    jobs = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, _, tokens = item.partition("@")
        if name not in VARIANTS and name != "best":
            raise ValueError(f"--variants: unknown variant {name!r}; expected 'best' or one of "
                             f"{sorted(VARIANTS)}")
        if tokens and not (tokens.isdigit() and int(tokens) > 0):
            raise ValueError(f"--variants: {item!r}: completion tokens after '@' must be a positive "
                             "integer, e.g. peft_default@1024")
        jobs.append(Job(name, int(tokens) if tokens else None))
    if not jobs:
        raise ValueError("--variants: no variant given")
    return jobs


def workload_for(shapes: str, job: Job, variant: Variant) -> Workload:
    base = WORKLOADS[shapes]
    w = Workload(base.prompt_tokens, job.completion_tokens or base.completion_tokens,
                 base.num_generations, base.completions_per_step, variant.micro_batch or base.micro_batch)
    if w.completions_per_step % w.micro_batch:
        raise ValueError(f"micro_batch {w.micro_batch} must divide completions_per_step "
                         f"{w.completions_per_step}")
    return w


def steps_per_round(variant: Variant, w: Workload) -> int:
    """Optimizer steps per generation round (one generate call serves this many steps)."""
    gen = variant.grpo.get("generation_batch_size", w.completions_per_step)
    if gen % w.completions_per_step:
        raise ValueError(f"generation_batch_size {gen} must be a multiple of {w.completions_per_step}")
    return gen // w.completions_per_step


def plan_steps(variant: Variant, w: Workload, warmup_rounds: int, timed_steps: int) -> tuple[int, int]:
    """(warm-up steps, timed steps), both whole generation rounds so averages are fair."""
    per_round = steps_per_round(variant, w)
    timed = -(-max(timed_steps, 1) // per_round) * per_round
    return warmup_rounds * per_round, timed


# ---------------------------------------------------------------------------------------
# model, tokenizer, data
def embedded_tokenizer() -> Any:
    from toolrl_lib.models import load_tokenizer, resolve_model

    return load_tokenizer(resolve_model("embedded"), padding_side="left")


def qwen3_config(shapes: str, tokenizer: Any) -> Any:
    from transformers import Qwen3Config

    shape = dict(SHAPES[shapes])
    if shape["vocab_size"] < len(tokenizer):
        raise ValueError(f"shape {shapes!r}: vocab_size {shape['vocab_size']} < tokenizer size {len(tokenizer)}")
    return Qwen3Config(**shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id)


def build_random_model(shapes: str, tokenizer: Any, device: str, dtype: Any) -> Any:
    """Random-weight Qwen3ForCausalLM allocated and initialised directly on ``device``.

    Built under ``torch.device(device)``: parameters are created (and initialised with
    the model's own ``_init_weights``) on the GPU, so the 16 GB never pass through the CPU;
    unlike a meta-device build, non-persistent buffers (rotary ``inv_freq``) stay correct."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    config = qwen3_config(shapes, tokenizer)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id,
                                               bos_token_id=tokenizer.bos_token_id)
    return model


def default_model_dir(shapes: str) -> Path:
    """/dev/shm when it has room for the bf16 weights (+ margin), else /tmp."""
    need = {"qwen3-8b": 20e9, "qwen3-1.7b": 5e9}.get(shapes, 1e8)
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and shutil.disk_usage(shm).free > need else Path("/tmp")
    return root / f"toolrl-random-{shapes}"


def ensure_saved_model(folder: str | Path, shapes: str, device: str) -> Path:
    """Save the random model (bf16 on CUDA) + embedded tokenizer with a Qwen3-style template once.

    Reused when the marker file is there (files outside the repo survive between GPU calls
    while the host stays warm). Written to a staging folder and renamed: never half-written."""
    from filelock import FileLock

    folder = Path(folder)
    if (folder / MARKER).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=1800):  # two unsloth workers at once
        if not (folder / MARKER).is_file():
            _save_random_model(folder, shapes, device)
    return folder


def _save_random_model(folder: Path, shapes: str, device: str) -> None:
    import torch

    tokenizer = embedded_tokenizer()
    from tests.fixtures.templates import QWEN3_STYLE_TEMPLATE

    tokenizer.chat_template = QWEN3_STYLE_TEMPLATE
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = build_random_model(shapes, tokenizer, device, dtype)
    staging = folder.parent / (folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    t0 = time.perf_counter()
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / MARKER).write_text(json.dumps({"shapes": shapes, "dtype": str(dtype),
                                              "save_s": round(time.perf_counter() - t0, 1)}))
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def fixed_length_prompt(tokenizer: Any, n_tokens: int, word: str = "a") -> str:
    """A prompt that tokenizes (as TRL does: ``tokenizer(text=...)``) to exactly n tokens."""
    text = word + f" {word}" * (n_tokens - 1)
    got = len(tokenizer(text=[text])["input_ids"][0])
    if got != n_tokens:
        raise ValueError(f"prompt of {n_tokens} repeated {word!r} tokenizes to {got} tokens; pick another word")
    return text


def prompt_dataset(tokenizer: Any, n_prompts: int, n_tokens: int) -> Any:
    from datasets import Dataset

    text = fixed_length_prompt(tokenizer, n_tokens)
    return Dataset.from_list([{"prompt": text} for _ in range(n_prompts)])


def token_sum_reward(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
    """Trivial but non-constant (sum of token ids mod 7): advantages are not all zero."""
    return [float(sum(ids) % 7) for ids in completion_ids]


# ---------------------------------------------------------------------------------------
# the worker: one variant in this process
class Recorder:
    """Per-step wall time and generation time (CUDA-synchronised), plus a deadline stop."""

    def __init__(self, cuda: bool, deadline: float, on_step: Any) -> None:
        self.cuda, self.deadline, self.on_step = cuda, deadline, on_step
        self.steps: list[float] = []
        self.gen: list[float] = []  # generation seconds inside each step
        self._start = 0.0
        self._gen_in_step = 0.0
        self.stopped_early = False

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def wrap_generation(self, trainer: Any) -> str:
        """Time TRL's generation method on this trainer instance (the library's rollout timer,
        CUDA-synchronised); return its name."""
        from toolrl_lib.fast.gen_timing import time_rollouts

        def add(seconds: float, *_: Any) -> None:
            self._gen_in_step += seconds

        return time_rollouts(trainer, add, sync=self.sync)

    def callback(self) -> Any:
        from transformers import TrainerCallback

        rec = self

        class StepCallback(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                rec.sync()
                rec._start = time.perf_counter()
                rec._gen_in_step = 0.0

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                rec.sync()
                rec.steps.append(time.perf_counter() - rec._start)
                rec.gen.append(rec._gen_in_step)
                rec.on_step()
                if time.time() + max(rec.steps) > rec.deadline and state.global_step < state.max_steps:
                    rec.stopped_early = True
                    control.should_training_stop = True

        return StepCallback()


def summarise(row: dict[str, Any], rec: Recorder, warmup: int, w: Workload, logs: list[dict]) -> None:
    """Fill the throughput fields of ``row`` from the timed steps (those after warm-up)."""
    timed, gen = rec.steps[warmup:], rec.gen[warmup:]
    row["steps_done"] = len(rec.steps)
    row["step_s_all"] = [round(s, 2) for s in rec.steps]
    row["gen_s_all"] = [round(s, 2) for s in rec.gen]
    row["timed_steps"] = len(timed)
    if timed:
        step = sum(timed) / len(timed)
        g = sum(gen) / len(gen)
        row.update(s_per_step=round(step, 3), gen_s_per_step=round(g, 3),
                   train_s_per_step=round(step - g, 3), gen_fraction=round(g / step, 3),
                   completions_per_s=round(w.completions_per_step / step, 3),
                   gen_tokens_per_s=round(w.completions_per_step * w.completion_tokens / step, 1))
    lengths = [h["completions/mean_length"] for h in logs if "completions/mean_length" in h]
    if lengths:
        row["mean_completion_tokens"] = round(sum(lengths) / len(lengths), 1)
        row["fixed_length_ok"] = all(abs(x - w.completion_tokens) < 1e-6 for x in lengths)
    grads = [h["grad_norm"] for h in logs if "grad_norm" in h]
    if grads:
        row["grad_norm_mean"] = round(float(sum(grads) / len(grads)), 6)


def peak_memory(row: dict[str, Any], cuda: bool) -> None:
    if cuda:
        import torch

        row["peak_alloc_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        row["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)


def policy_config(variant: Variant, w: Workload) -> Any:
    """The settings the library's loaders read: LoRA r16/alpha32 on all 7 projections, bf16, and
    for a vLLM variant ``grpo.vllm`` in colocate mode (the unsloth backend's loader reads it too:
    ``fast_inference``)."""
    from toolrl_lib.train.config import (
        GRPOSection,
        LoraSection,
        ModelSection,
        RunConfig,
        VLLMSection,
    )

    config = RunConfig(seed=0, model=ModelSection(dtype="bf16", max_seq_length=w.prompt_tokens + w.completion_tokens),
                       lora=LoraSection(r=16, alpha=32, dropout=0.0, target_modules=list(ALL_PROJECTIONS)),
                       grpo=GRPOSection(gradient_checkpointing=variant.grpo.get("gradient_checkpointing", True)))
    if variant.vllm is not None:
        config.grpo.vllm = VLLMSection(mode="colocate", max_model_len=w.prompt_tokens + w.completion_tokens,
                                       **variant.vllm)
    return config


def vllm_settings(variant: Variant, w: Workload) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A vLLM variant's ``GRPOConfig`` fields, its sampling kwargs and the engine context, all from the
    library (``grpo_vllm_kwargs``, ``colocated_engine``) as a run with ``grpo.vllm`` gets them. Fixed-length
    completions come from vLLM's ``ignore_eos`` (``suppress_tokens`` is transformers')."""
    from toolrl_lib.fast.vllm_engine import colocated_engine
    from toolrl_lib.train.trainer import grpo_vllm_kwargs

    config = policy_config(variant, w)
    fields = grpo_vllm_kwargs(config, variant.backend)  # unsloth: none, its loader builds the engine
    sampling = {**fields.pop("generation_kwargs", {}), "ignore_eos": True}
    v = config.grpo.vllm
    if variant.backend == "unsloth":
        return fields, sampling, contextlib.nullcontext()
    return fields, sampling, colocated_engine(v.kv_cache_gib, v.dtype)


def load_policy(variant: Variant, a: argparse.Namespace, w: Workload, cuda: bool) -> tuple[Any, Any, Any]:
    """(model, tokenizer, peft_config or None) for the variant's backend, through the library's
    loader (``toolrl_lib.train.backend``). PEFT's model is built on the GPU instead of loaded
    (16 GB never pass through the CPU) and gets its adapter from the trainer's ``peft_config``."""
    import torch

    from toolrl_lib.train.backend import load_policy as load_run_policy
    from toolrl_lib.train.backend import peft_lora_config

    config = policy_config(variant, w)
    if variant.backend == "unsloth":
        if not cuda:
            raise RuntimeError("variant needs a CUDA GPU: Unsloth's kernels do not run on CPU")
        folder = ensure_saved_model(a.model_dir or default_model_dir(a.shapes), a.shapes, "cuda")
        torch.cuda.reset_peak_memory_stats()
        model, tokenizer = load_run_policy(config, str(folder), "unsloth", "cuda")
        return model, tokenizer, None
    if variant.vllm is not None:  # vLLM loads the weights by path: the saved model, loaded onto the GPU
        from transformers import AutoModelForCausalLM

        if not cuda:
            raise RuntimeError("variant needs a CUDA GPU: vLLM generates on CUDA GPUs only")
        folder = ensure_saved_model(a.model_dir or default_model_dir(a.shapes), a.shapes, "cuda")
        torch.cuda.reset_peak_memory_stats()
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16, device_map="cuda")
        return model, embedded_tokenizer(), peft_lora_config(config.lora)
    tokenizer = embedded_tokenizer()
    model = build_random_model(a.shapes, tokenizer, "cuda" if cuda else "cpu",
                               torch.bfloat16 if cuda else torch.float32)
    return model, tokenizer, peft_lora_config(config.lora)


def run_worker(a: argparse.Namespace) -> dict[str, Any]:
    """Train one job in this process; keep ``a.row_file`` current after every step."""
    job = parse_jobs(a.worker)[0]
    variant = VARIANTS[job.variant]
    if variant.backend == "unsloth":
        import importlib.util

        if importlib.util.find_spec("unsloth") is None:
            raise RuntimeError("unsloth is not installed (benchmarks/gpu/setup.sh bnb + unsloth)")
        import unsloth  # noqa: F401  (must patch TRL before TRL is imported)
    import torch

    cuda = torch.cuda.is_available() and not a.cpu
    w = workload_for(a.shapes, job, variant)
    warmup, timed = plan_steps(variant, w, a.warmup_rounds, a.timed_steps)
    row: dict[str, Any] = {"job": job.name, "variant": job.variant, "backend": variant.backend,
                           "prompt_tokens": w.prompt_tokens, "completion_tokens": w.completion_tokens,
                           "completions_per_step": w.completions_per_step, "micro_batch": w.micro_batch,
                           "warmup_steps": warmup, "planned_timed_steps": timed, "status": "running",
                           "note": variant.note}
    row_file = Path(a.row_file)

    def save() -> None:
        peak_memory(row, cuda)
        row_file.write_text(json.dumps(row, indent=1))

    t0 = time.perf_counter()
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = min(1.0, a.memory_cap_gb * 1e9 / total)
        torch.cuda.set_per_process_memory_fraction(fraction)
        row.update(gpu=torch.cuda.get_device_name(0), memory_cap_gib=round(fraction * total / 2**30, 2))
    save()

    from trl import GRPOConfig, GRPOTrainer

    from toolrl_lib.train.backend import ensure_logprob_kernel

    ensure_logprob_kernel()  # TRL's log-prob kernel is Triton; a torch stand-in on CPU only
    model, tokenizer, lora = load_policy(variant, a, w, cuda)
    eos = sorted({tokenizer.eos_token_id, *_as_list(model.generation_config.eos_token_id)} - {None})
    grpo = dict(variant.grpo)
    sampling: dict[str, Any] = {"suppress_tokens": eos}
    engine: Any = contextlib.nullcontext()
    if variant.vllm is not None:
        fields, sampling, engine = vllm_settings(variant, w)
        grpo.update(fields)
        row["vllm"] = {**fields, "generation_kwargs": sampling, **(variant.vllm or {})}
    args = GRPOConfig(
        output_dir=str(Path(a.scratch) / job.name), use_cpu=not cuda, bf16=cuda, seed=0,
        per_device_train_batch_size=w.micro_batch,
        gradient_accumulation_steps=w.completions_per_step // w.micro_batch,
        num_generations=w.num_generations, max_completion_length=w.completion_tokens,
        generation_kwargs=sampling, loss_type="grpo",
        max_steps=warmup + timed, logging_steps=1, report_to=[], save_strategy="no",
        disable_tqdm=True, **({"gradient_checkpointing": False} if not cuda else {}), **grpo,
    )
    rec = Recorder(cuda, a.deadline, save)
    n_prompts = (warmup + timed) * w.completions_per_step // w.num_generations
    with engine:  # TRL builds its colocated vLLM engine in the constructor
        trainer = GRPOTrainer(model=model, reward_funcs=token_sum_reward, args=args, processing_class=tokenizer,
                              train_dataset=prompt_dataset(tokenizer, n_prompts, w.prompt_tokens),
                              peft_config=lora, callbacks=[rec.callback()])
    if variant.compile_generation:
        trainer.generation_config.disable_compile = False  # TRL sets True; static cache -> compiled decode
    if variant.merged_generation:  # before the timer wraps it: the merge is part of generation
        from toolrl_lib.fast.merged_generation import generate_with_merged_lora, merged_path_check

        check_ids = tokenizer(text=[fixed_length_prompt(tokenizer, 16)], return_tensors="pt")["input_ids"]
        policy = trainer.accelerator.unwrap_model(trainer.model)
        row["merged_check"] = merged_path_check(policy, check_ids.to(policy.device))
        save()
        if not row["merged_check"]["ok"]:
            raise RuntimeError(f"merged rollouts do not compute the LoRA path here: {row['merged_check']}")
        generate_with_merged_lora(trainer)
    row["gen_timer"] = rec.wrap_generation(trainer)
    row["gradient_checkpointing"] = bool(args.gradient_checkpointing)
    row["generation_batch_size"] = args.generation_batch_size
    row["init_s"] = round(time.perf_counter() - t0, 1)
    save()
    try:
        trainer.train()
    finally:
        logs = [h for h in trainer.state.log_history if "loss" in h]
        summarise(row, rec, warmup, w, logs)
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        row["status"] = "running"
        save()
    done = row.get("timed_steps", 0)
    row["status"] = "ok" if done >= timed else ("partial" if done else "no timed step")
    if rec.stopped_early:
        row["error"] = "stopped early: the time budget would not allow another step"
    save()
    return row


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


# ---------------------------------------------------------------------------------------
# the parent: schedule jobs over GPUs, collect rows
FIELDS = ["job", "status", "backend", "completion_tokens", "completions_per_s", "gen_tokens_per_s",
          "s_per_step", "gen_s_per_step", "train_s_per_step", "gen_fraction", "peak_alloc_gib",
          "peak_reserved_gib", "timed_steps", "warmup_steps", "init_s", "wall_s",
          "mean_completion_tokens", "fixed_length_ok", "grad_norm_mean", "generation_batch_size",
          "micro_batch", "gradient_checkpointing", "gpu", "error", "note"]


def gpu_count(cpu: bool) -> int:
    if cpu:
        return 0
    import torch

    return torch.cuda.device_count()


def worker_cmd(a: argparse.Namespace, job: Job, row_file: Path, deadline: float) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks.grpo_throughput", "--worker", job.name, "--row-file", str(row_file),
           "--shapes", a.shapes, "--deadline", str(deadline), "--warmup-rounds", str(a.warmup_rounds),
           "--timed-steps", str(a.timed_steps), "--memory-cap-gb", str(a.memory_cap_gb),
           "--scratch", a.scratch]
    if a.model_dir:
        cmd += ["--model-dir", a.model_dir]
    if a.cpu:
        cmd.append("--cpu")
    return cmd


def resolve_best(job: Job, rows: list[dict[str, Any]]) -> Job | None:
    if job.variant != "best":
        return job
    ok = [r for r in rows if r.get("completions_per_s") and r["variant"] in VARIANTS
          and r.get("status") in ("ok", "partial")]
    return Job(max(ok, key=lambda r: r["completions_per_s"])["variant"], job.completion_tokens) if ok else None


def run_all(a: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the jobs, one subprocess per GPU at a time (``lanes.run_lanes``), until done or out of time."""
    out = Path(a.out)
    (out / "rows").mkdir(parents=True, exist_ok=True)
    start = time.time()
    deadline = start + a.time_budget_s
    # Lanes are physical GPU ids: respect an outer CUDA_VISIBLE_DEVICES (e.g. "1": the other GPU is busy).
    gpus = [] if a.cpu else lanes.lanes_from_env(gpu_count(a.cpu))
    meta = {"shapes": a.shapes, "workload": asdict(WORKLOADS[a.shapes]), "lanes": gpus or ["cpu"],
            "time_budget_s": a.time_budget_s, "memory_cap_gb": a.memory_cap_gb,
            "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    rows: list[dict[str, Any]] = []
    pending = parse_jobs(a.variants)
    if a.resume:
        rows, pending, meta = resume_rows(out, pending, meta)

    def prepare(item: lanes.Job) -> lanes.Job | str:
        resolved = resolve_best(item.data, rows)  # "best" waits for every earlier job (wait_for_all)
        if resolved is None:
            return "no earlier variant finished"
        stem = out / "rows" / resolved.name.replace("@", "-")
        return lanes.Job(resolved.name, worker_cmd(a, resolved, stem.with_suffix(".json"), deadline),
                         log=stem.with_suffix(".log"), data=resolved)

    def record(outcome: lanes.Outcome) -> None:
        job = outcome.job.data
        if outcome.status == "skipped":
            row = {"job": job.name, "variant": job.variant, "status": "skipped",
                   "error": f"skipped: {outcome.reason}" if "time budget" in outcome.reason else outcome.reason}
        else:
            killed = outcome.status == "killed"
            row_file = out / "rows" / f"{job.name.replace('@', '-')}.json"
            row = collect_row(job, row_file, -9 if killed else outcome.returncode, killed, outcome.seconds)
            print(f"[{time.time() - start:6.0f}s] {job.name}: {row['status']} "
                  f"{row.get('completions_per_s', '')} completions/s {row.get('error', '')}", flush=True)
        rows.append(row)
        write_outputs(out, meta, rows)

    jobs = [lanes.Job(job.name, data=job, wait_for_all=job.variant == "best") for job in pending]
    lanes.run_lanes(jobs, gpus or [None], deadline, grace_s=a.grace_s, min_start_s=a.min_start_s,
                    poll_s=a.poll_s, prepare=prepare, on_end=record)
    write_outputs(out, meta, rows)
    return rows


def resume_rows(out: Path, pending: list[Job], meta: dict[str, Any]
                ) -> tuple[list[dict[str, Any]], list[Job], dict[str, Any]]:
    """Continue an earlier invocation's table (a 10-minute command limit splits one run):
    measured rows are kept, their jobs not re-run; skipped/failed ones are tried again."""
    path = out / "grpo_throughput.json"
    if not path.is_file():
        return [], pending, meta
    earlier = json.loads(path.read_text())
    if earlier["meta"]["shapes"] != meta["shapes"] or earlier["meta"]["workload"] != meta["workload"]:
        raise SystemExit(f"--resume: {path} was measured with other shapes/workload; use another --out")
    kept = [r for r in earlier["rows"] if r.get("status") in ("ok", "partial")]
    done = {r["job"] for r in kept}
    meta = {**meta, "commands": [*earlier["meta"].get("commands", [earlier["meta"]["command"]]),
                                 meta["command"]],
            "started": earlier["meta"]["started"], "resumed": meta["started"]}
    return kept, [job for job in pending if job.name not in done], meta


def collect_row(job: Job, row_file: Path, returncode: int, killed: bool, seconds: float) -> dict[str, Any]:
    """The worker's row (possibly partial), with the failure recorded when it did not finish."""
    row: dict[str, Any] = {"job": job.name, "variant": job.variant}
    if row_file.is_file():
        with contextlib.suppress(json.JSONDecodeError):  # a worker killed mid-write
            row.update(json.loads(row_file.read_text()))
    if killed:
        row["error"] = f"killed at the time budget after {seconds:.0f} s"
        row["status"] = "partial" if row.get("timed_steps") else "timeout"
    elif returncode != 0 or row.get("status") == "running":
        log = row_file.with_suffix(".log")
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
        row.setdefault("error", f"exit {returncode}: {tail[0][:300] if tail else 'no output'}")
        row["status"] = "partial" if row.get("timed_steps") else "failed"
    return row


def write_outputs(out: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    (out / "grpo_throughput.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2, default=str))
    with (out / "grpo_throughput.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "grpo_throughput.md").write_text(markdown_table(meta, rows))


def markdown_table(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    w = meta["workload"]
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "CPU")
    head = (f"GRPO throughput, {meta['shapes']} shapes, {gpu}, memory cap {meta['memory_cap_gb']} GB; "
            f"prompt {w['prompt_tokens']} tokens, {w['num_generations']} generations, "
            f"{w['completions_per_step']} completions per optimizer step, fixed-length completions.\n\n"
            "| job | status | completions/s | gen tokens/s | s/step | gen s | train s | peak alloc GiB | "
            "peak reserved GiB | timed steps | note |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
    lines = []
    for r in rows:
        note = r.get("error") or r.get("note", "")
        cells = [r["job"], r.get("status", "")] + [r.get(k, "") for k in (
            "completions_per_s", "gen_tokens_per_s", "s_per_step", "gen_s_per_step", "train_s_per_step",
            "peak_alloc_gib", "peak_reserved_gib", "timed_steps")] + [str(note).replace("|", "/")[:160]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return head + "\n".join(lines) + "\n"


def plot_throughput(meta: dict[str, Any], rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Seconds per optimizer step split into generation and training, one bar per measured job
    (fastest at the top), labelled with completions/s and peak memory; failed jobs listed below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = sorted((r for r in rows if r.get("s_per_step")), key=lambda r: r["completions_per_s"])
    if not measured:
        raise ValueError("no measured row to plot")
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(measured) + 1.8))
    names = [r["job"] for r in measured]
    gen = [r["gen_s_per_step"] for r in measured]
    train = [r["train_s_per_step"] for r in measured]
    ax.barh(names, gen, color="#4c72b0", label="generation")
    ax.barh(names, train, left=gen, color="#dd8452", label="training (log-probs, loss, backward, step)")
    for i, r in enumerate(measured):
        ax.text(r["s_per_step"] + 0.3, i, f"{r['completions_per_s']:.2f}/s, {r.get('peak_alloc_gib', '?')} GiB",
                va="center", fontsize=8)
    ax.set_xlim(0, max(r["s_per_step"] for r in measured) * 1.35)
    w = meta["workload"]
    ax.set_xlabel(f"seconds per optimizer step\n({w['completions_per_step']} completions, prompt "
                  f"{w['prompt_tokens']} + completion {w['completion_tokens']} tokens unless @N)")
    ax.set_title(f"GRPO at {meta['shapes']} shapes, LoRA r16, {meta['memory_cap_gb']:g} GB cap")
    ax.legend(loc="upper right", fontsize=8)
    unmeasured = [f"{r['job']}: {r.get('status')}" + (f" ({r['error'].split(':')[0]})" if r.get("error") else "")
                  for r in rows if not r.get("s_per_step")]
    if unmeasured:
        fig.text(0.01, 0.01, "not measured: " + "; ".join(unmeasured), fontsize=7)
    fig.tight_layout(rect=(0, 0.04 if unmeasured else 0, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/results", help="folder for grpo_throughput.{json,csv,md}")
    p.add_argument("--shapes", choices=sorted(SHAPES), default="qwen3-8b")
    p.add_argument("--variants", default=DEFAULT_JOBS, help=f"jobs VARIANT[@TOKENS]; variants: {sorted(VARIANTS)}")
    p.add_argument("--time-budget-s", type=float, default=420.0, help="the whole run, model init included")
    p.add_argument("--min-start-s", type=float, default=90.0, help="do not start a job with less time left")
    p.add_argument("--grace-s", type=float, default=20.0, help="kill a worker this long after the budget")
    p.add_argument("--warmup-rounds", type=int, default=1, help="untimed generation rounds first")
    p.add_argument("--timed-steps", type=int, default=2, help="timed optimizer steps (rounded up to rounds)")
    p.add_argument("--memory-cap-gb", type=float, default=80.0, help="per-process GPU cap, decimal GB")
    p.add_argument("--model-dir", default=None, help="saved random model for unsloth (default /dev/shm or /tmp)")
    p.add_argument("--scratch", default="/tmp/grpo_throughput", help="trainer output_dir (nothing is saved)")
    p.add_argument("--cpu", action="store_true", help="run on CPU even when CUDA is there")
    p.add_argument("--poll-s", type=float, default=1.0)
    p.add_argument("--prepare-model", action="store_true", help="only save the random model and exit")
    p.add_argument("--resume", action="store_true",
                   help="keep the measured rows already in --out and run only the other jobs")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="only draw the figure of --out's grpo_throughput.json to PNG and exit")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--row-file", default=None, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for name in ("time_budget_s", "memory_cap_gb"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if a.warmup_rounds < 0 or a.timed_steps < 1:
        p.error("--warmup-rounds must be >= 0 and --timed-steps >= 1")
    try:
        parse_jobs(a.worker or a.variants)
    except ValueError as error:
        p.error(str(error))
    if a.deadline is None:
        a.deadline = time.time() + a.time_budget_s
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.plot:
        table = Path(a.out) / "grpo_throughput.json"
        if not table.is_file():
            raise SystemExit(f"--plot: {table} not found; run the benchmark first (or point --out at it)")
        data = json.loads(table.read_text())
        print(plot_throughput(data["meta"], data["rows"], a.plot))
        return 0
    if a.prepare_model:
        import torch

        device = "cuda" if torch.cuda.is_available() and not a.cpu else "cpu"
        t0 = time.perf_counter()
        folder = ensure_saved_model(a.model_dir or default_model_dir(a.shapes), a.shapes, device)
        print(f"random {a.shapes} model in {folder} ({time.perf_counter() - t0:.0f} s)")
        return 0
    if a.worker:
        try:
            run_worker(a)
        except BaseException as error:
            row_file = Path(a.row_file)
            row = json.loads(row_file.read_text()) if row_file.is_file() else {"job": a.worker}
            row.update(status="partial" if row.get("timed_steps") else "failed",
                       error=f"{type(error).__name__}: {str(error)[:400]}",
                       traceback=traceback.format_exc()[-3000:])
            row_file.write_text(json.dumps(row, indent=1))
            raise
        return 0
    rows = run_all(a)
    print(markdown_table({"shapes": a.shapes, "workload": asdict(WORKLOADS[a.shapes]),
                          "memory_cap_gb": a.memory_cap_gb}, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
