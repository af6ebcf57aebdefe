"""Where the smoke workbook's CPU seconds go now, and the alternatives that did not beat them.

After the earlier workbook profiles (issue 26) two costs remain on the 2-core box: format
priming (a LoRA forward and backward over ~465-token rows) and token-by-token decoding. This
script measures, side by side in one run, with the smoke config's model and data:

1. priming rows, forward and backward, the way TRL's fused LM head does it (logits only at
   the completion's positions): seconds per row; the share of matrix products, attention and
   everything else (torch.profiler, self time); the products' rate against a plain matmul of
   the same shape on this machine;
2. that row's attention, forward and backward: SDPA's flash kernel (what runs) against SDPA's
   math kernel and an explicit softmax;
3. one decode step's linear layers at the GRPO batch (8 rows) with the weights out of cache (one
   copy per layer, as in the model): ``F.linear`` (what runs), ``W @ x.T`` and oneDNN-packed
   weights, against the floor of reading the weights once at this machine's read bandwidth;
4. the library's ``generate`` (what validations and GRPO rollouts call) with its decode steps on
   ``F.linear`` (``weight_major_linear.MAX_ROWS = 0``) and on ``W @ x.T`` (``WEIGHT_MAJOR_ROWS``),
   at the GRPO and the validation settings of the smoke config, same seed; which of the two the
   library uses on this machine is recorded (``W @ x.T`` except on Intel CPUs).

Writes ``<out>/<name>.{json,md}`` (``--name``: one file per kind of machine). The machine may be shared: each figure is the fastest
of ``--rounds`` (all rounds are in the JSON).

    python -m benchmarks.cpu_floor --out benchmarks/results --name cpu_floor_xeon
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm")


def fastest_ms(fn: Callable[[], Any], rounds: int, repeat: int = 1) -> tuple[float, list[float]]:
    """Milliseconds per call: one warm-up, then ``rounds`` timings of ``repeat`` calls each."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - start) / repeat * 1e3)
    return min(times), [round(t, 3) for t in times]


def priming_rows(config_path: str, n_rows: int) -> tuple[Any, Any, list[tuple[Any, Any]]]:
    """The smoke LoRA model and ``n_rows`` tokenised priming rows (ids, completion mask)."""
    import torch
    from peft import get_peft_model

    from toolrl_lib.models import load_model, load_tokenizer, resolve_model
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples
    from toolrl_lib.train.dataset import priming_rows as build_rows

    config = load_run_config(config_path, check=False)
    examples = load_examples(config.data.train_files, config.data.max_train_examples,
                             seed=config.seed, shuffle=True)
    base = resolve_model(config.model.name)
    tokenizer = load_tokenizer(base, padding_side="right")
    rows = build_rows(examples[:n_rows], get_adapter(config.model.family), tokenizer, config.priming.max_length)
    tokenised = []
    for row in rows:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        completion = tokenizer(row["completion"] + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + completion])
        mask = torch.tensor([[False] * len(prompt) + [True] * len(completion)])
        tokenised.append((ids, mask))
    model = load_model(base, dtype="fp32", device="cpu")
    lora = config.lora
    peft_model = get_peft_model(model, peft_lora_config(lora, r=config.priming.lora_r, alpha=config.priming.lora_alpha))
    peft_model.train()
    return peft_model, model.config, tokenised


def row_step(peft_model: Any, ids: Any, mask: Any) -> None:
    """Forward and backward of one row, projecting only the completion's positions (TRL's way)."""
    import torch

    backbone = peft_model.get_base_model().model
    head = peft_model.get_base_model().lm_head
    hidden = backbone(input_ids=ids, use_cache=False).last_hidden_state[:, :-1]
    keep = mask[:, 1:]
    logits = head(hidden[keep])
    loss = torch.nn.functional.cross_entropy(logits, ids[:, 1:][keep])
    loss.backward()
    peft_model.zero_grad(set_to_none=True)


def seconds_per_row(peft_model: Any, rows: list[tuple[Any, Any]], rounds: int, bf16: bool = False) -> list[float]:
    """Each round's seconds per row, in fp32 or under bf16 autocast (fp32 weights, as a trainer's
    ``bf16=True`` runs it)."""
    import torch

    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            for ids, mask in rows:
                row_step(peft_model, ids, mask)
        seconds.append((time.perf_counter() - start) / len(rows))
    return seconds


