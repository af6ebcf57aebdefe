"""One GPU vs two (DDP), same global batch, and a ZeRO-3 (or FSDP) full fine-tuning run.

Each run is ``toolrl train`` on the embedded SmolLM2-135M (configs/smoke.yaml, bf16, peft,
format priming on, 8 generations, same seed, data/processed/smoke) in its own subprocess:

    1gpu   --num-gpus 1                               per_device = global batch
    ddp2   --num-gpus 2 (configs/accelerate/ddp.yaml) per_device = global batch / 2
    zero3  --num-gpus 2 (zero3.yaml; fsdp.yaml when deepspeed is not importable or zero3 fails),
           lora.enabled=false (full fine-tuning), a few steps, validation before/after only

Recorded per run: wall time, mean GRPO step time after warm-up (step 1 excluded),
completions/s, reward per step, validation rows, peak GPU memory per GPU (nvidia-smi polled),
and the 2-GPU/1-GPU throughput ratio. Rows are written after every run to
``<out>/multi_gpu.{json,csv,md}``; ``--time-budget-s`` bounds the whole script (a run that
would pass it is killed and its partial metrics kept).

    PYTHONPATH=/tmp/site:$PWD TOOLRL_CACHE=/tmp/toolrl-cache python3 -m benchmarks.gpu.multi_gpu --out $OUT
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.gpu.lanes import Job, run_lanes
from toolrl_lib.fast.gen_timing import decode_summary, read_generation_times, straggler_table

# H200 hosts here: NVLink multicast must stay off (see the device notes).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}


def common_overrides(args: argparse.Namespace) -> list[str]:
    return [
        "backend=peft", f"device={args.device}", f"model.dtype={args.dtype}", f"seed={args.seed}",
        "data.train_files=[data/processed/smoke/train.jsonl]",
        "data.val_files=[data/processed/smoke/val.jsonl]",
        "priming.enabled=true", f"priming.max_steps={args.priming_steps}",
        "grpo.num_generations=8", "grpo.loss_type=grpo",
        f"grpo.max_completion_length={args.completion_tokens}", "grpo.temperature=1.0",
        f"validation.num_examples={args.val_examples}", "validation.k=4",
        "validation.max_new_tokens=128", f"validation.batch_size={args.val_examples * 4}",
        "validation.every_steps=0", "logging.progress_bar=false", "logging.tensorboard=false",
        "fast.generation_times=true",  # per-rank seconds per rollout round: who waits
    ]


def batch_sets(args: argparse.Namespace, gpus: int) -> list[str]:
    """Same global batch on 1 or 2 GPUs, in one of two layouts.

    - no ``--micro-batch``: each GPU takes its whole share in one micro-batch and one
      generation round per step (per_device = global / GPUs);
    - ``--micro-batch M``: every GPU works in micro-batches of M completions, each generated
      in its own round (generation_batch_size = M x GPUs); more GPUs = fewer accumulation
      steps. This is the layout of a model whose generation batch is memory-bound.
    """
    g, m = args.global_batch, args.micro_batch
    if not m:
        return [f"grpo.per_device_train_batch_size={g // gpus}", "grpo.gradient_accumulation_steps=1"]
    return [f"grpo.per_device_train_batch_size={m}",
            f"grpo.gradient_accumulation_steps={g // (m * gpus)}",
            f"grpo.generation_batch_size={m * gpus}"]


def plan(args: argparse.Namespace) -> list[dict]:
    runs = {
        "1gpu": {"gpus": 1, "accel": None, "sets": [*batch_sets(args, 1), f"grpo.max_steps={args.steps}"]},
        "ddp2": {"gpus": 2, "accel": "configs/accelerate/ddp.yaml",
                 "sets": [*batch_sets(args, 2), f"grpo.max_steps={args.steps}"]},
        "zero3": {"gpus": 2, "accel": "configs/accelerate/zero3.yaml",
                  "sets": [*batch_sets(args, 2), f"grpo.max_steps={args.full_ft_steps}",
                           "lora.enabled=false", "grpo.learning_rate=1e-6"]},
    }
    out = []
    for name in args.runs.split(","):
        run = dict(runs[name], name=name)
        if name == "zero3" and importlib.util.find_spec("deepspeed") is None:
            run.update(name="fsdp", accel="configs/accelerate/fsdp.yaml",
                       note="deepspeed not importable: FSDP full shard instead")
        out.append(run)
    return out


class GpuMemory:
    """Peak memory.used per GPU (MiB) while a run's processes live, from nvidia-smi."""

    def __init__(self) -> None:
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                text = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used",
                                       "--format=csv,noheader,nounits"], capture_output=True,
                                      text=True, timeout=10).stdout
                for line in text.strip().splitlines():
                    index, used = (int(x) for x in line.split(","))
                    self.peak[index] = max(self.peak.get(index, 0), used)
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self._stop.wait(0.5)

    def __enter__(self) -> GpuMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def read_run(run_dir: Path, warmup: int) -> dict:
    """What the run directory holds so far (also after a kill)."""
    result: dict = {}
    metrics = run_dir / "metrics.csv"
    if metrics.is_file():
        with metrics.open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        times = [float(r["step_time"]) for r in rows if r.get("step_time")]
        steady = times[warmup:] or times
        result.update(steps=len(rows), rewards=[float(r["reward"]) for r in rows if r.get("reward")],
                      step_times=[round(t, 3) for t in times],
                      mean_step_s=round(sum(steady) / len(steady), 3) if steady else None)
    rounds = read_generation_times(run_dir)
    per_step = straggler_table(rounds)
    if per_step:
        steady_gen = per_step[warmup:] or per_step
        steady_rounds = [r for r in rounds if r["step"] >= steady_gen[0]["step"]]
        result.update(
            generation=per_step, rounds=rounds, decode=decode_summary(steady_rounds),
            gen_slowest_s=round(sum(r["slowest_s"] for r in steady_gen) / len(steady_gen), 3),
            gen_wait_s=round(sum(r["wait_s"] for r in steady_gen) / len(steady_gen), 3))
    validation = run_dir / "validation.csv"
    if validation.is_file():
        with validation.open(encoding="utf-8") as handle:
            result["validation"] = list(csv.DictReader(handle))
    info = run_dir / "run_info.json"
    if info.is_file():
        result["run_info"] = json.loads(info.read_text(encoding="utf-8"))
    result["last_saved"] = (run_dir / "last").is_dir()
    return result


