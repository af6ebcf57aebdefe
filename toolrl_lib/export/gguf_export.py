"""Merged model folder -> GGUF files (llama.cpp's converter) + Ollama Modelfiles, verified.

Each requested type (``f16``, ``q8_0``, ...) is one run of llama.cpp's ``convert_hf_to_gguf.py``
on the merged folder, then the file is loaded back with transformers and compared with the
folder on the same prompts (``gguf_verify``; the file's metadata is parsed once for the
vocabulary check, the tokenizer and the model). Like the merge, the export is written to a hidden
sibling and renamed into place only when every file passed, with ``toolrl_gguf.json``
(sizes, seconds, every measured number) written last; ``require_pass=False`` keeps a failed
file and reports it instead (for measuring).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GGUF_TYPES = ("f16", "q8_0", "bf16", "f32")
GGUF_INFO = "toolrl_gguf.json"


class GGUFExportError(RuntimeError):
    """Conversion or verification failed; ``report`` holds what was measured."""

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class GGUFOptions:
    """What to export and how hard to check.

    Attributes:
        types: GGUF types to write, each one file (``f16``, ``q8_0``, ``bf16``, ``f32``).
        verify: load every file back and compare it with the source folder.
        require_pass: a failed verification is an error (nothing is left in place).
        max_new_tokens: greedy tokens compared per prompt.
        family: prompt family for the Modelfile (``hermes``/``qwen3``; empty: detected).
        overwrite: replace an existing output folder.
        converter: path to ``convert_hf_to_gguf.py`` (empty: fetched from the PyPI sdist).
    """

    types: tuple[str, ...] = ("f16", "q8_0")
    verify: bool = True
    require_pass: bool = True
    max_new_tokens: int = 24
    family: str = ""
    overwrite: bool = False
    converter: str = ""


@dataclass
class GGUFReport:
    source: str
    output: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    verification: dict[str, dict[str, Any]] = field(default_factory=dict)
    modelfiles: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(v.get("passed") for v in self.verification.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def table(self) -> list[dict[str, Any]]:
        """One row per type: size, seconds, and the verification numbers."""
        rows = []
        for kind, info in self.files.items():
            check = self.verification.get(kind, {})
            rows.append({
                "type": kind, "MB": round(info["bytes"] / 2**20, 1), "convert_s": info["seconds"],
                "logits_max_abs": check.get("max_abs"), "logits_mean_abs": check.get("mean_abs"),
                "top1_agreement": check.get("top1_agreement"),
                "greedy_identical": check.get("greedy_identical"), "passed": check.get("passed"),
            })
        return rows


def convert(model_dir: str | Path, out_file: str | Path, gguf_type: str, converter: str | Path = "") -> float:
    """Run llama.cpp's converter once; returns seconds. Raises with the converter's last lines."""
    from toolrl_lib.export.converter import ensure_converter

    if gguf_type not in GGUF_TYPES:
        raise ValueError(f"GGUF type must be one of {', '.join(GGUF_TYPES)}; got {gguf_type!r}")
    script = Path(converter) if converter else ensure_converter()
    command = [sys.executable, str(script), str(model_dir), "--outtype", gguf_type,
               "--outfile", str(out_file)]
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # use the matching gguf-py
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not Path(out_file).is_file():
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
        raise GGUFExportError(f"llama.cpp converter failed for {model_dir} ({gguf_type}): {tail}")
    return round(seconds, 2)


def converter_input(source: Path, folder: Path) -> list[str]:
    """``folder``: the source's files linked, with a repaired ``tokenizer.json`` where needed.

    A byte-level BPE tokenizer (ByteLevel pre-tokenizer) that also declares ``byte_fallback``
    and a SentencePiece-style decoder -- what transformers' GGUF reader writes, e.g. for the
    embedded SmolLM2 -- makes llama.cpp's converter take it for a SentencePiece vocabulary and
    write ``tokenizer.ggml.model = llama`` without merges; llama.cpp would then split text
    differently from the model's training. Every byte has a token in a byte-level vocabulary, so
    byte fallback never fires and the ByteLevel decoder alone decodes the same text: both are
    reset so that the converter writes the GPT-2 style vocabulary with its merges. Returns notes.
    """
    folder.mkdir(parents=True)
    notes = []
    for item in source.iterdir():
        if item.is_file() and item.name != "tokenizer.json":
            (folder / item.name).symlink_to(item.resolve())
    tokenizer_file = source / "tokenizer.json"
    if tokenizer_file.is_file():
        data = json.loads(tokenizer_file.read_text(encoding="utf-8"))
        model, pre = data.get("model") or {}, data.get("pre_tokenizer") or {}
        if model.get("type") == "BPE" and pre.get("type") == "ByteLevel" and model.get("byte_fallback"):
            model["byte_fallback"] = False
            data["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                               "use_regex": True}
            notes.append("tokenizer.json: byte-level BPE with byte_fallback and a SentencePiece-style "
                         "decoder; converted as plain byte-level BPE (same tokens)")
        (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return notes


def gguf_vocab_check(gguf_file: Path, tokenizer: Any) -> dict[str, Any]:
    """The GGUF's own vocabulary against the source tokenizer: model, pre-tokenizer, tokens."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf_file)

    def text(key: str) -> str:
        field = reader.fields.get(key)
        return "" if field is None else bytes(field.parts[field.data[0]]).decode("utf-8")

    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tokens_field.parts[i]).decode("utf-8") for i in tokens_field.data]
    vocab = tokenizer.get_vocab()
    by_id = {i: t for t, i in vocab.items()}
    mismatched = sum(by_id.get(i) != t for i, t in enumerate(tokens))
    merges = reader.fields.get("tokenizer.ggml.merges")
    return {"model": text("tokenizer.ggml.model"), "pre": text("tokenizer.ggml.pre"),
            "tokens": len(tokens), "tokens_mismatched": mismatched,
            "merges": 0 if merges is None else len(merges.data)}


