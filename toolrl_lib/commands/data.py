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
    smoke = sub.add_parser(
        "smoke", help="notebook 01's smoke-profile set (data/processed/smoke) without the notebook",
        description="Offline, about a second; skipped when OUT/train.jsonl exists (unless --force). "
        "The GPU benchmarks train on it (benchmarks/gpu/session.sh runs it in its first step).")
    smoke.add_argument("--out", help="output folder (default: data/processed/smoke)")
    smoke.add_argument("--force", action="store_true", help="prepare again even if it exists")
    smoke.set_defaults(handler=_smoke)
    generate = sub.add_parser(
        "generate", help="write raw synthetic rows (xlam|toolace|parquet), or the broad tool set",
        description="--generator synthetic (default) writes raw rows of the small catalogue in "
        "--format to a file; --generator broad writes OUT/{train,val,test}.jsonl (held-out "
        "functions), stats.json and the BFCL contamination report (contamination.json/.md).")
    generate.add_argument("--generator", choices=("synthetic", "broad"), default="synthetic")
    generate.add_argument("--format", choices=("xlam", "toolace", "parquet"),
                          help="synthetic: raw row format (required there)")
    generate.add_argument("--n", "--examples", dest="n", type=int, default=100,
                          help="examples to generate")
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--val-fraction", type=float, default=0.1, help="broad: share of val")
    generate.add_argument("--test-fraction", type=float, default=0.1, help="broad: share of test")
    generate.add_argument("--no-contamination-check", action="store_true",
                          help="broad: skip the BFCL overlap check (not recommended)")
    generate.add_argument("--out", required=True,
                          help="synthetic: output file (.jsonl or .parquet); broad: output folder")
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


def _smoke(args: argparse.Namespace) -> int:
    from toolrl_lib.data.explore import prepare_smoke
    from toolrl_lib.paths import processed_data_dir

    out = args.out or processed_data_dir("smoke")
    report = prepare_smoke(out, force=args.force)
    if report is None:
        print(json.dumps({"out": str(out), "prepared": False, "why": "train.jsonl exists (--force prepares again)"}))
    else:
        print(json.dumps({"out": str(out), "prepared": True, "train": report["train"], "val": report["val"],
                          "dropped": report["dropped"]}))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from toolrl_lib.data.synthetic import generate_examples, to_raw

    if args.generator == "broad":
        return _generate_broad(args)
    if args.format is None:
        raise ValueError("--format is required with --generator synthetic (xlam, toolace or parquet)")
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


def _generate_broad(args: argparse.Namespace) -> int:
    from toolrl_lib.data.toolset import generate_broad, write_broad

    data = generate_broad(args.n, seed=args.seed, val_fraction=args.val_fraction,
                          test_fraction=args.test_fraction, contamination=not args.no_contamination_check)
    stats = write_broad(data, args.out)
    print(json.dumps({"out": str(args.out), "signatures": stats["signatures"], "domains": stats["domains"],
                      "examples": {s: v["examples"] for s, v in stats["splits"].items()},
                      "kinds": stats["kinds"], "contamination": stats["contamination"],
                      "seconds": stats["seconds"]}, indent=2))
    return 0