def priming_breakdown(peft_model: Any, rows: list[tuple[Any, Any]], rounds: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    seconds = seconds_per_row(peft_model, rows, rounds)
    bf16 = seconds_per_row(peft_model, rows, rounds, bf16=True)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        for ids, mask in rows:
            row_step(peft_model, ids, mask)
    share = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    matmul_flops = 0.0
    for event in prof.key_averages():
        if event.key in MATMUL_OPS:
            share["matmul"] += event.self_cpu_time_total
            matmul_flops += event.flops or 0
        elif "scaled_dot_product" in event.key:
            share["attention"] += event.self_cpu_time_total
        else:
            share["other"] += event.self_cpu_time_total
    total = sum(share.values())
    return {
        "rows": len(rows), "mean_tokens": round(sum(int(i.shape[1]) for i, _ in rows) / len(rows), 1),
        "mean_completion_tokens": round(sum(int(m.sum()) for _, m in rows) / len(rows), 1),
        "seconds_per_row": round(min(seconds), 3), "rounds_seconds_per_row": [round(s, 3) for s in seconds],
        "bf16_autocast_seconds_per_row": round(min(bf16), 3),
        "rounds_bf16_autocast_seconds_per_row": [round(s, 3) for s in bf16],
        "share": {k: round(v / total, 3) for k, v in share.items()},
        "matmul_gflops_per_s": round(matmul_flops / (share["matmul"] * 1e-6) / 1e9, 1),
    }


def plain_matmul_rate(tokens: int, hidden: int, intermediate: int, rounds: int) -> float:
    import torch

    a, b = torch.randn(tokens, hidden), torch.randn(hidden, intermediate)
    ms, _ = fastest_ms(lambda: a @ b, rounds, repeat=20)
    return round(2 * tokens * hidden * intermediate / (ms * 1e-3) / 1e9, 1)


def attention_variants(cfg: Any, tokens: int, rounds: int) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    torch.manual_seed(0)
    q = torch.randn(1, heads, tokens, head_dim, requires_grad=True)
    k = torch.randn(1, kv_heads, tokens, head_dim, requires_grad=True)
    v = torch.randn(1, kv_heads, tokens, head_dim, requires_grad=True)
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()

    def sdpa(backend: Any) -> Callable[[], Any]:
        def run() -> Any:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            out.sum().backward()
            return out.detach()
        return run

    def explicit() -> Any:
        group = heads // kv_heads
        scores = q @ k.repeat_interleave(group, 1).transpose(-1, -2) / head_dim ** 0.5
        out = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1) @ v.repeat_interleave(group, 1)
        out.sum().backward()
        return out.detach()

    variants = {"sdpa_flash (runs)": sdpa(SDPBackend.FLASH_ATTENTION), "sdpa_math": sdpa(SDPBackend.MATH),
                "explicit_softmax": explicit}
    reference = variants["sdpa_flash (runs)"]()
    result = {}
    for name, fn in variants.items():
        ms, all_rounds = fastest_ms(fn, rounds, repeat=5)
        result[name] = {"ms_per_layer": round(ms, 2), "rounds": all_rounds,
                        "max_abs_diff": float((fn() - reference).abs().max())}
    return result


def decode_variants(cfg: Any, rows: int, rounds: int) -> dict[str, Any]:
    """One decode step's linear layers (every layer's own weights, so they come from memory)."""
    import torch
    import torch.nn.functional as F
    import torch.utils.mkldnn as mkldnn

    hidden, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    shapes = [(heads * head_dim, hidden), (kv_heads * head_dim, hidden), (kv_heads * head_dim, hidden),
              (hidden, heads * head_dim), (inter, hidden), (inter, hidden), (hidden, inter)]
    torch.manual_seed(0)
    with torch.inference_mode():
        weights = [torch.randn(out, inp) * 0.02 for _ in range(layers) for out, inp in shapes]
        head = torch.randn(cfg.vocab_size, hidden) * 0.02
        inputs = {w.shape[1]: torch.randn(rows, w.shape[1]) for w in weights}
        x_head = torch.randn(rows, hidden)

        def packed(w: Any) -> Any:
            linear = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
            linear.weight.data = w
            return mkldnn.to_mkldnn(linear)

        packed_layers = [packed(w) for w in weights]
        packed_head = packed(head)
        variants = {
            "F.linear (runs)": (lambda: [F.linear(inputs[w.shape[1]], w) for w in weights],
                                lambda: F.linear(x_head, head)),
            "W @ x.T": (lambda: [w @ inputs[w.shape[1]].t() for w in weights], lambda: head @ x_head.t()),
            "oneDNN packed": (lambda: [m(inputs[m.weight.shape[1]]) for m in packed_layers],
                              lambda: packed_head(x_head)),
        }
        result = {}
        for name, (layers_fn, head_fn) in variants.items():
            layer_ms, layer_rounds = fastest_ms(layers_fn, rounds, repeat=3)
            head_ms, head_rounds = fastest_ms(head_fn, rounds, repeat=3)
            result[name] = {"layers_ms": round(layer_ms, 1), "lm_head_ms": round(head_ms, 1),
                            "step_ms": round(layer_ms + head_ms, 1),
                            "rounds": {"layers": layer_rounds, "lm_head": head_rounds}}
        big = torch.randn(125_000_000)  # 500 MB: far beyond any cache
        read_ms, _ = fastest_ms(lambda: big.sum(), rounds)
        bandwidth = big.numel() * 4 / (read_ms * 1e-3)
        weight_bytes = (sum(w.numel() for w in weights) + head.numel()) * 4
    return {"rows": rows, "variants": result, "read_gb_per_s": round(bandwidth / 1e9, 1),
            "weights_mb": round(weight_bytes / 1e6, 1),
            "read_floor_step_ms": round(weight_bytes / bandwidth * 1e3, 1)}