def export_gguf(model_dir: str | Path, out_dir: str | Path | None = None,
                options: GGUFOptions | None = None) -> GGUFReport:
    """Convert ``model_dir`` to every type in ``options.types`` in ``out_dir`` (default
    ``<model_dir>/gguf``), verify each file, write Modelfiles and ``toolrl_gguf.json``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolrl_lib.export import gguf_verify, modelfile
    from toolrl_lib.prompts import detect_family

    options = options or GGUFOptions()
    source = Path(model_dir)
    if not (source / "config.json").is_file():
        raise GGUFExportError(f"{source}: not a model folder (no config.json)")
    out = Path(out_dir) if out_dir else source / "gguf"
    if out.exists() and not options.overwrite:
        raise GGUFExportError(f"{out} exists; pass overwrite to replace it")
    unknown = [t for t in options.types if t not in GGUF_TYPES]
    if unknown or not options.types:
        raise GGUFExportError(f"GGUF types must be among {', '.join(GGUF_TYPES)}; got {list(options.types)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    report = GGUFReport(source=str(source), output=str(out))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        family = options.family or detect_family(tokenizer)
        reference = None
        if options.verify:
            start = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(source, dtype="float32").eval()
            reference = gguf_verify.reference_outputs(model, tokenizer, max_new_tokens=options.max_new_tokens)
            del model
            gc.collect()
            report.timings["reference"] = round(time.perf_counter() - start, 2)
        inputs = staging.parent / f"{staging.name}-input"
        report.notes += converter_input(source, inputs)
        for kind in options.types:
            name = f"model-{kind}.gguf"
            seconds = convert(inputs, staging / name, kind, options.converter)
            report.files[kind] = {"file": name, "bytes": (staging / name).stat().st_size, "seconds": seconds}
            report.modelfiles[kind] = modelfile.write_modelfile(staging, name, family, tokenizer).name
            with gguf_verify.one_parse_per_file():  # vocab check, tokenizer and model: one parse
                start = time.perf_counter()
                vocab = gguf_vocab_check(staging / name, tokenizer)
                report.files[kind]["vocab"] = vocab
                report.timings[f"vocab_{kind}"] = round(time.perf_counter() - start, 2)
                if reference is not None:
                    start = time.perf_counter()
                    model, gguf_tokenizer = gguf_verify.load_gguf_model(staging / name)
                    check = gguf_verify.compare(reference, model, gguf_tokenizer, kind, options.max_new_tokens)
                    if vocab["tokens_mismatched"]:
                        check["problems"].append(f"{vocab['tokens_mismatched']} GGUF tokens differ from the source vocabulary")
                        check["passed"] = False
                    report.verification[kind] = {**check, "vocab": vocab}
                    del model
                    gc.collect()
                    report.timings[f"verify_{kind}"] = round(time.perf_counter() - start, 2)
        failed = {k: v["problems"] for k, v in report.verification.items() if not v["passed"]}
        if failed and options.require_pass:
            raise GGUFExportError(f"GGUF verification failed: {failed} (nothing was written)", report.to_dict())
        (staging / GGUF_INFO).write_text(json.dumps({**report.to_dict(), "family": family}, indent=2))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(staging.parent / f"{staging.name}-input", ignore_errors=True)
    return report
