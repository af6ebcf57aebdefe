"""``toolrl eval bfcl|compare|score|replay|setup|mean-at-k|pass-at-k|bfcl-pass-at-k``: BFCL v4 with its official scorer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _live_tokens(text: str) -> int | str:
    """``--multi-turn-max-live-tokens``: a positive number of tokens or ``kv``."""
    if text == "kv":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive number of tokens or 'kv', got {text!r}")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="evaluate models (BFCL v4 official scorer, mean@k)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    bfcl = sub.add_parser("bfcl", help="generate on BFCL v4 categories (single- and multi-turn) and score officially")
    bfcl.add_argument("--model", required=True, help="'embedded', a model folder or a hub id")
    bfcl.add_argument("--format", dest="family", help="prompt family (qwen3|hermes|llama3|mistral); default: detected")
    bfcl.add_argument("--categories", default="all",
                      help="comma list, or all (single-turn) / non_live / live / multi_turn")
    bfcl.add_argument("--limit", type=int, help="first N entries per category (default: all)")
    bfcl.add_argument("--out", help="evaluation folder (default: runs/bfcl/<model name>)")
    bfcl.add_argument("--label", help="model name in tables (default: from --model)")
    bfcl.add_argument("--max-new-tokens", type=int, default=256)
    bfcl.add_argument("--batch-size", type=int, default=16)
    bfcl.add_argument("--max-batch-tokens", type=int,
                      help="also cap a batch at prompts x (longest prompt + max new tokens) tokens "
                           "(long prompts then go in smaller batches; default: no cap)")
    bfcl.add_argument("--backend", default="auto", choices=("auto", "hf", "vllm"))
    bfcl.add_argument("--dtype", default="auto")
    bfcl.add_argument("--no-score", action="store_true", help="only generate (score later)")
    bfcl.add_argument("--multi-turn-max-new-tokens", type=int, default=128,
                      help="token budget of one multi-turn step (BFCL allows up to 4096; default 128)")
    bfcl.add_argument("--window", type=int,
                      help="context length for the multi-turn over-window check (default: the model's)")
    bfcl.add_argument("--compact-docs", action="store_true",
                      help="multi-turn: shorter function docs for small-window models (a deviation from BFCL)")
    bfcl.add_argument("--multi-turn-max-live", type=int,
                      help="multi-turn: episodes in flight at once, refilled as they finish (default: all)")
    bfcl.add_argument("--multi-turn-max-live-tokens", type=_live_tokens, default=None, metavar="N|kv",
                      help="multi-turn: admit a queued episode only while the live transcripts fit N tokens "
                           "(kv: the vLLM engine's fixed KV cache, $TOOLRL_VLLM_KV_CACHE_GIB; default: no limit)")
    bfcl.add_argument("--multi-turn-step-limit", type=int, default=20,
                      help="multi-turn: steps per turn before force-termination (BFCL: 20; fewer is a deviation)")
    bfcl.set_defaults(handler=_bfcl)

    compare = sub.add_parser("compare", help="paired comparison of two `eval bfcl` folders (B - A)")
    compare.add_argument("dir_a")
    compare.add_argument("dir_b")
    compare.add_argument("--csv", help="also write the table here")
    compare.set_defaults(handler=_compare)

    rescore = sub.add_parser("score", help="sanitise and score the BFCL result files of a folder "
                             "(single- and multi-turn; e.g. written elsewhere or by hand)")
    rescore.add_argument("dir", help="folder holding result/<name>/<group>/BFCL_v4_<cat>_result.json")
    rescore.add_argument("--name", help="model folder under result/ (default: the only one)")
    rescore.set_defaults(handler=_score)

    replay = sub.add_parser("replay", help="score BFCL's own ground truth (pipeline sanity check)")
    replay.add_argument("--out", default="runs/bfcl/groundtruth")
    replay.add_argument("--categories", default="all")
    replay.set_defaults(handler=_replay)

    setup = sub.add_parser("setup", help="create the scorer venv (.bfcl-venv or $TOOLRL_BFCL_VENV)")
    setup.set_defaults(handler=_setup)

    mean = sub.add_parser("mean-at-k", help="mean@k of our rewards on a JSONL split")
    mean.add_argument("--model", required=True)
    mean.add_argument("--data", required=True, help="Example JSONL (e.g. data/processed/smoke/val.jsonl)")
    mean.add_argument("--format", dest="family")
    mean.add_argument("--k", type=int, default=4)
    mean.add_argument("--limit", type=int)
    mean.add_argument("--max-new-tokens", type=int, default=128)
    mean.add_argument("--temperature", type=float, default=1.0)
    mean.add_argument("--seed", type=int, default=0)
    mean.add_argument("--backend", default="auto", choices=("auto", "hf", "vllm"),
                      help="auto = vLLM where it is installed and a CUDA device exists, else transformers")
    mean.add_argument("--dtype", default="auto")
    mean.set_defaults(handler=_mean_at_k)

    passk = sub.add_parser("pass-at-k", help="pass@k curves (1, 2, 4, ... n) of a model on a JSONL split")
    passk.add_argument("--model", required=True)
    passk.add_argument("--data", required=True, help="Example JSONL (e.g. data/processed/broad/val.jsonl)")
    passk.add_argument("--format", dest="family")
    _sampling_arguments(passk, max_new_tokens=128, limit_help=None)
    passk.add_argument("--out", help="write the curves here as JSON (also printed)")
    passk.set_defaults(handler=_pass_at_k)

    bpassk = sub.add_parser("bfcl-pass-at-k",
                            help="pass@k curves on BFCL's non-live AST categories, each sample judged by BFCL")
    bpassk.add_argument("--model", required=True)
    bpassk.add_argument("--out", required=True, help="folder: samples (resumable), result files, pass_at_k.json")
    bpassk.add_argument("--format", dest="family")
    bpassk.add_argument("--categories", default="non_live_ast",
                        help="comma list of non-live AST categories (default: all six)")
    _sampling_arguments(bpassk, max_new_tokens=256, limit_help="first N entries per category (default: all)")
    bpassk.add_argument("--no-score", action="store_true",
                        help="only sample (e.g. on a GPU box); the same command again scores")
    bpassk.set_defaults(handler=_bfcl_pass_at_k)


def _sampling_arguments(parser: argparse.ArgumentParser, *, max_new_tokens: int, limit_help: str | None) -> None:
    """What pass-at-k and bfcl-pass-at-k share: n samples per example, the ks, the sampler."""
    parser.add_argument("--n", type=int, default=64, help="samples per example (the largest k)")
    parser.add_argument("--ks", help="comma-separated k values <= n (default 1, 2, 4, ... n)")
    parser.add_argument("--limit", type=int, help=limit_help)
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", choices=("auto", "hf", "vllm"))
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="transformers backend: prompts x samples per generate call")


def _parse_ks(text: str | None, n: int) -> list[int] | None:
    """``--ks "1,4,16"`` -> [1, 4, 16]; each must be in 1..n."""
    if not text:
        return None
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--ks {text!r}: expected comma-separated integers such as 1,4,16") from None
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise ValueError(f"--ks {text!r}: every k must be between 1 and --n ({n})")
    return ks


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")


def _bfcl(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.bfcl_results import bfcl_model_name
    from toolrl_lib.evaluate.runner import evaluate_bfcl, parse_categories
    from toolrl_lib.paths import resolve

    categories = parse_categories(args.categories)  # refuse unknown names before any loading
    _check_limit(args.limit)
    if args.max_batch_tokens is not None and args.max_batch_tokens < 1:
        raise ValueError(f"--max-batch-tokens must be >= 1, got {args.max_batch_tokens}")
    if args.family:
        from toolrl_lib.prompts import get_adapter

        get_adapter(args.family)
    if args.multi_turn_max_new_tokens < 1:
        raise ValueError(f"--multi-turn-max-new-tokens must be >= 1, got {args.multi_turn_max_new_tokens}")
    from toolrl_lib.evaluate.bfcl_multi_turn.runner import MultiTurnSettings

    if args.multi_turn_step_limit < 1:
        raise ValueError(f"--multi-turn-step-limit must be >= 1, got {args.multi_turn_step_limit}")
    multi_turn = MultiTurnSettings(max_new_tokens=args.multi_turn_max_new_tokens, window=args.window,
                                   compact=args.compact_docs, step_limit=args.multi_turn_step_limit,
                                   max_live=args.multi_turn_max_live,
                                   max_live_tokens=args.multi_turn_max_live_tokens)
    name = bfcl_model_name(args.label or Path(args.model).name or args.model)
    out = resolve(args.out) if args.out else resolve(Path("runs/bfcl") / name)
    run = evaluate_bfcl(
        args.model, out, family=args.family, label=args.label, categories=categories,
        limit=args.limit, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
        backend=args.backend, dtype=args.dtype, progress=True, run_scorer=not args.no_score,
        max_batch_tokens=args.max_batch_tokens, multi_turn=multi_turn,
    )  # fmt: skip
    _print_summary(run.summary, run.aggregates)
    print(f"results: {out}")
    return 0


def _print_summary(summary: list[dict], aggregates: dict) -> None:
    import pandas as pd

    if not summary:
        return
    frame = pd.DataFrame(summary)[["category", "n", "accuracy", "call_rate", "valid_rate"]]
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if aggregates.get("multi_turn"):
        print(pd.DataFrame(aggregates["multi_turn"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for key in ("non_live_ast", "live_ast"):
        value = aggregates.get(key)
        print(f"{key}: {'n/a (not all parts run)' if value is None else f'{value:.4f}'}")
    if aggregates.get("partial"):
        print("note: --limit was used; aggregates are subset estimates")
    print(aggregates.get("note", ""))


def _compare(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.analysis import compare_dirs

    table = compare_dirs(args.dir_a, args.dir_b)
    print(f"A = {args.dir_a}\nB = {args.dir_b}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _score(args: argparse.Namespace) -> int:
    import pandas as pd

    from toolrl_lib.evaluate.bfcl_summary import overall_note
    from toolrl_lib.evaluate.rescore import score_folder
    from toolrl_lib.paths import resolve

    scored = score_folder(resolve(args.dir), args.name)
    for report in scored.sanitised:
        if report.changed or report.dropped:
            print(f"sanitised {report.category}: {report.changed} lines rewritten, {report.dropped} dropped")
    frame = pd.DataFrame(scored.summary)[["category", "n", "accuracy", "call_rate"]]
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(overall_note(scored.overall))
    print(f"scores: {scored.root}/score, tables: entries.csv, summary.csv")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.replay import KNOWN_GT_DEFECTS, replay_ground_truth
    from toolrl_lib.evaluate.runner import parse_categories
    from toolrl_lib.paths import resolve

    scores = replay_ground_truth(resolve(args.out), parse_categories(args.categories))
    unexpected = []
    for category, s in scores.items():
        print(f"{category:24s} {s.correct:5d}/{s.total:<5d} {s.accuracy:.4f}")
        unexpected += [f["id"] for f in s.failures if f["id"] not in KNOWN_GT_DEFECTS]
    if unexpected:
        print(f"unexpected failures: {unexpected[:10]}")
        return 1
    return 0


def _setup(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.bfcl_venv import ensure_bfcl_venv

    print(ensure_bfcl_venv(verbose=True))
    return 0


def _split_and_sampler(args: argparse.Namespace, **sampler_kwargs: Any) -> tuple[list[Any], Any, str]:
    """What mean-at-k and pass-at-k share: the split's examples (``--limit``), the loaded sampler
    (``--model``, ``--backend``, ``--dtype``) and the prompt family (``--format`` or detected)."""
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.evaluate.backends import load_sampler
    from toolrl_lib.paths import resolve
    from toolrl_lib.prompts import detect_family

    _check_limit(args.limit)
    path = resolve(args.data)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (notebook 01, `toolrl data prepare` or `toolrl data generate` "
                                f"writes it)")
    examples = list(read_jsonl(path))[: args.limit]
    loaded = load_sampler(args.model, backend=args.backend, dtype=args.dtype, **sampler_kwargs)
    return examples, loaded, args.family or detect_family(loaded.tokenizer)


def _mean_at_k(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.mean_at_k import mean_at_k

    examples, loaded, family = _split_and_sampler(args)
    result = mean_at_k(
        None, loaded.tokenizer, examples, family, k=args.k, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, seed=args.seed, sampler=loaded.sample,
    )  # fmt: skip
    print(json.dumps({"family": family, "n_examples": result.n_examples, **result.scores}, indent=2))
    return 0


def _pass_at_k(args: argparse.Namespace) -> int:
    from toolrl_lib.atomic import write_text
    from toolrl_lib.evaluate.mean_at_k import mean_at_k
    from toolrl_lib.evaluate.pass_at_k import pass_at_k_curves

    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}")
    ks = _parse_ks(args.ks, args.n)
    examples, loaded, family = _split_and_sampler(args, batch_size=args.batch_size)
    result = mean_at_k(
        None, loaded.tokenizer, examples, family, k=args.n, schemes=("binary",),
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
        sampler=loaded.sample, count_solved=True,
    )  # fmt: skip
    out = {"model": args.model, "data": str(args.data), "family": family, "backend": loaded.backend,
           "temperature": args.temperature, "max_new_tokens": args.max_new_tokens, "seed": args.seed,
           **pass_at_k_curves(result.per_example, ks)}
    text = json.dumps(out, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_text(args.out, text + "\n")
    print(text)
    return 0


def _bfcl_pass_at_k(args: argparse.Namespace) -> int:
    from toolrl_lib.evaluate.bfcl_pass_at_k import bfcl_pass_at_k
    from toolrl_lib.evaluate.bfcl_summary import NON_LIVE_AST
    from toolrl_lib.paths import resolve

    _check_limit(args.limit)
    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}")
    names = [c.strip() for c in args.categories.split(",") if c.strip()]
    categories = list(NON_LIVE_AST) if names == ["non_live_ast"] else names
    result = bfcl_pass_at_k(
        args.model, resolve(args.out), n=args.n, categories=categories, ks=_parse_ks(args.ks, args.n),
        family=args.family, limit=args.limit, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, seed=args.seed, backend=args.backend, dtype=args.dtype,
        batch_size=args.batch_size, score=not args.no_score,
    )  # fmt: skip
    if result is not None:
        print(json.dumps({key: result[key] for key in ("n", "entries", "non_live_ast", "by_category")}, indent=2))
    return 0
