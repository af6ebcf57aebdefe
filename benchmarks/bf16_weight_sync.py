"""How much of a LoRA update reaches a bf16 vLLM engine through TRL's weight sync.

TRL 1.15 syncs a PEFT policy into its colocated vLLM engine with ``merge_adapter()``, a read of
the merged weights, then ``unmerge_adapter()`` (``trl/generation/vllm_generation.py``,
``_iter_named_params``). With bf16 base weights the merge is ``W + BA`` rounded to bf16: where a
delta is below half of W's bf16 spacing (about 0.2-0.4% of |W|) it is lost, so the engine samples
(and our vLLM validation scores) a partial, quantised copy of the policy being trained. Issue 39's
GPU run measured its own adapter this way (``toolrl merge``: ||BA||/||W|| = 8.1e-4 after 193
steps, 19.1% of the changed weights still different after rounding; the merge was refused).

This measures it on the embedded model with the GPU configs' adapter (LoRA r16, alpha 32, every
projection), for random low-rank deltas scaled to a relative size ||BA||/||W|| per module (a random
direction: rounding depends on magnitudes), on the gold transcripts of real multi-turn tasks. The
base weights are the bf16 ones the trainer holds; every log-prob is computed in float32, so that
the only difference between the models is their weights:

- ``changed``: share of the weights the delta touches that differ from W after the bf16 merge
- ``kept``: the merged change projected on the true delta, <bf16(W+D) - W, D> / ||D||^2
- ``error``: ||bf16(W+D) - W - D|| / ||D||
- ``drift``: what one merge + unmerge in bf16 leaves in the frozen base weights (PEFT 0.21: ``W += D``,
  then ``W -= D.to(bf16)``), ||bf16(bf16(W+D) - bf16(D)) - W|| / ||D||
- ``logp_kept``: the engine's per-token log-prob change (weights bf16(W+D)) regressed on the
  trained policy's (W + D), both against W (1 = the engine sees the whole change, 0 = none of it),
  and ``logp_corr`` their correlation

For scale, the setup line gives the noise of bf16 compute itself: the mean per-token log-prob
difference between a bf16 and a float32 forward of the same base weights.

    python -m benchmarks.bf16_weight_sync --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

SCALES = (1e-4, 3e-4, 8.1e-4, 3e-3, 1e-2)


def gold_transcripts(model_path: str, count: int) -> list[list[int]]:
    """Token ids of ``count`` gold episodes of the hard task kinds (what GRPO trains on)."""
    from toolrl_lib.envs import HARD_KINDS, get_env, make_tasks
    from toolrl_lib.envs.episode import Episode, EpisodeSettings, play_gold
    from toolrl_lib.models import load_tokenizer
    from toolrl_lib.prompts import get_adapter

    tokenizer, adapter = load_tokenizer(model_path), get_adapter("hermes")
    episodes = [play_gold(Episode(get_env(task.env), task, adapter, tokenizer, EpisodeSettings(max_episode_tokens=4096)))
                for task in make_tasks("train", count, kinds=list(HARD_KINDS))]
    return [episode.prompt_ids + episode.completion_ids for episode in episodes]


def token_logprobs(model: Any, sequences: list[list[int]]) -> Any:
    """Log-probability of every next token of every sequence, concatenated (float32)."""
    import torch

    out = []
    with torch.no_grad():
        for ids in sequences:
            batch = torch.tensor([ids])
            logits = model(input_ids=batch).logits[0, :-1].float()
            out.append(torch.log_softmax(logits, -1).gather(-1, batch[0, 1:, None])[:, 0])
    return torch.cat(out)


def lora_layers(model: Any) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def set_delta(layers: list[Any], scale: float, seed: int) -> None:
    """Random A and B per module, B scaled so that ||scaling * B A|| = scale * ||W||."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in layers:
            a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
            a.copy_(torch.randn(a.shape, generator=generator))
            b.copy_(torch.randn(b.shape, generator=generator))
            delta = layer.get_delta_weight("default").float()
            b.mul_(scale * layer.base_layer.weight.float().norm() / delta.norm())


