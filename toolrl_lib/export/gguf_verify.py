"""Check an exported GGUF against the model folder it came from, on the same prompts.

A GGUF can be wrong in ways a file listing never shows: a tensor mapped to the wrong layer,
a transposed projection, a tokenizer that splits text differently, a quantisation that moved
the logits further than expected. transformers reads GGUF (dequantising to a normal model),
so the file is loaded back and compared with the source folder: token ids of the prompts,
per-position logits (max / mean |difference|, relative to the largest reference logit),
the share of positions whose top-1 token agrees, and greedy continuations token by token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolrl_lib.merge.checks import FIXED_PROMPTS, chat_prompts, logit_diff

# Limits per GGUF type, relative to the reference's largest |logit| (``scale``): a file passes
# when max|gguf - ref| <= max_rel * scale, mean|.| <= mean_rel * scale, top-1 agreement >=
# min_top1 and a share of greedy continuations is identical. Measured on the embedded
# SmolLM2-135M (4 chat prompts, 172 positions, scale 39.5, CPU fp32; benchmarks/results/
# gguf_export.md): f16 max 0.041 / mean 0.0057, top-1 1.0, greedy 4/4 identical; q8_0 max 1.32 /
# mean 0.21 (rel. 0.034 / 0.0053), top-1 0.965, greedy 1/4 identical. The q8_0 limits leave ~2x
# over that; a mis-mapped or foreign tensor moves logits by the order of the scale (tested).
GGUF_TOLERANCE: dict[str, dict[str, float]] = {
    "f32": {"max_rel": 1e-4, "mean_rel": 1e-5, "min_top1": 1.0, "greedy_identical": 1.0},
    "f16": {"max_rel": 0.02, "mean_rel": 0.002, "min_top1": 0.97, "greedy_identical": 0.5},
    "bf16": {"max_rel": 0.15, "mean_rel": 0.025, "min_top1": 0.9, "greedy_identical": 0.0},
    "q8_0": {"max_rel": 0.08, "mean_rel": 0.012, "min_top1": 0.9, "greedy_identical": 0.0},
}


@dataclass
class Reference:
    """The source folder's tokenizer, prompts, logits and greedy tokens (computed once)."""

    tokenizer: Any
    prompts: list[str]
    ids: list[list[int]]
    logits: list[Any]
    greedy: list[list[int]]


@contextmanager
def one_parse_per_file() -> Iterator[None]:
    """Within the block, each GGUF file is parsed once and gguf-py's tensor-name table built once.

    Why: transformers' GGUF loader parses the whole metadata (for SmolLM2 49k token strings and
    48k merges, seconds each in gguf-py) twice for the tokenizer and twice for the model, and
    rebuilds the tensor-name table for every submodule (~400 times for 30 layers); with our
    vocabulary check that was five parses of the same bytes per file. Both are pure reads of
    an unchanged file, so a reader is kept per (path, size, mtime) and the table per
    (architecture, layers): what gets loaded is the same. The originals are back on exit.
    """
    import gguf

    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, int, int], Any] = {}

    def reader(path: str | Path, mode: str = "r") -> Any:
        if mode != "r":
            return original_reader(path, mode)
        stat = Path(path).stat()
        key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, lru_cache(maxsize=None)(original_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = original_reader, original_map
        readers.clear()


def load_gguf_model(gguf_file: str | Path, dtype: str = "fp32", device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) read from a GGUF file by transformers (dequantised)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolrl_lib.merge.checks import torch_dtype

    path = Path(gguf_file)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch_dtype(dtype)).to(device).eval()
    return model, tokenizer


def reference_outputs(model: Any, tokenizer: Any, questions: tuple[str, ...] | list[str] = FIXED_PROMPTS,
                      max_new_tokens: int = 24) -> Reference:
    prompts = chat_prompts(tokenizer, questions)
    ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    logits, greedy = _run(model, ids, max_new_tokens, tokenizer)
    return Reference(tokenizer, prompts, ids, logits, greedy)


def _run(model: Any, ids: list[list[int]], max_new_tokens: int, tokenizer: Any) -> tuple[list[Any], list[list[int]]]:
    import torch

    device = next(model.parameters()).device
    logits, greedy = [], []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.inference_mode():
        for row in ids:
            x = torch.tensor([row], device=device)
            logits.append(model(input_ids=x).logits[0].float().cpu())
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=False,
                                 max_new_tokens=max_new_tokens, pad_token_id=pad)
            greedy.append(out[0, len(row):].tolist())
    return logits, greedy


def compare(reference: Reference, model: Any, tokenizer: Any, gguf_type: str, max_new_tokens: int = 24) -> dict[str, Any]:
    """Numbers and verdict for one GGUF model (already loaded) against the reference."""
    import torch

    gguf_ids = [tokenizer(p, add_special_tokens=False).input_ids for p in reference.prompts]
    same_ids = [a == b for a, b in zip(reference.ids, gguf_ids, strict=True)]
    logits, greedy = _run(model, reference.ids, max_new_tokens, reference.tokenizer)
    ref_all, got_all = torch.cat(reference.logits), torch.cat(logits)
    scale = float(ref_all.abs().max())
    diff = logit_diff(got_all, ref_all)
    top1 = float((got_all.argmax(-1) == ref_all.argmax(-1)).float().mean())
    rows = []
    for index, (want, got) in enumerate(zip(reference.greedy, greedy, strict=True)):
        first = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                     None if len(want) == len(got) else min(len(want), len(got)))
        rows.append({"prompt": index, "identical": want == got, "first_difference_at": first,
                     "reference": reference.tokenizer.decode(want), "gguf": reference.tokenizer.decode(got)})
    identical = sum(r["identical"] for r in rows) / len(rows)
    tol = GGUF_TOLERANCE.get(gguf_type, GGUF_TOLERANCE["q8_0"])
    limits = {"max_abs": tol["max_rel"] * scale, "mean_abs": tol["mean_rel"] * scale}
    problems = []
    if not all(same_ids):
        problems.append(f"the GGUF tokenizer splits {same_ids.count(False)} prompt(s) differently")
    for key in ("max_abs", "mean_abs"):
        if diff[key] > limits[key]:
            problems.append(f"logits {key} {diff[key]:.4g} > limit {limits[key]:.4g}")
    if top1 < tol["min_top1"]:
        problems.append(f"top-1 agreement {top1:.3f} < {tol['min_top1']}")
    if identical < tol["greedy_identical"]:
        problems.append(f"greedy continuations identical {identical:.2f} < {tol['greedy_identical']}")
    return {
        "type": gguf_type, "passed": not problems, "problems": problems,
        "tokenizer_ids_identical": all(same_ids), "scale": scale, **diff, "limits": limits,
        "top1_agreement": top1, "positions": int(ref_all.shape[0]),
        "greedy_identical": identical, "greedy_tokens": max_new_tokens,
        "greedy_token_agreement": _token_agreement(reference.greedy, greedy), "generations": rows,
    }


def _token_agreement(want: list[list[int]], got: list[list[int]]) -> float:
    """Share of greedy positions equal before the first divergence of each row (prefix match)."""
    total = sum(len(w) for w in want) or 1
    matched = 0
    for a, b in zip(want, got, strict=True):
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            matched += 1
    return matched / total
