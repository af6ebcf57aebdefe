"""Generation backends for evaluation: transformers everywhere, vLLM when present.

``auto`` picks vLLM only when it is importable AND a CUDA device exists; otherwise plain
``toolrl_lib.generation.generate`` (the same sampler training validation uses). Two shapes:
greedy (``load_for_eval``: one completion per prompt, BFCL) and sampling (``load_sampler``:
k completions per prompt, mean@k); both return completions without the prompt or special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "hf", "vllm")

Generator = Callable[[list[str]], list[str]]
# (prompts, k, max_new_tokens, temperature, top_p, seed) -> k completions per prompt
Sampler = Callable[[list[str], int, int, float, float, int], list[list[str]]]
VLLM_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


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
    kv_tokens: int | None = None  # token positions its KV cache holds, where known (vLLM, fixed cache)


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
        kv_bytes = vllm_kv_cache_bytes()
        return LoadedModel(tokenizer, _vllm_generator(path, tokenizer, max_new_tokens, dtype), "vllm",
                           kv_tokens=kv_bytes // kv_bytes_per_token(path, dtype) if kv_bytes else None)
    from toolrl_lib.generation import generate

    hf_model = _hf_model(path, base, dtype)

    def complete(prompts: list[str]) -> list[str]:
        outs = generate(
            hf_model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
        )
        return [o[0] for o in outs]

    return LoadedModel(tokenizer, complete, "hf", hf_model)


@dataclass
class LoadedSampler:
    """A model ready to sample k completions per prompt (mean@k), plus its tokenizer."""

    tokenizer: Any
    sample: Sampler
    backend: str


def load_sampler(
    model: str, *, backend: str = "auto", dtype: str = "auto", batch_size: int = 16
) -> LoadedSampler:
    """Load ``model`` (as ``load_for_eval`` does) for sampling. vLLM loads model folders only: an
    adapter folder goes to transformers under ``auto`` and is refused, in one line, under ``vllm``
    (before anything loads)."""
    from toolrl_lib.models import resolve_model

    picked = pick_backend(backend)
    base = adapter_base(model)
    if picked == "vllm" and base:
        if backend == "vllm":
            raise ValueError(adapter_refusal(model))
        picked = "hf"
    tokenizer = eval_tokenizer(model)
    if picked == "vllm":
        return LoadedSampler(tokenizer, _vllm_sampler(resolve_model(model), tokenizer, dtype), "vllm")
    hf_model = _hf_model(model if base else resolve_model(model), base, dtype)
    return LoadedSampler(tokenizer, hf_sampler(hf_model, tokenizer, batch_size), "hf")


def adapter_refusal(model: str) -> str:
    """Why ``--backend vllm`` cannot take the adapter folder ``model``, and the merge that fixes it."""
    from toolrl_lib.run_dir import run_of

    run = run_of(model)
    merge = f"toolrl merge --run {run} --checkpoint {Path(model).name}" if run else "toolrl merge"
    return (f"--backend vllm: {model} is a LoRA adapter folder and vLLM needs a merged model "
            f"folder: run `{merge}` first and pass its output (or use --backend hf)")


def hf_sampler(model: Any, tokenizer: Any, batch_size: int = 16) -> Sampler:
    """Sampling with ``toolrl_lib.generation.generate`` (what mean@k has always used);
    ``temperature <= 0`` is greedy."""

    def sample(prompts: list[str], k: int, max_new_tokens: int, temperature: float, top_p: float,
               seed: int) -> list[list[str]]:
        from toolrl_lib.generation import generate

        sampling = temperature > 0
        return generate(
            model, tokenizer, prompts, max_new_tokens=max_new_tokens, do_sample=sampling,
            temperature=temperature if sampling else 1.0, top_p=top_p, num_return_sequences=k,
            batch_size=batch_size, seed=seed,
        )  # fmt: skip

    return sample


def _hf_model(path: str, base: str | None, dtype: str) -> Any:
    """The transformers model at ``path``; an adapter folder (``base`` given) merged into its base."""
    from toolrl_lib.models import load_model

    if base:
        from peft import PeftModel

        return PeftModel.from_pretrained(load_model(base, dtype=dtype), path).merge_and_unload()
    return load_model(path, dtype=dtype)


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


VLLM_MEMORY_ENV = "TOOLRL_VLLM_GPU_MEMORY_UTILIZATION"
VLLM_KV_CACHE_ENV = "TOOLRL_VLLM_KV_CACHE_GIB"
_ENGINES: dict[tuple[str, str], Any] = {}


def vllm_memory_share() -> float:
    """The share of GPU memory an evaluation engine may take: ``$TOOLRL_VLLM_GPU_MEMORY_UTILIZATION``
    (set it when the engine shares the GPU with training: vLLM's default 0.9 would take it all),
    else vLLM's default."""
    import os

    text = os.environ.get(VLLM_MEMORY_ENV)
    if not text:
        return 0.9
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise ValueError(f"${VLLM_MEMORY_ENV}={text!r}: expected a share of GPU memory in (0, 1]")
    return share


def kv_bytes_per_token(path: str, dtype: str = "auto") -> int:
    """Bytes of key/value cache one token takes in a vLLM engine loading ``path`` in ``dtype``:
    2 x layers x key/value heads x head size x bytes per value; ``auto`` is 16-bit (vLLM runs a
    float32 folder in float16 unless told otherwise). The embedded SmolLM2-135M: 2 x 30 x 3 x 64
    x 4 = 46,080 in float32.

    >>> import json, tempfile, pathlib
    >>> folder = tempfile.mkdtemp()
    >>> config = {"model_type": "llama", "num_hidden_layers": 30, "num_attention_heads": 9,
    ...           "num_key_value_heads": 3, "hidden_size": 576, "torch_dtype": "float32"}
    >>> _ = (pathlib.Path(folder) / "config.json").write_text(json.dumps(config))
    >>> kv_bytes_per_token(folder, "fp32"), kv_bytes_per_token(folder)
    (46080, 23040)
    """
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    text = getattr(config, "text_config", None) or config
    heads = text.num_attention_heads
    head_size = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    size = 4 if VLLM_DTYPES.get(dtype, dtype) in ("float32", "float") else 2
    return 2 * text.num_hidden_layers * kv_heads * head_size * size


def vllm_kv_cache_bytes() -> int | None:
    """A fixed KV cache size for an evaluation engine: ``$TOOLRL_VLLM_KV_CACHE_GIB`` GiB, else
    None (vLLM sizes it by profiling). Set it when other processes on the GPU are starting or
    growing: vLLM's profiling counts their growth as its own and can come out negative ("Available
    KV cache memory: -29.49 GiB", seen beside two GRPO trainers on one H200)."""
    import os

    text = os.environ.get(VLLM_KV_CACHE_ENV)
    if not text:
        return None
    try:
        gib = float(text)
    except ValueError:
        gib = -1.0
    if not gib > 0:
        raise ValueError(f"${VLLM_KV_CACHE_ENV}={text!r}: expected a positive number of GiB")
    return int(gib * 2**30)


def _vllm_llm(path: str, dtype: str) -> Any:
    """The one vLLM engine for ``path`` in this process (greedy BFCL, mean@k and pass@k of one
    model share it: an engine's start costs ~50 s); the prefix cache is on, so prompts sharing a
    long tool list (BFCL) or one prompt's k samples (mean@k) prefill it once."""
    import os

    key = (str(path), VLLM_DTYPES.get(dtype, dtype))
    if key in _ENGINES:
        return _ENGINES[key]
    from vllm import LLM

    # This process has touched CUDA already (the device check): vLLM's engine process must be
    # spawned, not forked ("Cannot re-initialize CUDA in forked subprocess", seen on an H200).
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    _ENGINES[key] = LLM(model=str(path), dtype=key[1], enable_prefix_caching=True,
                        gpu_memory_utilization=vllm_memory_share(), kv_cache_memory_bytes=vllm_kv_cache_bytes())
    return _ENGINES[key]


def _vllm_stops(tokenizer: Any) -> list[int] | None:
    eos = tokenizer.eos_token_id
    return [eos] if eos is not None else None


def _vllm_generator(path: str, tokenizer: Any, max_new_tokens: int, dtype: str) -> Generator:
    from vllm import SamplingParams

    llm = _vllm_llm(path, dtype)
    params = SamplingParams(
        temperature=0.0,
        max_tokens=max_new_tokens,
        stop_token_ids=_vllm_stops(tokenizer),
        skip_special_tokens=True,
    )

    def complete(prompts: list[str]) -> list[str]:
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return [out.outputs[0].text for out in outputs]

    return complete


def model_top_k(path: str) -> int:
    """``generation.default_top_k`` of the model folder ``path`` (no generation_config.json: 50)."""
    from transformers import GenerationConfig

    from toolrl_lib.generation import default_top_k

    try:
        return default_top_k(GenerationConfig.from_pretrained(path))
    except OSError:  # no generation_config.json
        return default_top_k(None)


def _vllm_sampler(path: str, tokenizer: Any, dtype: str) -> Sampler:
    """Sampling with this process's vLLM engine for ``path``."""
    return sampler_from_llm(_vllm_llm(path, dtype), tokenizer, model_top_k(path))


def sampler_from_llm(llm: Any, tokenizer: Any, top_k: int) -> Sampler:
    """Sampling with the vLLM engine ``llm`` (ours, or a trainer's colocated one): one ``generate``
    call per prompt list with ``n=k`` (vLLM prefills each prompt once for its k samples);
    ``temperature <= 0`` is greedy, then ``k == 1``. ``top_k``: what ``toolrl_lib.generation``
    samples with (``model_top_k``), so both backends draw alike."""
    stops = _vllm_stops(tokenizer)

    def sample(prompts: list[str], k: int, max_new_tokens: int, temperature: float, top_p: float,
               seed: int) -> list[list[str]]:
        from vllm import SamplingParams

        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if temperature <= 0 and k > 1:
            raise ValueError("k > 1 needs temperature > 0 (greedy repeats itself)")
        params = SamplingParams(
            n=k, temperature=max(temperature, 0.0), top_p=top_p, top_k=top_k, max_tokens=max_new_tokens,
            seed=seed, stop_token_ids=stops, skip_special_tokens=True,
        )  # fmt: skip
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return [[choice.text for choice in out.outputs] for out in outputs]

    return sample
