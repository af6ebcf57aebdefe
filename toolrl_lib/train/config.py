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
    skip_zero_advantage: bool = field(default=True, metadata={"help": "A micro-batch whose completions all have advantage 0 skips the model's forward and backward (toolrl_lib/fast/zero_advantage.py): its loss and gradient are exactly 0 either way"})
    loss_mmap_threshold: int = field(default=0, metadata={"help": "CPU (glibc): while the loss runs forward and back, blocks of at least this many bytes get their own mapping and go back to the OS when freed (toolrl_lib/fast/loss_memory.py); 0 = the allocator's default. The smoke profile's 1 MiB: 4 GRPO steps peaked at 3.42 instead of 3.97 GiB for 7% more step time (benchmarks/results/grpo_memory.md)"})
    priming_mmap_threshold: int = field(default=0, metadata={"help": "CPU (glibc): while priming trains, blocks of at least this many bytes get their own mapping and go back to the OS when freed (toolrl_lib.fast.memory.set_mmap_threshold; as loss_mmap_threshold); 0 = the allocator's default"})
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
    _filtering_rules(c, rule)
    _validation_rules(c, rule)
    _checkpoint_logging_rules(c, rule)
    _fast_rules(c, rule)
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
    rule(f.loss_mmap_threshold >= 0, "fast.loss_mmap_threshold", f.loss_mmap_threshold,
         "must be >= 0 bytes (0: the allocator's default)")
    rule(f.priming_mmap_threshold >= 0, "fast.priming_mmap_threshold", f.priming_mmap_threshold,
         "must be >= 0 bytes (0: the allocator's default)")


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
