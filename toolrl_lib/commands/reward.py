"""``toolrl reward score``: score completions from a JSONL file, one breakdown per line.

Input lines: ``{"completion": str, "ground_truth": [{"name", "arguments"}], "tools": [...]}``
(``tools`` optional). Output (stdout, JSONL, same order): the breakdown plus ``"line": N``;
a malformed line gives ``{"line": N, "error": "..."}`` and the rest are still scored.
Exit code 1 when any line was malformed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any


def register(subparsers: argparse._SubParsersAction) -> None:
    from toolrl_lib.prompts import FAMILIES
    from toolrl_lib.rewards.schemes import SCHEMES

    parser = subparsers.add_parser("reward", help="score completions with a reward scheme")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    score = sub.add_parser("score", help="score a JSONL file of completions (output: JSONL on stdout)")
    score.add_argument("--input", required=True, help="JSONL file ('-' = stdin)")
    score.add_argument("--scheme", choices=SCHEMES, default="weighted")
    score.add_argument("--format", dest="family", choices=FAMILIES, default="hermes",
                       help="completion format (model family)")
    score.add_argument("--weights", help='weighted scheme only, JSON e.g. {"format": 0.2, "args": 0.6}')
    score.set_defaults(handler=_score)


def check_row(row: Any) -> str | None:
    """Why a decoded input line cannot be scored (None when it can)."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    if not isinstance(row.get("completion"), str):
        return "field 'completion' must be a string"
    ground_truth = row.get("ground_truth")
    if not isinstance(ground_truth, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in ground_truth
    ):
        return "field 'ground_truth' must be a list of {\"name\": str, \"arguments\": {...}}"
    bad = [i for i, c in enumerate(ground_truth) if not isinstance(c.get("arguments", {}), dict)]
    if bad:
        return f"field 'ground_truth'[{bad[0]}].arguments must be an object"
    if not isinstance(row.get("tools", []), list):
        return "field 'tools' must be a list of tool schemas"
    return None


def score_lines(
    lines: Iterable[bytes], scheme: str, family: str, weights: dict[str, float] | None = None
) -> Iterator[dict[str, Any]]:
    """One output record per non-blank input line (errors as records, never raised)."""
    from toolrl_lib.rewards.schemes import score

    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            yield {"line": number, "error": f"not UTF-8 at byte {error.start}"}
            continue
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as error:
            yield {"line": number, "error": f"invalid JSON: {error}"}
            continue
        problem = check_row(row)
        if problem:
            yield {"line": number, "error": problem}
            continue
        result = score(row["completion"], row["ground_truth"], row.get("tools", []),
                       scheme=scheme, family=family, weights=weights)
        yield {"line": number, **result.to_dict()}


def _open(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")  # noqa: SIM115 - closed by the caller


def _score(args: argparse.Namespace) -> int:
    from toolrl_lib.rewards.schemes import resolve_weights

    weights = None
    if args.weights:
        try:
            weights = json.loads(args.weights)
        except ValueError as error:
            raise ValueError(f"--weights is not JSON: {error}") from error
        if not isinstance(weights, dict):
            raise ValueError("--weights must be a JSON object")
        resolve_weights(weights)
    handle = _open(args.input)
    errors = scored = 0
    try:
        for record in score_lines(handle, args.scheme, args.family, weights):
            if "error" in record and "total" not in record:
                errors += 1
            else:
                scored += 1
            sys.stdout.write(json.dumps(record) + "\n")
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    print(f"scored {scored} line(s), {errors} malformed", file=sys.stderr)
    return 1 if errors else 0
