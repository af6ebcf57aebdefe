"""How far TRL's vLLM weight sync moves the frozen bf16 base weights, against ``fast/weight_sync.py`` (CPU).

Each sync TRL merges the LoRA update into the model's weights and unmerges it (PEFT's
``merge_adapter``/``unmerge_adapter``); in bf16 the round trip rounds twice. This runs both syncs
on the same model, the embedded model's widths (SmolLM2-135M: hidden 576, MLP 1536, 9 query and 3
key/value heads, LoRA r16 alpha 32 on all seven projections; ``--layers`` of its 30 decoder
layers, random weights at its init scale). Training is stood in for by a random walk of the
adapters: before each sync every LoRA B (PEFT starts it at zero) takes a step of ``--b-step``
(standard deviation per element), the same walk for both syncs. After each count of syncs it
reports the share of adapted base-weight elements changed, and their RMS drift over the RMS of
the LoRA update at that point (the drift is noise of the update's own size when that ratio
nears 1). With the adapter held fixed the round trip moves the weights once and then no further
(measured: the same figures after 1 and 10 syncs); it is a changing adapter that walks them.

    python -m benchmarks.weight_sync_drift --out benchmarks/results
"""

from __future__ import annotations

import argparse
import contextlib
import json
import types
from pathlib import Path
from typing import Any

from benchmarks.result_files import write_result

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def embedded_shaped(layers: int, seed: int = 0) -> Any:
    """A bf16 LLaMA at the embedded model's widths with LoRA r16 on every projection (B at zero)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=256, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                         num_attention_heads=9, num_key_value_heads=3, initializer_range=0.041666666666666664)
    return get_peft_model(LlamaForCausalLM(config).to(torch.bfloat16),
                          LoraConfig(r=16, lora_alpha=32, target_modules=TARGETS))


def step_adapters(model: Any, b_step: float, generator: Any) -> None:
    """One step of the adapters' random walk: every LoRA B moves by N(0, b_step) per element."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * b_step)


def generation_of(model: Any) -> Any:
    """What TRL's ``VLLMGeneration._iter_named_params`` reads of its instance, without vLLM."""
    from trl.generation.vllm_generation import VLLMGeneration

    generation = types.SimpleNamespace(
        model=model, _dist=types.SimpleNamespace(is_fsdp=False, gather_params=lambda params: contextlib.nullcontext()))
    generation._fix_param_name_to_vllm = types.MethodType(VLLMGeneration._fix_param_name_to_vllm, generation)
    generation.trl_iter = types.MethodType(VLLMGeneration._iter_named_params, generation)
    return generation


def drift(model: Any, before: dict[str, Any], updates: dict[str, Any]) -> dict[str, float]:
    """Share of adapted base elements changed, and RMS drift / RMS update, over every adapted weight."""

    changed = total = 0
    square_drift = square_update = 0.0
    for name, param in model.named_parameters():
        if name in updates:
            difference = param.detach().float() - before[name]
            changed += int((difference != 0).sum())
            total += difference.numel()
            square_drift += float(difference.pow(2).sum())
            square_update += float(updates[name].pow(2).sum())
    return {"changed_share": round(changed / total, 4),
            "drift_over_update": round((square_drift / max(square_update, 1e-30)) ** 0.5, 4)}


def run(layers: int, b_step: float, counts: list[int]) -> list[dict[str, Any]]:
    import torch

    from toolrl_lib.fast.weight_sync import adapted_layers, merged_named_params

    rows = []
    for sync in ("trl", "exact"):
        model = embedded_shaped(layers)
        generation = generation_of(model)
        generator = torch.Generator().manual_seed(1)
        names = {id(p): n for n, p in model.named_parameters()}
        before = {names[key]: layer.get_base_layer().weight.detach().float().clone()
                  for key, layer in adapted_layers(model).items()}
        done = 0
        for count in counts:
            for _ in range(count - done):
                step_adapters(model, b_step, generator)
                for _ in (generation.trl_iter() if sync == "trl" else merged_named_params(generation)):
                    pass
            done = count
            updates = {names[key]: sum(layer.get_delta_weight(a).detach().float() for a in layer.active_adapters)
                       for key, layer in adapted_layers(model).items()}
            rows.append({"sync": sync, "syncs": count, "layers": layers, "b_step": b_step,
                         **drift(model, before, updates)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--b-step", default="0.0001,0.001", help="the adapters' step per sync (std per element of "
                        "LoRA B), comma-separated")
    parser.add_argument("--syncs", default="1,10,50,200", help="sync counts to report at (increasing)")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.syncs.split(",")]
    rows = [row for step in (float(b) for b in args.b_step.split(",")) for row in run(args.layers, step, counts)]
    command = (f"python -m benchmarks.weight_sync_drift --out {args.out} --layers {args.layers} "
               f"--b-step {args.b_step} --syncs {args.syncs}")
    table = ["| sync | LoRA B step per sync | syncs | adapted base elements changed | RMS drift / RMS LoRA update |",
             "| --- | --- | --- | --- | --- |"]
    table += [f"| {r['sync']} | {r['b_step']} | {r['syncs']} | {100 * r['changed_share']:.1f}% | "
              f"{r['drift_over_update']} |" for r in rows]
    note = (f"The embedded model's widths, {args.layers} decoder layers, bf16 base weights, LoRA r16 alpha 32 on "
            "all seven projections, each LoRA B taking a random step of the given std before each sync. `trl`: TRL 1.15's "
            "`VLLMGeneration._iter_named_params` (PEFT's merge into the weights, then unmerge); `exact`: "
            "`toolrl_lib/fast/weight_sync.py` (each adapted weight handed over as a fresh W + sBA copy), which "
            "the trainer installs whenever TRL's engine is on with the peft backend.")
    write_result(args.out, "weight_sync_drift", {"rows": rows, "command": command}, table, note, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
