"""Time BFCL v4 evaluation: generation per category + the official scorer.

    python -m benchmarks.bfcl_single_turn                      # CPU subset: 3 entries x 13 categories
    python -m benchmarks.bfcl_single_turn --limit 0 --batch-size 64   # GPU: every single-turn entry

Writes benchmarks/results/bfcl_eval.{csv,json,md}: per category the entries generated, the
seconds spent and entries/s, plus scorer time for our results and for BFCL's full ground
truth (3,641 entries; the scorer's own throughput, independent of the model).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import pandas as pd

from toolrl_lib.data.bfcl import SCORED_SINGLE_TURN
from toolrl_lib.evaluate import analysis
from toolrl_lib.evaluate.backends import load_for_eval
from toolrl_lib.evaluate.bfcl_results import (
    generations_file,
    read_results,
    result_file,
    write_results,
)
from toolrl_lib.evaluate.bfcl_venv import ensure_bfcl_venv
from toolrl_lib.evaluate.replay import replay_ground_truth
from toolrl_lib.evaluate.runner import generate_pending, parse_categories
from toolrl_lib.evaluate.scorer import score
from toolrl_lib.paths import project_root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--family", default="hermes")
    parser.add_argument("--categories", default="all")
    parser.add_argument("--limit", type=int, default=3, help="entries per category (0 = all)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--out", default=str(project_root() / "benchmarks" / "results"))
    args = parser.parse_args()
    cats = parse_categories(args.categories)
    limit = args.limit or None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    ensure_bfcl_venv()
    venv_s = time.perf_counter() - t
    t = time.perf_counter()
    loaded = load_for_eval(args.model, backend=args.backend, max_new_tokens=args.max_new_tokens,
                           batch_size=args.batch_size)
    load_s = time.perf_counter() - t
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        state = {"model": loaded}
        for category in cats:
            t = time.perf_counter()
            n = generate_pending(None, work, [category], args.family, limit, chunk=64, state=state)
            seconds = time.perf_counter() - t
            rows.append({"category": category, "entries": n, "generate_s": seconds, "entries_per_s": n / seconds})
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(out / "bfcl_eval.partial.csv", index=False)  # survives a kill
            write_results(result_file(work, "bench", category), read_results(generations_file(work, category)))
        t = time.perf_counter()
        scores = score(work, "bench", cats)
        score_s = time.perf_counter() - t
        entries = analysis.entries_table(work, "bench", cats, scores, label=args.model)
        summary = analysis.summary_table(entries, ci=False).set_index("category")
        t = time.perf_counter()
        gt = replay_ground_truth(work / "gt", list(SCORED_SINGLE_TURN))
        gt_s = time.perf_counter() - t
    table = pd.DataFrame(rows).set_index("category")
    table["accuracy"] = summary["accuracy"]
    table["call_rate"] = summary["call_rate"]
    table = table.reset_index()
    info = {
        "model": args.model, "family": args.family, "backend": loaded.backend,
        "limit_per_category": limit, "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size, "machine": platform.platform(), "processor": platform.processor(),
        "cpu_count": os.cpu_count(), "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "venv_ready_s": round(venv_s, 2), "model_load_s": round(load_s, 2),
        "generate_s_total": round(float(table["generate_s"].sum()), 2),
        "entries_total": int(table["entries"].sum()),
        "score_s_ours": round(score_s, 2),
        "score_s_full_ground_truth": round(gt_s, 2),
        "ground_truth_entries": sum(s.total for s in gt.values()),
    }  # fmt: skip
    table.to_csv(out / "bfcl_eval.csv", index=False)
    (out / "bfcl_eval.partial.csv").unlink(missing_ok=True)
    (out / "bfcl_eval.json").write_text(json.dumps(info, indent=2))
    lines = [
        "# BFCL v4 evaluation timing",
        "",
        f"Model `{args.model}` ({loaded.backend}, family {args.family}), {limit or 'all'} entries per "
        f"category, {args.max_new_tokens} new tokens max, batch {args.batch_size}; {info['machine']}, "
        f"{info['cpu_count']} CPUs, load average {info['load_average_1m_at_end']} at the end "
        "(other jobs shared the machine when this was above the CPU count).",
        "",
        "| category | entries | generate s | entries/s | accuracy | call rate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in table.itertuples():
        lines.append(f"| {row.category} | {row.entries} | {row.generate_s:.1f} | {row.entries_per_s:.2f} | "
                     f"{row.accuracy:.2f} | {row.call_rate:.2f} |")
    lines += [
        "",
        f"Model load {info['model_load_s']} s; generation total {info['generate_s_total']} s for "
        f"{info['entries_total']} entries; official scorer on these results {info['score_s_ours']} s "
        f"(mostly its start-up); on BFCL's full single-turn ground truth ({info['ground_truth_entries']} "
        f"entries) {info['score_s_full_ground_truth']} s.",
        "",
    ]
    (out / "bfcl_eval.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