def measure(model: Any, sequences: list[list[int]], scale: float, seed: int) -> dict[str, float]:
    """One delta size on a float32 model whose base weights hold bf16 values (see the docstring)."""
    import torch

    layers = lora_layers(model)
    set_delta(layers, scale, seed)
    originals = [layer.base_layer.weight.detach().clone() for layer in layers]
    deltas = [layer.get_delta_weight("default").detach().float() for layer in layers]
    with model.disable_adapter():
        base = token_logprobs(model, sequences)
    trained = token_logprobs(model, sequences)  # W + BA exactly: the policy the trainer holds
    touched = changed = 0
    kept_num = kept_den = error = drift = 0.0
    with torch.no_grad():
        for w, d, layer in zip(originals, deltas, layers, strict=True):
            merged = (w + d).to(torch.bfloat16)  # merge_adapter() on bf16 weights
            # then unmerge_adapter(): PEFT subtracts the delta cast to the weights' dtype first
            unmerged = (merged.float() - d.to(torch.bfloat16).float()).to(torch.bfloat16).float()
            seen = merged.float() - w
            nonzero = d != 0
            touched += int(nonzero.sum())
            changed += int(((seen != 0) & nonzero).sum())
            kept_num += float((seen * d).sum())
            kept_den += float((d * d).sum())
            error += float(((seen - d) ** 2).sum())
            drift += float(((unmerged - w) ** 2).sum())
            layer.base_layer.weight.copy_(merged.float())
    with model.disable_adapter():
        engine = token_logprobs(model, sequences)  # what the bf16 engine holds after the sync
    with torch.no_grad():
        for w, layer in zip(originals, layers, strict=True):
            layer.base_layer.weight.copy_(w)  # the next size starts from the original weights
    true_change, engine_change = trained - base, engine - base
    slope = float((engine_change * true_change).sum() / (true_change * true_change).sum())
    corr = float(torch.corrcoef(torch.stack([true_change, engine_change]))[0, 1])
    return {"scale": scale, "changed": changed / touched, "kept": kept_num / kept_den,
            "error": (error / kept_den) ** 0.5, "drift": (drift / kept_den) ** 0.5,
            "logp_change_trained": float(true_change.abs().mean()),
            "logp_change_engine": float(engine_change.abs().mean()), "logp_kept": slope, "logp_corr": corr,
            "tokens": int(true_change.numel())}


def bf16_compute_noise(path: str, sequences: list[list[int]]) -> float:
    """Mean |log-prob| difference per token between bf16 and float32 forwards of the same weights."""
    from toolrl_lib.models import load_model

    bf16 = token_logprobs(load_model(path, dtype="bf16", device="cpu").eval(), sequences)
    fp32 = token_logprobs(round_to_bf16(load_model(path, dtype="fp32", device="cpu")).eval(), sequences)
    return float((bf16 - fp32).abs().mean())


def round_to_bf16(model: Any) -> Any:
    """Every floating parameter rounded to bf16 and kept in float32 (the bf16 trainer's values)."""
    import torch

    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(torch.bfloat16).float())
    return model


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["# LoRA updates through a bf16 weight sync (TRL merge -> bf16 engine)", "",
             result["setup"], "",
             "| ||BA|| / ||W|| | weights changed | update kept | error | base drift after unmerge | "
             "mean abs logp change: trained W + BA | engine bf16(W + BA) | logp change kept | corr |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        lines.append(f"| {r['scale']:.1e} | {r['changed']:.1%} | {r['kept']:.3f} | {r['error']:.3f} | {r['drift']:.3f} | "
                     f"{r['logp_change_trained']:.4f} | {r['logp_change_engine']:.4f} | {r['logp_kept']:.3f} | "
                     f"{r['logp_corr']:.3f} |")
    lines += ["", "Command: `" + result["command"] + "`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--episodes", type=int, default=4, help="gold transcripts to score")
    parser.add_argument("--scales", default=",".join(str(s) for s in SCALES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for bf16_weight_sync.{json,md}")
    args = parser.parse_args(argv)
    import torch
    from peft import get_peft_model

    from toolrl_lib.models import load_model, resolve_model
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.config import LoraSection

    torch.manual_seed(args.seed)
    path = str(resolve_model(args.model))
    sequences = gold_transcripts(path, args.episodes)
    t0 = time.time()
    noise = bf16_compute_noise(path, sequences)
    model = get_peft_model(round_to_bf16(load_model(path, dtype="fp32", device="cpu")),
                           peft_lora_config(LoraSection(r=16, alpha=32)))
    model.eval()
    rows = [measure(model, sequences, float(s), args.seed) for s in args.scales.split(",")]
    command = " ".join(["python -m benchmarks.bf16_weight_sync", *(sys.argv[1:] if argv is None else argv)])
    result = {"setup": (f"Model `{args.model}`, base weights rounded to bf16 (the bf16 trainer's), LoRA r16 alpha 32 "
                        f"on every projection ({len(lora_layers(model))} modules); random low-rank deltas (seed "
                        f"{args.seed}); float32 log-probs over {sum(map(len, sequences))} tokens of {len(sequences)} "
                        f"gold transcripts of the hard multi-turn kinds; CPU ({platform.machine()}), {time.time() - t0:.0f} s. "
                        f"For scale, bf16 compute itself moves a token's log-prob by {noise:.4f} on average "
                        f"(bf16 against float32 forward, same weights)."),
              "bf16_compute_noise": noise, "rows": rows, "command": command}
    print(to_markdown(result))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bf16_weight_sync.json").write_text(json.dumps(result, indent=2))
        (out / "bf16_weight_sync.md").write_text(to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
