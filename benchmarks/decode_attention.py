"""Shared-prefix decode attention: PyTorch's fused CPU flash kernel against the explicit softmax.

Every CPU decode in the workbook (validations, GRPO rollouts, BFCL generation, notebook 06)
attends over each prompt's keys/values once for its k samples (``toolrl_lib.prefix_cache``).
That attention was four tensor products plus an explicit softmax per layer and token (27% of a
validation's decode in ``torch.profiler``, more than any layer but the linear ones); it is now
``attend_with_lse``: the CPU flash kernel, which also returns the log-sum-exp that joins the
prefix and suffix parts. This script runs the library's ``generate`` at the smoke GRPO and
validation settings with both, alternating, same seed, and checks the completions are the same.

    python benchmarks/decode_attention.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_floor import cpu_model  # noqa: E402


def explicit_attend(query: Any, key: Any, value: Any, scaling: float, bias: Any = None) -> tuple[Any, Any]:
    """The explicit variant: scores, log-sum-exp and weights written out as tensors."""
    import torch

    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if bias is not None:
        scores = scores + bias
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), value), lse


def run(config_path: str, rounds: int, val_prompts: int | None) -> list[dict[str, Any]]:
    from toolrl_lib import prefix_cache
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
                                         num_return_sequences=g.num_generations, batch_size=2 * g.num_generations)),
        ("validation", val, dict(max_new_tokens=v.max_new_tokens, temperature=v.temperature,
                                 num_return_sequences=v.k, batch_size=v.batch_size)),
    ]
    fused = prefix_cache.attend_with_lse
    generate(model, tokenizer, [adapter.render_prompt(train[0], tokenizer)], max_new_tokens=4)  # warm-up
    results = []
    for name, examples, kwargs in settings:
        prompts = [adapter.render_prompt(e, tokenizer) for e in examples]
        outputs, times = {}, {"explicit softmax": [], "fused flash kernel": []}
        try:
            for _ in range(rounds):  # alternate, so drift on the box hits both
                for variant, attend in (("explicit softmax", explicit_attend), ("fused flash kernel", fused)):
                    prefix_cache.attend_with_lse = attend
                    start = time.perf_counter()
                    outputs[variant] = generate(model, tokenizer, prompts, do_sample=True, seed=config.seed, **kwargs)
                    times[variant].append(round(time.perf_counter() - start, 2))
        finally:
            prefix_cache.attend_with_lse = fused
        pairs = [(a, b) for pa, pb in zip(*outputs.values(), strict=True) for a, b in zip(pa, pb, strict=True)]
        results.append({"setting": name, "prompts": len(prompts), **kwargs,
                        "variants": {k: {"seconds": min(t), "rounds": t} for k, t in times.items()},
                        "identical_completions": sum(a == b for a, b in pairs) / len(pairs)})
    return results


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Shared-prefix decode attention: fused flash kernel vs explicit softmax", "",
             f"{result['cpus']} CPU(s) ({result['cpu_model']}), torch {result['torch']}, threads "
             f"{result['threads']}; `{result['command']}`; the library's `generate`, fastest of "
             f"{result['rounds']} alternating round(s).", "",
             "| setting | prompts x samples | explicit softmax s | fused flash kernel s | change | identical completions |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in result["settings"]:
        a, b = (row["variants"][k]["seconds"] for k in ("explicit softmax", "fused flash kernel"))
        lines.append(f"| {row['setting']} | {row['prompts']} x {row['num_return_sequences']} | {a} | {b} | "
                     f"{(b - a) / a:+.0%} | {row['identical_completions']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/smoke.yaml")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--val-prompts", type=int, default=None, help="first N validation prompts (default all)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    import torch

    result = {"command": "python benchmarks/decode_attention.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
              "cpu_model": cpu_model(), "rounds": args.rounds,
              "settings": run(args.config, args.rounds, args.val_prompts)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_attention.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "decode_attention.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
