"""Seconds of ``export_gguf`` (convert + verify), before and after parsing each file once, side by side.

Before: the vocabulary check, transformers' GGUF tokenizer and model each read the file on their
own (five gguf-py parses of the metadata, the tensor-name table rebuilt per submodule); it is
run by swapping ``gguf_verify.one_parse_per_file`` for a no-op. After: the library as it is.
Both run the whole export of the same model in alternating rounds, and their verification
numbers must be identical (same checks, less work). The machine is shared, so the table shows
the fastest round per phase (every round is in the JSON). Default model: the embedded
SmolLM2-135M, type q8_0 (what notebook 04 exports in the smoke profile).
Writes ``<out>/gguf_export_speed.{json,md}``.

    python -m benchmarks.gguf_export_speed --out benchmarks/results
    python -m benchmarks.gguf_export_speed --model runs/<stamp>/merged --types f16 q8_0 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SAME = ("max_abs", "mean_abs", "top1_agreement", "greedy_identical", "tokenizer_ids_identical",
        "passed", "vocab")


def export_once(model_dir: Path, types: tuple[str, ...], max_new_tokens: int, shared: bool) -> dict[str, Any]:
    """One whole export into a temporary folder: seconds per phase and the verification numbers."""
    from toolrl_lib.export import gguf_verify
    from toolrl_lib.export.gguf_export import GGUFOptions, export_gguf

    original = gguf_verify.one_parse_per_file
    if not shared:
        gguf_verify.one_parse_per_file = contextlib.nullcontext  # the code before the change
    try:
        with tempfile.TemporaryDirectory(prefix="gguf-speed-") as tmp:
            start = time.perf_counter()
            report = export_gguf(model_dir, Path(tmp) / "gguf", GGUFOptions(types=types, max_new_tokens=max_new_tokens))
            wall = time.perf_counter() - start
    finally:
        gguf_verify.one_parse_per_file = original
    seconds = {"export_wall": round(wall, 2), **report.timings}
    for kind, info in report.files.items():
        seconds[f"convert_{kind}"] = info["seconds"]
    numbers = {kind: {k: check[k] for k in SAME} for kind, check in report.verification.items()}
    return {"seconds": seconds, "numbers": numbers, "passed": report.passed}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# GGUF export: before / after one parse per file",
        "",
        f"Model `{result['model']}`, types {', '.join(result['types'])}, {result['cpus']} CPU(s) "
        f"(shared machine), {result['rounds']} alternating round(s); fastest round per phase, in "
        "seconds (every round in the JSON). `vocab_*`: the vocabulary check (after: the one parse "
        "of the file); `verify_*`: loading the GGUF with transformers and comparing logits and "
        "greedy tokens.",
        "",
        f"Command: `{result['command']}`",
        "",
        "| phase | before s | after s |",
        "| --- | --- | --- |",
    ]
    for phase in result["fastest"]["after"]:
        lines.append(f"| {phase} | {result['fastest']['before'][phase]} | {result['fastest']['after'][phase]} |")
    lines += ["", f"Verification numbers identical in every round, before and after: {result['identical_numbers']}; "
              f"all passed: {result['all_passed']}. Peak RSS of the benchmark process: {result['peak_rss_mb']} MB."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="", help="model folder (default: the embedded model)")
    p.add_argument("--types", nargs="+", default=["q8_0"])
    p.add_argument("--rounds", type=int, default=2, help="before/after pairs")
    p.add_argument("--max-new-tokens", type=int, default=24, help="the export's default")
    p.add_argument("--out", default="benchmarks/results")
    a = p.parse_args(argv)

    from toolrl_lib.models import prepare_embedded_model

    model_dir = Path(a.model) if a.model else prepare_embedded_model()
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(a.rounds):
        for label in ("before", "after"):
            run = export_once(model_dir, tuple(a.types), a.max_new_tokens, label == "after")
            runs[label].append(run)
            print(label, run["seconds"], flush=True)
    fastest = {label: {k: min(r["seconds"][k] for r in rows) for k in rows[0]["seconds"]}
               for label, rows in runs.items()}
    every = [r for rows in runs.values() for r in rows]
    result = {
        "model": str(model_dir), "types": a.types, "cpus": os.cpu_count(), "rounds": a.rounds,
        "fastest": fastest, "runs": runs,
        "identical_numbers": all(r["numbers"] == every[0]["numbers"] for r in every),
        "all_passed": all(r["passed"] for r in every),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "python": platform.python_version(),
        "command": "python -m benchmarks.gguf_export_speed " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gguf_export_speed.json").write_text(json.dumps(result, indent=2))
    (out / "gguf_export_speed.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if result["identical_numbers"] and result["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
