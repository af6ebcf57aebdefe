"""Generate with the LoRA update merged into a copy of the weights.

A LoRA projection computes ``W x + s B (A x)``: three matmuls where the merged model needs
one. While decoding (one token per step) the two extra small matmuls per projection, seven
projections per layer, cost far more than their FLOPs: on the CPU box the LoRA path decoded
1.15-1.34x slower than the merged one (``benchmarks/gpu/merged_generation.py``).
For the rollout only, each adapted projection gets ``W + s B A`` (a fresh tensor: ``W`` is
kept untouched, so nothing drifts through bf16 merge/unmerge round trips) and the adapters
are switched off; afterwards ``W`` and the adapters are back. Memory: one extra copy of the
adapted weights while generating. Training and its gradients never see the merged copy.

The merged projection rounds differently from the LoRA path (one bf16 matmul instead of
three), so sampled completions differ by rounding from what the LoRA path would sample;
TRL's loss uses log-probs recomputed with the LoRA path either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolrl_lib.fast.trl_compat import hook_rollout


def lora_layers(model: Any) -> list[Any]:
    """The model's PEFT LoRA layers (what the merged rollouts and the weight sync merge)."""
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


@contextmanager
def lora_merged(model: Any) -> Iterator[Any]:
    """Inside: ``model`` (a PeftModel) computes with ``W + s B A`` and adapters disabled."""
    import torch

    layers = lora_layers(model)
    if not layers:
        raise ValueError("lora_merged needs a PEFT LoRA model; this model has no LoRA layers")
    swapped: list[tuple[Any, Any]] = []
    try:
        with torch.no_grad():
            for layer in layers:
                base = layer.get_base_layer()
                if not isinstance(base, torch.nn.Linear) or layer.merged:
                    raise ValueError(
                        f"lora_merged supports unmerged LoRA on torch.nn.Linear only, got "
                        f"{type(base).__name__} (merged={layer.merged}): set "
                        f"fast.merged_generation=false for this model")
                active = [name for name in layer.active_adapters if name in layer.lora_A]
                if not active:
                    continue
                weight = base.weight.data
                merged = weight.clone()
                for name in active:
                    merged += layer.get_delta_weight(name).to(weight.dtype)
                base.weight.data = merged
                swapped.append((base, weight))
        with model.disable_adapter():
            yield model
    finally:
        for base, weight in swapped:
            base.weight.data = weight


@contextmanager
def merged_if(model: Any, enabled: bool) -> Iterator[Any]:
    """``lora_merged(model)`` when ``enabled`` and the model has LoRA layers, else the model as
    it is: for the library's own rollouts (single-turn ``rollout_func``, multi-turn episodes)."""
    if enabled and lora_layers(model):
        with lora_merged(model) as merged:
            yield merged
    else:
        yield model


def generate_with_merged_lora(trainer: Any) -> str:
    """Make ``trainer`` (a TRL GRPOTrainer on a PEFT LoRA model) roll out with merged weights;
    returns the name of the generation method it wrapped."""
    peft_model = trainer.accelerator.unwrap_model(trainer.model)

    def merged_rollout(call: Any, *args: Any, **kwargs: Any) -> Any:
        with lora_merged(peft_model):
            return call(*args, **kwargs)

    return hook_rollout(trainer, merged_rollout)


def merged_path_check(model: Any, input_ids: Any, new_tokens: int = 8, lora_b_std: float = 0.05,
                      seed: int = 0) -> dict[str, Any]:
    """Does this model's forward *and* generate honour the merged path? For a backend that
    patches LoRA layers (Unsloth) this cannot be taken on trust: one that ignored the adapter
    switch would add the update twice.

    The adapters' B matrices (zero at init, so every path would agree trivially) are set to
    random values for the check and restored after. Returns the mean and largest logit gaps of
    the merged and the base (adapters off) path against the LoRA path, the greedy-token agreement
    of merged vs LoRA and of base vs LoRA over ``new_tokens`` tokens, and ``ok``: the merged
    path's mean gap at most half the base path's (rounding: bf16 on the embedded model gives
    ~0.1 of it; an update applied twice gives ~1) and its tokens agreeing with LoRA at least as
    often as the base path's do."""
    import torch

    layers = lora_layers(model)
    if not layers:
        raise ValueError("merged_path_check needs a PEFT LoRA model; this model has no LoRA layers")
    saved = [(w, w.detach().clone()) for layer in layers for w in
             (layer.lora_B[name].weight for name in layer.active_adapters if name in layer.lora_B)]
    generator = torch.Generator(device="cpu").manual_seed(seed)
    greedy = {"do_sample": False, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens}
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for weight, _ in saved:
                noise = torch.randn(weight.shape, generator=generator) * lora_b_std
                weight.copy_(noise.to(weight.device, weight.dtype))

            def run() -> tuple[Any, Any]:
                logits = model(input_ids=input_ids).logits.float()
                tokens = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                        pad_token_id=0, **greedy)[:, input_ids.shape[1]:]
                return logits, tokens

            lora_logits, lora_tokens = run()
            with lora_merged(model):
                merged_logits, merged_tokens = run()
            with model.disable_adapter():
                base_logits, base_tokens = run()
    finally:
        with torch.no_grad():
            for weight, original in saved:
                weight.copy_(original)
        model.train(was_training)
    merged_diff, base_diff = (merged_logits - lora_logits).abs(), (base_logits - lora_logits).abs()
    merged_agree = (merged_tokens == lora_tokens).float().mean().item()
    base_agree = (base_tokens == lora_tokens).float().mean().item()
    return {"merged_vs_lora_mean_logit_gap": round(merged_diff.mean().item(), 5),
            "base_vs_lora_mean_logit_gap": round(base_diff.mean().item(), 5),
            "merged_vs_lora_max_logit_gap": round(merged_diff.max().item(), 5),
            "base_vs_lora_max_logit_gap": round(base_diff.max().item(), 5),
            "merged_vs_lora_token_agreement": round(merged_agree, 4),
            "base_vs_lora_token_agreement": round(base_agree, 4),
            "ok": bool(base_diff.mean() > 0 and merged_diff.mean() <= 0.5 * base_diff.mean()
                       and merged_agree >= base_agree)}


def require_merged_path(model: Any, tokenizer: Any) -> dict[str, Any]:
    """Run :func:`merged_path_check` on a short fixed prompt; raise when the merged path does
    not compute the LoRA path on this model (a backend whose layers ignore the adapter switch
    would train on rollouts of a different policy). Returns the check's figures."""
    ids = tokenizer(text=["Merged rollouts must compute what the LoRA model computes."],
                    return_tensors="pt")["input_ids"]
    check = merged_path_check(model, ids.to(model.device))
    if not check["ok"]:
        raise RuntimeError(f"fast.merged_generation: merged rollouts do not compute the LoRA path on "
                           f"this model: {check}; set fast.merged_generation=false")
    return check