def run_one(spec: dict, args: argparse.Namespace, work: Path, budget_s: float) -> dict:
    run_dir = work / f"run-{spec['name']}"
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run each time (no accidental resume)
    cmd = [sys.executable, "-m", "toolrl_lib.cli", "train", "--config", "configs/smoke.yaml",
           "--out", str(run_dir)]
    for item in common_overrides(args) + spec["sets"]:
        cmd += ["--set", item]
    if spec["gpus"] > 1:
        cmd += ["--num-gpus", str(spec["gpus"]), "--accelerate-config", spec["accel"]]
    log_path = work / f"{spec['name']}.log"
    row = {"run": spec["name"], "gpus": spec["gpus"], "accelerate_config": spec["accel"],
           "command": " ".join(cmd), "note": spec.get("note", "")}
    start = time.perf_counter()
    job = Job(spec["name"], cmd, log=log_path, env={**NCCL_ENV, "PYTHONUNBUFFERED": "1"})
    with GpuMemory() as memory:  # the launcher and its ranks: one process group, killed together
        (outcome,) = run_lanes([job], [None], time.time() + max(budget_s, 1), say=None, own_group=True,
                                poll_s=0.2)
    row["exit_code"] = outcome.returncode if outcome.status == "exit" else "killed: time budget"
    row["wall_s"] = round(time.perf_counter() - start, 1)
    row["peak_gpu_mib"] = memory.peak
    row.update(read_run(run_dir, args.warmup_steps))
    info = row.get("run_info", {})
    batch = info.get("global_batch")
    if batch and row.get("mean_step_s"):
        row["completions_per_s"] = round(batch / row["mean_step_s"], 2)
    if row["exit_code"] != 0:
        row["log_tail"] = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
    return row


def decode_cell(decode: dict | None) -> str:
    """"rounds / mean longest / ms per decode step", or "" for a run without timing rows."""
    if not decode:
        return ""
    return f"{decode['rounds']} / {decode['mean_longest']} / {decode['ms_per_decode_step']}"


