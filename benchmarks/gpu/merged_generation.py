"""Benchmark: rollouts through LoRA adapters vs through merged weights (``fast.merged_generation``).

The same model generates the same prompts three ways: with its LoRA adapters (what TRL + PEFT
do by default), with the update merged into a copy of the weights (``lora_merged``, the merge
counted in the time), and without adapters (the plain base model: the floor). Completions
have a fixed length (EOS suppressed), decoding is greedy, so every way decodes the same number
of tokens; the greedy tokens of the merged and LoRA ways are also compared (they differ only
by rounding, which can flip a near-tie).

    python -m benchmarks.gpu.merged_generation                              # embedded model, CPU
    python -m benchmarks.gpu.merged_generation --device cuda --shapes qwen3-8b --batch 32 \
        --new-tokens 128 --repeats 1                  # random weights at Qwen3-8B shapes, no files

With ``--shapes`` the model has random weights and the prompts are random token ids (speed
only: the greedy agreement is then about random logits, not a language model's).

writes benchmarks/results/merged_generation_<device>.{json,csv,md}.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _prompts(tokenizer: Any, batch: int) -> list[str]:
    return [tokenizer.apply_chat_template(
        [{"role": "user", "content": f"Request {i}: what is the weather in city number {i * 7}?"}],
        add_generation_prompt=True, tokenize=False) for i in range(batch)]


def _generate(model: Any, inputs: Any, new_tokens: int, eos: list[int], sync: Any) -> tuple[Any, float]:
    import torch

    sync()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, suppress_tokens=eos, pad_token_id=eos[0])
    sync()
    return out[:, inputs["input_ids"].shape[1]:], time.perf_counter() - start


def _random_model(shapes: str, prompt_tokens: int, batch: int, device: str, dtype: Any) -> tuple[Any, Any, list[int]]:
    """A random-weight Qwen3 at ``grpo_throughput.SHAPES[shapes]``, built on ``device``, and
    random prompts of ``prompt_tokens`` ids; token 0 plays EOS/padding."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config

    from benchmarks.grpo_throughput import SHAPES

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            Qwen3Config(**SHAPES[shapes], eos_token_id=0, pad_token_id=0, bos_token_id=1), dtype=dtype)
    model.generation_config = GenerationConfig(eos_token_id=0, pad_token_id=0, bos_token_id=1)
    ids = torch.randint(2, SHAPES[shapes]["vocab_size"], (batch, prompt_tokens), device=device)
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, [0]


def _write(stem: Path, result: dict[str, Any], a: argparse.Namespace) -> None:
    rows = result["rows"]
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    with stem.with_suffix(".csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    agreement = result.get("greedy_token_agreement_merged_vs_lora")
    lines = [f"# Rollouts: LoRA adapters vs merged weights ({result['device_name']}, {result['dtype']})", "",
             f"{result['model']}, LoRA r{a.rank} on all projections, batch {a.batch} x {a.new_tokens} new "
             f"tokens after {result['prompt_tokens']} prompt tokens (fixed length, greedy), mean of "
             f"{a.repeats} after a warm-up; merged includes the merge. Greedy tokens merged = LoRA: "
             f"{'n/a' if agreement is None else f'{agreement:.1%}'}.", "",
             "| way | mean s | min s | tokens/s | speed-up vs LoRA |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['way']} | {r['mean_s']} | {r['min_s']} | {r['tokens_per_s']} | {r['speedup_vs_lora']} |"
              for r in rows]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(lines[-1], flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded", help="'embedded' or a model folder")
    parser.add_argument("--shapes", default=None, help="random weights at grpo_throughput's shapes "
                        "(qwen3-8b, tiny) instead of --model")
    parser.add_argument("--prompt-tokens", type=int, default=256, help="prompt length with --shapes")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto", help="auto: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per way (after one warm-up)")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--out", default="benchmarks/results")
    a = parser.parse_args(argv)
    for flag in ("batch", "new_tokens", "repeats", "rank", "prompt_tokens"):
        if getattr(a, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1")

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from toolrl_lib.fast.merged_generation import lora_merged

    cuda = a.device.startswith("cuda")
    dtype = {"auto": torch.bfloat16 if cuda else torch.float32, "bf16": torch.bfloat16,
             "fp32": torch.float32}[a.dtype]
    if a.shapes:
        base, inputs, eos = _random_model(a.shapes, a.prompt_tokens, a.batch, a.device, dtype)
    else:
        from toolrl_lib.models import load_tokenizer, resolve_model

        folder = resolve_model(a.model)
        tokenizer = load_tokenizer(folder)
        tokenizer.padding_side = "left"
        torch.manual_seed(0)
        base = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(a.device)
        inputs = tokenizer(_prompts(tokenizer, a.batch), return_tensors="pt", padding=True).to(a.device)
        eos = sorted({tokenizer.eos_token_id, tokenizer.pad_token_id} - {None})
    model = get_peft_model(base, LoraConfig(r=a.rank, lora_alpha=2 * a.rank, target_modules=PROJECTIONS,
                                            init_lora_weights=False))  # random B: a trained-like update
    model.eval()
    for module in model.modules():  # small updates, as after training, so greedy paths stay comparable
        if hasattr(module, "lora_B"):
            for linear in module.lora_B.values():
                linear.weight.data.mul_(0.01)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def lora_way() -> tuple[Any, float]:
        return _generate(model, inputs, a.new_tokens, eos, sync)

    def merged_way() -> tuple[Any, float]:
        sync()
        start = time.perf_counter()
        with lora_merged(model):
            tokens, _ = _generate(model, inputs, a.new_tokens, eos, sync)
        return tokens, time.perf_counter() - start

    def base_way() -> tuple[Any, float]:
        with model.disable_adapter():
            return _generate(model, inputs, a.new_tokens, eos, sync)

    ways = {"lora": lora_way, "merged": merged_way, "base (no adapters)": base_way}
    device_name = torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine()
    result: dict[str, Any] = {
        "model": f"random {a.shapes}" if a.shapes else a.model, "device": a.device,
        "device_name": device_name, "dtype": str(dtype), "batch": a.batch, "new_tokens": a.new_tokens,
        "prompt_tokens": int(inputs["input_ids"].shape[1]), "lora_rank": a.rank,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "rows": [],
        "command": " ".join(["python -m benchmarks.gpu.merged_generation",
                             *(sys.argv[1:] if argv is None else argv)])}
    tokens: dict[str, Any] = {}
    for name, way in ways.items():  # results are written after every way (a kill keeps them)
        tokens[name], _ = way()  # warm-up (kernels, caches)
        times = [way()[1] for _ in range(a.repeats)]
        mean = sum(times) / len(times)
        result["rows"].append({"way": name, "mean_s": round(mean, 4), "min_s": round(min(times), 4),
                               "tokens_per_s": round(a.batch * a.new_tokens / mean, 1),
                               "repeats": a.repeats})
        for row in result["rows"]:
            row["speedup_vs_lora"] = round(result["rows"][0]["mean_s"] / row["mean_s"], 3)
        if "merged" in tokens:
            result["greedy_token_agreement_merged_vs_lora"] = round(
                (tokens["merged"] == tokens["lora"]).float().mean().item(), 4)
        _write(Path(a.out) / f"merged_generation_{'cuda' if cuda else 'cpu'}", result, a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
