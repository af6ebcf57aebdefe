"""Model + LoRA loading for training: Unsloth on CUDA when available, PEFT everywhere.

Both backends return the same thing: a PEFT-wrapped causal LM and its tokenizer, so the
rest of the run (GRPOTrainer, callbacks, artefacts) does not care which one built it.
Unsloth must be imported before TRL to patch it, so ``resolve_backend`` does that import.
The device set-up every trainer of ours shares (GRPO and priming's SFT) lives here too:
precision flags, one GPU per process, TRL's log-prob kernel on CPU.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

from toolrl_lib.train.config import LoraSection, RunConfig


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise ValueError("device = 'cuda' but torch sees no CUDA device; use device: auto or cpu")
    return device


def resolve_backend(backend: str, device: str, processes: int = 1, lora: bool = True) -> str:
    """``auto`` -> ``unsloth`` on one CUDA GPU with LoRA when the package is installed, else ``peft``.

    Unsloth supports single-GPU LoRA training only: several processes (``--num-gpus``) and
    full fine-tuning are the peft backend's. Choosing ``unsloth`` imports it now, before
    anything imports TRL."""
    has_unsloth = importlib.util.find_spec("unsloth") is not None
    if backend == "auto":
        backend = "unsloth" if device == "cuda" and has_unsloth and processes == 1 and lora else "peft"
    if backend == "unsloth":
        if processes > 1:
            raise ValueError(f"backend 'unsloth' runs on one GPU only ({processes} processes were "
                             "launched); use backend: peft for multi-GPU training")
        if not lora:
            raise ValueError("backend 'unsloth' trains LoRA adapters only; use backend: peft for "
                             "lora.enabled=false (full fine-tuning)")
        if device != "cuda":
            raise ValueError("backend 'unsloth' needs a CUDA device; use backend: peft (or auto)")
        if not has_unsloth:
            raise ValueError(
                "backend 'unsloth' but the package is not installed: pip install "
                "'toolrl-workbook[unsloth]' (unsloth, unsloth_zoo, bitsandbytes), or use backend: peft"
            )
        if "trl" in sys.modules and "unsloth" not in sys.modules:
            warnings.warn("trl was imported before unsloth; Unsloth's patches may be incomplete "
                          "(restart the kernel and train first)", stacklevel=2)
        import unsloth  # noqa: F401  (patches transformers/TRL in place)
    elif "unsloth" in sys.modules:
        raise ValueError(
            "backend 'peft' in a process that imported unsloth: Unsloth patched TRL's trainers for "
            "the whole process and they then expect its models; run peft in a fresh process "
            "(restart the kernel) or use backend: unsloth"
        )
    return backend


def precision_kwargs(device: str, dtype: str, tf32: bool = False) -> dict[str, Any]:
    """TrainingArguments precision flags: fp32 on CPU; bf16 autocast on capable GPUs; ``tf32``
    (model.tf32) is recorded in the Trainer's arguments, whose own switch sets only torch's generic
    flag: ``use_tf32`` sets the one the matmuls read."""
    if device == "cpu":
        return {"use_cpu": True, "bf16": False, "fp16": False}
    import torch

    from toolrl_lib.models import resolve_dtype

    flags = {"bf16": resolve_dtype(dtype, device) == torch.bfloat16, "fp16": False}
    return {**flags, "tf32": True} if tf32 else flags


def use_tf32(enabled: bool, device: str) -> bool:
    """model.tf32: let this process's float32 matmuls use TF32 tensor cores (CUDA only; True when set).

    TrainingArguments(tf32=True) sets only torch's generic ``torch.backends.fp32_precision`` on torch
    >= 2.9; run 5 (2026-12-06) showed no speed-up under it, and torch's compiler reported TF32 off,
    since it reads the cuBLAS matmul's own flag, which stays "none". So that flag is set here, through
    the same (new) API: reading the legacy ``allow_tf32`` after a new-API write raises."""
    if not enabled or device == "cpu":
        return False
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9
        matmul.fp32_precision = "tf32"
    else:
        matmul.allow_tf32 = True
    return True


def one_gpu_per_process(args: Any) -> Any:
    """Outside a distributed launch the HF Trainer wraps the model in ``nn.DataParallel``
    when several GPUs are visible (TRL's SFTTrainer refuses that; GRPO would silently split
    generation). A single process trains on one GPU; several GPUs are ``--num-gpus N``."""
    if args.world_size == 1 and args.n_gpu > 1:
        print(f"{args.n_gpu} GPUs visible to one process: training on cuda:0 only "
              "(use `toolrl train --num-gpus N` to train on several)")
        args._n_gpu = 1  # read by Trainer (DataParallel wrap) and by the batch-size arithmetic
    return args


def ensure_logprob_kernel() -> None:
    """TRL 1.15 computes SFT/GRPO log-probs with a Triton kernel; CPU wheels lack Triton, so
    install the pure-PyTorch stand-in there (a no-op where the kernel exists)."""
    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()


def peft_lora_config(lora: LoraSection, r: int | None = None, alpha: int | None = None,
                     layers: list[int] | None = None) -> Any:
    """PEFT ``LoraConfig`` from the run's LoRA section; ``layers``: only these decoder layers."""
    from peft import LoraConfig

    return LoraConfig(
        r=r or lora.r, lora_alpha=alpha or lora.alpha, lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules), bias="none", task_type="CAUSAL_LM",
        layers_to_transform=layers,
    )


