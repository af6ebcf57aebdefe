"""Does the full profile fit an 80 GB GPU? Run ``toolrl train --config configs/qwen3_8b_h100.yaml``.

Issue #7 part 2. The real Qwen3-8B is not on the GPU host, so the run uses a random-weight
Qwen3-8B-shaped folder (saved once by ``grpo_throughput.ensure_saved_model``: bf16 weights,
the embedded SmolLM2 tokenizer with a Qwen3-style chat template, family qwen3). Everything
else is the profile as written (LoRA r16 on all projections, 8 generations, 8 x 4 = 32
completions per step, completion 1024 tokens, gradient checkpointing, its backend), except
the ``--set`` overrides below: the smoke data, no difficulty filtering, a small validation,
``grpo.max_steps`` steps, no TensorBoard. The training process caps its GPU memory with
``torch.cuda.set_per_process_memory_fraction`` (``--memory-cap-gb``, decimal GB: 80 GB =
74.5 GiB, under the 79.2 GiB an H100 80GB exposes) and records peak allocated/reserved
memory and the step times from the run's ``metrics.csv`` into
``<out>/full_profile_fit_<backend>.json`` (also written when the run fails or is killed).

    python -m benchmarks.gpu.full_profile_fit --out $OUT                  # GPU, the config's backend (unsloth)
    python -m benchmarks.gpu.full_profile_fit --out $OUT --backend peft   # GPU, the fallback backend
    python -m benchmarks.gpu.full_profile_fit --out /tmp/f --shapes tiny --cpu --backend peft  # CPU smoke

The colab profile (issue #24: a 16 GB T4, fp16) is proven the same way, plus the merge:
``--config configs/qwen3_1p7b_colab.yaml --shapes qwen3-1.7b --memory-cap-gb 15 --merge
--label colab_profile_fit``. ``--merge`` runs ``toolrl merge`` on the run's last adapter in the
same capped process (fp16 output) and records its own peak memory (``merge_peak_*``) and the
merge's backend, notes and checks (``merge``: its ``toolrl_merge.json``; null if it failed).
Random weights give every completion the same reward, so the adapter stays a no-op; its
lora_B gets N(0, 1e-3) first (``perturb_noop_adapter``). That is large enough for fp16: at
Qwen3-1.7B shapes (r16, alpha 32) |delta| is ~8e-5 against an fp16 step of ~1.5e-5 at |W| ~
0.02, so ~95% of the probed weights move (the H200 run: 190608/200704). The first H200 run's
merge failed because Unsloth's merged 16-bit save writes the base's own dtype (bf16 here, as
for the real Qwen3-1.7B), not fp16; the merge now uses PEFT whenever the two differ.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import grpo_throughput as gt  # the random model
from benchmarks.gpu.lanes import Job, run_lanes

CONFIG = "configs/qwen3_8b_h100.yaml"


def overrides(a: argparse.Namespace, model_dir: Path) -> list[str]:
    """The ``--set`` list: the profile, pointed at the random model and the smoke data."""
    sets = [
        f"model.name={model_dir}", "model.family=qwen3", f"backend={a.backend}",
        "data.train_files=[data/processed/smoke/train.jsonl]",
        "data.val_files=[data/processed/smoke/val.jsonl]",
        "filtering.enabled=false", f"grpo.max_steps={a.max_steps}", "grpo.warmup_steps=0",
        f"validation.num_examples={a.val_examples}", "validation.k=2",
        f"validation.max_new_tokens={a.val_tokens}", "validation.batch_size=8",
        f"checkpoint.save_steps={a.max_steps}", "logging.tensorboard=false",
        "logging.progress_bar=false",
    ]
    if a.cpu:
        sets += ["device=cpu", "model.dtype=fp32", "grpo.gradient_checkpointing=false"]
    return sets + list(a.set)


def child(a: argparse.Namespace) -> int:
    """In the training process: cap memory, run the CLI in-process, record peak memory."""
    import torch

    cuda = torch.cuda.is_available() and not a.cpu
    result: dict[str, Any] = json.loads(Path(a.result).read_text())
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = min(1.0, a.memory_cap_gb * 1e9 / total)
        torch.cuda.set_per_process_memory_fraction(fraction)
        result.update(gpu=torch.cuda.get_device_name(0), memory_cap_gib=round(fraction * total / 2**30, 2),
                      gpu_total_gib=round(total / 2**30, 2))
    from toolrl_lib.cli import main as toolrl

    argv = ["train", "--config", a.config, "--out", a.run_dir]
    for item in result["overrides"]:
        argv += ["--set", item]
    rc = 1
    try:
        rc = toolrl(argv)
    finally:
        if cuda:
            result["peak_alloc_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            result["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
        result["train_rc"] = rc
        Path(a.result).write_text(json.dumps(result, indent=2))
    if rc == 0 and a.merge:
        rc = merge_step(a, result, cuda)
    return rc


def perturb_noop_adapter(adapter_dir: Path, scale: float = 1e-3) -> bool:
    """Fill an all-zero adapter's lora_B with N(0, scale) values (True if it was all zero)."""
    import torch
    from safetensors.torch import load_file, save_file

    path = adapter_dir / "adapter_model.safetensors"
    tensors = load_file(str(path))
    if any(float(t.abs().max()) > 0 for k, t in tensors.items() if "lora_B" in k):
        return False
    generator = torch.Generator().manual_seed(0)
    for key, tensor in tensors.items():
        if "lora_B" in key:
            noise = torch.randn(tensor.shape, generator=generator) * scale
            tensors[key] = noise.to(tensor.dtype)
    save_file(tensors, str(path), metadata={"format": "pt"})
    return True


