"""The numbers behind a merge's verification: LoRA deltas, what survives rounding to the
output dtype, weight probes of the saved folder, logit differences and their tolerances.

Pure functions over models and tensors (no files written), used by ``toolrl_lib.merge``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
DTYPES = ("bf16", "fp16", "fp32")

# Logit tolerance per output dtype, relative to the reference's largest |logit| (``scale``):
# a check passes when max|merged - ref| <= atol + max_rel * scale and the mean likewise.
# Measured: SmolLM2-135M + random r=8 LoRA on all projections (CPU, scale ~40): fp32 merge
# max 1.1e-4 / mean 1.3e-5; saved bf16 max 1.2-1.5 / mean 0.16-0.18 (casting the base
# alone gives the same 1.2 / 0.19); fp16 max 0.17 / mean 0.022. A random-weight
# Qwen3-8B-shaped model + r=16 LoRA (H200, scale ~7): bf16 max 0.35 / mean 0.048. The
# limits leave >= 2x headroom over those; a corrupted or mis-mapped tensor moves logits by
# the order of the scale itself. (A dropped delta is caught by the weight probes instead.)
LOGIT_TOLERANCE: dict[str, dict[str, float]] = {
    "fp32": {"max_rel": 1e-4, "mean_rel": 1e-5, "atol": 1e-3},
    "fp16": {"max_rel": 0.02, "mean_rel": 0.002, "atol": 1e-3},
    "bf16": {"max_rel": 0.15, "mean_rel": 0.025, "atol": 1e-3},
}

# A few tool-calling flavoured user turns: fixed so that every merge is checked the same way.
FIXED_PROMPTS: tuple[str, ...] = (
    "What's the weather like in Paris today? Use the get_weather tool if you can.",
    "Convert 250 US dollars to euros.",
    "Book a table for two at an Italian restaurant tomorrow at 7pm.",
    "Tell me a short joke about computers.",
)


# safetensors header dtype names of the float types a merged folder may hold
STORED_DTYPES = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp64"}


def stored_dtypes(folder: str | Path, names: set[str] | None = None) -> dict[str, int]:
    """How many floating tensors (of ``names``, default all) the ``*.safetensors`` files of
    ``folder`` store per dtype, read from the headers (no weights loaded). What is on disk is what a user gets:
    ``from_pretrained(dtype=...)`` casts on load and would hide a file written in another
    dtype (Unsloth's merged 16-bit save keeps the base checkpoint's, e.g. bf16 for fp16)."""
    import json
    import struct

    counts: dict[str, int] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for key, entry in header.items():
            if key == "__metadata__" or (names is not None and key not in names):
                continue
            name = STORED_DTYPES.get(entry.get("dtype", ""))
            if name:
                counts[name] = counts.get(name, 0) + 1
    return counts


def torch_dtype(name: str) -> Any:
    import torch

    table = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if name not in table:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {name!r}")
    return table[name]


def chat_prompts(tokenizer: Any, questions: tuple[str, ...] | list[str] = FIXED_PROMPTS) -> list[str]:
    """User questions rendered with the tokenizer's chat template (plain text without one)."""
    if not getattr(tokenizer, "chat_template", None):
        return list(questions)
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False
        )
        for q in questions
    ]


def prompt_logits(model: Any, tokenizer: Any, prompts: list[str]) -> Any:
    """Per-position logits (fp32, CPU) for each prompt, unpadded, concatenated."""
    import torch

    device = next(model.parameters()).device
    rows = []
    with torch.inference_mode():
        for prompt in prompts:
            enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(device)
            rows.append(model(**enc).logits[0].float().cpu())
    return torch.cat(rows)


def logit_diff(a: Any, b: Any) -> dict[str, float]:
    diff = (a - b).abs()
    return {"max_abs": float(diff.max()), "mean_abs": float(diff.mean())}


def logit_limits(dtype: str, scale: float, overrides: dict[str, float] | None = None) -> dict[str, float]:
    tol = {**LOGIT_TOLERANCE[dtype], **(overrides or {})}
    return {
        "max_abs": tol["atol"] + tol["max_rel"] * scale,
        "mean_abs": tol["atol"] + tol["mean_rel"] * scale,
    }


def lora_layers(peft_model: Any) -> list[tuple[str, Any]]:
    from peft.tuners.lora import LoraLayer

    return [(n, m) for n, m in peft_model.named_modules() if isinstance(m, LoraLayer)]


