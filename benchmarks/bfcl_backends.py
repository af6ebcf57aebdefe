"""BFCL single-turn generation through vLLM against our own generator: seconds, scores, agreement.

The GPU step (``benchmarks/gpu/session.sh bfclv``) generates all 3,641 single-turn entries of
BFCL v4 with the embedded model twice, greedy, 256 new tokens, bf16 — ``toolrl eval bfcl
--backend vllm`` and ``--backend hf`` (``toolrl_lib.generation``) — and times each. Here, on the
CPU box, each folder is scored by BFCL's own scorer (``toolrl eval score``'s sanitise-then-score
path) and the two are compared entry by entry:

- ``raw_identical``: the share of entries whose completion text is the same string;
- ``calls_identical``: the share whose parsed calls (the result line BFCL scores) are the same;
- the accuracy of each backend per BFCL part, and the entries one gets right and the other not.

Greedy decoding in bf16 is not bit-reproducible across kernels: two implementations pick
different tokens where the top two logits tie within bf16 rounding, and the texts part from
there. The agreement measures how often that changes what BFCL sees.

    python -m benchmarks.bfcl_backends --archive bfcl_vllm.tar.gz --work runs/bfcl_backends \\
        --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path
from typing import Any

BACKENDS = ("hf", "vllm")


def generations(folder: Path) -> dict[str, dict[str, Any]]:
    """Every generated line of a folder's ``generations/*.jsonl``, by entry id."""
    from toolrl_lib.evaluate.bfcl_results import read_results

    rows: dict[str, dict[str, Any]] = {}
    for path in sorted((folder / "generations").glob("*.jsonl")):
        for row in read_results(path):
            rows[row["id"]] = {**row, "category": path.stem}
    return rows