def merge_step(a: argparse.Namespace, result: dict[str, Any], cuda: bool) -> int:
    """``toolrl merge`` of the run's last adapter in the same capped process; its own peak."""
    import gc

    import torch

    from toolrl_lib.cli import main as toolrl

    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    # Random weights give every completion the same reward, so a few GRPO steps leave lora_B at
    # zero and the merge (rightly) refuses a no-op adapter. This measures memory, not learning:
    # give the saved adapter small random deltas first, and say so in the result.
    result["adapter_perturbed_for_merge"] = perturb_noop_adapter(Path(a.run_dir) / "last")
    argv = ["merge", "--run", a.run_dir, "--checkpoint", "last", "--dtype", a.merge_dtype,
            "--device", "cuda" if cuda else "cpu", "--n-generations", "2", "--max-new-tokens", "16",
            "--out", str(Path(a.run_dir) / "merged"), "--overwrite"]
    t0 = time.perf_counter()
    rc = 1
    try:
        rc = toolrl(argv)
    finally:
        result["merge_rc"], result["merge_s"] = rc, round(time.perf_counter() - t0, 1)
        result["merge"] = merge_summary(Path(a.run_dir) / "merged")
        if cuda:
            result["merge_peak_alloc_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            result["merge_peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
        Path(a.result).write_text(json.dumps(result, indent=2))
    return rc


def merge_summary(folder: Path) -> dict[str, Any] | None:
    """Backend, notes, checks and weight probes of a verified merge (its ``toolrl_merge.json``)."""
    from toolrl_lib.merge import MERGE_INFO

    path = folder / MERGE_INFO
    if not path.is_file():
        return None
    info = json.loads(path.read_text())
    return {"backend": info.get("backend"), "dtype": info.get("dtype"), "notes": info.get("notes"),
            "checks": {c["check"]: c["passed"] for c in info.get("checks", [])},
            "saved_probes": info.get("delta", {}).get("saved_probes")}


def step_times(run_dir: Path) -> list[float]:
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return []
    with path.open() as handle:
        return [round(float(r["step_time"]), 2) for r in csv.DictReader(handle) if r.get("step_time")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--backend", choices=["peft", "unsloth"], default=None,
                   help="default: the config's own backend (unsloth for the full profile)")
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--shapes", choices=sorted(gt.SHAPES), default="qwen3-8b")
    p.add_argument("--model-dir", default=None, help="saved random model (default /dev/shm or /tmp)")
    p.add_argument("--max-steps", type=int, default=2)
    p.add_argument("--val-examples", type=int, default=4)
    p.add_argument("--val-tokens", type=int, default=32)
    p.add_argument("--memory-cap-gb", type=float, default=80.0, help="decimal GB")
    p.add_argument("--time-budget-s", type=float, default=540.0, help="kill the training process after this")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config overrides")
    p.add_argument("--merge", action="store_true", help="merge the last adapter after training (same cap)")
    p.add_argument("--merge-dtype", default="fp16", choices=["fp16", "bf16", "fp32"])
    p.add_argument("--label", default="full_profile_fit", help="result file stem: <label>_<backend>.json")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    p.add_argument("--run-dir", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.max_steps < 1 or a.memory_cap_gb <= 0 or a.time_budget_s <= 0:
        p.error("--max-steps must be >= 1, --memory-cap-gb and --time-budget-s > 0")
    if a.child:
        return child(a)
    if a.backend is None:
        from toolrl_lib.train.config import load_run_config

        a.backend = load_run_config(a.config).backend

    start = time.perf_counter()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result_path = out / f"{a.label}_{a.backend}.json"
    run_dir = Path(a.run_dir or f"/tmp/full_profile_fit/{a.backend}-{int(time.time())}")
    import torch

    device = "cuda" if torch.cuda.is_available() and not a.cpu else "cpu"
    t0 = time.perf_counter()
    model_dir = gt.ensure_saved_model(a.model_dir or gt.default_model_dir(a.shapes), a.shapes, device)
    result: dict[str, Any] = {
        "config": a.config, "backend": a.backend, "shapes": a.shapes, "model_dir": str(model_dir),
        "model_prepare_s": round(time.perf_counter() - t0, 1), "memory_cap_gb": a.memory_cap_gb,
        "overrides": overrides(a, model_dir), "run_dir": str(run_dir), "status": "running",
    }
    result_path.write_text(json.dumps(result, indent=2))
    cmd = [sys.executable, "-m", "benchmarks.gpu.full_profile_fit", "--child", "--result", str(result_path),
           "--run-dir", str(run_dir), "--config", a.config, "--memory-cap-gb", str(a.memory_cap_gb)]
    if a.cpu:
        cmd.append("--cpu")
    if a.merge:
        cmd += ["--merge", "--merge-dtype", a.merge_dtype]
    log_path = out / f"{a.label}_{a.backend}.log"
    left = max(1.0, a.time_budget_s - (time.perf_counter() - start))
    (outcome,) = run_lanes([Job(a.label, cmd, log=log_path)], [None], time.time() + left, say=None, poll_s=0.2)
    timed_out = outcome.status == "killed"
    rc = -9 if timed_out else outcome.returncode
    result = json.loads(result_path.read_text())
    steps = step_times(run_dir)
    info_path = run_dir / "run_info.json"
    if info_path.is_file():  # e.g. the merged-rollout check the run made under unsloth
        info = json.loads(info_path.read_text())
        result.update({k: info[k] for k in ("backend", "merged_check") if k in info})
    result.update(rc=rc, wall_s=round(time.perf_counter() - start, 1), step_times_s=steps,
                  steps_done=len(steps))
    if timed_out:
        result["status"], result["error"] = "timeout", f"killed after --time-budget-s {a.time_budget_s}"
    elif rc != 0:
        lines = log_path.read_text(errors="replace").strip().splitlines()
        result["status"], result["error"] = "failed", (lines[-1][:400] if lines else f"exit {rc}")
    else:
        result["status"] = "ok" if len(steps) >= a.max_steps else "incomplete"
        if a.merge and result.get("merge_rc") != 0:
            result["status"] = "merge failed"
    cap_gib = a.memory_cap_gb * 1e9 / 2**30
    if "peak_reserved_gib" in result:
        peak = max(result["peak_reserved_gib"], result.get("merge_peak_reserved_gib", 0.0))
        result["fits_cap"] = result["status"] == "ok" and peak <= cap_gib
    result_path.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "overrides"}, indent=2))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
