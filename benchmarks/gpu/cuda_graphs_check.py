"""Check ``fast.cuda_graphs`` on a GPU: replayed graphs against eager, numbers and time.

The CPU tests run the graphed path with ``capture=False`` (the same function, eagerly): they
cannot show that a *recorded* graph gives eager's numbers, that a replay with new data of the
same shape reads that data (not the data it was recorded with), or that the LoRA gradients come
back through ``make_graphed_callables``. This script does, on the model and micro-batch shapes
of the GRPO recipe (``configs/embedded_gpu.yaml``: LoRA r 16 on every projection, bf16 weights,
bf16 autocast, TRL's fused log-prob head, the fused LoRA projections; 8 prompts x 8 completions
of up to 128 tokens), and times each way:

- for a sequence of micro-batches whose shapes repeat (new random data each time), the shared
  prompt loss forward + backward four ways: replayed from the graphs; the same padded shapes run
  eagerly (``capture_*``: what recording alone changes, which should be float rounding at most);
  eagerly without the padding (``padding_*``: the buckets' extra masked positions); and eagerly
  again (``repeat_*``: the noise floor). Log-probs and entropies as the largest absolute
  difference over real tokens, LoRA gradients as the relative norm of the difference;
- the same without gradients (the round's log-prob pass), interleaved with the former;
- milliseconds per call, eager against replayed (median of ``--repeats``).

``--planned`` gives the graphs every width of ``--widths`` up front (``fast.cuda_graphs``' planned
widths, as a run plans its training prompts'): the first call of each kind records them all from
stand-in inputs (``cuda_graphs.at_width``), so the later widths' rows compare replays of graphs
recorded from those stand-ins (``recorded`` false) with eager on the real data.

The first GPU run (2026-12-07, H100, an earlier form that compared replays with unpadded eager
only) found differences of up to 8.6 in a log-prob and 0.98 in the gradients' relative norm on
random tokens, while the same option's GRPO run matched eager's entropies and TRL's sampler
log-prob difference to ~1e-3 (``benchmarks/results/cuda_graphs_check.md``). The split above told
the padding from the recording (run 9): replays equal eager on the same padded shapes, and those
differences were the padding in bf16 on random tokens.

    python -m benchmarks.gpu.cuda_graphs_check --model /tmp/toolrl-cache/models/smollm2-135m-instruct \
        --out $OUT/cuda_graphs_check.json
    python -m benchmarks.gpu.cuda_graphs_check --model tiny --device cpu   # the plumbing, eagerly (no capture)

Exit status 1 when a replay differs from the same shapes run eagerly by more than ``--atol`` in a
log-prob, or a recording failed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RECIPE = "configs/embedded_gpu.yaml"  # the GRPO recipe whose LoRA section the check adapts the model with


def build_model(path: str, device: str, dtype: str = "bf16") -> Any:
    """A LoRA model as the GPU recipe trains it, with non-zero adapters (so the branches count)."""
    import torch
    from peft import get_peft_model
    from trl import GRPOTrainer  # noqa: F401  (TRL's module sets up its kernels on import)
    from trl.trainer.utils import add_fused_lm_head

    from toolrl_lib.fast.fused_lora import fuse_lora_layers
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.config import load_run_config

    if device == "cpu":  # TRL's fused head has a Triton kernel only; the library's CPU stand-in
        from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

        install_cpu_logprob_fallback()
    if path == "tiny":
        from toolrl_lib.models import make_tiny_model

        model, _ = make_tiny_model(seed=3, num_layers=2)
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32)
    model.to(device)
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    torch.manual_seed(0)
    model = get_peft_model(model, peft_lora_config(load_run_config(RECIPE).lora))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    fuse_lora_layers(model)
    return model


def micro_batch(groups: int, per_group: int, width: int, completion: int, vocab: int, seed: int,
                device: str) -> tuple[Any, Any]:
    """``groups`` prompts of up to ``width`` tokens (left-padded), ``per_group`` completions each of
    up to ``completion`` tokens (right-padded): random ids, lengths varied, a fresh draw per seed."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids, mask = [], []
    for group in range(groups):
        plen = width - int(torch.randint(0, width // 3, (1,), generator=g)) if group else width
        prompt = torch.randint(5, vocab, (plen,), generator=g).tolist()
        for _ in range(per_group):
            real = completion - int(torch.randint(0, completion // 2, (1,), generator=g))
            comp = torch.randint(5, vocab, (real,), generator=g).tolist()
            ids.append([0] * (width - plen) + prompt + comp + [0] * (completion - real))
            mask.append([0] * (width - plen) + [1] * (plen + real) + [0] * (completion - real))
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


def compare(a: Any, b: Any, real: Any) -> float:
    return float((a.float() - b.float())[real].abs().max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="/tmp/toolrl-cache/models/smollm2-135m-instruct",
                        help="a model folder, or 'tiny' (a 2-layer random model, for the CPU)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--widths", default="448,700,448,896,700",
                        help="prompt widths of the micro-batches, in order (a repeat replays a recorded shape)")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--per-group", type=int, default=8)
    parser.add_argument("--completion", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per way")
    parser.add_argument("--weights", choices=["bf16", "fp32"], default="bf16",
                        help="the base weights' dtype (the recipe loads bf16; fp32 shows the padding's effect without "
                             "bf16 rounding)")
    parser.add_argument("--autocast", choices=["auto", "bf16", "off"], default="auto",
                        help="bf16 autocast as the trainer runs it (auto: on cuda only)")
    parser.add_argument("--atol", type=float, default=2e-2,
                        help="largest log-prob difference accepted between a replay and the same shapes run eagerly")
    parser.add_argument("--planned", action="store_true",
                        help="record every width of --widths at each kind's first call, as a run plans its prompts'")
    parser.add_argument("--out", type=Path, default=None, help="JSON of the comparisons and timings")
    args = parser.parse_args(argv)

    import torch

    from toolrl_lib.fast.cuda_graphs import GraphedBackbone
    from toolrl_lib.fast.shared_prompt import batched_shared_prompt_logps, prompt_groups

    cuda = args.device == "cuda"
    model = build_model(args.model, args.device, args.weights)
    vocab = model.config.vocab_size
    params = [p for p in model.parameters() if p.requires_grad]
    widths = [int(w) for w in args.widths.split(",")]
    # a micro-batch's longest prompt is ``width`` tokens; the graphs' width is that less its last token
    graphs = GraphedBackbone(model, capture=cuda, widths=[w - 1 for w in widths] if args.planned else ())
    eager_padded = GraphedBackbone(model, capture=False)  # the graphs' padded shapes, eagerly
    bf16 = args.autocast == "bf16" or (args.autocast == "auto" and cuda)
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=bf16)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def loss_and_grads(ids: Any, mask: Any, use: Any, grad: bool) -> tuple[Any, Any, list[Any] | None]:
        groups = prompt_groups(ids, mask, args.completion)
        real = mask[:, -args.completion:].bool()
        with autocast, torch.set_grad_enabled(grad):
            logps, ent = batched_shared_prompt_logps(model, ids, mask, args.completion, True, groups, graphs=use)
        grads = torch.autograd.grad((logps * real).sum(), params) if grad else None
        return logps.detach(), ent.detach(), grads

    def timed(ids: Any, mask: Any, use: Any, grad: bool) -> float:
        times = []
        for _ in range(args.repeats):
            sync()
            start = time.perf_counter()
            loss_and_grads(ids, mask, use, grad)
            sync()
            times.append(time.perf_counter() - start)
        return 1000 * statistics.median(times)

    def compared(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], real: Any, prefix: str) -> dict[str, float]:
        out = {f"{prefix}_logp_max_abs_diff": compare(a[0], b[0], real),
               f"{prefix}_entropy_max_abs_diff": compare(a[1], b[1], real)}
        if a[2] is not None:
            num = sum(float((x.float() - y.float()).norm()) ** 2 for x, y in zip(a[2], b[2], strict=True))
            den = sum(float(y.float().norm()) ** 2 for y in b[2])
            out[f"{prefix}_grad_relative_diff"] = (num / den) ** 0.5 if den else 0.0
        return out

    rows, worst = [], 0.0
    for step, width in enumerate(widths):
        for grad in (True, False):  # interleaved, as in a run: one memory pool serves both kinds of graph
            ids, mask = micro_batch(args.groups, args.per_group, width, args.completion, vocab,
                                    seed=1000 * grad + step, device=args.device)
            real = mask[:, -args.completion:].bool()
            recorded_before = len(graphs.train_graphs if grad else graphs.infer_graphs)
            start = time.perf_counter()
            got = loss_and_grads(ids, mask, graphs, grad)  # records on a new shape, else replays
            sync()
            first_s = time.perf_counter() - start
            padded = loss_and_grads(ids, mask, eager_padded, grad)  # the same buckets, run eagerly
            eager = loss_and_grads(ids, mask, None, grad)  # no padding: what the run does without the option
            again = loss_and_grads(ids, mask, None, grad)
            row: dict[str, Any] = {
                "grad": grad, "width": width, "rows": int(ids.shape[0]),
                "recorded": len(graphs.train_graphs if grad else graphs.infer_graphs) > recorded_before,
                "first_call_s": round(first_s, 3),
                # capture: the replay against the same padded shapes run eagerly (what recording alone changes)
                **compared(got, padded, real, "capture"),
                # padding: the buckets' extra masked positions, both eager (float rounding of other shapes)
                **compared(padded, eager, real, "padding"),
                # repeat: eager against itself (the noise floor: kernels that are not deterministic)
                **compared(again, eager, real, "repeat"),
            }
            row["eager_ms"] = round(timed(ids, mask, None, grad), 2)
            row["graphed_ms"] = round(timed(ids, mask, graphs, grad), 2)
            worst = max(worst, row["capture_logp_max_abs_diff"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"model": args.model, "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
              "torch": torch.__version__, "capture": cuda, "weights": args.weights, "autocast_bf16": bf16,
              "planned": args.planned, "atol": args.atol,
              "worst_capture_logp_diff": worst,
              "passed": worst <= args.atol and not graphs.errors, "graphs": graphs.stats(), "rows": rows,
              "command": "python -m benchmarks.gpu.cuda_graphs_check " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}), flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
