"""What a LoRA training step asks of the host: aten ops dispatched and CPU seconds (CPU, no GPU).

The embedded model's GRPO step on an H100 is bound by the host, not the GPU: ~0.28 s an optimizer
step of 64 completions with the GPU busy about a quarter of it (``benchmarks/results/grpo_step_profile.md``),
because each of the thousands of small ops per forward and backward is a kernel the host launches.
This counts those ops for the embedded model's layer structure (SmolLM2-135M: 30 decoder layers,
9 query and 3 key/value heads, LoRA r16 on all seven projections) at a tiny width, under bf16
autocast as the GPU recipe runs, for PEFT's LoRA layers (with and without their float32 input
copies, ``fast.bf16_lora_inputs``) and ``fast.fused_lora``. The op counts do not depend on the
width or the batch. The CPU seconds beside them are this CPU's, bf16 matmuls included, so they
are no measure of a GPU host's launch cost; the GPU seconds come from
``benchmarks/gpu/grpo_throughput.py`` (run 5: a third fewer ops, the same 0.28-s mid-round step).

    python -m benchmarks.lora_host_cost --out benchmarks/results
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import statistics
import time
from pathlib import Path
from typing import Any

# SmolLM2-135M-Instruct's layout (the embedded model), at hidden width WIDTH instead of 576
LAYERS, HEADS, KV_HEADS = 30, 9, 3
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
VARIANTS = {
    "peft": "PEFT's LoRA layers (float32 adapters cast their input to float32; autocast casts it back)",
    "peft_bf16_inputs": "PEFT's LoRA layers on bf16 activations (fast.bf16_lora_inputs, the GPU recipe)",
    "fused": "each LoRA projection one autograd node (fast.fused_lora)",
}


def build(width: int, vocab: int, seed: int = 0) -> Any:
    """The embedded model's layer structure at ``width``, bf16, LoRA r16 (float32 adapters, B non-zero)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(hidden_size=width, intermediate_size=width * 8 // 3, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, vocab_size=vocab,
                         tie_word_embeddings=True, max_position_embeddings=2048)
    model = get_peft_model(LlamaForCausalLM(config).to(torch.bfloat16),
                           LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS))
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)
    return model


def step_fn(model: Any, variant: str, ids: Any) -> Any:
    """One loss forward and backward as ``variant`` runs it (bf16 autocast)."""
    import contextlib

    import torch
    from peft.helpers import disable_input_dtype_casting

    def step(grad: bool = True) -> None:
        inputs = disable_input_dtype_casting(model) if variant == "peft_bf16_inputs" else contextlib.nullcontext()
        with inputs, torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
            loss = model(input_ids=ids).logits.float().logsumexp(-1).mean()
        if grad:
            model.zero_grad(set_to_none=True)
            loss.backward()

    return step


def count_ops(step: Any, grad: bool) -> collections.Counter:
    """aten ops dispatched by one ``step(grad)``, by name."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: collections.Counter = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            counts[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        step(grad)
    return counts


def measure(width: int, rows: int, tokens: int, repeats: int, vocab: int) -> list[dict[str, Any]]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # dispatch cost, not how well two cores split tiny matmuls
    try:
        return _measure(width, rows, tokens, repeats, vocab)
    finally:
        torch.set_num_threads(threads)


def _measure(width: int, rows: int, tokens: int, repeats: int, vocab: int) -> list[dict[str, Any]]:
    import torch

    from toolrl_lib.fast.fused_lora import fuse_lora_layers

    base = build(width, vocab)
    ids = torch.randint(0, vocab, (rows, tokens), generator=torch.Generator().manual_seed(0))
    out = []
    for variant in VARIANTS:
        model = copy.deepcopy(base)
        if variant == "fused":
            fuse_lora_layers(model)
        step = step_fn(model, variant, ids)
        for _ in range(3):
            step()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        nograd = []
        for _ in range(repeats):
            start = time.perf_counter()
            step(False)
            nograd.append(time.perf_counter() - start)
        ops, ops_nograd = count_ops(step, True), count_ops(step, False)
        out.append({"variant": variant, "what": VARIANTS[variant], "ops_forward_backward": sum(ops.values()),
                    "ops_forward_no_grad": sum(ops_nograd.values()),
                    "cpu_s_forward_backward": round(statistics.median(times), 4),
                    "cpu_s_forward_no_grad": round(statistics.median(nograd), 4),
                    "top_ops": dict(ops.most_common(6))})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    first = rows[0]
    lines = ["| variant | aten ops, forward + backward | x peft | CPU s, forward + backward | x peft "
             "| aten ops, no-grad forward | CPU s, no-grad forward |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['ops_forward_backward']} | "
                     f"{r['ops_forward_backward'] / first['ops_forward_backward']:.2f} | {r['cpu_s_forward_backward']} | "
                     f"{r['cpu_s_forward_backward'] / first['cpu_s_forward_backward']:.2f} | "
                     f"{r['ops_forward_no_grad']} | {r['cpu_s_forward_no_grad']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=72, help="hidden size (a multiple of 9 heads x 2)")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    rows = measure(args.width, args.rows, args.tokens, args.repeats, args.vocab)
    command = (f"python -m benchmarks.lora_host_cost --width {args.width} --rows {args.rows} --tokens {args.tokens} "
               f"--repeats {args.repeats}" + (f" --out {args.out}" if args.out else ""))
    note = (f"The embedded model's layer structure (30 layers, 9/3 heads, LoRA r16 on 7 projections: 210 adapted "
            f"projections) at hidden width {args.width}, vocabulary {args.vocab}, bf16 weights with float32 adapters "
            f"under bf16 autocast, {args.rows} rows x {args.tokens} tokens, one CPU thread; medians of {args.repeats} "
            f"after 3 warm-ups. aten ops: every op dispatched (views and casts included), counted with a "
            f"TorchDispatchMode; on a GPU each non-view op is a kernel launch. The CPU seconds include this CPU's "
            f"bf16 matmuls and say little about a GPU host's launch cost: on one H100 (grpo_throughput.md, run 5) "
            f"the fused projections left a mid-round optimizer step at 0.28 s.")
    print(table(rows))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lora_host_cost.json").write_text(json.dumps({"rows": rows, "note": note, "command": command},
                                                                  indent=2) + "\n")
        (args.out / "lora_host_cost.md").write_text(f"{table(rows)}\n\n{note}\n\n```bash\n{command}\n```\n")


if __name__ == "__main__":
    main()
