"""``toolrl data prepare|generate``: build the processed training set from raw rows."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    from toolrl_lib.data.pipeline import SOURCES

    parser = subparsers.add_parser("data", help="prepare training data")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    prepare = sub.add_parser(
        "prepare", help="raw rows -> validated, de-duplicated train/val JSONL + summary.json",
        description="Prints the JSON summary on stdout. Bad rows are counted by reason and "
        "skipped (listed in OUT/dropped.jsonl); --strict stops at the first one.")
    prepare.add_argument("--source", required=True, choices=SOURCES)
    prepare.add_argument("--input", help="JSON/JSONL/parquet file or folder; 'hub:<dataset id>' "
                         "reads the Hugging Face hub (xlam/toolace default to the hub when "
                         "omitted; synthetic generates; bfcl uses the packaged unscored sets)")
    prepare.add_argument("--out", required=True, help="output folder")
    prepare.add_argument("--strict", action="store_true", help="stop at the first bad row")
    prepare.add_argument("--seed", type=int, default=0, help="split (and generator) seed")
    prepare.add_argument("--val-fraction", type=float, default=0.1)
    prepare.add_argument("--n", type=int, default=1000, help="synthetic: examples to generate")
    prepare.add_argument("--kinds", help="synthetic: comma-separated kinds (default: mixed)")
    prepare.add_argument("--limit", type=int, help="read at most this many raw rows")
    prepare.add_argument("--near-dup-threshold", type=float, default=0.8,
                         help="word-trigram Jaccard at which a same-answer row is a near-duplicate")
    prepare.add_argument("--no-contamination-check", action="store_true",
                         help="skip the BFCL overlap check (not recommended)")
    prepare.set_defaults(handler=_prepare)
    generate = sub.add_parser("generate", help="write raw synthetic rows (xlam|toolace|parquet)")
    generate.add_argument("--format", required=True, choices=("xlam", "toolace", "parquet"))
    generate.add_argument("--n", type=int, default=100)
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--out", required=True, help="output file (.jsonl or .parquet)")
    generate.set_defaults(handler=_generate)


def _prepare(args: argparse.Namespace) -> int:
    from toolrl_lib.data.pipeline import prepare

    if args.input is None and args.source == "parquet":
        raise ValueError("--source parquet needs --input PATH")
    opts = {"limit": args.limit, "contamination": not args.no_contamination_check,
            "near_dup_threshold": args.near_dup_threshold}
    if args.source == "synthetic":
        opts["n"] = args.n
        opts["kinds"] = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    report = prepare(args.source, args.input, args.out, strict=args.strict, seed=args.seed,
                     val_fraction=args.val_fraction, **opts)
    print(json.dumps(report.to_json(), indent=2))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from toolrl_lib.data.synthetic import generate_examples, to_raw

    rows = to_raw(generate_examples(args.n, seed=args.seed), args.format)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), out)
    else:
        with out.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(json.dumps({"rows": len(rows), "format": args.format, "out": str(out)}))
    return 0
