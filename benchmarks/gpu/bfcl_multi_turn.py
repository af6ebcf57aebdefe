"""BFCL v4 multi-turn: accuracy per category (bootstrap CI), turns passed, share over the
window, force-terminations and seconds per category, for one or more models.

Two phases, because the GPU host has no BFCL scorer venv:

    # GPU host (generate only; models side by side on the one GPU, resumable; packs
    # $OUT/bfcl_multi_turn.tar.gz with the generations and result files):
    python -m benchmarks.gpu.bfcl_multi_turn generate --model base=embedded \\
        --model primed=/tmp/rl/primed_model --work /tmp/mt --pack $OUT --deadline-s 540
    # here (sanitise + BFCL's official checker, tables):
    python -m benchmarks.gpu.bfcl_multi_turn report --archive bfcl_multi_turn.tar.gz \\
        --work runs/bfcl_multi_turn --out benchmarks/results --command "..."

``all`` runs both here (a CPU check: ``all --limit 1 --max-new-tokens 16 --out /tmp/x``).
All four categories of a model run in one batched loop (one generate per step for every
live episode); the seconds per category are each episode's share of the batches it was in,
by prompt tokens (``generate_seconds`` of its generation line), summed per category.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.lanes import Job, Outcome, run_lanes
from toolrl_lib.data.bfcl import MULTI_TURN
from toolrl_lib.paths import project_root


def generate_command(label: str, model: str, work: Path, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, "-m", "toolrl_lib.cli", "eval", "bfcl", "--model", model, "--label", label,
           "--format", args.family, "--categories", ",".join(args.categories), "--out", str(work / label),
           "--no-score", "--batch-size", str(args.batch_size), "--backend", args.backend,
           "--dtype", args.dtype, "--multi-turn-max-new-tokens", str(args.max_new_tokens)]  # fmt: skip
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.max_batch_tokens:
        cmd += ["--max-batch-tokens", str(args.max_batch_tokens)]
    if args.window is not None:
        cmd += ["--window", str(args.window)]
    if args.compact_docs:
        cmd += ["--compact-docs"]
    if args.max_live:
        cmd += ["--multi-turn-max-live", str(args.max_live)]
    if getattr(args, "max_live_tokens", None):
        cmd += ["--multi-turn-max-live-tokens", str(args.max_live_tokens)]
    return cmd


def phase_generate(models: list[tuple[str, str]], work: Path, args: argparse.Namespace) -> None:
    """Every model's generation at once (one process each), killed at ``--deadline-s``; a
    model whose process finished writes ``<label>/timing.json``. Re-running resumes.
    ``args.env`` (optional): variables on top of this process's for the generation processes."""
    work.mkdir(parents=True, exist_ok=True)
    jobs = []
    for label, model in models:
        if (work / label / "timing.json").is_file():
            print(f"{label}: already generated, skipped", flush=True)
            continue
        jobs.append(Job(label, generate_command(label, model, work, args), log=work / f"{label}.log",
                        append_log=True, env={"PYTHONUNBUFFERED": "1", **(getattr(args, "env", None) or {})}))

    def record(outcome: Outcome) -> None:
        label = outcome.job.name
        spent = work / f"{label}.seconds.json"  # every command's share, killed ones included
        calls = (json.loads(spent.read_text()) if spent.is_file() else []) + [round(outcome.seconds, 1)]
        spent.write_text(json.dumps(calls))
        if outcome.status == "killed":
            print(f"{label}: resumable: run generate again", flush=True)
        if outcome.ok:
            (work / label / "timing.json").write_text(json.dumps(
                {"wall_seconds": round(sum(calls), 1), "commands_seconds": calls, "device": device_name(),
                 "concurrent_models": len(models)}))  # fmt: skip

    if jobs:  # side by side on the visible GPU(s): one lane per model, none pinned
        run_lanes(jobs, [None] * len(jobs), time.time() + args.deadline_s, on_end=record)
    if args.pack:
        pack(work, Path(args.pack) / "bfcl_multi_turn.tar.gz")


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"


