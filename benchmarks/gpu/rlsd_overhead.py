"""Benchmark: what RLSD-TR costs on top of plain GRPO, per optimizer step.

RLSD adds no-grad forward passes per generation batch (the teacher on prompt + privileged
text + completion, and the student when TRL has not already computed old log-probs) and,
for the trust-region teacher, an EMA of the LoRA weights after each optimizer step. This
script trains the same random-weight model with the same seed three ways (GRPO, RLSD with
the live teacher, RLSD-TR) on identical batches — RLSD keeps the random stream unchanged,
so all three sample the same completions — and reports seconds per optimizer step and peak
GPU memory. Weights are random, so rewards and losses mean nothing here; only cost does.

    python -m benchmarks.gpu.rlsd_overhead                      # GPU: SmolLM2-135M-shaped model
    python -m benchmarks.gpu.rlsd_overhead --hidden 64 --layers 2 --steps 2 --warmup 1  # CPU smoke

writes benchmarks/results/rlsd_overhead.{json,csv,md}.
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


def _dataset(tok: Any, n: int, prompt_words: int) -> Any:
    from datasets import Dataset

    rows = []
    for i in range(n):
        text = " ".join(f"w{(i * 7 + j) % 97}" for j in range(prompt_words))
        prompt = tok.apply_chat_template([{"role": "user", "content": f"request {i}: {text}"}],
                                         add_generation_prompt=True, tokenize=False)
        rows.append({"prompt": prompt,
                     "privileged": f'<tool_call>\n{{"name": "tool_{i}", "arguments": {{"x": {i}}}}}\n</tool_call>'})
    return Dataset.from_list(rows)


def _reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    return [float(len(c) % 5) for c in completions]


class _Timer:
    """Wall time per optimizer step (CUDA-synchronised), from a TrainerCallback."""

    def __init__(self, cuda: bool) -> None:
        import torch
        from transformers import TrainerCallback

        timer = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if cuda:
                    torch.cuda.synchronize()
                timer.start = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if cuda:
                    torch.cuda.synchronize()
                timer.times.append(time.perf_counter() - timer.start)

        self.times: list[float] = []
        self.start = 0.0
        self.callback = Callback()


def run_mode(mode: str, a: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    import torch
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback
    from toolrl_lib.models import make_tiny_model
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.config import LoraSection
    from toolrl_lib.train.rlsd import RLSDConfig, RLSDGRPOTrainer

    install_cpu_logprob_fallback()
    cuda = torch.cuda.is_available() and not a.cpu
    set_seed(a.seed)
    model, tok = make_tiny_model(seed=a.seed, hidden_size=a.hidden, num_layers=a.layers)
    if cuda:
        model = model.to("cuda", dtype=torch.bfloat16)
        torch.cuda.reset_peak_memory_stats()
    prompts_per_step = a.completions // a.generations
    args = GRPOConfig(
        output_dir=str(out_dir / mode), use_cpu=not cuda, bf16=cuda, seed=a.seed,
        per_device_train_batch_size=a.completions, gradient_accumulation_steps=1,
        num_generations=a.generations, max_completion_length=a.completion_tokens,
        max_steps=a.warmup + a.steps, logging_steps=1, report_to=[], save_strategy="no",
        learning_rate=1e-5, gradient_checkpointing=False, disable_tqdm=True, loss_type="dapo",
    )
    lora = peft_lora_config(LoraSection())  # the library's: r16/alpha32 on all 7 projections
    timer = _Timer(cuda)
    common = dict(model=model, reward_funcs=_reward, args=args, processing_class=tok, peft_config=lora,
                  train_dataset=_dataset(tok, prompts_per_step * (a.warmup + a.steps), a.prompt_words),
                  callbacks=[timer.callback])
    if mode == "grpo":
        trainer = GRPOTrainer(**common)
    else:
        teacher = "live" if mode == "rlsd_live" else "trust_region"
        trainer = RLSDGRPOTrainer(rlsd=RLSDConfig(teacher=teacher), **common)
    trainer.train()
    timed = timer.times[a.warmup:]
    logs = [h for h in trainer.state.log_history if "loss" in h]
    lengths = [h.get("completions/mean_length", float("nan")) for h in logs]
    row = {
        "mode": mode, "seconds_per_step": round(sum(timed) / len(timed), 4),
        "min_step_s": round(min(timed), 4), "max_step_s": round(max(timed), 4), "timed_steps": len(timed),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "mean_completion_tokens": round(sum(lengths) / len(lengths), 1),
    }
    if mode != "grpo":
        row["rlsd_weight_mean"] = round(sum(h["rlsd/weight_mean"] for h in logs) / len(logs), 4)
        row["rlsd_teacher_kl"] = round(sum(h["rlsd/teacher_kl"] for h in logs) / len(logs), 6)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=576, help="SmolLM2-135M: 576")
    parser.add_argument("--layers", type=int, default=30, help="SmolLM2-135M: 30")
    parser.add_argument("--completions", type=int, default=64, help="completions per optimizer step")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--completion-tokens", type=int, default=128)
    parser.add_argument("--prompt-words", type=int, default=60)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--modes", default="grpo,rlsd_live,rlsd_tr")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parents[1] / "results"))
    parser.add_argument("--scratch", default="/tmp/rlsd_overhead")
    a = parser.parse_args(argv)

    import torch

    rows = [run_mode(mode, a, Path(a.scratch)) for mode in a.modes.split(",")]
    base = next((r["seconds_per_step"] for r in rows if r["mode"] == "grpo"), None)
    for r in rows:
        r["vs_grpo"] = round(r["seconds_per_step"] / base, 3) if base else None
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not a.cpu else platform.processor() or "cpu"
    result = {
        "rows": rows, "device": device, "torch": torch.__version__,
        "model": f"random Llama, hidden {a.hidden}, {a.layers} layers, byte-level vocab (tiny tokenizer)",
        "batch": f"{a.completions} completions/step ({a.completions // a.generations} prompts x {a.generations}), "
                 f"<= {a.completion_tokens} new tokens, LoRA r16 all projections",
        "command": "python -m benchmarks.gpu.rlsd_overhead " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = Path(a.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rlsd_overhead.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[-1]).index(k) if k in rows[-1] else 99)
    with (out / "rlsd_overhead.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"# RLSD-TR overhead vs GRPO ({device})", "", f"{result['model']}; {result['batch']}.", "",
             "| mode | s/step | vs GRPO | peak GiB | mean completion tokens |", "|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['seconds_per_step']} | {r['vs_grpo']} | {r['peak_gpu_gib']} | "
              f"{r['mean_completion_tokens']} |" for r in rows]
    lines += ["", f"`{result['command']}` ({result['date']})", ""]
    (out / "rlsd_overhead.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
