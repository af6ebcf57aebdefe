"""Showing a finished merge in notebook 04: base vs merged answers side by side, and the
sizes and logit differences against their limits."""

from __future__ import annotations

from typing import Any

from toolrl_lib.merge.core import _device, _free, _greedy
from toolrl_lib.merge.report import MergeReport


def side_by_side(report: MergeReport, *, device: str = "auto") -> list[dict[str, Any]]:
    """The verification prompts answered greedily by the base model, next to the merged
    model's answers recorded in ``report`` (same length, same sampler)."""
    from toolrl_lib.models import load_model, load_tokenizer

    device = _device(device)
    prompts = [g["prompt"] for g in report.generations]
    tokenizer = load_tokenizer(report.output)
    model = load_model(report.base_model, dtype="auto", device=device)
    max_new_tokens = int(report.options.get("max_new_tokens", 32))
    base_texts = _greedy(model, tokenizer, prompts, max_new_tokens)
    del model
    _free(device)
    return [
        {"prompt_tail": g["prompt_tail"], "base": text, "merged": g["merged"],
         "merged == base+adapter": g["identical"]}
        for g, text in zip(report.generations, base_texts, strict=True)
    ]


def summary_rows(report: MergeReport) -> list[dict[str, Any]]:
    """Adapter vs merged size and the logit differences against their limits."""
    mb = 1 << 20
    logits = report.logits
    limits = logits.get("limits", {})
    rows = [
        {"quantity": "adapter weights (MB)",
         "value": report.sizes.get("adapter_weights_bytes", 0) / mb},
        {"quantity": f"merged size (MB, {report.dtype})",
         "value": report.sizes.get("merged_bytes", 0) / mb},
        {"quantity": "adapter effect on logits (max |diff|, fp32)",
         "value": logits.get("adapter_effect", {}).get("max_abs")},
        {"quantity": "merged fp32 vs base+adapter (max |diff|)",
         "value": logits.get("merge_fp32_vs_reference", {}).get("max_abs")},
        {"quantity": f"saved {report.dtype} vs base+adapter (max |diff|)",
         "value": logits.get("saved_vs_reference", {}).get("max_abs"), "limit": limits.get("max_abs")},
        {"quantity": f"saved {report.dtype} vs base+adapter (mean |diff|)",
         "value": logits.get("saved_vs_reference", {}).get("mean_abs"),
         "limit": limits.get("mean_abs")},
        {"quantity": "changed weights surviving rounding",
         "value": report.delta.get("survival_fraction")},
    ]
    return rows