def pack(work: Path, archive: Path, suffixes: tuple[str, ...] = (".json", ".jsonl", ".log")) -> None:
    """Settings, logs, generations and result files (no weights); well under 19 MB."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    for old in archive.parent.glob(f"{archive.name}.part*"):  # a split of an earlier call's pack
        old.unlink()
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in suffixes:
                tar.add(path, arcname=str(path.relative_to(work)))
    print(f"packed {archive} ({archive.stat().st_size / 1e6:.1f} MB)", flush=True)
    data = archive.read_bytes()
    if len(data) > PART_BYTES:  # files over 16 MiB do not come back from the GPU host: split
        for n, start in enumerate(range(0, len(data), PART_BYTES)):
            archive.with_name(f"{archive.name}.part{n}").write_bytes(data[start : start + PART_BYTES])
        archive.unlink()
        print(f"split into {n + 1} parts of <= {PART_BYTES >> 20} MiB ({archive.name}.partN)", flush=True)


PART_BYTES = 15 << 20


def unpack(archive: Path, work: Path) -> None:
    """Extract ``archive`` (or its ``.part0``, ``.part1``, ... joined, as ``pack`` split it)."""
    work.mkdir(parents=True, exist_ok=True)
    if not archive.is_file():
        parts = sorted(archive.parent.glob(f"{archive.name}.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
        if not parts:
            raise SystemExit(f"{archive} not found (nor {archive.name}.part0, ...)")
        joined = work / archive.name
        joined.write_bytes(b"".join(p.read_bytes() for p in parts))
        archive = joined
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")


def write_complete_results(label: str, folder: Path, limit: int | None = None) -> list[str]:
    """The result files of a model whose generation was cut short, for the categories it finished
    (every entry generated): those can be scored on their own. Returns them; the rest are left out."""
    from toolrl_lib.data.bfcl import load_bfcl_entries
    from toolrl_lib.evaluate import bfcl_results as results
    from toolrl_lib.evaluate.bfcl_multi_turn.runner import write_multi_turn_results

    complete = []
    for category in MULTI_TURN:
        source = results.generations_file(folder, category)
        if not source.is_file():
            continue
        ids = [str(e["id"]) for e in load_bfcl_entries(category)[:limit]]
        if set(ids) <= results.done_ids(source):
            write_multi_turn_results(folder, results.bfcl_model_name(label), category, ids)
            complete.append(category)
    return complete


def category_rows(label: str, folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score one model's folder (sanitiser first) and tabulate it per category."""
    import pandas as pd

    from toolrl_lib.evaluate import bfcl_results as results
    from toolrl_lib.evaluate.bfcl_multi_turn.report import multi_turn_summary
    from toolrl_lib.evaluate.rescore import score_folder

    scored = score_folder(folder)
    table = pd.read_csv(folder / "multi_turn.csv")
    turns = {r["category"]: r for r in multi_turn_summary(table).to_dict(orient="records")}
    rows = []
    for row in scored.summary:
        category = row["category"]
        lines = results.read_results(results.generations_file(folder, category))
        wanted = set(table.loc[table["category"] == category, "id"].astype(str))
        lines = [r for r in lines if str(r["id"]) in wanted]
        extra = turns.get(category, {})
        rows.append({
            "model": label, "category": category, "n": row["n"], "correct": row.get("correct"),
            "accuracy": row["accuracy"], "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
            "turns_passed_share": extra.get("turns_passed_share"),
            "over_window_share": extra.get("inference_errors", 0) / max(1, row["n"]),
            "force_terminated": extra.get("force_terminated"),
            "calls_per_entry": extra.get("calls_per_entry"),
            "steps_per_entry": sum(r.get("steps", 0) for r in lines) / max(1, len(lines)),
            "seconds": round(sum(float(r.get("generate_seconds") or 0) for r in lines), 1),
        })  # fmt: skip
    return rows, scored.overall


def phase_report(work: Path, out: Path, commands: list[str], prefix: str = "bfcl_multi_turn") -> dict:
    from toolrl_lib.evaluate.analysis import compare_dirs

    labels = sorted(p.name for p in work.iterdir() if (p / "result").is_dir())
    if not labels:
        raise SystemExit(f"no model folders with result files under {work}")
    rows, overall, meta = [], {}, {}
    for label in labels:
        folder = work / label
        model_rows, overall[label] = category_rows(label, folder)
        rows += model_rows
        settings = json.loads((folder / "generation_multi_turn.json").read_text())
        timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").is_file() else {}
        meta[label] = {"settings": settings, **timing}
    comparisons = []
    if "base" in labels:
        for label in [x for x in labels if x != "base"]:
            table = compare_dirs(work / "base", work / label)
            comparisons += [{"a": "base", "b": label, **r} for r in table.to_dict(orient="records")]
    report = {"commands": commands, "models": meta, "rows": rows, "overall": overall,
              "comparisons": comparisons}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{prefix}.json").write_text(json.dumps(report, indent=2, default=str))
    (out / f"{prefix}.md").write_text(to_markdown(report))
    print(to_markdown(report))
    return report


def _f(value: Any, digits: int = 3) -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:.{digits}f}"