def decode_table(d: dict[str, Any]) -> list[str]:
    return [
        f"## One decode step's linear layers, {d['rows']} rows, weights from memory",
        "",
        "| variant | layers ms | LM head ms | step ms |",
        "| --- | --- | --- | --- |",
        *[f"| {name} | {v['layers_ms']} | {v['lm_head_ms']} | {v['step_ms']} |" for name, v in d["variants"].items()],
        f"| read floor ({d['weights_mb']:.0f} MB at {d['read_gb_per_s']} GB/s) | | | {d['read_floor_step_ms']} |",
        "",
    ]


def generate_settings(config_path: str, val_prompts: int | None = None) -> tuple[Any, Any, Any, list[tuple[str, list[str], dict[str, Any]]]]:
    """The smoke config's model and tokenizer (warmed up), its seed, and the two ``generate``
    settings both decode benchmarks time: (name, rendered prompts, generate kwargs)."""
    from toolrl_lib.generation import generate
    from toolrl_lib.models import load_model, load_tokenizer, resolve_model
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.dataset import load_examples, validation_subset

    config = load_run_config(config_path, check=False)
    base = resolve_model(config.model.name)
    tokenizer, model = load_tokenizer(base), load_model(base, dtype="fp32", device="cpu")
    adapter = get_adapter(config.model.family)
    train = load_examples(config.data.train_files, config.data.max_train_examples, seed=config.seed, shuffle=True)
    val = validation_subset(load_examples(config.data.val_files, None, seed=config.seed, shuffle=False),
                            config.validation.num_examples)[:val_prompts]
    g, v = config.grpo, config.validation
    settings = [
        ("GRPO rollout", train[:2], dict(max_new_tokens=g.max_completion_length, temperature=g.temperature,
                                         num_return_sequences=g.num_generations,
                                         batch_size=2 * g.num_generations)),
        ("validation", val, dict(max_new_tokens=v.max_new_tokens, temperature=v.temperature,
                                 num_return_sequences=v.k, batch_size=v.batch_size)),
    ]
    generate(model, tokenizer, [adapter.render_prompt(train[0], tokenizer)], max_new_tokens=4)  # warm-up
    rendered = [(name, [adapter.render_prompt(e, tokenizer) for e in examples], kwargs)
                for name, examples, kwargs in settings]
    return model, tokenizer, config.seed, rendered


def generate_variants(config_path: str, rounds: int) -> list[dict[str, Any]]:
    """Seconds of ``generate`` at the smoke GRPO and validation settings, F.linear vs W @ x.T."""
    from toolrl_lib.fast import weight_major_linear
    from toolrl_lib.generation import generate

    model, tokenizer, seed, settings = generate_settings(config_path)
    default_rows = weight_major_linear.MAX_ROWS
    results = []
    for name, prompts, kwargs in settings:
        row: dict[str, Any] = {"setting": name, "prompts": len(prompts), **kwargs}
        outputs = {}
        times: dict[str, list[float]] = {"F.linear": [], "W @ x.T": []}
        try:
            for _ in range(rounds):  # the two variants alternate, so drift on the box hits both
                for variant, rows in (("F.linear", 0), ("W @ x.T", weight_major_linear.WEIGHT_MAJOR_ROWS)):
                    weight_major_linear.MAX_ROWS = rows
                    start = time.perf_counter()
                    outputs[variant] = generate(model, tokenizer, prompts, do_sample=True, seed=seed, **kwargs)
                    times[variant].append(round(time.perf_counter() - start, 2))
        finally:
            weight_major_linear.MAX_ROWS = default_rows
        row["variants"] = {variant: {"seconds": min(t), "rounds": t} for variant, t in times.items()}
        pairs = [(a, b) for pa, pb in zip(*outputs.values(), strict=True) for a, b in zip(pa, pb, strict=True)]
        row["identical_completions"] = sum(a == b for a, b in pairs) / len(pairs)
        results.append(row)
    return results


