"""Batched text generation with Hugging Face ``generate``: the one sampler everything shares.

Training validation (mean@k), the BFCL evaluation and the notebooks all call ``generate``,
so greedy and sampled completions are produced the same way everywhere. Prompts are
already fully rendered strings (chat template applied by the prompt adapter), so no
special tokens are added here; padding is on the left so every row's continuation starts
at the same position.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


def batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most ``size`` items."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    for start in range(0, len(items), size):
        yield items[start : start + size]


def prompts_per_batch(batch_size: int, num_return_sequences: int) -> int:
    """``batch_size`` counts sequences, so k samples per prompt leave batch_size // k prompts."""
    return max(1, batch_size // max(1, num_return_sequences))


def stop_token_ids(tokenizer: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's eos (ChatML ``<|im_end|>``), never the pad token."""
    eos = tokenizer.eos_token_id
    ids = list(eos) if isinstance(eos, (list, tuple)) else [eos]
    return [i for i in ids if i is not None]


def generate(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    *,
    max_new_tokens: int = 256,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    num_return_sequences: int = 1,
    batch_size: int = 16,
    seed: int | None = None,
    progress: bool = False,
) -> list[list[str]]:
    """Complete each prompt; returns, per prompt, ``num_return_sequences`` decoded strings.

    Completions exclude the prompt and special tokens and stop at ``tokenizer.eos_token_id``.
    Greedy by default; ``do_sample=True`` with ``temperature``/``top_p`` for mean@k. With
    ``seed`` the sampling is reproducible (torch's global RNG is seeded once up front).
    """
    import torch

    if num_return_sequences < 1:
        raise ValueError(f"num_return_sequences must be >= 1, got {num_return_sequences}")
    if not do_sample and num_return_sequences > 1:
        raise ValueError("num_return_sequences > 1 needs do_sample=True (greedy repeats itself)")
    if not prompts:
        return []
    if seed is not None:
        torch.manual_seed(seed)
    stops = stop_token_ids(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    device = next(model.parameters()).device
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_p": top_p}
        if do_sample
        else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    )
    per_batch = prompts_per_batch(batch_size, num_return_sequences)
    chunks = list(batches(prompts, per_batch))
    bar = _progress(len(prompts), progress)
    out: list[list[str]] = []
    was_training = model.training
    model.eval()
    try:
        for chunk in chunks:
            enc = tokenizer(
                list(chunk), return_tensors="pt", padding=True, add_special_tokens=False
            ).to(device)
            with torch.inference_mode():
                generated = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=num_return_sequences,
                    eos_token_id=stops,
                    pad_token_id=pad_id,
                    **sampling,
                )
            new_tokens = generated[:, enc["input_ids"].shape[1] :]
            texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            for i in range(len(chunk)):
                out.append(texts[i * num_return_sequences : (i + 1) * num_return_sequences])
            if bar is not None:
                bar.update(len(chunk))
    finally:
        tokenizer.padding_side = old_side
        if was_training:
            model.train()
        if bar is not None:
            bar.close()
    return out


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="generate", unit="prompt")