def to_markdown(report: dict) -> str:
    lines = ["# BFCL v4 multi-turn (BFCL's official checker; our loop and executor)", ""]
    for label, meta in report["models"].items():
        s = meta["settings"]
        lines.append(f"- **{label}**: `{s['model']}`, family {s['family']}, step budget {s['max_new_tokens']} "
                     f"new tokens, window {s['window']}, compact docs {s['compact']}, step limit "
                     f"{s['step_limit']}; generation wall time {meta.get('wall_seconds', 'n/a')} s on "
                     f"{meta.get('device', 'n/a')} ({meta.get('concurrent_models', 1)} models side by side)")
    lines += ["", "| model | category | n | accuracy [95% CI] | turns passed | over window | force-terminated "
              "| steps/entry | calls/entry | seconds |", "|" + " --- |" * 10]
    for r in report["rows"]:
        lines.append(f"| {r['model']} | {r['category']} | {r['n']} | {_f(r['accuracy'])} "
                     f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}] | {_f(r['turns_passed_share'])} | "
                     f"{_f(r['over_window_share'])} | {r['force_terminated']} | {_f(r['steps_per_entry'], 2)} | "
                     f"{_f(r['calls_per_entry'], 2)} | {r['seconds']} |")
    partial = any(r["n"] < 200 for r in report["rows"])
    lines += ["", "BFCL Overall, computed with BFCL's weights over the parts that ran completely"
              + (" (a subset of entries, --limit: an estimate, not BFCL's number):" if partial else ":"), ""]
    for label, o in report["overall"].items():
        value = o["overall_over_parts_run"]
        lines.append(f"- {label}: {_f(value, 4)} over {', '.join(o['parts_run']) or 'no part'} "
                     f"({o['weight_share_run']:.0%} of BFCL's weight; multi-turn part "
                     f"{_f(o['parts'].get('multi_turn'), 4)}); BFCL's own Overall with the missing parts as 0: "
                     f"{_f(o['bfcl_overall_missing_as_zero'], 4)}; not run: {', '.join(o['categories_missing'])}")
    if report["comparisons"]:
        lines += ["", "Paired differences (B - A, paired bootstrap 95% CI, exact McNemar):", "",
                  "| A | B | category | n | diff | 95% CI | McNemar p |", "|" + " --- |" * 7]
        for c in report["comparisons"]:
            lines.append(f"| {c['a']} | {c['b']} | {c.get('category')} | {c.get('n')} | {_f(c.get('diff'), 4)} | "
                         f"[{_f(c.get('ci_low'), 4)}, {_f(c.get('ci_high'), 4)}] | {_f(c.get('mcnemar_p'), 4)} |")
    lines += ["", "Turns passed: the mean share of an entry's turns before the turn BFCL's checker failed it "
              "(entries the checker reached). Over window: entries recorded as BFCL inference errors because "
              "prompt + step budget exceeded the model's window. Seconds: each episode's share (by prompt "
              "tokens) of the generation batches it was in, summed per category; the models ran side by "
              "side on one GPU, so they share it.", "", "Commands, in order:", ""]
    lines += [f"- `{c}`" for c in report["commands"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", choices=("generate", "report", "all"))
    parser.add_argument("--model", action="append", default=None, help="LABEL=PATH (repeatable; default base=embedded)")
    parser.add_argument("--family", default="hermes")
    parser.add_argument("--categories", default=",".join(MULTI_TURN))
    parser.add_argument("--limit", type=int, default=None, help="first N entries per category")
    parser.add_argument("--max-new-tokens", type=int, default=128,
                        help="token budget of one step (BFCL allows 4096; parallel calls need ~125)")
    parser.add_argument("--window", type=int, default=None, help="default: the model's own")
    parser.add_argument("--compact-docs", action="store_true")
    parser.add_argument("--batch-size", type=int, default=256, help="episodes per generate call")
    parser.add_argument("--max-batch-tokens", type=int, default=2**20,
                        help="cap on episodes x (longest prompt + budget) tokens per generate call")
    parser.add_argument("--max-live", type=int, default=200,
                        help="episodes in flight per model, refilled as they finish (0: all at once); on a "
                             "GPU each holds a device cache slot of window x 23 KB (SmolLM2-135M, bf16): "
                             "200 x 8k = 38 GB per model")
    parser.add_argument("--max-live-tokens", default=None, metavar="N|kv",
                        help="admit an episode only while the live transcripts fit N tokens (kv: the engine's "
                             "fixed KV cache): beyond it vLLM evicts transcripts and pre-fills them again every step")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--deadline-s", type=float, default=540, help="generate: kill what still runs after this")
    parser.add_argument("--pack", default=None, help="generate: write bfcl_multi_turn.tar.gz into this folder")
    parser.add_argument("--archive", default=None, help="report: the tar.gz that generate packed")
    parser.add_argument("--work", default=str(project_root() / "runs" / "bfcl_multi_turn"))
    parser.add_argument("--out", default=str(project_root() / "benchmarks" / "results"))
    parser.add_argument("--command", action="append", default=None, help="report: a command to record (repeat)")
    args = parser.parse_args(argv)
    args.categories = [c for c in args.categories.split(",") if c]
    unknown = [c for c in args.categories if c not in MULTI_TURN]
    if unknown:
        parser.error(f"not multi-turn categories: {unknown}")
    models = []
    for spec in args.model or ["base=embedded"]:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            parser.error(f"--model wants LABEL=PATH, got {spec!r}")
        models.append((label, path))
    work = Path(args.work)
    this = "python -m benchmarks.gpu.bfcl_multi_turn " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.phase in ("generate", "all"):
        phase_generate(models, work, args)
    if args.phase == "report" and args.archive:
        unpack(Path(args.archive), work)
    if args.phase in ("report", "all"):
        phase_report(work, Path(args.out), args.command or [this])
    return 0


if __name__ == "__main__":
    sys.exit(main())