def top_layers(model: Any, count: int) -> list[int] | None:
    """Indices of the top ``count`` decoder layers (None: ``count`` 0, every layer).

    >>> from types import SimpleNamespace as NS
    >>> top_layers(NS(config=NS(num_hidden_layers=30)), 3)
    [27, 28, 29]
    >>> top_layers(NS(config=NS(num_hidden_layers=30)), 0) is None
    True
    """
    if count <= 0:
        return None
    total = int(model.config.num_hidden_layers)
    if count > total:
        raise ValueError(f"priming.top_layers={count}: the model has {total} decoder layers")
    return list(range(total - count, total))


def load_base(model_path: str, dtype: str, device: str) -> Any:
    from toolrl_lib.models import load_model

    return load_model(model_path, dtype=dtype, device=device)


def unsloth_vllm_kwargs(config: RunConfig) -> dict[str, Any]:
    """Extra ``FastLanguageModel.from_pretrained`` arguments for ``grpo.vllm`` on the unsloth
    backend: its vLLM engine (``fast_inference``), the memory share it may take, and the largest
    LoRA rank vLLM must hold (the run's ``lora.r``). None with vLLM off."""
    from toolrl_lib.train.config import VLLM_GPU_MEMORY_DEFAULT

    v = config.grpo.vllm
    if not v.on:
        return {}
    return {"fast_inference": True,
            "gpu_memory_utilization": v.gpu_memory_utilization or VLLM_GPU_MEMORY_DEFAULT,
            "max_lora_rank": config.lora.r}


def load_policy(config: RunConfig, model_path: str, backend: str, device: str) -> tuple[Any, Any]:
    """(PEFT model with a fresh LoRA adapter, or the full model when lora.enabled is false,
    tokenizer) for GRPO."""
    from toolrl_lib.models import load_tokenizer, resolve_dtype

    if backend == "unsloth":
        from unsloth import FastLanguageModel

        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=model_path, max_seq_length=config.model.max_seq_length,
            dtype=resolve_dtype(config.model.dtype, device), load_in_4bit=False,
            **unsloth_vllm_kwargs(config),
        )
        model = FastLanguageModel.get_peft_model(
            model, r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules), bias="none",
            use_gradient_checkpointing="unsloth" if config.grpo.gradient_checkpointing else False,
            random_state=config.seed,
        )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return model, tokenizer
    from peft import get_peft_model

    tokenizer = load_tokenizer(model_path, padding_side="left")
    if not config.lora.enabled:
        # fp32 master weights: a 1e-5 update vanishes in bf16 weights (8 mantissa bits);
        # the trainer's bf16 autocast still computes in bf16 on GPU.
        model = load_base(model_path, "fp32", device)
        model.requires_grad_(True)
        return model, tokenizer
    base = load_base(model_path, config.model.dtype, device)
    import torch

    torch.manual_seed(config.seed)  # LoRA init is random: same seed, same adapter
    model = get_peft_model(base, peft_lora_config(config.lora))
    return model, tokenizer


def save_policy(model: Any, tokenizer: Any, folder: Path) -> Path:
    """Save the policy + tokenizer atomically (a crash never leaves half a folder).

    A PEFT model saves its ``default`` adapter only (RLSD-TR keeps its teacher as a second
    adapter); a plain model (full fine-tuning) saves a full model folder."""
    from toolrl_lib.atomic import staged_dir

    with staged_dir(folder) as staging:
        if hasattr(model, "peft_config"):
            model.save_pretrained(str(staging), selected_adapters=["default"])
        else:
            model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
    return folder


def is_full_model(folder: str | Path) -> bool:
    """A full model folder (config.json), as opposed to a PEFT adapter folder."""
    return (Path(folder) / "config.json").is_file()


def load_adapter_model(base_path: str, adapter_dir: str, dtype: str, device: str, fold: bool = True) -> Any:
    """Base + saved adapter, for evaluation of a saved checkpoint (never the in-memory one).

    ``fold``: in fp32, merge the adapter into the weights (rounding only): sampling through
    unmerged LoRA layers runs 14 extra small matmuls per layer and token. In bf16/fp16 the
    merge would round the delta away, so the adapter stays separate there."""
    import torch
    from peft import PeftModel

    base = load_base(base_path, dtype, device)
    model = PeftModel.from_pretrained(base, adapter_dir)
    if fold and next(model.parameters()).dtype == torch.float32:
        model = model.merge_and_unload()
    model.eval()
    return model
