"""``toolrl merge --run DIR``: merge a run's LoRA adapter into its base, verified."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "merge",
        help="merge a training run's LoRA adapter into its base model (verified, atomic)",
        description="Merge a LoRA adapter into its base and save a standalone model folder. "
        "The output appears only after every verification check passed; its "
        "toolrl_merge.json records provenance and the checks.",
    )
    parser.add_argument("--run", required=True, help="training run directory (has run_info.json)")
    parser.add_argument("--checkpoint", default="best",
                        help="best | last | auto (best if saved, else last) | checkpoint-<step> "
                        "| path to an adapter folder (default best)")
    parser.add_argument("--out", help="output folder (default: <run>/merged)")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"),
                        help="dtype of the saved weights; the merge runs in fp32 (default bf16)")
    parser.add_argument("--base", help="override the base model named in run_info.json")
    parser.add_argument("--backend", default="auto", choices=("auto", "peft", "unsloth"),
                        help="auto = the run's backend (Unsloth only when importable)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--val-file", help="validation JSONL for the generation check "
                        "(default: the run config's data.val_files[0])")
    parser.add_argument("--n-generations", type=int, default=4,
                        help="validation prompts whose greedy generations are compared")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--push-to-hub", metavar="REPO_ID",
                        help="upload the verified folder (token from $HF_TOKEN only)")
    parser.add_argument("--gguf", action="append", metavar="TYPE", default=[],
                        help="also export the merged model to GGUF (f16, q8_0, bf16, f32; repeat "
                        "for several), verified, with an Ollama Modelfile, into <out>/gguf")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.set_defaults(handler=_merge)


def _merge(args: argparse.Namespace) -> int:
    from toolrl_lib.cli import CommandError
    from toolrl_lib.merge import (
        MergeError,
        MergeOptions,
        MergeVerificationError,
        merge_run,
        push_to_hub,
    )

    options = MergeOptions(
        dtype=args.dtype, device=args.device, backend=args.backend,
        n_generations=args.n_generations, max_new_tokens=args.max_new_tokens,
        overwrite=args.overwrite,
    )
    try:
        report = merge_run(args.run, args.checkpoint, args.out, base_model=args.base,
                           options=options, val_file=args.val_file)
    except MergeVerificationError as error:
        if error.report is not None:
            _print_checks(error.report)
        raise CommandError(f"{error} (nothing was written)") from error
    except MergeError as error:
        raise CommandError(str(error)) from error
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_checks(report)
        for note in report.notes:
            print(f"note: {note}")
        print(f"adapter weights {_size(report.sizes['adapter_weights_bytes'])} -> merged "
              f"{_size(report.sizes['merged_bytes'])} ({report.dtype}) at {report.output}")
    if args.gguf:
        _export_gguf(report.output, args.gguf, args.overwrite)
    if args.push_to_hub:
        try:
            print(f"uploaded: {push_to_hub(report.output, args.push_to_hub)}")
        except MergeError as error:
            raise CommandError(str(error)) from error
    return 0


def _export_gguf(folder: str, types: list[str], overwrite: bool) -> None:
    from toolrl_lib.cli import CommandError
    from toolrl_lib.export.converter import ConverterError
    from toolrl_lib.export.gguf_export import GGUFExportError, GGUFOptions, export_gguf

    try:
        report = export_gguf(folder, options=GGUFOptions(types=tuple(types), overwrite=overwrite))
    except (GGUFExportError, ConverterError, ValueError) as error:
        raise CommandError(str(error)) from error
    for row in report.table():
        print(f"gguf {row['type']}: {row['MB']} MB, logits max |diff| {row['logits_max_abs']:.3g}, "
              f"top-1 agreement {row['top1_agreement']:.3f}, greedy identical "
              f"{row['greedy_identical']:.2f} [{'ok' if row['passed'] else 'FAIL'}]")
    print(f"gguf files and Modelfiles at {report.output}")


def _print_checks(report: object) -> None:
    for check in report.checks:  # type: ignore[attr-defined]
        mark = "ok  " if check["passed"] else "FAIL"
        print(f"[{mark}] {check['check']}: {check['detail']}")


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
