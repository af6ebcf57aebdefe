"""The run configuration: one YAML file <-> one tree of dataclasses.

Every knob of a training run lives here, with its default and a comment saying what it
does. ``load_run_config`` parses strictly (unknown keys and wrong types are errors, via
``toolrl_lib.config``) and then ``validate`` checks the rules that would otherwise only
fail deep inside TRL after minutes of model loading. Both name the offending field.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolrl_lib.config import ConfigError, apply_overrides, from_dict, load_yaml, to_dict
from toolrl_lib.data.example import KINDS
from toolrl_lib.envs.config import MultiTurnSection, multi_turn_violations
from toolrl_lib.train.rlsd import RLSDConfig

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "gspo", "rlsd")
BACKENDS = ("auto", "peft", "unsloth")
DTYPES = ("auto", "bf16", "bfloat16", "fp16", "float16", "fp32", "float32")
REWARD_COMPONENTS = ("format", "name", "args", "reasoning")
LORA_MAX_RANK = 256  # beyond this LoRA stops being "low rank" for any model we target
ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class ModelSection:
    name: str = field(default="embedded", metadata={"help": "\"embedded\", a local model folder or a hub id"})
    family: str = field(default="auto", metadata={"help": "chat-format family (toolrl_lib.prompts.FAMILIES) or \"auto\" = detect"})
    dtype: str = field(default="auto", metadata={"help": "auto = bf16 on CUDA, fp32 on CPU"})
    tf32: bool = field(default=False, metadata={"help": "CUDA, training only (GRPO, SFT): float32 matmuls on TF32 tensor cores (10-bit mantissa), for model.dtype fp32. A float32 trainer otherwise runs them on the plain float32 units, several times slower on Hopper; the colocated vLLM engine and the periodic validation share the process, so their float32 matmuls follow; evaluations in other processes (test tasks, BFCL) stay full float32. Ignored on the CPU"})
    max_seq_length: int = field(default=4096, metadata={"help": "prompt + completion tokens the model must hold"})
    enable_thinking: bool = field(default=False, metadata={"help": "render prompts with the family's thinking switch on"})


@dataclass
class LoraSection:
    r: int = field(default=16, metadata={"help": "adapter rank"})
    alpha: int = field(default=32, metadata={"help": "scaling numerator (effective scale alpha / r)"})
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: list(ALL_PROJECTIONS))
    enabled: bool = field(default=True, metadata={"help": "false = full fine-tuning (all weights, peft backend only): last/ and best/ then hold a full model folder, trained from fp32 master weights (bf16 autocast on GPU)."})


@dataclass
class DataSection:
    train_files: list[str] = field(default_factory=lambda: ["data/processed/smoke/train.jsonl"])
    val_files: list[str] = field(default_factory=lambda: ["data/processed/smoke/val.jsonl"])
    max_train_examples: int | None = field(default=None, metadata={"help": "first N after a seeded shuffle; None = all"})
    max_prompt_tokens: int = field(default=1024, metadata={"help": "longer rendered prompts are dropped (and counted)"})
    oversample_kinds: dict[str, float] | None = field(default=None, metadata={"help": "Repeat the GRPO prompts of some kinds, e.g. {irrelevance: 3.0}: a small no-call share lets updates on call prompts raise the call rate everywhere. Factors >= 1 (2.5 = every example twice, half of them a third time); priming and validation are unchanged."})
    hard_negatives: int = field(default=0, metadata={"help": "Issue 18's data levers (toolrl_lib.train.mix): generated hard no-call prompts (same-domain near misses; required values missing from the query) added to the GRPO mix after oversample_kinds, and a systematic kind order so each rollout round holds every kind in its share (TRL's shuffle off). Priming and validation are unchanged by these two."})
    balance_kinds: bool = False


@dataclass
class RewardSection:
    scheme: str = field(default="weighted", metadata={"help": "one of toolrl_lib.rewards.SCHEMES"})
    weights: dict[str, float] | None = field(default=None, metadata={"help": "per-component weights for \"weighted\""})
    spurious_call: float | None = field(default=None, metadata={"help": "Abstention-aware payouts of the training reward (toolrl_lib.rewards.shaping; validation and BFCL keep the plain schemes). null = the scheme's own value. total for a call when no call is correct"})
    abstention: float | None = field(default=None, metadata={"help": "total for a correct abstention (valid plain text)"})
    args_sharp: bool = field(default=False, metadata={"help": "a non-exact call on a call prompt earns <= a spurious call"})
    strict_format: bool = field(default=False, metadata={"help": "A broken format earns the scheme's minimum (deliberate deviation from BFCL, which reads calls around stray text and counts undecodable text on a no-call prompt as abstention)."})


VLLM_MODES = ("off", "colocate", "server")
VLLM_GPU_MEMORY_DEFAULT = 0.3  # TRL 1.15's vllm_gpu_memory_utilization default, used by both backends


@dataclass
class VLLMSection:
    """GRPO rollouts generated by vLLM (a CUDA GPU and ``pip install -e ".[vllm]"``; docs/SCALING.md).

    peft backend: TRL's engine (``GRPOConfig(use_vllm=True, vllm_mode=...)``, weights synced after
    each optimizer step); unsloth backend: Unsloth's ``fast_inference=True`` (colocate only, LoRA
    applied inside vLLM). ``fast.rollouts: library`` and the multi-turn run do not generate through
    TRL, so they refuse vLLM; ``fast.merged_generation`` steps aside (TRL never calls the generate
    path it hooks). Validation, filtering and priming still generate with transformers."""

    mode: Literal["off", "colocate", "server"] | bool = field(default="off", metadata={"help": "off = TRL's transformers generate (or fast.rollouts); colocate = a vLLM engine inside each training process, sharing its GPU; server = a separate `trl vllm-serve` process (peft backend only). A bare YAML off reads as false: both mean off"})
    gpu_memory_utilization: float | None = field(default=None, metadata={"help": "colocate: the share of the GPU's memory vLLM may take (weights + KV cache), in (0, 1); null = 0.3 (TRL's default). Server mode: give it to trl vllm-serve instead"})
    max_model_len: int | None = field(default=None, metadata={"help": "colocate, peft backend: vLLM's context window; null = data.max_prompt_tokens + grpo.max_completion_length (the unsloth backend sizes vLLM by model.max_seq_length)"})
    kv_cache_gib: float | None = field(default=None, metadata={"help": "colocate, peft backend: a fixed KV cache (GiB) for TRL's engine. vLLM then skips its start-up memory profiling, which asserts when another process on the same GPU frees memory meanwhile (two variants side by side on one H200, 2026-12-04); null = vLLM sizes the cache by profiling within gpu_memory_utilization. A round of 512 completions of the embedded model fits in 6 GiB with prefix caching; on an 80 GB card that freed the memory fast.cuda_graphs' planned widths lacked beside fast.sampler_logps (grpo_throughput.md, run 11: the device peak 50.1 against 62.3 GiB)"})
    max_num_batched_tokens: int | None = field(default=None, metadata={"help": "colocate, peft backend: the most tokens vLLM's scheduler puts in one model step; null = TRL's 4096. TRL 1.15 fixes 4096 (for vLLM's start-up memory profiling), so a round of 512 prompts of ~400 tokens takes ~50 steps of prefill alongside the decodes, unless the copies of a prompt hit the prefix cache. Pair it with kv_cache_gib, which skips that profiling. Why: the engine's own round bounds an overlapped round (run 13: 2.87 s for 512 completions on an H100, alone). Measured with fast.engine_prompt_groups on an H100 (benchmarks/results/grpo_throughput.md, run 14): vLLM's round no shorter (2.54-3.42 against 2.67-3.49 s); fast.engine_processes is what shortened it"})
    dtype: Literal["auto", "float32"] = field(default="auto", metadata={"help": "colocate, peft backend: the engine's weights and compute. auto = the model folder's (bf16 for ours); float32 keeps every LoRA update TRL syncs in (a bf16 engine rounds W + BA to bf16, which drops updates below half a bf16 step of the weight: benchmarks/results/bf16_weight_sync.md); needs model.dtype fp32 so that the merge feeding it is exact too; 4 bytes a parameter, for small models"})
    enable_sleep_mode: bool = field(default=False, metadata={"help": "colocate, peft backend: vLLM offloads its weights and KV cache while the optimizer steps (less GPU memory, a wake-up transfer each round)"})
    tensor_parallel_size: int | None = field(default=None, metadata={"help": "colocate, peft backend: GPUs one vLLM engine spans; null = 1"})
    server_host: str | None = field(default=None, metadata={"help": "server: host of the `trl vllm-serve` process; null = TRL's default (0.0.0.0)"})
    server_port: int | None = field(default=None, metadata={"help": "server: its port; null = TRL's default (8000)"})
    server_timeout: float | None = field(default=None, metadata={"help": "server: seconds to wait for it to come up; null = TRL's default (240)"})
    detokenize: bool = field(default=True, metadata={"help": "peft backend: let vLLM turn sampled tokens into text as it generates (its default). TRL decodes the token ids itself afterwards, so false skips work whose result is never read (SamplingParams(detokenize=False), through GRPOConfig.generation_kwargs)"})
    importance_sampling_correction: bool = field(default=True, metadata={"help": "peft backend: weight each token's loss by the trainer's over vLLM's probability of it (TRL's default, GRPOConfig.vllm_importance_sampling_correction). false trusts vLLM's bf16 sampler to match the trainer. Its cost varied: 73.8 against 98.8 completions/s for the embedded model on an H200 (benchmarks/results/grpo_throughput.md, run 1), nothing measurable on an H100 (111.4 with it against 101.9 without, run 5). Where a round spans several optimizer steps (gradient_accumulation_steps not a multiple of steps_per_generation, every GPU recipe here) TRL 1.15 runs its log-prob forward over the round either way, so that forward is not what false saves; what is was not profiled"})

    def __post_init__(self) -> None:
        if self.mode is False:  # YAML 1.1: `mode: off` is the boolean false
            self.mode = "off"

    @property
    def on(self) -> bool:
        return self.mode in ("colocate", "server")


@dataclass
class GRPOSection:
    loss_type: Literal["grpo", "dapo", "dr_grpo", "gspo", "rlsd"] = "dapo"
    num_generations: int = field(default=8, metadata={"help": "completions per prompt (the group); >= 2"})
    beta: float = field(default=0.0, metadata={"help": "KL weight; > 0 keeps a reference model (the adapter disabled)"})
    epsilon: float = field(default=0.2, metadata={"help": "lower clip of the importance ratio"})
    epsilon_high: float | None = field(default=None, metadata={"help": "upper clip (DAPO's clip-higher); None = epsilon"})
    scale_rewards: Literal["group", "batch", "none"] = field(default="group", metadata={"help": "\"none\" = Dr. GRPO"})
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 256
    per_device_train_batch_size: int = field(default=8, metadata={"help": "completions per device per micro-step"})
    gradient_accumulation_steps: int = 4
    generation_batch_size: int | None = field(default=None, metadata={"help": "completions per generation round; None = TRL's"})
    num_iterations: int = field(default=1, metadata={"help": "optimisation passes per generation round (mu)"})
    mask_truncated_completions: bool = False
    learning_rate: float = 1e-5
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_steps: int = field(default=-1, metadata={"help": "> 0 overrides num_train_epochs"})
    num_train_epochs: float = 1.0
    gradient_checkpointing: bool = False
    vllm: VLLMSection = field(default_factory=VLLMSection, metadata={"help": "rollouts generated by vLLM (GPU only)"})


@dataclass
class PrimingSection:
    """Format priming: a short SFT on ground-truth completions before GRPO."""

    enabled: bool = False
    num_examples: int = field(default=256, metadata={"help": "training examples used (the first N after shuffling)"})
    shortest_of: int = field(default=0, metadata={"help": "prime on the num_examples shortest examples (prompt + completion tokens) among the first N after shuffling, kept in their order (0: the first num_examples). Priming's CPU time grows with its tokens; benchmarks/priming_variants.py measures what the choice does to the primed model"})
    max_steps: int = 32
    learning_rate: float = 1e-3
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_length: int = field(default=2048, metadata={"help": "prompt + completion tokens"})
    lora_r: int = 16
    lora_alpha: int = 32
    top_layers: int = field(default=0, metadata={"help": "LoRA on the top N decoder layers only (0: every layer). Nothing below the lowest adapted layer needs a gradient, so the backward stops there: priming's compute falls by up to a third at half the layers (benchmarks/priming_variants.py measures what it does to the primed model)"})


SFT_METHODS = ("lora", "full")


@dataclass
class SFTSection:
    """``toolrl sft``: supervised fine-tuning on the ground truth of ``data.train_files`` (loss on the
    assistant's tokens only), the GRPO warm start; priming grown up: whole epochs, LoRA or full
    fine-tuning, the best checkpoint kept by eval loss on ``data.val_files``, resumable across calls."""

    method: Literal["lora", "full"] = field(default="lora", metadata={"help": "lora = a LoRA adapter (sft.lora_r/lora_alpha, targets lora.target_modules), merged into the saved model; full = every weight, from fp32 master weights (bf16 autocast on GPU)"})
    epochs: float = field(default=1.0, metadata={"help": "passes over the training rows (fractions allowed); sft.max_steps > 0 overrides it"})
    max_steps: int = field(default=-1, metadata={"help": "> 0: stop after this many optimizer steps instead of sft.epochs"})
    num_examples: int | None = field(default=None, metadata={"help": "training examples used, the first N after a seeded shuffle of data.train_files (data.max_train_examples is GRPO's, not read here); null or 0 = all"})
    learning_rate: float = field(default=2e-4, metadata={"help": "peak learning rate (LoRA likes ~1e-4..1e-3; full fine-tuning ~1e-5..5e-5)"})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "transformers' schedule name: constant, linear, cosine, constant_with_warmup, ..."})
    warmup_steps: float = field(default=0.03, metadata={"help": "linear warm-up: >= 1 = steps, in [0, 1) = a share of all steps"})
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    batch_size: int = field(default=8, metadata={"help": "rows per device per micro-step"})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "micro-steps per optimizer step"})
    max_length: int = field(default=2048, metadata={"help": "prompt + completion tokens; longer rows are dropped (and counted), never cut"})
    lora_r: int = 16
    lora_alpha: int = 32
    eval_steps: int = field(default=100, metadata={"help": "eval loss (assistant tokens only) on data.val_files every N optimizer steps, and at the end"})
    eval_examples: int | None = field(default=None, metadata={"help": "validation examples scored, the first N of data.val_files; null or 0 = all"})
    eval_batch_size: int = 16
    save_steps: int = field(default=100, metadata={"help": "a resumable checkpoint every N optimizer steps (a multiple of sft.eval_steps when sft.load_best)"})
    save_total_limit: int | None = field(default=2, metadata={"help": "keep the newest N checkpoints (the best one is kept besides); null = all"})
    load_best: bool = field(default=True, metadata={"help": "the saved model is the checkpoint with the lowest eval loss (false: the last step)"})
    time_budget_s: float = field(default=0.0, metadata={"help": "> 0: once this many seconds have passed since the command started, save a checkpoint after the current step and stop; `toolrl sft --resume` goes on from there (leave a margin for loading, the save and an evaluation). 0 = no limit"})
    gradient_checkpointing: bool = False
    dataset_num_proc: int | None = field(default=None, metadata={"help": "processes that tokenise the rows before training (TRL's dataset_num_proc): 16,000 broad rows take ~40 s in one; null = one"})


@dataclass
class FilteringSection:
    """Drop prompts the start model always or never solves: their groups carry no advantage."""

    enabled: bool = False
    k: int = field(default=8, metadata={"help": "samples per prompt to estimate its pass rate"})
    max_new_tokens: int = 256
    temperature: float = 1.0
    batch_size: int = 16
    drop_always_solved: bool = True
    drop_never_solved: bool = True
    solved_threshold: float = field(default=1.0, metadata={"help": "a sample \"solves\" the prompt when binary reward >= this"})


@dataclass
class ValidationSection:
    enabled: bool = True
    every_steps: int = field(default=50, metadata={"help": "0 = only before and after training"})
    num_examples: int = field(default=64, metadata={"help": "validation examples scored (chosen by `selection`)"})
    selection: Literal["stratified", "first"] = field(default="stratified", metadata={"help": "stratified: round-robin over kinds"})
    k: int = field(default=16, metadata={"help": "samples per prompt for mean@k"})
    schemes: list[str] = field(default_factory=lambda: ["binary", "weighted"])
    best_scheme: str = field(default="binary", metadata={"help": "best/ = highest \"<best_scheme>_<best_metric>@<k>\""})
    best_metric: Literal["mean", "summary"] = field(default="mean", metadata={"help": "mean = plain mean@k over the examples; summary = BFCL-like: call kinds 2/3, the no-call kind 1/3 (toolrl_lib.evaluate.mean_at_k.kind_scores), as BFCL weighs AST vs irrelevance"})
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    batch_size: int = 16
    before_training: bool = field(default=True, metadata={"help": "also score the start model(s): the \"before\" numbers"})
    hard_negatives: int = field(default=0, metadata={"help": "generated hard no-call examples added to the validation set"})
    vllm: bool = field(default=True, metadata={"help": "periodic validation samples through the run's colocated vLLM engine when it has one (weights synced first; sleep mode excepted), else transformers' generate"})


@dataclass
class CheckpointSection:
    save_steps: int = field(default=50, metadata={"help": "a resumable checkpoint every N optimizer steps"})
    save_total_limit: int | None = field(default=3, metadata={"help": "keep the newest N checkpoints; None = all"})


@dataclass
class LoggingSection:
    logging_steps: int = 1
    tensorboard: bool = True
    wandb: Literal["auto", "off"] = field(default="auto", metadata={"help": "auto = only when WANDB_API_KEY is set"})
    wandb_project: str = "toolrl"
    progress_bar: bool = True
    log_completions: bool = field(default=False, metadata={"help": "TRL's sampled-completion tables"})


@dataclass
class FastSection:
    """The opt-in speed and memory layer (``toolrl_lib.fast``; what each option changes and where
    it was measured: that package's docstring). All off = TRL's own loop, nothing hooked."""

    rollouts: Literal["trl", "library"] = field(default="trl", metadata={"help": "Who samples the GRPO completions: \"trl\" (transformers' generate inside TRL) or \"library\" (toolrl_lib.generation through TRL's rollout_func: one prefill per prompt for its whole group, an in-place cache; faster on CPU; peft backend, plain GRPO losses only)"})
    merged_generation: bool = field(default=False, metadata={"help": "Roll out with W + sBA in a copy of the adapted weights, adapters off (LoRA only): one matmul per projection while decoding instead of three; +1 weight copy of memory. Applies to TRL's sampler, the library rollouts and multi-turn episodes. Under unsloth the run first checks that its patched layers honour the adapter switch."})
    shared_prompt: bool = field(default=False, metadata={"help": "Loss forward with each distinct prompt of a micro-batch run once for all its completions (toolrl_lib/fast/shared_prompt.py): same log-probs, far less compute when per_device_train_batch_size holds several completions of a prompt; peft backend, not rlsd"})
    group_batches: bool = field(default=False, metadata={"help": "Each rollout round shuffled by whole groups instead of rows (toolrl_lib/fast/group_batches.py), so that a micro-batch holds per_device_train_batch_size / num_generations whole groups and fast.shared_prompt can share their prompts; the rows, advantages and losses are unchanged, only which completions share an optimizer step"})
    bf16_lora_inputs: bool = field(default=False, metadata={"help": "bf16 runs: the LoRA branches of the loss forwards read the bf16 activations as they are instead of a float32 copy that autocast casts straight back (PEFT's disable_input_dtype_casting; toolrl_lib/fast/lora_inputs.py): the same numbers, two activation copies fewer per adapted projection"})
    fused_lora: bool = field(default=False, metadata={"help": "Each LoRA projection as one autograd node (toolrl_lib/fast/fused_lora.py): x W^T + s (x A^T) B^T in three matmuls forward and five backward, instead of PEFT's three linear layers, multiply, add and casts, each its own kernel and node; same numbers up to float rounding. A third fewer aten ops per forward and backward (benchmarks/results/lora_host_cost.md), but an H100's mid-round step of the embedded model stayed at 0.28 s (benchmarks/results/grpo_throughput.md, run 5). Peft backend with lora.enabled (Unsloth fuses its own); projections with dropout, DoRA or merged adapters keep PEFT's forward"})
    round_logprob_rows: int = field(default=0, metadata={"help": "Rows per forward of TRL's no-grad log-prob pass over a rollout round (its old_per_token_logps, run whenever a round spans several optimizer steps; toolrl_lib/fast/round_logprobs.py); 0 = TRL's per_device_train_batch_size. Without gradients (and with TRL's fused LM head) far larger chunks fit; on a GPU each chunk costs about the same host time to launch, so a round of 512 in one chunk instead of 8 saves seven forwards' launches (H100, run 5: a round's first step 2.7-3.3 -> 2.3-2.7 s). With fast.shared_prompt, chunks take whole groups, shortest prompts first: a chunk of 128 rows pads its prompt forward to 1.20x the real tokens where the round in one chunk pads to 1.96x (benchmarks/results/round_logprob_padding.md; the seconds of 128 and 256 not yet measured). Same log-probs up to float rounding"})
    sampler_logps: bool = field(default=False, metadata={"help": "vLLM rollouts: the round's old log-probs (PPO's ratio denominator) are the log-probs vLLM sampled each token with, instead of TRL's no-grad forward over the whole round (toolrl_lib/fast/sampler_logps.py; that forward took ~0.9-1.0 s of each round of 512 on an H100, run 6). A change of algorithm: the ratio is then taken against the policy that sampled (vLLM's bf16 kernels; under fast.overlap_generation one round staler), TRL's importance-sampling correction becomes exactly 1, and the clip range absorbs the engine's difference from the trainer. A round whose log-probs are missing, not finite or do not match its completions runs the forward as before (counted in run_info's sampler_logps). Needs grpo.vllm on with importance_sampling_correction true (TRL then always makes that call, right after the rollout), the peft backend, fast.rollouts trl, a loss other than rlsd and a single-turn run. On an H100 with the engine-process overlap: 88.4 against 99.3 completions/s for its twin in run 8, 103.5 and 90.2 against 87.8-88.5 in run 9 (111.5 and 103.3 with CUDA MPS; benchmarks/results/grpo_throughput.md); with fast.cuda_graphs 146.6 against 163.9 for the graphs with the round's forward in chunks of 64 (run 10, one planned width out of memory)"})
    compile_layers: bool = field(default=False, metadata={"help": "GPU: the trainer's decoder layers compiled once for all layers (regional torch.compile, toolrl_lib/fast/compiled_layers.py): fewer, fused kernels in the loss forwards and backwards, where a small model's step is bound by kernel launches; same numbers up to float rounding, a start-up cost per graph. Needs vLLM for rollouts and validation (transformers' generate would recompile per layer) and the peft backend. Measured slower on an H100 with the embedded model: 94.5 against 112.4 completions/s eager in the same run (benchmarks/results/grpo_throughput.md, run 3)"})
    cuda_graphs: bool = field(default=False, metadata={"help": "GPU: fast.shared_prompt's two backbone passes (prompts, then their completions) replayed from CUDA graphs (toolrl_lib/fast/cuda_graphs.py): recorded per shape with torch.cuda.make_graphed_callables (forward and backward) or one captured forward without gradients, eager's kernels, so the same numbers; the prompts' width rounded up to 64 tokens and the completions' to 32 (masked). A small model's step is bound by the host launching ~5,000 kernels one at a time; a replay launches them in one call. Costs a recording per new shape and the graphs' memory pool. Needs device cuda, fast.shared_prompt, the peft backend, not fast.compile_layers, and one micro-batch per optimizer step (a replay overwrites the last one's gradients). Every width bucket of the training prompts (at most 16, those holding the most prompts) is recorded at each mode's first recording (cuda_graphs.planned_widths), so later steps meet few new shapes (a recording waits for the overlapped generation). Replays give eager's log-probs exactly on the same padded shapes and gradients to fp32 rounding (benchmarks/results/cuda_graphs_check.md, run 9). Runs 8-9 on an H100 (benchmarks/results/grpo_throughput.md), before the planned widths: replayed mid-round steps 0.18-0.21 s against 0.33-0.53 s eager, yet 24 timed steps slower (75.2 against 88.1 completions/s in run 9), new shapes recorded inside them. Run 10, planned widths (24 graphs recorded in the first round, none after), with fast.round_logprob_rows 64 and the engine-overlap recipe: 163.9 and 135.2 completions/s in two calls against 88.9 eager, 6.85x TRL's generate in the same call"})
    trim_padding: bool = field(default=False, metadata={"help": "Every log-prob forward of the trainer cut to its rows' own length (toolrl_lib/fast/trim_padding.py): rows in length order, chunks without the round's common padding, and (dapo, grpo, dr_grpo) each optimizer step's rows sorted by length before they are split into micro-batches; the same log-probs and gradient up to float rounding, far fewer tokens where lengths vary (multi-turn episodes). Peft backend, not rlsd, not with fast.shared_prompt"})
    skip_zero_advantage: bool = field(default=True, metadata={"help": "A micro-batch whose completions all have advantage 0 skips the model's forward and backward (toolrl_lib/fast/zero_advantage.py): its loss and gradient are exactly 0 either way"})
    loss_mmap_threshold: int = field(default=0, metadata={"help": "CPU (glibc): while the loss runs forward and back, blocks of at least this many bytes get their own mapping and go back to the OS when freed (toolrl_lib/fast/loss_memory.py); 0 = the allocator's default. The smoke profile's 1 MiB: 4 GRPO steps peaked at 3.42 instead of 3.97 GiB for 7% more step time (benchmarks/results/grpo_memory.md)"})
    priming_mmap_threshold: int = field(default=0, metadata={"help": "CPU (glibc): while priming trains, blocks of at least this many bytes get their own mapping and go back to the OS when freed (toolrl_lib.fast.memory.set_mmap_threshold; as loss_mmap_threshold); 0 = the allocator's default"})
    overlap_generation: bool = field(default=False, metadata={"help": "GPU, vLLM colocate: the next rollout round generated on a worker thread (its own CUDA stream) while the trainer scores this round and takes its optimizer steps (toolrl_lib/fast/overlap.py). Each round is then sampled from the weights at the start of the round before: one round (steps_per_generation optimizer steps) staler than TRL's loop, which grpo.vllm.importance_sampling_correction (keep it on) reweights. One process, tensor_parallel_size 1, no sleep mode, the peft backend, single-turn runs. Alone, measured slower for the embedded model on an H100: 105.6 against 111.9 completions/s in the same run (benchmarks/results/grpo_throughput.md, run 4): both halves are Python-bound on the host and one interpreter lock runs one thread at a time. With fast.generation_process (the engine in a process of its own) faster: 128.2 against 107.0 completions/s without the overlap (run 6)"})
    generation_process: bool = field(default=False, metadata={"help": "GPU, vLLM colocate: TRL's engine in a process of its own on the same GPU (toolrl_lib/fast/engine_process.py): TRL's LLM(...) becomes a client that sends each round's prompt ids over a pipe and gets token ids and log-probs back; weights are synced through CUDA IPC buffers the engine mapped once. Alone it changes only where generation runs; with fast.overlap_generation the next round is generated outside the trainer's interpreter, where a thread shares its lock. Measured on one H100 with fast.overlap_generation: 128.2 against 107.0 completions/s without the overlap (benchmarks/results/grpo_throughput.md, run 6). One GPU per engine (tensor_parallel_size 1), no sleep mode, the peft backend, single-turn runs"})
    engine_core_process: bool = field(default=False, metadata={"help": "GPU, with fast.generation_process: vLLM's engine core (its scheduler and the model's steps) in a process of its own beneath the engine process (vLLM's multiprocessing, VLLM_ENABLE_V1_MULTIPROCESSING=1), so that the engine process's handling of each step's outputs (the sampled tokens and their log-probs, 512 requests a step in a round of 512) runs beside the model's next steps instead of between them. Measured no faster on an H100 (benchmarks/results/grpo_throughput.md, run 11: 133.4 against 132.7 completions/s in one call, 151.6 against 157.0 with fast.sampler_logps in another): the overlapped generation is slow for sharing the GPU with the trainer, not for its host-side work. Off: one engine process does both in turn"})
    engine_sm_percent: int = field(default=0, metadata={"help": "GPU, with fast.generation_process, under CUDA MPS: the largest share of the GPU's SMs, in percent, that the engine process may use (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, set in the engine process before vLLM creates its CUDA context; toolrl_lib/fast/engine_process.py). 0: no cap of its own (it inherits the trainer's environment). The trainer's own cap is the same variable in the trainer's environment when it starts (benchmarks/gpu/grpo_throughput.py's *_mps_e<E>t<T> variants set both). Without an MPS server the variable does nothing and the two processes take turns on the GPU in time slices. Why: under MPS without caps the trainer's large kernels took every SM from the engine's small decode steps (run 12: the engine's round 4.45 s against 3.50 s without MPS, benchmarks/results/grpo_throughput.md). Measured on an H100 (run 13): engine 50 / trainer 50 153.9 against 162.8 completions/s without MPS (the trainer, slowed by its cap, became the bound); engine 30 / trainer 70 gave wrong generations (every completion at the length limit, vLLM's log-probs 7.7 nats a token off the trainer's; fast.sampler_logps refused them): do not go below 50 until that is understood"})
    engine_prompt_groups: bool = field(default=False, metadata={"help": "GPU, with fast.generation_process: each group's G copies of a prompt, which TRL's colocated engine sends as G requests of one sample each, sent to vLLM as one request of G samples (n = G; toolrl_lib/fast/engine_process.py generate_in_groups), the samples handed back in the same order. The same sampling distribution; the prompt is taken in once per group instead of G times. Not when the call already asks for several samples or fixes a seed. Why: with the overlap the engine's own round bounds a round (run 13: 2.87 s for 512 completions on an H100 with the GPU to itself). Measured with grpo.vllm.max_num_batched_tokens=32768 on an H100 (run 14): vLLM's round no shorter (2.54-3.42 against 2.67-3.49 s), since it is bound by host-side work per decode step, not by prompts"})
    engine_processes: int = field(default=1, metadata={"help": "GPU, with fast.generation_process: how many vLLM engines, each in a process of its own on the same GPU, share each round (toolrl_lib/fast/engine_process.py EnginePool): each takes a contiguous share of the round's groups, all generate at once, and the outputs come back in order; every engine maps the same weight buffers and gets its own seed (TRL's + its index). Needs grpo.vllm.kv_cache_gib (a fixed KV cache per engine: vLLM's start-up memory profiling cannot share a GPU between engines). Why: for a small model vLLM's round is bound by host-side work per model step (its scheduler and every running request's outputs), and the GPU sat idle for most of run 13's rounds; two engines each carry half of it. Each engine costs its own weights, KV cache and CUDA graphs in GPU memory (~8 GiB each here with a 6 GiB cache). Measured on an H100 (benchmarks/results/grpo_throughput.md, run 14): vLLM's round 1.57-1.92 s against 2.67-3.49 s with one engine, 149.3 against 141.0 completions/s in the same call; the trainer, whose steps share the GPU with three processes' time slices, then bounds the round"})
    prompt_token_cache: bool = field(default=False, metadata={"help": "Each distinct prompt rendered and tokenised once per run instead of once per row and round (toolrl_lib/fast/prompt_tokens.py): TRL's own _tokenize_prompts tokenises the prompts not seen before, the ids are kept under the prompt's text (or a conversation's JSON). Same ids (tested against TRL's). Text prompts and text conversations without environments; other prompts go to TRL's method untouched. Run 12's profile put TRL's tokenisation and the overlap's of the next round at ~0.2 s of each round's first step on the trainer's main thread (benchmarks/results/grpo_step_profile_run12.md); on the CPU a round of 512 rows takes 123 ms with TRL's method, 3-20 ms with the cache (benchmarks/results/prompt_token_cache.md). On an H100 one call ran 140.1 completions/s against 162.8 for its twin in another call (run 13), with one slow round and the engine's generation the bound: no GPU gain shown yet. Off by default"})
    generation_times: bool = field(default=False, metadata={"help": "generation_times.rank<r>.jsonl per process: seconds per rollout round (multi-GPU waits; toolrl_lib/fast/gen_timing.py)"})


# Keys that left their section: a config naming one fails with the new place (or why it went).
MOVED_KEYS = {
    "grpo.rollouts": "fast.rollouts",
    "grpo.merged_generation": "fast.merged_generation",
    "grpo.shared_prompt": "fast.shared_prompt",
    "grpo.loss_mmap_threshold": "fast.loss_mmap_threshold",
    "priming.mmap_threshold": "fast.priming_mmap_threshold",
    "logging.generation_times": "fast.generation_times",
}
REMOVED_KEYS = {
    "priming.prompt_gradient": "removed: priming without the prompt's gradient was measured worse "
                               "(benchmarks/results/priming_detached.md); delete the key",
}


def check_moved_keys(data: dict[str, Any]) -> None:
    """Raise a ConfigError naming the new key for every old speed key in ``data``."""
    problems = []
    for old, new in MOVED_KEYS.items():
        section, key = old.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            problems.append(f"{old} moved to {new} (the fast: section); rename it")
    for old, why in REMOVED_KEYS.items():
        section, key = old.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            problems.append(f"{old}: {why}")
    if problems:
        raise ConfigError("outdated run config keys:\n  - " + "\n  - ".join(problems))


@dataclass
class RunConfig:
    """Everything one GRPO run needs; saved as ``<run>/config.yaml``."""

    name: str = "run"
    seed: int = 0
    backend: Literal["auto", "peft", "unsloth"] = field(default="auto", metadata={"help": "auto = unsloth on CUDA if importable"})
    device: Literal["auto", "cpu", "cuda"] = "auto"
    model: ModelSection = field(default_factory=ModelSection)
    lora: LoraSection = field(default_factory=LoraSection)
    data: DataSection = field(default_factory=DataSection)
    reward: RewardSection = field(default_factory=RewardSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    priming: PrimingSection = field(default_factory=PrimingSection)
    sft: SFTSection = field(default_factory=SFTSection, metadata={"help": "`toolrl sft`: the supervised warm start (toolrl_lib.train.sft)"})
    filtering: FilteringSection = field(default_factory=FilteringSection)
    validation: ValidationSection = field(default_factory=ValidationSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    fast: FastSection = field(default_factory=FastSection, metadata={"help": "the opt-in speed and memory layer (toolrl_lib.fast)"})
    rlsd: RLSDConfig = field(default_factory=RLSDConfig)
    multi_turn: MultiTurnSection = field(default_factory=MultiTurnSection, metadata={"help": "episodes in our tool environments instead of single-turn prompts (toolrl_lib.envs)"})

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def best_validation_key(v: ValidationSection) -> str:
    """The validation.csv column that picks best/ (and variants): e.g. ``binary_summary@16``."""
    return f"{v.best_scheme}_{v.best_metric}@{v.k}"


def world_size() -> int:
    """Processes accelerate will launch (1 unless run under ``accelerate launch``/torchrun)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def generation_batch_size(grpo: GRPOSection, processes: int = 1) -> int:
    """Completions generated per round, as TRL computes it when not set explicitly."""
    if grpo.generation_batch_size is not None:
        return grpo.generation_batch_size
    return grpo.per_device_train_batch_size * processes * grpo.gradient_accumulation_steps


def validate(config: RunConfig, processes: int | None = None) -> RunConfig:
    """Check cross-field rules before any model loads; raise one ConfigError listing all."""
    processes = processes or world_size()
    problems = [f"{key} = {value!r}: {rule}" for key, value, rule in _violations(config, processes)]
    if problems:
        raise ConfigError("invalid run config:\n  - " + "\n  - ".join(problems))
    return config


Rule = Callable[[bool, str, Any, str], None]


def _violations(c: RunConfig, processes: int) -> list[tuple[str, Any, str]]:
    """Every broken rule as ``(key, value, what is expected)``, section by section."""
    out: list[tuple[str, Any, str]] = []

    def rule(ok: bool, key: str, value: Any, text: str) -> None:
        if not ok:
            out.append((key, value, text))

    _model_rules(c, rule)
    _lora_rules(c, rule)
    _data_rules(c, rule)
    _reward_rules(c, rule)
    _grpo_rules(c, rule, processes)
    _priming_rules(c, rule)
    _sft_rules(c, rule)
    _filtering_rules(c, rule)
    _validation_rules(c, rule)
    _checkpoint_logging_rules(c, rule)
    _fast_rules(c, rule)
    _vllm_rules(c, rule, c.backend)
    return out + multi_turn_violations(c)


def _model_rules(c: RunConfig, rule: Rule) -> None:
    """model.*: name, family, dtype, length."""
    rule(bool(c.model.name.strip()), "model.name", c.model.name, "must not be empty")
    families = _families()
    rule(c.model.family == "auto" or c.model.family in families, "model.family", c.model.family,
         f"must be 'auto' or one of {list(families)}")
    rule(c.model.dtype in DTYPES, "model.dtype", c.model.dtype, f"must be one of {list(DTYPES)}")
    rule(c.model.max_seq_length >= 16, "model.max_seq_length", c.model.max_seq_length, "must be >= 16")


def _lora_rules(c: RunConfig, rule: Rule) -> None:
    """lora.* and what full fine-tuning excludes."""
    lora = c.lora
    rule(lora.enabled or c.backend != "unsloth", "lora.enabled", lora.enabled,
         "full fine-tuning (false) needs backend 'peft' (or auto); the unsloth backend trains "
         "LoRA adapters only")
    rule(1 <= lora.r <= LORA_MAX_RANK, "lora.r", lora.r, f"LoRA rank must be in [1, {LORA_MAX_RANK}]")
    rule(lora.alpha > 0, "lora.alpha", lora.alpha, "must be > 0")
    rule(0.0 <= lora.dropout < 1.0, "lora.dropout", lora.dropout, "must be in [0, 1)")
    rule(bool(lora.target_modules), "lora.target_modules", lora.target_modules, "must not be empty")


def _data_rules(c: RunConfig, rule: Rule) -> None:
    """data.*: files, caps, oversampling, prompt length within the window."""
    g = c.grpo
    rule(bool(c.data.train_files), "data.train_files", c.data.train_files, "needs at least one file")
    rule(c.data.max_train_examples is None or c.data.max_train_examples >= 1,
         "data.max_train_examples", c.data.max_train_examples, "must be >= 1 or null")
    for kind, factor in (c.data.oversample_kinds or {}).items():
        rule(kind in KINDS, f"data.oversample_kinds.{kind}", kind, f"must be one of {list(KINDS)}")
        rule(isinstance(factor, int | float) and factor >= 1, f"data.oversample_kinds.{kind}", factor,
             "must be a number >= 1 (1 = as is, 2 = every example twice)")
    rule(c.data.max_prompt_tokens >= 1, "data.max_prompt_tokens", c.data.max_prompt_tokens, "must be >= 1")
    rule(c.data.max_prompt_tokens + g.max_completion_length <= c.model.max_seq_length,
         "data.max_prompt_tokens", c.data.max_prompt_tokens,
         f"max_prompt_tokens + grpo.max_completion_length ({g.max_completion_length}) must fit "
         f"model.max_seq_length ({c.model.max_seq_length})")


def _reward_rules(c: RunConfig, rule: Rule) -> None:
    """reward.*: scheme, payouts within its range, weights."""
    schemes = _schemes()
    rule(c.reward.scheme in schemes, "reward.scheme", c.reward.scheme, f"must be one of {list(schemes)}")
    lo_hi = _reward_ranges().get(c.reward.scheme)
    for name in ("spurious_call", "abstention"):
        value = getattr(c.reward, name)
        rule(value is None or lo_hi is None or lo_hi[0] <= value <= lo_hi[1], f"reward.{name}", value,
             f"must lie in the {c.reward.scheme} range {list(lo_hi or ())} or be null")
    for name in c.reward.weights or {}:
        rule(name in REWARD_COMPONENTS, f"reward.weights.{name}", c.reward.weights[name],
             f"unknown reward component; use {list(REWARD_COMPONENTS)}")


def _grpo_rules(c: RunConfig, rule: Rule, processes: int) -> None:
    """grpo.*: loss, group size, batch divisibility, clipping, sampling, optimiser."""
    g = c.grpo
    rule(g.loss_type in LOSS_TYPES, "grpo.loss_type", g.loss_type, f"unknown loss type; use {list(LOSS_TYPES)}")
    rule(g.num_generations >= 2, "grpo.num_generations", g.num_generations,
         "must be >= 2 (with one completion per prompt the group-relative advantage is always 0)")
    gen_batch = generation_batch_size(g, processes)
    if g.num_generations >= 1:
        rule(gen_batch % g.num_generations == 0, "grpo.generation_batch_size", gen_batch,
             f"generation batch (per_device_train_batch_size x processes ({processes}) x "
             f"gradient_accumulation_steps unless set) must be divisible by "
             f"grpo.num_generations ({g.num_generations})")
    if g.generation_batch_size is not None:
        global_batch = g.per_device_train_batch_size * processes
        rule(g.generation_batch_size % max(global_batch, 1) == 0, "grpo.generation_batch_size",
             g.generation_batch_size,
             f"must be divisible by the global batch (per_device_train_batch_size x processes = "
             f"{global_batch})")
    rule(g.beta >= 0, "grpo.beta", g.beta, "must be >= 0")
    rule(g.epsilon > 0, "grpo.epsilon", g.epsilon, "must be > 0")
    rule(g.epsilon_high is None or g.epsilon_high >= g.epsilon, "grpo.epsilon_high", g.epsilon_high,
         f"must be >= grpo.epsilon ({g.epsilon}) or null")
    rule(g.temperature > 0, "grpo.temperature", g.temperature, "must be > 0 (GRPO samples)")
    rule(0 < g.top_p <= 1, "grpo.top_p", g.top_p, "must be in (0, 1]")
    rule(g.max_completion_length >= 1, "grpo.max_completion_length", g.max_completion_length, "must be >= 1")
    rule(g.per_device_train_batch_size >= 1, "grpo.per_device_train_batch_size",
         g.per_device_train_batch_size, "must be >= 1")
    rule(g.gradient_accumulation_steps >= 1, "grpo.gradient_accumulation_steps",
         g.gradient_accumulation_steps, "must be >= 1")
    rule(g.num_iterations >= 1, "grpo.num_iterations", g.num_iterations, "must be >= 1")
    rule(g.learning_rate > 0, "grpo.learning_rate", g.learning_rate, "must be > 0")
    rule(g.warmup_steps >= 0, "grpo.warmup_steps", g.warmup_steps, "must be >= 0")
    rule(g.max_steps > 0 or g.num_train_epochs > 0, "grpo.max_steps", g.max_steps,
         "set max_steps > 0 or num_train_epochs > 0")


def _priming_rules(c: RunConfig, rule: Rule) -> None:
    """priming.* (when enabled)."""
    p = c.priming
    if p.enabled:
        rule(p.max_steps >= 1, "priming.max_steps", p.max_steps, "must be >= 1 when priming is enabled")
        rule(p.num_examples >= 1, "priming.num_examples", p.num_examples, "must be >= 1")
        rule(p.shortest_of == 0 or p.shortest_of >= p.num_examples, "priming.shortest_of", p.shortest_of,
             f"must be 0 (off) or >= priming.num_examples ({p.num_examples})")
        rule(p.batch_size >= 1, "priming.batch_size", p.batch_size, "must be >= 1")
        rule(p.learning_rate > 0, "priming.learning_rate", p.learning_rate, "must be > 0")
        rule(1 <= p.lora_r <= LORA_MAX_RANK, "priming.lora_r", p.lora_r,
             f"LoRA rank must be in [1, {LORA_MAX_RANK}]")
        rule(p.top_layers >= 0, "priming.top_layers", p.top_layers, "must be >= 0 (0: every layer)")


def _sft_rules(c: RunConfig, rule: Rule) -> None:
    """sft.* (always: its defaults are valid, so a GRPO config is never refused for them)."""
    s = c.sft
    rule(s.method in SFT_METHODS, "sft.method", s.method, f"must be one of {list(SFT_METHODS)}")
    rule(s.max_steps > 0 or s.epochs > 0, "sft.epochs", s.epochs, "set sft.epochs > 0 or sft.max_steps > 0")
    rule(s.max_steps == -1 or s.max_steps >= 1, "sft.max_steps", s.max_steps, "must be >= 1, or -1 (use sft.epochs)")
    rule(s.dataset_num_proc is None or s.dataset_num_proc >= 1, "sft.dataset_num_proc", s.dataset_num_proc,
         "must be >= 1 or null")
    rule(s.num_examples is None or s.num_examples >= 0, "sft.num_examples", s.num_examples,
         "must be >= 1, or null / 0 (all)")
    rule(s.learning_rate > 0, "sft.learning_rate", s.learning_rate, "must be > 0")
    rule(s.warmup_steps >= 0, "sft.warmup_steps", s.warmup_steps, "must be >= 0 (>= 1: steps, < 1: a share)")
    rule(s.weight_decay >= 0, "sft.weight_decay", s.weight_decay, "must be >= 0")
    rule(s.max_grad_norm > 0, "sft.max_grad_norm", s.max_grad_norm, "must be > 0")
    for name in ("batch_size", "gradient_accumulation_steps", "eval_batch_size", "eval_steps", "save_steps"):
        rule(getattr(s, name) >= 1, f"sft.{name}", getattr(s, name), "must be >= 1")
    rule(s.max_length >= 16, "sft.max_length", s.max_length, "must be >= 16")
    if s.method == "lora":
        rule(1 <= s.lora_r <= LORA_MAX_RANK, "sft.lora_r", s.lora_r, f"LoRA rank must be in [1, {LORA_MAX_RANK}]")
        rule(s.lora_alpha > 0, "sft.lora_alpha", s.lora_alpha, "must be > 0")
    rule(s.eval_examples is None or s.eval_examples >= 0, "sft.eval_examples", s.eval_examples,
         "must be >= 1, or null / 0 (all)")
    rule(s.save_total_limit is None or s.save_total_limit >= 1, "sft.save_total_limit", s.save_total_limit,
         "must be >= 1 or null")
    rule(not s.load_best or s.eval_steps < 1 or s.save_steps % s.eval_steps == 0, "sft.save_steps",
         s.save_steps, f"must be a multiple of sft.eval_steps ({s.eval_steps}) when sft.load_best "
         "(the best checkpoint is chosen among evaluated, saved steps)")
    rule(s.time_budget_s >= 0, "sft.time_budget_s", s.time_budget_s, "must be >= 0 seconds (0: no limit)")


def sft_violations(c: RunConfig) -> list[tuple[str, Any, str]]:
    """What ``toolrl sft`` needs beyond ``validate``: the files it trains on and selects with."""
    out = []
    if not c.data.train_files:
        out.append(("data.train_files", c.data.train_files, "SFT needs at least one training file"))
    if not c.data.val_files:
        out.append(("data.val_files", c.data.val_files, "SFT evaluates (and picks its best "
                    "checkpoint) on the validation files: give at least one"))
    return out


def validate_sft(config: RunConfig) -> RunConfig:
    """``validate`` plus the SFT stage's own needs; raise one ConfigError listing all."""
    found = _violations(config, 1) + sft_violations(config)
    problems = [f"{key} = {value!r}: {text}" for key, value, text in found]
    if problems:
        raise ConfigError("invalid run config for sft:\n  - " + "\n  - ".join(problems))
    return config


def _filtering_rules(c: RunConfig, rule: Rule) -> None:
    """filtering.* (when enabled)."""
    f = c.filtering
    if f.enabled:
        rule(f.k >= 2, "filtering.k", f.k, "must be >= 2 to tell always/never solved from mixed")
        rule(f.temperature > 0, "filtering.temperature", f.temperature, "must be > 0 (sampling)")
        rule(f.drop_always_solved or f.drop_never_solved, "filtering.drop_always_solved", False,
             "filtering is enabled but drops nothing; enable a drop rule or disable filtering")


def _validation_rules(c: RunConfig, rule: Rule) -> None:
    """validation.* (when enabled)."""
    v = c.validation
    schemes = _schemes()
    if v.enabled:
        rule(v.k >= 1, "validation.k", v.k, "must be >= 1")
        rule(v.every_steps >= 0, "validation.every_steps", v.every_steps, "must be >= 0")
        rule(v.num_examples >= 1, "validation.num_examples", v.num_examples, "must be >= 1")
        rule(v.selection in ("stratified", "first"), "validation.selection", v.selection,
             "must be 'stratified' or 'first'")
        rule(bool(c.data.val_files), "data.val_files", c.data.val_files, "validation needs val files")
        for i, s in enumerate(v.schemes):
            rule(s in schemes, f"validation.schemes[{i}]", s, f"must be one of {list(schemes)}")
        rule(v.best_scheme in v.schemes, "validation.best_scheme", v.best_scheme,
             f"must be one of validation.schemes {v.schemes}")
        rule(v.best_metric in ("mean", "summary"), "validation.best_metric", v.best_metric,
             "must be 'mean' or 'summary'")
        rule(v.temperature > 0 or v.k == 1, "validation.temperature", v.temperature,
             "greedy decoding (0) makes k > 1 samples identical; use k = 1")


def _checkpoint_logging_rules(c: RunConfig, rule: Rule) -> None:
    """checkpoint.* and logging.*."""
    rule(c.checkpoint.save_steps >= 1, "checkpoint.save_steps", c.checkpoint.save_steps, "must be >= 1")
    rule(c.checkpoint.save_total_limit is None or c.checkpoint.save_total_limit >= 1,
         "checkpoint.save_total_limit", c.checkpoint.save_total_limit, "must be >= 1 or null")
    rule(c.logging.logging_steps >= 1, "logging.logging_steps", c.logging.logging_steps, "must be >= 1")


def _fast_rules(c: RunConfig, rule: Rule) -> None:
    """fast.*: every speed option's preconditions, in one place."""
    f, g = c.fast, c.grpo
    rule(not f.merged_generation or c.lora.enabled, "fast.merged_generation", f.merged_generation,
         "merges LoRA adapters for rollouts: needs lora.enabled (full fine-tuning has no adapters)")
    rule(f.rollouts in ("trl", "library"), "fast.rollouts", f.rollouts, "must be 'trl' or 'library'")
    rule(f.rollouts == "trl" or (c.backend != "unsloth" and g.loss_type != "rlsd" and not f.generation_times),
         "fast.rollouts", f.rollouts, "'library' samples through TRL's rollout_func: it needs the "
         "peft backend (not unsloth), a loss other than rlsd and fast.generation_times off "
         "(that wraps TRL's own sampler)")
    rule(not f.shared_prompt or (c.backend != "unsloth" and g.loss_type != "rlsd"),
         "fast.shared_prompt", f.shared_prompt, "runs the model's own forward on shared keys/values: "
         "needs the peft backend (not unsloth) and a loss other than rlsd")
    rule(not f.trim_padding or (c.backend != "unsloth" and g.loss_type != "rlsd" and not f.shared_prompt),
         "fast.trim_padding", f.trim_padding, "cuts TRL's log-prob forwards to each chunk's own columns: needs "
         "the peft backend (not unsloth), a loss other than rlsd, and fast.shared_prompt off (it replaces the "
         "same forward)")
    rule(not f.group_batches or g.per_device_train_batch_size % g.num_generations == 0,
         "fast.group_batches", f.group_batches, f"puts whole groups in each micro-batch: needs "
         f"grpo.per_device_train_batch_size ({g.per_device_train_batch_size}) to be a multiple of "
         f"grpo.num_generations ({g.num_generations})")
    rule(not f.bf16_lora_inputs or (c.lora.enabled and c.model.dtype == "bf16" and c.backend != "unsloth"),
         "fast.bf16_lora_inputs", f.bf16_lora_inputs, "feeds PEFT's LoRA branches bf16 activations under "
         "autocast: needs lora.enabled, model.dtype bf16 and the peft backend")
    rule(not f.fused_lora or (c.lora.enabled and c.backend != "unsloth"), "fast.fused_lora", f.fused_lora,
         "replaces PEFT's LoRA linear forwards: needs lora.enabled and the peft backend (Unsloth has its own)")
    rule(not f.compile_layers or (c.backend != "unsloth" and g.vllm.on and g.loss_type != "rlsd"
                                  and not g.vllm.enable_sleep_mode
                                  and (not c.validation.enabled
                                       or (c.validation.vllm and g.vllm.mode == "colocate"))),
         "fast.compile_layers", f.compile_layers, "compiles the decoder layers for the trainer's loss "
         "forwards only: needs the peft backend, a loss other than rlsd, grpo.vllm on without sleep mode, "
         "and validation through the colocated engine (mode colocate, validation.vllm true) or off: transformers' generate "
         "through compiled layers would recompile them per layer")
    rule(not f.cuda_graphs or (c.device != "cpu" and f.shared_prompt and c.backend != "unsloth"
                               and not f.compile_layers and g.loss_type != "rlsd"
                               and g.gradient_accumulation_steps == 1),
         "fast.cuda_graphs", f.cuda_graphs, "replays fast.shared_prompt's backbone passes from CUDA graphs: needs "
         "device cuda (or auto on a GPU), fast.shared_prompt, the peft backend, a loss other than rlsd, "
         "grpo.gradient_accumulation_steps 1 (a replay overwrites the previous micro-batch's gradients), and not "
         "fast.compile_layers (which compiles the same layers its own way)")
    v = g.vllm
    # what both the overlap and the engine process need: TRL's one-GPU colocated engine, awake, driven by TRL
    own_colocated_engine = (v.mode == "colocate" and not v.enable_sleep_mode and (v.tensor_parallel_size or 1) == 1
                            and c.backend != "unsloth" and f.rollouts == "trl" and not c.multi_turn.enabled)
    rule(not f.overlap_generation or own_colocated_engine,
         "fast.overlap_generation", f.overlap_generation, "generates the next round in TRL's colocated vLLM "
         "engine on a worker thread: needs grpo.vllm.mode colocate without sleep mode, tensor_parallel_size 1, "
         "the peft backend, fast.rollouts trl and a single-turn run (the multi-turn rollout_func drives the "
         "engine itself)")
    rule(not f.sampler_logps or (v.on and v.importance_sampling_correction and c.backend != "unsloth"
                                 and f.rollouts == "trl" and g.loss_type != "rlsd" and not c.multi_turn.enabled),
         "fast.sampler_logps", f.sampler_logps, "takes the round's old log-probs from vLLM's sampler: needs grpo.vllm "
         "on with importance_sampling_correction true (TRL then runs the call it answers, right after the rollout), "
         "the peft backend, fast.rollouts trl, a loss other than rlsd and a single-turn run")
    rule(f.round_logprob_rows >= 0, "fast.round_logprob_rows", f.round_logprob_rows,
         "must be >= 0 rows (0: TRL's per_device_train_batch_size)")
    rule(not f.generation_process or own_colocated_engine,
         "fast.generation_process", f.generation_process, "moves TRL's colocated vLLM engine into a child "
         "process: needs grpo.vllm.mode colocate without sleep mode, tensor_parallel_size 1, the peft backend, "
         "fast.rollouts trl and a single-turn run")
    rule(not f.engine_core_process or f.generation_process, "fast.engine_core_process", f.engine_core_process,
         "splits the engine process of fast.generation_process: set fast.generation_process true too")
    rule(0 <= f.engine_sm_percent <= 100, "fast.engine_sm_percent", f.engine_sm_percent,
         "must be a percentage of the GPU's SMs, 1-100 (0: no cap of its own)")
    rule(not f.engine_sm_percent or f.generation_process, "fast.engine_sm_percent", f.engine_sm_percent,
         "caps the SMs of fast.generation_process's engine process: set fast.generation_process true too")
    rule(not f.engine_prompt_groups or f.generation_process, "fast.engine_prompt_groups", f.engine_prompt_groups,
         "groups the requests in fast.generation_process's engine process: set fast.generation_process true too")
    rule(f.engine_processes >= 1, "fast.engine_processes", f.engine_processes, "must be >= 1 engine process")
    rule(f.engine_processes == 1 or (f.generation_process and v.kv_cache_gib is not None), "fast.engine_processes",
         f.engine_processes, "splits each round between several engine processes of fast.generation_process: set "
         "fast.generation_process true and grpo.vllm.kv_cache_gib (each engine's KV cache, fixed: vLLM's start-up "
         "memory profiling cannot share the GPU between engines)")
    rule(f.loss_mmap_threshold >= 0, "fast.loss_mmap_threshold", f.loss_mmap_threshold,
         "must be >= 0 bytes (0: the allocator's default)")
    rule(f.priming_mmap_threshold >= 0, "fast.priming_mmap_threshold", f.priming_mmap_threshold,
         "must be >= 0 bytes (0: the allocator's default)")


LIBRARY_ROLLOUTS_WITH_VLLM = (
    "'library' samples with the library's own decoder through TRL's rollout_func, which replaces "
    "TRL's generation (vLLM included): the library rollouts step aside when vLLM generates; set "
    "fast.rollouts: trl (or grpo.vllm.mode: off)")
MULTI_TURN_WITH_VLLM = (
    "the multi-turn rollout_func (toolrl_lib/train/multi_turn_rollout.py) plays its episode steps "
    "through the colocated engine in this process, awake: use mode colocate, sleep mode off, backend peft "
    "(or grpo.vllm.mode: off for the library's own decoder)")
SERVER_TAKES_IT = ("a colocate setting: in server mode the server has its own, given on its command "
                   "line (trl vllm-serve --model M --gpu_memory_utilization 0.9 --tensor_parallel_size 1 "
                   "--max_model_len N); leave it null/false here")


def _vllm_rules(c: RunConfig, rule: Rule, backend: str) -> None:
    """grpo.vllm.*: a GPU, the rollout paths that step aside, each mode's own fields, the backend's
    limits (``backend``: the configured one, or the resolved one in ``check_vllm_backend``)."""
    v, key = c.grpo.vllm, "grpo.vllm"
    rule(v.mode in VLLM_MODES, f"{key}.mode", v.mode,
         f"must be one of {list(VLLM_MODES)} (true is ambiguous: say colocate or server)")
    if not v.on:
        return
    rule(c.device != "cpu", f"{key}.mode", v.mode, "vLLM generates on CUDA GPUs only and device is "
         "cpu; set grpo.vllm.mode: off (or device: cuda / auto on a GPU machine)")
    rule(c.fast.rollouts != "library", "fast.rollouts", c.fast.rollouts, LIBRARY_ROLLOUTS_WITH_VLLM)
    if c.multi_turn.enabled:
        rule(v.mode == "colocate" and not v.enable_sleep_mode and backend != "unsloth", f"{key}.mode", v.mode,
             MULTI_TURN_WITH_VLLM)
    rule(v.gpu_memory_utilization is None or 0 < v.gpu_memory_utilization < 1,
         f"{key}.gpu_memory_utilization", v.gpu_memory_utilization, "must be in (0, 1) or null")
    rule(v.kv_cache_gib is None or v.kv_cache_gib > 0, f"{key}.kv_cache_gib", v.kv_cache_gib,
         "must be > 0 GiB or null (null: vLLM profiles free memory)")
    rule(v.max_num_batched_tokens is None or v.max_num_batched_tokens >= 1, f"{key}.max_num_batched_tokens",
         v.max_num_batched_tokens, "must be >= 1 tokens or null (null: TRL's 4096)")
    rule(v.dtype in ("auto", "float32"), f"{key}.dtype", v.dtype, "must be auto or float32")
    rule(v.dtype != "float32" or c.model.dtype == "fp32", f"{key}.dtype", v.dtype,
         f"a float32 engine keeps the synced LoRA update only when the merge that feeds it is exact: "
         f"needs model.dtype fp32 (is {c.model.dtype}; bf16 weights round W + BA before the engine sees it)")
    rule(v.tensor_parallel_size is None or v.tensor_parallel_size >= 1, f"{key}.tensor_parallel_size",
         v.tensor_parallel_size, "must be >= 1 or null")
    needed = c.data.max_prompt_tokens + c.grpo.max_completion_length
    rule(v.max_model_len is None or v.max_model_len >= needed, f"{key}.max_model_len", v.max_model_len,
         f"must hold data.max_prompt_tokens + grpo.max_completion_length ({needed}), or be null")
    rule(v.server_port is None or 1 <= v.server_port <= 65535, f"{key}.server_port", v.server_port,
         "must be a port number (1-65535) or null")
    rule(v.server_timeout is None or v.server_timeout > 0, f"{key}.server_timeout", v.server_timeout,
         "must be > 0 seconds or null")
    if v.mode == "colocate":
        for name in ("server_host", "server_port", "server_timeout"):
            rule(getattr(v, name) is None, f"{key}.{name}", getattr(v, name),
                 "applies to mode: server only (colocate runs vLLM inside the training process); "
                 "leave it null")
    if v.mode == "server":
        for name in ("gpu_memory_utilization", "tensor_parallel_size", "max_model_len", "kv_cache_gib",
                     "max_num_batched_tokens"):
            rule(getattr(v, name) is None, f"{key}.{name}", getattr(v, name), SERVER_TAKES_IT)
        rule(not v.enable_sleep_mode, f"{key}.enable_sleep_mode", v.enable_sleep_mode, SERVER_TAKES_IT)
        rule(v.dtype == "auto", f"{key}.dtype", v.dtype, "a colocate setting: in server mode the server has "
             "its own (trl vllm-serve --model M --dtype float32); leave it auto here")
    if backend == "unsloth":
        unsloth = ("the unsloth backend runs vLLM through FastLanguageModel(fast_inference=True): "
                   "colocate on one GPU, sized by model.max_seq_length and gpu_memory_utilization")
        rule(v.mode == "colocate", f"{key}.mode", v.mode, unsloth + "; use mode: colocate or backend: peft")
        for name in ("max_model_len", "tensor_parallel_size", "kv_cache_gib", "max_num_batched_tokens"):
            rule(getattr(v, name) is None, f"{key}.{name}", getattr(v, name),
                 unsloth + "; leave it null or use backend: peft")
        rule(v.dtype == "auto", f"{key}.dtype", v.dtype, unsloth + "; leave it auto or use backend: peft")
        rule(not v.enable_sleep_mode, f"{key}.enable_sleep_mode", v.enable_sleep_mode,
             unsloth + "; TRL's sleep mode is the peft backend's (leave it false)")


def vllm_max_model_len(config: RunConfig) -> int:
    """vLLM's context window: ``grpo.vllm.max_model_len`` or, when null, the longest prompt plus
    the longest completion a single-turn run allows; a multi-turn run's whole transcript (its
    first prompt and every step and injected result after it) within ``model.max_seq_length``."""
    v = config.grpo.vllm
    if v.max_model_len:
        return v.max_model_len
    if config.multi_turn.enabled:
        return config.model.max_seq_length
    return config.data.max_prompt_tokens + config.grpo.max_completion_length


def check_vllm_backend(config: RunConfig, backend: str) -> None:
    """``grpo.vllm`` against the backend ``auto`` resolved to at run time (``validate`` only saw
    ``auto``); raise one ConfigError listing what the resolved backend cannot do."""
    out: list[tuple[str, Any, str]] = []
    _vllm_rules(config, lambda ok, key, value, text: out.append((key, value, text)) if not ok else None,
                backend)
    if out:
        raise ConfigError(f"invalid run config for backend {backend!r}:\n  - "
                          + "\n  - ".join(f"{k} = {v!r}: {t}" for k, v, t in out))


def _families() -> tuple[str, ...]:
    from toolrl_lib.prompts import FAMILIES

    return tuple(FAMILIES)


def _schemes() -> tuple[str, ...]:
    from toolrl_lib.rewards.schemes import REGISTRY

    return tuple(REGISTRY)


def _reward_ranges() -> dict[str, tuple[float, float]]:
    from toolrl_lib.rewards.schemes import REGISTRY

    return {name: scheme.range for name, scheme in REGISTRY.items()}


def settings_help(cls: type = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(key, default, help)`` for every setting of the run config, from the dataclass fields'
    ``metadata["help"]`` (what ``toolrl train --help`` lists)."""
    import dataclasses

    cls = cls or RunConfig
    rows = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(f.type if isinstance(f.type, type) else None):
            rows.extend(settings_help(f.type, key + "."))
            continue
        section = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(section):
            rows.extend(settings_help(type(section), key + "."))
            continue
        rows.append((key, repr(section), f.metadata.get("help", "")))
    return rows


def load_run_config(
    path: str | Path | None = None, overrides: list[str] | None = None, *, check: bool = True,
    processes: int | None = None,
) -> RunConfig:
    """YAML file (or defaults when ``path`` is None) + ``key.sub=value`` overrides -> RunConfig.

    ``processes``: validate the batch rules for that many training processes (default: the
    current WORLD_SIZE), e.g. before ``--num-gpus N`` launches them."""
    data = load_yaml(path) if path is not None else {}
    data = apply_overrides(data, overrides or [])
    try:
        check_moved_keys(data)
        config = from_dict(RunConfig, data)
    except ConfigError as error:
        raise ConfigError(f"{path or 'run config'}: {error}") from error
    return validate(config, processes) if check else config


def run_config_from_dict(data: dict[str, Any], *, check: bool = True) -> RunConfig:
    check_moved_keys(data)
    config = from_dict(RunConfig, data)
    return validate(config) if check else config


def save_run_config(config: RunConfig, path: str | Path) -> Path:
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
    return path
