"""Reward fuzz benchmark: is ``toolrl_lib.rewards.score`` safe and fast on anything a policy emits?

Three measurements, written to ``benchmarks/results/reward_fuzz.{json,csv,md}``:

1. **Fuzz** — ``--n`` (default 1,000,000) generated and mutated completions over all families
   and schemes: rendered ground truths, realistic mistakes, random character/structure
   mutations and hostile strings (deep nesting, megabyte strings, unterminated tags,
   thousands of ``<tool_call>`` blocks, NaN/Infinity, duplicate keys, lone surrogates).
   Goal: 0 exceptions, every total inside ``reward_range`` and every component in [0, 1].
2. **Throughput** — ``weighted`` on typical completions (valid or near-valid calls), one
   process: goal ≥ 20,000 completions/s. Measured as process CPU time (the number that
   does not depend on what else the machine runs) and wall time.
3. **Hostile latency** — 64 KB hostile strings of each kind: goal p99 ≤ 1 ms (thread CPU
   time; wall time reported too).

Run: ``nice .venv/bin/python -m benchmarks.reward_fuzz [--n 1000000] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing as mp
import os
import platform
import random
import sys
import time
from pathlib import Path

from toolrl_lib.data.synthetic import generate_examples
from toolrl_lib.prompts import FAMILIES, get_adapter
from toolrl_lib.rewards import SCHEMES, reward_range, score

RESULTS = Path(__file__).resolve().parent / "results"
HOSTILE_BYTES = 64 * 1024
TAGS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", "<|python_tag|>",
        "<|im_end|>", '{"name": ', '"arguments": {', "}", "{", "[", "]", ",", ":", '"', "\\", "NaN",
        "Infinity", "-Infinity", "1e999", "\ud800", "\udfff", "\x00", "\n"]


# ---------------------------------------------------------------------------------------
# Generators
def example_pool(n: int, seed: int):
    examples = generate_examples(n, seed=seed)
    return [(e.ground_truth, e.tools, e.query) for e in examples]


def typical(rng: random.Random, gold: list[dict], tools: list[dict], family: str) -> str:
    """What a model plausibly writes: the right calls or a realistic mistake."""
    adapter = get_adapter(family)
    calls = [dict(c, arguments=dict(c["arguments"])) for c in gold]
    roll = rng.random()
    if roll < 0.15 and calls:
        key = rng.choice(list(calls[0]["arguments"]) or ["x"])
        calls[0]["arguments"][key] = rng.choice([0, "wrong", True, 3.5, None, [1]])
    elif roll < 0.25 and calls:
        calls = calls[:-1]
    elif roll < 0.35 and tools:
        calls = calls + [{"name": rng.choice(tools)["name"], "arguments": {}}]
    elif roll < 0.42:
        calls = []
    elif roll < 0.50 and calls:
        calls[0] = dict(calls[0], name=calls[0]["name"] + "_v2")
    reasoning = "I should call the matching function with the values from the request." if rng.random() < 0.5 else None
    text = adapter.render_completion(calls, reasoning=reasoning)
    if rng.random() < 0.1:
        text = "Sure, here you go: " + text
    return text


def mutate(rng: random.Random, text: str) -> str:
    """1-4 random character/structure edits."""
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        pos = rng.randint(0, len(text))
        if op == 0:
            text = text[:pos] + rng.choice(TAGS) + text[pos:]
        elif op == 1 and text:
            end = min(len(text), pos + rng.randint(1, 20))
            text = text[:pos] + text[end:]
        elif op == 2:
            text = text[:pos]
        elif op == 3 and text:
            end = min(len(text), pos + rng.randint(1, 40))
            text = text[:end] + text[pos:end] * rng.randint(1, 5) + text[end:]
        elif op == 4:
            text = text[:pos] + chr(rng.randint(0, 0x10FFFF)) + text[pos:]
        elif op == 5:
            text = text.replace('"', "'", rng.randint(1, 3))
        elif op == 6:
            text = text.replace("}", "}" * rng.randint(2, 4), 1)
        else:
            text = text[:pos] + '"dup": 1, "dup": 2, ' + text[pos:]
    return text


def _pad(unit: str, size: int) -> str:
    return (unit * (size // max(len(unit), 1) + 1))[:size]


def hostile(kind: str, size: int = HOSTILE_BYTES, rng: random.Random | None = None) -> str:
    """A hostile completion of about ``size`` characters."""
    rng = rng or random.Random(0)
    half = size // 2
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    block = f"<tool_call>\n{call}\n</tool_call>\n"
    if kind == "deep_nesting":
        return '<tool_call>\n{"name": "f", "arguments": {"a": ' + "[" * half + "]" * half + "}}\n</tool_call>"
    if kind == "deep_unbalanced":
        return "<tool_call>\n" + '{"a": ' * (size // 6)
    if kind == "many_blocks":
        return _pad(block, size)
    if kind == "unterminated_tag":
        return '<tool_call>\n{"name": "' + "a" * size
    if kind == "long_string_arg":
        return '<tool_call>\n{"name": "get_weather", "arguments": {"city": "' + "x" * size + '"}}\n</tool_call>'
    if kind == "nan_inf":
        return '<tool_call>\n{"name": "f", "arguments": {"v": [' + _pad("NaN, Infinity, 1e999, ", size) + "1]}}\n</tool_call>"
    if kind == "duplicate_keys":
        keys = ", ".join(f'"k{i}": {i}' for i in range(size // 12))
        return '<tool_call>\n{"name": "f", "arguments": {' + keys + ', "k0": 1}}\n</tool_call>'
    if kind == "surrogates":
        return _pad("\ud800<tool_call>\udfff{\"name\": \"\\ud800\"}", size)
    if kind == "huge_number":
        return '<tool_call>\n{"name": "f", "arguments": {"n": ' + "9" * size + "}}\n</tool_call>"
    if kind == "think_flood":
        return _pad("<think>", size)
    if kind == "tag_soup":
        return "".join(rng.choice(TAGS) for _ in range(size // 6))[:size]
    if kind == "random_text":
        return "".join(chr(rng.randint(32, 0x2FFF)) for _ in range(size))
    if kind == "json_list_flood":
        return "[TOOL_CALLS]" + _pad(call + ", ", size)
    if kind == "many_objects_llama":
        return _pad(call.replace("arguments", "parameters") + "\n", size)
    raise ValueError(kind)


HOSTILE_KINDS = ("deep_nesting", "deep_unbalanced", "many_blocks", "unterminated_tag", "long_string_arg",
                 "nan_inf", "duplicate_keys", "surrogates", "huge_number", "think_flood", "tag_soup",
                 "random_text", "json_list_flood", "many_objects_llama")


# ---------------------------------------------------------------------------------------
# 1. fuzz (in worker processes)
def _fuzz_chunk(args: tuple[int, int, int]) -> dict:
    start, count, seed = args
    rng = random.Random(seed * 1_000_003 + start)
    pool = example_pool(200, seed=seed + start % 7)
    hostile_cache = {(k, s): hostile(k, s, random.Random(s)) for k in HOSTILE_KINDS for s in (300, 4096, HOSTILE_BYTES)}
    megabyte = "<tool_call>\n" + "x" * (1 << 20)
    stats = {"n": 0, "exceptions": 0, "out_of_range": 0, "by_origin": {}, "errors": [], "cpu_s": 0.0}
    t0 = time.process_time()
    for i in range(count):
        gold, tools, query = pool[rng.randrange(len(pool))]
        family = FAMILIES[i % len(FAMILIES)]
        scheme = SCHEMES[(i // len(FAMILIES)) % len(SCHEMES)]
        roll = rng.random()
        if roll < 0.45:
            origin, text = "typical", typical(rng, gold, tools, family)
        elif roll < 0.90:
            origin, text = "mutated", mutate(rng, typical(rng, gold, tools, family))
        elif roll < 0.999:
            kind = HOSTILE_KINDS[rng.randrange(len(HOSTILE_KINDS))]
            size = (300, 4096, HOSTILE_BYTES)[rng.randrange(3)]
            origin, text = "hostile", mutate(rng, hostile_cache[(kind, size)]) if rng.random() < 0.3 else hostile_cache[(kind, size)]
        else:
            origin, text = "megabyte", megabyte
        stats["by_origin"][origin] = stats["by_origin"].get(origin, 0) + 1
        try:
            result = score(text, gold, tools, scheme=scheme, family=family, context=query)
        except Exception as error:  # noqa: BLE001 - counting is the point
            stats["exceptions"] += 1
            if len(stats["errors"]) < 5:
                stats["errors"].append(f"{type(error).__name__}: {error} | {origin} {text[:80]!r}")
            continue
        lo, hi = reward_range(scheme)
        parts = (result.format, result.name, result.args, result.reasoning)
        if not (math.isfinite(result.total) and lo <= result.total <= hi and all(0.0 <= p <= 1.0 for p in parts)):
            stats["out_of_range"] += 1
            if len(stats["errors"]) < 5:
                stats["errors"].append(f"out of range {result} | {origin} {text[:80]!r}")
        stats["n"] += 1
    stats["cpu_s"] = time.process_time() - t0
    return stats


def run_fuzz(n: int, workers: int, seed: int, chunk: int = 25_000) -> dict:
    jobs = [(start, min(chunk, n - start), seed) for start in range(0, n, chunk)]
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(workers) as pool:
        parts = pool.map(_fuzz_chunk, jobs)
    total = {"n": 0, "exceptions": 0, "out_of_range": 0, "by_origin": {}, "errors": [], "cpu_s": 0.0}
    for part in parts:
        for key in ("n", "exceptions", "out_of_range", "cpu_s"):
            total[key] += part[key]
        for origin, count in part["by_origin"].items():
            total["by_origin"][origin] = total["by_origin"].get(origin, 0) + count
        total["errors"].extend(part["errors"][: 5 - len(total["errors"])])
    total["attempted"] = n
    total["wall_s"] = time.perf_counter() - t0
    total["workers"] = workers
    return total


# ---------------------------------------------------------------------------------------
# 2. throughput
def run_throughput(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    pool = example_pool(500, seed=seed)
    cases = []
    for _ in range(n):
        gold, tools, query = pool[rng.randrange(len(pool))]
        cases.append((typical(rng, gold, tools, "hermes"), gold, tools))
    mean_chars = sum(len(c[0]) for c in cases) / len(cases)
    best_cpu = best_wall = float("inf")
    for _ in range(3):
        w0, c0 = time.perf_counter(), time.process_time()
        for text, gold, tools in cases:
            score(text, gold, tools, scheme="weighted", family="hermes")
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return {"n": n, "mean_chars": round(mean_chars, 1), "repeats": 3,
            "per_s_cpu": n / best_cpu, "per_s_wall": n / best_wall,
            "us_per_completion_cpu": best_cpu / n * 1e6}


# ---------------------------------------------------------------------------------------
# 3. hostile latency
def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


def run_latency(per_kind: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    gold = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    tools = [{"name": "get_weather", "description": "", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}]
    rows = []
    all_cpu: list[float] = []
    all_wall: list[float] = []
    for kind in HOSTILE_KINDS:
        texts = [hostile(kind, HOSTILE_BYTES, random.Random(rng.random())) for _ in range(4)]
        cpu, wall = [], []
        for i in range(per_kind):
            text = texts[i % len(texts)]
            family = FAMILIES[i % len(FAMILIES)]
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            score(text, gold, tools, scheme="weighted", family=family)
            cpu.append((time.thread_time_ns() - c0) / 1e6)
            wall.append((time.perf_counter_ns() - w0) / 1e6)
        all_cpu += cpu
        all_wall += wall
        rows.append({"kind": kind, "n": per_kind, "chars": len(texts[0]),
                     "p50_ms_cpu": _percentile(cpu, 50), "p99_ms_cpu": _percentile(cpu, 99),
                     "max_ms_cpu": max(cpu), "p99_ms_wall": _percentile(wall, 99)})
    rows.append({"kind": "ALL", "n": len(all_cpu), "chars": HOSTILE_BYTES,
                 "p50_ms_cpu": _percentile(all_cpu, 50), "p99_ms_cpu": _percentile(all_cpu, 99),
                 "max_ms_cpu": max(all_cpu), "p99_ms_wall": _percentile(all_wall, 99)})
    return rows


# ---------------------------------------------------------------------------------------
def write_results(report: dict, latency: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "reward_fuzz.json").write_text(json.dumps({**report, "latency": latency}, indent=2))
    with (out / "reward_fuzz.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(latency[0]))
        writer.writeheader()
        writer.writerows(latency)
    fuzz, tp = report["fuzz"], report["throughput"]
    overall = latency[-1]
    lines = [
        "# Reward fuzz benchmark",
        "",
        f"Machine: {report['machine']}; Python {report['python']}; {report['date']}.",
        "",
        "| goal | measured | pass |",
        "|---|---|---|",
        f"| 0 exceptions on {fuzz['attempted']:,} fuzzed completions | {fuzz['exceptions']} | {'yes' if fuzz['exceptions'] == 0 else 'NO'} |",
        f"| all totals/components in range | {fuzz['out_of_range']} out of range | {'yes' if fuzz['out_of_range'] == 0 else 'NO'} |",
        f"| ≥ 20,000 completions/s, weighted, typical, one core | {tp['per_s_cpu']:,.0f}/s CPU time ({tp['per_s_wall']:,.0f}/s wall) | {'yes' if tp['per_s_cpu'] >= 20_000 else 'NO'} |",
        f"| p99 ≤ 1 ms on 64 KB hostile strings | {overall['p99_ms_cpu']:.3f} ms CPU ({overall['p99_ms_wall']:.3f} ms wall) | {'yes' if overall['p99_ms_cpu'] <= 1.0 else 'NO'} |",
        "",
        f"Fuzz mix: {json.dumps(fuzz['by_origin'])}; {fuzz['workers']} worker(s), {fuzz['wall_s']:.0f} s wall.",
        "",
        "| hostile kind (64 KB) | p50 ms | p99 ms | max ms | p99 ms wall |",
        "|---|---|---|---|---|",
        *[f"| {r['kind']} | {r['p50_ms_cpu']:.3f} | {r['p99_ms_cpu']:.3f} | {r['max_ms_cpu']:.3f} | {r['p99_ms_wall']:.3f} |" for r in latency],
        "",
        "CPU time = the process/thread's own CPU time, unaffected by other load on a shared machine.",
    ]
    (out / "reward_fuzz.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="fuzzed completions")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--throughput-n", type=int, default=50_000)
    parser.add_argument("--latency-per-kind", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    throughput = run_throughput(args.throughput_n, args.seed)
    print(f"throughput: {throughput['per_s_cpu']:,.0f}/s CPU, {throughput['per_s_wall']:,.0f}/s wall", flush=True)
    latency = run_latency(args.latency_per_kind, args.seed)
    print(f"hostile 64KB p99: {latency[-1]['p99_ms_cpu']:.3f} ms CPU", flush=True)
    fuzz = run_fuzz(args.n, args.workers, args.seed)
    print(f"fuzz: {fuzz['n']:,} scored, {fuzz['exceptions']} exceptions, {fuzz['out_of_range']} out of range, "
          f"{fuzz['wall_s']:.0f}s", flush=True)
    report = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu(s) {platform.node()}",
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "args": {k: str(v) for k, v in vars(args).items()},
        "throughput": throughput,
        "fuzz": fuzz,
    }
    write_results(report, latency, args.out)
    print(f"results in {args.out}")
    ok = (fuzz["exceptions"] == 0 and fuzz["out_of_range"] == 0 and throughput["per_s_cpu"] >= 20_000
          and latency[-1]["p99_ms_cpu"] <= 1.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