def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bf16_instructions() -> list[str]:
    """The CPU's native bf16 instruction sets (Linux flags ``amx_bf16``, ``avx512_bf16``): where
    there are none, bf16 matrix products are emulated."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted({"amx_bf16", "avx512_bf16"} & set(flags))


def markdown(result: dict[str, Any]) -> str:
    p, a = result["priming"], result["attention"]
    lines = [
        "# CPU floor of the smoke workbook's two remaining costs",
        "",
        f"{result['cpus']} CPU(s) ({result['cpu_model']}; native bf16: "
        f"{', '.join(result.get('bf16_instructions', [])) or 'none'}), torch {result['torch']}, threads {result['threads']}; "
        f"`{result['command']}`; fastest of {result['rounds']} rounds.",
        "",
        f"## Priming: {p['rows']} rows of ~{p['mean_tokens']:.0f} tokens "
        f"(~{p['mean_completion_tokens']:.0f} trained), forward + backward",
        "",
        "| seconds / row | matrix products | attention | other | products' rate | plain matmul rate "
        "| bf16 autocast s / row |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {p['seconds_per_row']} | {p['share']['matmul']:.0%} | {p['share']['attention']:.0%} | "
        f"{p['share']['other']:.0%} | {p['matmul_gflops_per_s']} GFLOP/s | {result['plain_matmul_gflops_per_s']} GFLOP/s "
        f"| {p.get('bf16_autocast_seconds_per_row', '–')} |",
        "",
        f"## Attention of one ~{p['mean_tokens']:.0f}-token row, forward + backward, one layer",
        "",
        "| variant | ms | max abs diff to flash |",
        "| --- | --- | --- |",
        *[f"| {name} | {v['ms_per_layer']} | {v['max_abs_diff']:.1e} |" for name, v in a.items()],
        "",
        *[line for d in result["decode"] for line in decode_table(d)],
        "## The library's `generate`, decode steps on F.linear vs W @ x.T (same seed)",
        "",
        f"The library decodes with {result['library_decode']} on this CPU "
        "(`toolrl_lib/fast/weight_major_linear.py`: W @ x.T except on Intel CPUs).",
        "",
        "| setting | prompts x samples, max new tokens | F.linear s | W @ x.T s | identical completions |",
        "| --- | --- | --- | --- | --- |",
        *[f"| {r['setting']} | {r['prompts']} x {r['num_return_sequences']}, {r['max_new_tokens']} | "
          f"{r['variants']['F.linear']['seconds']} | {r['variants']['W @ x.T']['seconds']} | "
          f"{r['identical_completions']:.0%} |" for r in result["generate"]],
        "",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/smoke.yaml")
    parser.add_argument("--rows", type=int, default=4, help="priming rows per round")
    parser.add_argument("--decode-rows", type=int, nargs="+", default=[8, 80],
                        help="decode batches (GRPO: 2 prompts x 4; validation: 40 prompts x 2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--generate-rounds", type=int, default=2, help="rounds of each generate() setting")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--name", default="cpu_floor", help="output file stem (one per machine kind)")
    args = parser.parse_args(argv)
    import torch

    from toolrl_lib.fast import weight_major_linear

    peft_model, cfg, rows = priming_rows(args.config, args.rows)
    priming = priming_breakdown(peft_model, rows, args.rounds)
    tokens = int(round(priming["mean_tokens"]))
    result = {
        "command": "python -m benchmarks.cpu_floor " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
        "bf16_instructions": bf16_instructions(),
        "library_decode": "W @ x.T" if weight_major_linear.MAX_ROWS else "F.linear",
        "rounds": args.rounds,
        "priming": priming,
        "plain_matmul_gflops_per_s": plain_matmul_rate(tokens, cfg.hidden_size, cfg.intermediate_size, args.rounds),
        "attention": attention_variants(cfg, tokens, args.rounds),
        "decode": [decode_variants(cfg, rows, args.rounds) for rows in args.decode_rows],
        "generate": generate_variants(args.config, args.generate_rounds),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / f"{args.name}.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
