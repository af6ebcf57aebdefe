"""Shared-prefix decode attention: PyTorch's fused CPU flash kernel against the explicit softmax.

Every CPU decode in the workbook (validations, GRPO rollouts, BFCL generation, notebook 06)
attends over each prompt's keys/values once for its k samples (``toolrl_lib.fast.decode``).
That attention was four tensor products plus an explicit softmax per layer and token (27% of a
validation's decode in ``torch.profiler``, more than any layer but the linear ones); it is now
``attend_with_lse``: the CPU flash kernel, which also returns the log-sum-exp that joins the
prefix and suffix parts. This script runs the library's ``generate`` at the smoke GRPO and
validation settings with both, alternating, same seed, and checks the completions are the same.

    python -m benchmarks.history.decode_attention --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.cpu_floor import cpu_model, generate_settings


def run(config_path: str, rounds: int, val_prompts: int | None) -> list[dict[str, Any]]:
    from toolrl_lib.fast import decode as prefix_cache
    from toolrl_lib.generation import generate

    model, tokenizer, seed, settings = generate_settings(config_path, val_prompts)
    fused = prefix_cache.attend_with_lse
    variants = (("explicit softmax", prefix_cache.explicit_attend_with_lse), ("fused flash kernel", fused))
    results = []
    for name, prompts, kwargs in settings:
        outputs, times = {}, {variant: [] for variant, _ in variants}
        try:
            for _ in range(rounds):  # alternate, so drift on the box hits both
                for variant, attend in variants:
                    prefix_cache.attend_with_lse = attend
                    start = time.perf_counter()
                    outputs[variant] = generate(model, tokenizer, prompts, do_sample=True, seed=seed, **kwargs)
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

    result = {"command": "python -m benchmarks.history.decode_attention " + " ".join(argv if argv is not None else sys.argv[1:]),
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
