"""Batched text generation: the one sampler everything shares.

Training validation (mean@k), the BFCL evaluation and the notebooks all call ``generate``,
so greedy and sampled completions are produced the same way everywhere. Prompts are
already fully rendered strings (chat template applied by the prompt adapter), so no
special tokens are added here.

It is a plain decoding loop over the model's forward pass (HF ``generate``'s sampling rules:
temperature, then top-k, then top-p; ``sample_tokens``): each prompt prefilled once for its k
samples, top-k drawn among the k kept tokens (same distribution as masking the vocabulary),
rows that finished dropped from the batch. Written out because ``generate`` wastes most of a
CPU's time on work this loop avoids (``benchmarks/results/workbook_profile.md``).

Where its keys/values live is the speed layer's business (``toolrl_lib.fast.decode``), chosen
by one switch in ``decode_group``: ``fast_decode.shared_prefix_applies(model)`` (a CPU model
with sdpa attention) runs ``decode_shared``, each prompt's keys/values stored once for its k
samples; everywhere else ``decode_padded`` runs a left-padded batch whose prefill is written k
times into a cache that grows in place (``GrowingCache``; ``DynamicCache`` copies the whole
cache at every token). Two more CPU tricks apply around it: grouped-query attention without
copying the key/value heads (``sdpa_gqa`` in ``toolrl_lib.models``), and, off Intel, decode
steps whose linear layers read each weight in its stored order
(``toolrl_lib.fast.weight_major_linear``: 1.4-1.8x faster a step on an AMD EPYC).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from toolrl_lib.fast import decode as fast_decode
from toolrl_lib.fast.weight_major_linear import weight_major_linear
from toolrl_lib.models import pad_token_id, stop_token_ids


def batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most ``size`` items."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    for start in range(0, len(items), size):
        yield items[start : start + size]


def prompts_per_batch(batch_size: int, num_return_sequences: int) -> int:
    """``batch_size`` counts sequences, so k samples per prompt leave batch_size // k prompts."""
    return max(1, batch_size // max(1, num_return_sequences))


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

    Completions exclude the prompt and special tokens and stop at the tokenizer's end-of-turn
    ids (``stop_token_ids``). Greedy by default; ``do_sample=True`` with ``temperature``/``top_p``
    (and the model's ``generation_config.top_k``, 50 when unset, as in HF ``generate``) for mean@k.
    ``batch_size`` counts sequences (prompts x samples) decoded together. With ``seed`` the
    sampling is reproducible (torch's global RNG is seeded once up front).
    """
    if not prompts:
        return []
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    ids = generate_ids(model, encoded, sampler=Sampler.from_model(model, do_sample, temperature, top_p),
                       stops=stop_token_ids(tokenizer), pad_id=pad_token_id(tokenizer),
                       max_new_tokens=max_new_tokens, num_return_sequences=num_return_sequences,
                       batch_size=batch_size, seed=seed, progress=progress)
    return [tokenizer.batch_decode(samples, skip_special_tokens=True) for samples in ids]


def generate_ids(
    model: Any,
    prompt_ids: list[list[int]],
    *,
    sampler: Sampler,
    stops: list[int],
    pad_id: int,
    max_new_tokens: int,
    num_return_sequences: int = 1,
    batch_size: int = 16,
    seed: int | None = None,
    progress: bool = False,
) -> list[list[list[int]]]:
    """``generate`` on token ids: per prompt, ``num_return_sequences`` lists of new token ids,
    each ending with its stop id unless it ran to ``max_new_tokens`` (what GRPO trains on)."""
    import torch

    k = num_return_sequences
    if k < 1:
        raise ValueError(f"num_return_sequences must be >= 1, got {k}")
    if not sampler.do_sample and k > 1:
        raise ValueError("num_return_sequences > 1 needs do_sample=True (greedy repeats itself)")
    if not prompt_ids:
        return []
    if seed is not None:
        torch.manual_seed(seed)
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    out: list[list[list[int]]] = [[] for _ in prompt_ids]
    bar = _progress(len(prompt_ids), progress)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for chunk in batches(order, prompts_per_batch(batch_size, k)):
                rows = decode_group(model, [list(prompt_ids[i]) for i in chunk], k, max_new_tokens,
                                    sampler, stops, pad_id)
                for j, i in enumerate(chunk):
                    out[i] = rows[j * k : (j + 1) * k]
                if bar is not None:
                    bar.update(len(chunk))
    finally:
        if was_training:
            model.train()
        if bar is not None:
            bar.close()
    return out


def default_top_k(generation_config: Any) -> int:
    """The top-k a sampler draws with: the model's ``generation_config.top_k``, 50 when unset
    (transformers' default; vLLM's own default has none, so evaluation passes this one)."""
    top_k = getattr(generation_config, "top_k", None)
    return 50 if top_k is None else int(top_k)


class Sampler:
    """Next-token choice as HF ``generate`` makes it: argmax, or temperature -> top-k -> top-p
    -> a multinomial draw from torch's global RNG."""

    def __init__(self, do_sample: bool, temperature: float, top_k: int, top_p: float) -> None:
        if do_sample and temperature <= 0:
            raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, temperature, top_k, top_p

    @classmethod
    def from_model(cls, model: Any, do_sample: bool, temperature: float, top_p: float) -> Sampler:
        return cls(do_sample, temperature, default_top_k(getattr(model, "generation_config", None)), top_p)

    def __call__(self, logits: Any) -> Any:
        import torch

        if not self.do_sample:
            return logits.argmax(-1)
        logits = logits / self.temperature
        if 0 < self.top_k < logits.shape[-1]:
            # The same distribution as masking all but the top k, drawn over k entries instead
            # of the whole vocabulary (the full-vocabulary draw was a tenth of a CPU decode step).
            values, index = torch.topk(logits, self.top_k, dim=-1)  # descending
            if self.top_p < 1.0:
                drop = values.flip(-1).softmax(-1).cumsum(-1).flip(-1) <= 1 - self.top_p
                drop[..., :1] = False  # always keep the most likely token
                values = values.masked_fill(drop, float("-inf"))
            pick = torch.multinomial(values.softmax(-1), num_samples=1)
            return index.gather(-1, pick).squeeze(-1)
        if self.top_p < 1.0:
            ascending, index = torch.sort(logits, descending=False)
            drop = ascending.softmax(-1).cumsum(-1) <= 1 - self.top_p
            drop[..., -1:] = False  # always keep the most likely token
            logits = logits.masked_fill(drop.scatter(-1, index, drop), float("-inf"))
        return torch.multinomial(logits.softmax(-1), num_samples=1).squeeze(-1)


def decode_group(
    model: Any, prompt_ids: list[list[int]], k: int, max_new_tokens: int, sampler: Sampler,
    stops: list[int], pad_id: int,
) -> list[list[int]]:
    """New token ids for each prompt's k samples (prompt-major), stop token included: the
    distinct prompts prefilled once, then one forward per token over the rows still running."""
    with weight_major_linear():  # CPU decode steps off Intel: W @ x.T (not CUDA, not prefills)
        if fast_decode.shared_prefix_applies(model):  # the switch: the CPU speed path
            return decode_shared(model, prompt_ids, k, max_new_tokens, sampler, stops, pad_id)
        return decode_padded(model, prompt_ids, k, max_new_tokens, sampler, stops, pad_id)


def decode_padded(
    model: Any, prompt_ids: list[list[int]], k: int, max_new_tokens: int, sampler: Sampler,
    stops: list[int], pad_id: int,
) -> list[list[int]]:
    """``decode_group`` as one left-padded batch: the prefill written k times into a
    ``fast.decode.GrowingCache`` (CUDA, and attention implementations other than sdpa)."""
    import torch

    from toolrl_lib.models import inference_attention

    device = next(model.parameters()).device
    width = max(len(ids) for ids in prompt_ids)
    input_ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for row, ids in enumerate(prompt_ids):
        input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
        mask[row, width - len(ids):] = 1
    input_ids, mask = input_ids.to(device), mask.to(device)
    cache = fast_decode.GrowingCache(repeat=k, room=max_new_tokens)
    with inference_attention(model):
        logits = model(input_ids=input_ids, attention_mask=mask,
                       position_ids=(mask.cumsum(-1) - 1).clamp(min=0), past_key_values=cache,
                       use_cache=True, logits_to_keep=1).logits[:, -1, :].float()
        if k > 1:  # the cache already holds each prompt's rows k times
            logits, mask = logits.repeat_interleave(k, dim=0), mask.repeat_interleave(k, dim=0)

        def drop(keep: Any) -> None:
            nonlocal mask
            cache.batch_select_indices(keep)
            mask = mask[keep]

        def forward(ids: Any, step: int) -> Any:
            nonlocal mask
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
            return model(input_ids=ids, attention_mask=mask, position_ids=mask.sum(-1, keepdim=True) - 1,
                         past_key_values=cache, use_cache=True).logits[:, -1, :].float()

        return sample_tokens(logits, max_new_tokens, sampler, stops, pad_id, drop, forward)


def sample_tokens(
    logits: Any, max_new_tokens: int, sampler: Sampler, stops: list[int], pad_id: int,
    drop: Any, forward: Any,
) -> list[list[int]]:
    """The token loop both decoders share: sample, record, stop at ``stops``, drop finished rows
    once a quarter of the batch is done (``drop(keep)`` shrinks the caller's cache and state),
    then ``forward(next_ids, step)`` -> the next logits of the rows still in the batch."""
    import torch

    rows = logits.shape[0]
    tokens: list[list[int]] = [[] for _ in range(rows)]
    live = list(range(rows))  # batch position -> output row
    running = torch.ones(rows, dtype=torch.bool, device=logits.device)
    stop_ids = torch.tensor(stops, device=logits.device)
    for step in range(max_new_tokens):
        chosen = sampler(logits)
        for position, (token, alive) in enumerate(zip(chosen.tolist(), running.tolist(), strict=True)):
            if alive:
                tokens[live[position]].append(token)
        running &= ~torch.isin(chosen, stop_ids)
        if step == max_new_tokens - 1 or not running.any():
            break
        if (~running).sum() * 4 >= len(live):  # a quarter finished: drop them from the batch
            keep = running.nonzero().squeeze(-1)
            drop(keep)
            live = [live[i] for i in keep.tolist()]
            chosen, running = chosen[keep], running[keep]
        logits = forward(chosen.masked_fill(~running, pad_id).unsqueeze(-1), step)
    return tokens


def decode_shared(
    model: Any, prompt_ids: list[list[int]], k: int, max_new_tokens: int, sampler: Sampler,
    stops: list[int], pad_id: int,
) -> list[list[int]]:
    """``decode_group`` with each prompt prefilled alone (no padding) and its keys/values kept
    once for its k samples (``toolrl_lib.fast.decode.SharedPrefixCache``)."""
    with fast_decode.shared_prefix_steps(model, prompt_ids, k, max_new_tokens) as (logits, drop, forward):
        return sample_tokens(logits, max_new_tokens, sampler, stops, pad_id, drop, forward)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="generate", unit="prompt")
