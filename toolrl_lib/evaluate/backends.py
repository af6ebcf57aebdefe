"""Greedy generation backends for evaluation: transformers everywhere, vLLM when present.

``auto`` picks vLLM only when it is importable AND a CUDA device exists; otherwise plain
``toolrl_lib.generation.generate`` (the same sampler training validation uses). Both
return one completion string per prompt, without the prompt or special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "hf", "vllm")

Generator = Callable[[list[str]], list[str]]


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def vllm_available() -> bool:
    """vLLM can generate here: importable (not imported) and a CUDA device exists."""
    from toolrl_lib.fast.vllm_engine import vllm_importable

    return vllm_importable() and cuda_available()


def pick_backend(backend: str) -> str:
    """``hf`` or ``vllm`` for ``backend``; ``auto`` is vLLM only where it can run. An explicit
    ``vllm`` that cannot run raises the one-line ``VLLMMissing`` (with the install command)
    before anything loads."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if backend == "auto":
        return "vllm" if vllm_available() else "hf"
    if backend == "vllm":
        from toolrl_lib.fast.vllm_engine import VLLMMissing, require_vllm

        require_vllm("--backend vllm", "use --backend hf (or auto)")
        if not cuda_available():
            raise VLLMMissing("--backend vllm: vLLM generates on CUDA GPUs only and torch sees "
                              "none here; use --backend hf (or auto)")
    return backend


@dataclass
class LoadedModel:
    """A model ready to complete prompts greedily, plus its tokenizer (for prompts)."""

    tokenizer: Any
    complete: Generator
    backend: str
    model: Any = None  # the transformers model behind ``complete`` (hf backend; None otherwise)


def load_for_eval(
    model: str,
    *,
    backend: str = "auto",
    dtype: str = "auto",
    max_new_tokens: int = 256,
    batch_size: int = 16,
) -> LoadedModel:
    """Load ``model`` (``embedded``, a folder, a hub id, or a PEFT adapter folder of a
    training run, merged in memory) for greedy completion."""
    from toolrl_lib.models import resolve_model

    backend = pick_backend(backend)
    base = adapter_base(model)
    path = model if base else resolve_model(model)
    tokenizer = eval_tokenizer(model)
    if backend == "vllm" and not base:
        return LoadedModel(tokenizer, _vllm_generator(path, tokenizer, max_new_tokens, dtype), "vllm")
    from toolrl_lib.generation import generate
    from toolrl_lib.models import load_model

    if base:
        from peft import PeftModel

        hf_model = PeftModel.from_pretrained(load_model(base, dtype=dtype), path).merge_and_unload()
    else:
        hf_model = load_model(path, dtype=dtype)

    def complete(prompts: list[str]) -> list[str]:
        outs = generate(
            hf_model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
        )
        return [o[0] for o in outs]

    return LoadedModel(tokenizer, complete, "hf", hf_model)


def adapter_base(model: str) -> str | None:
    """For a PEFT adapter folder (no config.json): the base model it sits on, else None.

    The training run's ``run_info.json`` (one level up) names the base, found where the run
    directory is now (``toolrl_lib.run_dir.run_base``: a run copied to another machine works);
    otherwise the adapter's own ``base_model_name_or_path``.
    """
    from toolrl_lib.run_dir import run_base, run_of

    folder = Path(model).expanduser()
    if not (folder / "adapter_config.json").is_file() or (folder / "config.json").is_file():
        return None
    run = run_of(folder)
    if run is not None:
        base = run_base(run)
        if base:
            return str(base)
    base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise FileNotFoundError(f"{folder} is a LoRA adapter but names no base model")
    return str(base)


def eval_tokenizer(model: str) -> Any:
    """The tokenizer for ``model``; for an adapter folder its own copy, else its base's."""
    from toolrl_lib.models import load_tokenizer

    base = adapter_base(model)
    if base and _has_tokenizer(Path(model)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        return tokenizer
    return load_tokenizer(base or model)


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer_config.json").is_file()


def _vllm_generator(path: str, tokenizer: Any, max_new_tokens: int, dtype: str) -> Generator:
    from vllm import LLM, SamplingParams

    names = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
    llm = LLM(model=path, dtype=names.get(dtype, dtype), enable_prefix_caching=True)
    eos = tokenizer.eos_token_id
    params = SamplingParams(
        temperature=0.0,
        max_tokens=max_new_tokens,
        stop_token_ids=[eos] if eos is not None else None,
        skip_special_tokens=True,
    )

    def complete(prompts: list[str]) -> list[str]:
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return [out.outputs[0].text for out in outputs]

    return complete