def agreement(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Entry-by-entry agreement of two generation sets over the ids both hold.

    >>> one = {"x": {"raw": "hi", "result": "", "category": "c"}, "y": {"raw": "a", "result": "r", "category": "c"}}
    >>> two = {"x": {"raw": "hi", "result": "", "category": "c"}, "y": {"raw": "b", "result": "r", "category": "c"}}
    >>> agreement(one, two)["raw_identical"], agreement(one, two)["calls_identical"]
    (0.5, 1.0)
    """
    common = sorted(set(a) & set(b))
    by_category: dict[str, list[int]] = {}
    raw = calls = 0
    for entry in common:
        same_raw = a[entry].get("raw") == b[entry].get("raw")
        same_calls = a[entry].get("result") == b[entry].get("result")
        raw += same_raw
        calls += same_calls
        counts = by_category.setdefault(a[entry]["category"], [0, 0, 0])
        counts[0] += 1
        counts[1] += same_raw
        counts[2] += same_calls
    n = max(len(common), 1)
    return {"entries": len(common), "only_in_first": len(set(a) - set(b)), "only_in_second": len(set(b) - set(a)),
            "raw_identical": round(raw / n, 4), "calls_identical": round(calls / n, 4),
            "by_category": {c: {"entries": t, "raw_identical": round(r / t, 4), "calls_identical": round(k / t, 4)}
                            for c, (t, r, k) in sorted(by_category.items())}}


def score(folder: Path) -> dict[str, Any]:
    """BFCL's own scores of a folder (sanitised first), per category and its overall parts."""
    from toolrl_lib.evaluate.rescore import score_folder

    scored = score_folder(folder)
    return {"overall": scored.overall,
            "categories": {r["category"]: {"accuracy": r.get("accuracy"), "n": r.get("n")} for r in scored.summary}}


def correct_ids(folder: Path) -> dict[str, bool]:
    import pandas as pd

    entries = pd.read_csv(folder / "entries.csv")
    return {str(i): bool(c) for i, c in zip(entries["id"], entries["correct"], strict=True)}


def build(work: Path) -> dict[str, Any]:
    times = {}
    for line in (work / "times.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            times[row["backend"]] = row
    out: dict[str, Any] = {"backends": {}}
    gens_of = {backend: generations(work / backend) for backend in BACKENDS}
    for backend in BACKENDS:
        folder, gens = work / backend, gens_of[backend]
        t = times.get(backend, {})
        entry: dict[str, Any] = {"entries": len(gens), "seconds": t.get("seconds"), "exit_code": t.get("rc")}
        run = folder / "run.json"
        if run.is_file():  # model load (vLLM: engine start) + generation, without interpreter start-up
            entry["load_and_generate_s"] = round(json.loads(run.read_text())["timings"]["generate_s"], 1)
        if t.get("seconds") and gens:
            entry["entries_per_s"] = round(len(gens) / t["seconds"], 2)
        if t.get("rc") == 0:
            entry.update(score(folder))
        out["backends"][backend] = entry
    out["agreement"] = agreement(gens_of["hf"], gens_of["vllm"])
    if (work / "hf" / "entries.csv").is_file() and (work / "vllm" / "entries.csv").is_file():
        ca, cb = correct_ids(work / "hf"), correct_ids(work / "vllm")
        common = set(ca) & set(cb)
        out["agreement"]["correct_only_hf"] = sum(ca[i] and not cb[i] for i in common)
        out["agreement"]["correct_only_vllm"] = sum(cb[i] and not ca[i] for i in common)
        out["agreement"]["correct_both"] = sum(ca[i] and cb[i] for i in common)
    if all(out["backends"][x].get("seconds") for x in BACKENDS):
        out["speedup_vllm_over_hf"] = round(out["backends"]["hf"]["seconds"] / out["backends"]["vllm"]["seconds"], 2)
    return out


def markdown(result: dict[str, Any], command: str) -> str:
    lines = ["| backend | entries | seconds, whole command | seconds, model load + generation | entries/s (whole command) "
             "| BFCL single-turn summary |", "| --- | --- | --- | --- | --- | --- |"]
    for backend, r in result["backends"].items():
        summary = (r.get("overall") or {}).get("overall_over_parts_run", "")  # BFCL's weights over the parts run
        summary = round(summary, 4) if isinstance(summary, float) else summary
        lines.append(f"| {backend} | {r['entries']} | {r.get('seconds')} | {r.get('load_and_generate_s', '')} | "
                     f"{r.get('entries_per_s', '')} | {summary} |")
    ag = result["agreement"]
    lines += ["", f"Greedy agreement over {ag['entries']} entries: same text {ag['raw_identical']:.1%}, "
              f"same parsed calls {ag['calls_identical']:.1%}"
              + (f"; right only with hf {ag['correct_only_hf']}, only with vLLM {ag['correct_only_vllm']}, "
                 f"both {ag['correct_both']}" if "correct_both" in ag else "") + ".",
              "", "| category | entries | same text | same calls |", "| --- | --- | --- | --- |"]
    lines += [f"| {c} | {v['entries']} | {v['raw_identical']:.1%} | {v['calls_identical']:.1%} |"
              for c, v in ag["by_category"].items()]
    if result.get("note"):
        lines += ["", result["note"]]
    if command:
        lines += ["", "```bash", command, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--archive", help="bfcl_vllm.tar.gz from the GPU step (holds bv/)")
    parser.add_argument("--work", default="runs/bfcl_backends")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--command", default="bash benchmarks/gpu/session.sh bfclv  # on the GPU host")
    parser.add_argument("--note", default="", help="what the run's logs say beyond these files (kept in both)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    if args.archive:
        work.mkdir(parents=True, exist_ok=True)
        with tarfile.open(args.archive) as archive:
            archive.extractall(work, filter="data")
        work = work / "bv"
    result = build(work)
    if args.note:
        result["note"] = args.note
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bfcl_backends.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "bfcl_backends.md").write_text(markdown(result, args.command))
    print(markdown(result, args.command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