def write_results(out: Path, results: dict) -> None:
    rows = results["runs"]
    by = {r["run"]: r for r in rows}
    if by.get("1gpu", {}).get("completions_per_s") and by.get("ddp2", {}).get("completions_per_s"):
        results["throughput_ratio_2gpu_vs_1gpu"] = round(
            by["ddp2"]["completions_per_s"] / by["1gpu"]["completions_per_s"], 3)
    (out / "multi_gpu.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    columns = ["run", "gpus", "exit_code", "wall_s", "steps", "mean_step_s", "completions_per_s",
               "gen_slowest_s", "gen_wait_s", "decode", "peak_gpu_mib", "rewards", "note"]
    with (out / "multi_gpu.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(r[k]) if isinstance(r.get(k), dict | list) else r.get(k)
                             for k in columns})
    lines = [f"# GRPO on 1 vs 2 GPUs ({results['gpu']}), embedded SmolLM2-135M", "",
             f"global batch {results['global_batch']} completions/step (8 generations), "
             f"{'micro-batches of ' + str(results['args']['micro_batch']) + ', one generation round each' if results['args'].get('micro_batch') else 'one generation round per step'}, "
             f"seed {results['seed']}, priming on; ratio 2-GPU/1-GPU completions/s: "
             f"{results.get('throughput_ratio_2gpu_vs_1gpu', 'n/a')}", "",
             "Generation s/step: the slowest rank's generation time per step (rounds summed); wait: "
             "slowest minus the mean over ranks, time the faster ranks sit idle at the next collective. "
             "Rounds: generation rounds (all ranks, after warm-up), their mean longest completion "
             "(a round decodes until its longest one ends) and milliseconds per decode step.",
             "",
             "| run | GPUs | exit | wall s | steps | mean step s | completions/s | generation s/step | "
             "wait s/step | rounds / mean longest / ms per decode step | peak MiB per GPU | "
             "binary mean@4 base / primed / final |", "| --- " * 12 + "|"]
    for r in rows:
        val = {v["stage"]: v.get("binary_mean@4", "") for v in r.get("validation", [])}
        lines.append(f"| {r['run']} | {r['gpus']} | {r['exit_code']} | {r['wall_s']} | "
                     f"{r.get('steps', 0)} | {r.get('mean_step_s')} | {r.get('completions_per_s')} | "
                     f"{r.get('gen_slowest_s', '')} | {r.get('gen_wait_s', '')} | {decode_cell(r.get('decode'))} | "
                     f"{r['peak_gpu_mib']} | {val.get('base', '')} / {val.get('primed', '')} / "
                     f"{val.get('final', '')} |")
    lines += ["", "Reward mean per step:", ""]
    lines += [f"- {r['run']}: {[round(x, 3) for x in r.get('rewards', [])]}" for r in rows]
    (out / "multi_gpu.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def resume(out: Path, results: dict, specs: list[dict]) -> tuple[dict, list[dict]]:
    """Continue an earlier invocation (a 10-minute command limit splits one benchmark):
    runs that finished (exit 0) are kept and not repeated; the others run again."""
    path = out / "multi_gpu.json"
    if not path.is_file():
        return results, specs
    earlier = json.loads(path.read_text(encoding="utf-8"))
    same = ("global_batch", "micro_batch", "completion_tokens", "seed", "steps", "priming_steps")
    changed = [k for k in same if earlier["args"].get(k) != results["args"].get(k)]
    if changed:
        raise SystemExit(f"--resume: {path} was measured with other {', '.join(changed)}; use another --out")
    kept = [r for r in earlier["runs"] if r.get("exit_code") == 0]
    done = {r["run"] for r in kept}
    merged = {**results, "runs": kept,
              "commands": [*earlier.get("commands", [earlier["args"]]), results["args"]]}
    return merged, [spec for spec in specs if spec["name"] not in done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="runs/multi_gpu", help="run directories and logs")
    parser.add_argument("--runs", default="1gpu,ddp2,zero3")
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps of the 1gpu/ddp2 runs")
    parser.add_argument("--full-ft-steps", type=int, default=3, help="GRPO steps of the zero3 run")
    parser.add_argument("--global-batch", type=int, default=64, help="completions per step")
    parser.add_argument("--micro-batch", type=int, default=0,
                        help="completions per micro-batch and generation round (0: one round per step)")
    parser.add_argument("--completion-tokens", type=int, default=128)
    parser.add_argument("--priming-steps", type=int, default=32)
    parser.add_argument("--val-examples", type=int, default=16)
    parser.add_argument("--warmup-steps", type=int, default=1, help="steps left out of mean step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the script itself")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--time-budget-s", type=float, default=360)
    parser.add_argument("--resume", action="store_true",
                        help="keep the finished runs already in --out, run only the others")
    args = parser.parse_args()
    if args.global_batch % 16:
        parser.error("--global-batch must be a multiple of 16 (8 generations x 2 GPUs)")
    if args.micro_batch and (args.micro_batch % 8 or args.global_batch % (2 * args.micro_batch)):
        parser.error("--micro-batch must be a multiple of 8 that divides --global-batch / 2")
    deadline = time.perf_counter() + args.time_budget_s
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    import torch

    results = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
               "gpus_visible": torch.cuda.device_count(), "torch": torch.__version__,
               "global_batch": args.global_batch, "seed": args.seed, "args": vars(args), "runs": []}
    specs = plan(args)
    if args.resume:
        results, specs = resume(out, results, specs)
    for i, spec in enumerate(specs):
        left = deadline - time.perf_counter()
        if left < 30:
            results["runs"].append({"run": spec["name"], "gpus": spec["gpus"], "exit_code":
                                    "skipped: time budget", "wall_s": 0, "peak_gpu_mib": {}})
            continue
        # Give later runs a fair share of what is left.
        share = left / (len(specs) - i) if spec["name"] != specs[-1]["name"] else left
        row = run_one(spec, args, work, min(left, share * 1.3))
        results["runs"].append(row)
        write_results(out, results)
        print(f"{row['run']}: exit {row['exit_code']}, {row['wall_s']} s, "
              f"step {row.get('mean_step_s')} s, {row.get('completions_per_s')} completions/s", flush=True)
        if spec["name"] == "zero3" and row["exit_code"] != 0 and deadline - time.perf_counter() > 60:
            fsdp = dict(spec, name="fsdp", accel="configs/accelerate/fsdp.yaml",
                        note="zero3 failed; FSDP full shard instead")
            results["runs"].append(run_one(fsdp, args, work, deadline - time.perf_counter()))
    write_results(out, results)


if __name__ == "__main__":
    main()