def delta_stats(peft_model: Any, dtype: str, adapter_name: str = "default") -> dict[str, Any]:
    """Size of each LoRA delta, and how much of it survives rounding ``base + delta`` to ``dtype``.

    Rounding to 16 bits keeps a delta far below the weights' resolution only in expectation
    (a few weights jump a whole step, most do not move), so a small surviving fraction or a
    relative error above 1 means the saved model carries the training only on average."""
    import torch

    target = torch_dtype(dtype)
    n_modules = n_nonzero = 0
    changed = touched = 0
    max_abs = 0.0
    sq_norm = 0.0
    base_sq = 0.0
    err_sq = 0.0
    with torch.no_grad():
        for _, module in lora_layers(peft_model):
            if adapter_name not in getattr(module, "lora_A", {}):
                continue
            n_modules += 1
            delta = module.get_delta_weight(adapter_name).float()
            base = module.get_base_layer().weight.float()
            max_abs = max(max_abs, float(delta.abs().max()))
            sq_norm += float(delta.pow(2).sum())
            base_sq += float(base.pow(2).sum())
            nonzero = delta != 0
            if bool(nonzero.any()):
                n_nonzero += 1
                touched += int(nonzero.sum())
                merged = (base + delta).to(target)
                base_cast = base.to(target)
                changed += int(((merged != base_cast) & nonzero).sum())
                kept = merged.float() - base_cast.float()
                err_sq += float((kept - delta).pow(2).sum())
    return {
        "lora_modules": n_modules,
        "nonzero_modules": n_nonzero,
        "max_abs": max_abs,
        "frobenius": sq_norm**0.5,
        "relative_to_base": (sq_norm / base_sq) ** 0.5 if base_sq else 0.0,
        "changed_weights": touched,
        "survive_in_dtype": changed,
        "survival_fraction": changed / touched if touched else 0.0,
        # ||round(W + D) - round(W) - D|| / ||D||: how exactly the saved weights carry D
        "saved_delta_rel_error": (err_sq / sq_norm) ** 0.5 if sq_norm else 0.0,
    }


def weight_probes(
    peft_model: Any, dtype: str, per_module: int = 1024, adapter_name: str = "default"
) -> dict[str, dict[str, Any]]:
    """For each LoRA-wrapped weight, a fixed spread of positions with the values the saved
    model must hold there (``round(W + delta)``) and the base's (``round(W)``), so that the
    written folder can be checked tensor by tensor without keeping the models in memory."""
    import torch

    target = torch_dtype(dtype)
    probes = {}
    with torch.no_grad():
        for name, module in lora_layers(peft_model):
            if adapter_name not in getattr(module, "lora_A", {}):
                continue
            base = module.get_base_layer().weight
            flat = base.detach().float().flatten()
            count = max(2, min(per_module, flat.numel()))
            # integer spacing: float linspace overshoots the last index past 2**24 elements
            index = torch.arange(count, device=flat.device) * (flat.numel() - 1) // (count - 1)
            delta = module.get_delta_weight(adapter_name).float().flatten()[index]
            probes[name.removeprefix("base_model.model.")] = {
                "index": index.cpu(),
                "expected": (flat[index] + delta).to(target).cpu(),
                "base": flat[index].to(target).cpu(),
            }
    return probes


def compare_probes(model: Any, probes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How many probed weights of ``model`` hold the merged value, where the delta is visible."""

    visible = matched = exact = total = 0
    missing = []
    for name, probe in probes.items():
        try:
            weight = model.get_submodule(name).weight.detach().flatten()[probe["index"]].cpu()
        except AttributeError:
            missing.append(name)
            continue
        weight = weight.to(probe["expected"].dtype)
        shows = probe["expected"] != probe["base"]
        visible += int(shows.sum())
        matched += int((weight == probe["expected"])[shows].sum())
        exact += int((weight == probe["expected"]).sum())
        total += weight.numel()
    return {"probed": total, "exact": exact, "delta_visible": visible, "delta_matched": matched,
            "missing_modules": missing[:5]}


def check_adapter_loaded(peft_model: Any, adapter_dir: Path) -> list[str]:
    """Problems if the adapter file's tensors are not exactly what the model now holds."""
    import torch
    from peft.utils import get_peft_model_state_dict

    weights = adapter_dir / ADAPTER_WEIGHTS[0]
    if weights.is_file():
        from safetensors.torch import load_file

        saved = load_file(str(weights))
    else:
        saved = torch.load(adapter_dir / ADAPTER_WEIGHTS[1], map_location="cpu", weights_only=True)
    live = get_peft_model_state_dict(peft_model)
    problems = []
    unused = sorted(set(saved) - set(live))
    if unused:
        problems.append(f"{len(unused)} adapter tensor(s) have no place in the base, e.g. {unused[0]}")
    for key in sorted(set(saved) & set(live)):
        if saved[key].shape != live[key].shape:
            problems.append(f"{key}: shape {tuple(saved[key].shape)} vs {tuple(live[key].shape)}")
        elif not torch.equal(saved[key].float().cpu(), live[key].float().cpu()):
            problems.append(f"{key}: loaded values differ from the file")
    return problems[:10]


def compare_generations(reference: list[str], merged: list[str], prompts: list[str]) -> list[dict]:
    rows = []
    for index, (ref, got, prompt) in enumerate(zip(reference, merged, prompts, strict=True)):
        same = ref == got
        pairs = zip(ref, got, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ref), len(got)))
        rows.append({
            "index": index,
            "prompt": prompt,
            "prompt_tail": prompt[-120:],
            "reference": ref,
            "merged": got,
            "identical": same,
            "first_difference_at": None if same else first,
        })
    return rows
