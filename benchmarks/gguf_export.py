"""GGUF export of a model folder, per type: size, conversion seconds, and how far the file read
back by transformers is from the folder (logits, top-1 agreement, greedy tokens).

Default model: the embedded SmolLM2-135M folder (what the smoke workbook merges onto). Writes
``<out>/gguf_export.json`` and ``gguf_export.md``.

    python -m benchmarks.gguf_export --out benchmarks/results
    python -m benchmarks.gguf_export --model runs/<stamp>/merged --types f16 q8_0 bf16
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path


def markdown(result: dict) -> str:
    lines = [
        "# GGUF export: llama.cpp's converter, read back by transformers",
        "",
        f"Model `{result['model']}`; {result['prompts']} chat prompts, logits at every prompt position "
        f"({result['positions']} positions), greedy {result['greedy_tokens']} new tokens per prompt, "
        f"CPU fp32 on both sides. Converter: llama-cpp-python {result['converter_version']} sdist. "
        f"Reference logit scale (max |logit|) {result['scale']:.2f}.",
        "",
        f"Command: `{result['command']}`",
        "",
        "| type | MB | convert s | logits max abs | logits mean abs | top-1 agreement | greedy identical | greedy tokens before divergence | passed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['type']} | {row['MB']} | {row['convert_s']} | {row['max_abs']:.4f} | {row['mean_abs']:.5f} "
            f"| {row['top1_agreement']:.4f} | {row['greedy_identical']:.2f} | {row['greedy_token_agreement']:.3f} "
            f"| {row['passed']} |")
    lines += ["", "Source folder on disk: " + f"{result['source_mb']} MB ({result['source_dtype']})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="", help="model folder (default: the embedded model)")
    p.add_argument("--types", nargs="+", default=["f16", "q8_0"])
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--out", default="benchmarks/results")
    a = p.parse_args(argv)

    from toolrl_lib.export.converter import VERSION
    from toolrl_lib.export.gguf_export import GGUFOptions, export_gguf
    from toolrl_lib.models import prepare_embedded_model

    model = Path(a.model) if a.model else prepare_embedded_model()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gguf-bench-") as tmp:
        options = GGUFOptions(types=tuple(a.types), require_pass=False, max_new_tokens=a.max_new_tokens)
        report = export_gguf(model, Path(tmp) / "gguf", options)
    rows = []
    for kind, info in report.files.items():
        check = report.verification[kind]
        rows.append({"type": kind, "MB": round(info["bytes"] / 2**20, 1), "convert_s": info["seconds"],
                     **{k: check[k] for k in ("max_abs", "mean_abs", "top1_agreement", "greedy_identical",
                                              "greedy_token_agreement", "passed", "problems",
                                              "tokenizer_ids_identical")}})
    first = next(iter(report.verification.values()))
    config = json.loads((model / "config.json").read_text())
    result = {
        "model": str(model), "converter_version": VERSION, "types": a.types, "rows": rows,
        "scale": first["scale"], "positions": first["positions"], "prompts": len(first["generations"]),
        "greedy_tokens": a.max_new_tokens, "timings": report.timings,
        "source_mb": round(sum(f.stat().st_size for f in model.glob("*.safetensors")) / 2**20, 1),
        "source_dtype": config.get("dtype") or config.get("torch_dtype"),
        "generations": {k: v["generations"] for k, v in report.verification.items()},
        "wall_s": round(time.perf_counter() - start, 1), "python": platform.python_version(),
        "command": "python -m benchmarks.gguf_export " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gguf_export.json").write_text(json.dumps(result, indent=2))
    (out / "gguf_export.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
