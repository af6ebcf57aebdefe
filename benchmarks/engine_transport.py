"""What carrying a rollout round's outputs from the engine process to the trainer costs the hosts (CPU).

Under ``fast.generation_process`` vLLM's engine runs in a process of its own, and each round's
outputs come back over a pipe: the engine process packs vLLM's ``RequestOutput``s into tuples
(``engine_process.pack_outputs``), they are pickled across, and the trainer unpacks them into
objects with the fields TRL reads (``unpack_outputs``), one log-prob object per sampled token. Run
13 found the engine's round (2.87 s for 512 completions on an H100, TRL's rollout call with the
GPU to itself) to bound an overlapped round; this times the traffic part of it on stand-in outputs
shaped like a round (``--requests`` completions of ``--tokens`` tokens on average, one log-prob each,
prompts of ``--prompt-tokens``), so that what is left of the 2.87 s is vLLM's own and the sync's:

- ``pack_ms`` (engine process), ``pickle_ms`` and ``unpickle_ms`` (the pipe's two ends),
  ``unpack_ms`` (trainer), their sum and the trainer's share; ``megabytes`` pickled;

for the reply as it was through run 13 (a tuple a log-prob entry) and as ``engine_process`` sends it
now (flat arrays, which pickle as raw bytes), side by side.

    python -m benchmarks.engine_transport --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.result_files import write_result


def standin_round(requests: int, tokens: int, prompt_tokens: int, seed: int = 0) -> list[Any]:
    """``requests`` outputs in vLLM's ``RequestOutput`` shape: one sample each, its length drawn
    around ``tokens``, one ``Logprob``-like object per position.

    >>> out = standin_round(3, 10, 5)
    >>> len(out), len(out[0].prompt_token_ids), len(out[0].outputs[0].token_ids) == len(out[0].outputs[0].logprobs)
    (3, 5, True)
    """
    rng = random.Random(seed)
    outputs = []
    for _ in range(requests):
        length = max(1, min(2 * tokens, int(rng.gauss(tokens, tokens / 4))))
        ids = [rng.randrange(49152) for _ in range(length)]
        logprobs = [{t: SimpleNamespace(logprob=-rng.random(), rank=1)} for t in ids]
        sample = SimpleNamespace(token_ids=ids, text="", finish_reason="stop", logprobs=logprobs)
        outputs.append(SimpleNamespace(prompt_token_ids=list(range(prompt_tokens)), outputs=[sample]))
    return outputs


def tuples_pack(outputs: list[Any]) -> list[tuple]:
    """The reply as the engine process first sent it (through run 13): a (token id, log-prob, rank)
    tuple per log-prob entry, nested in lists. The baseline the flat arrays are timed against."""
    return [(list(r.prompt_token_ids or []), [(list(o.token_ids), o.text, o.finish_reason, None if o.logprobs is None
                                               else [[(int(t), float(lp.logprob), lp.rank) for t, lp in pos.items()]
                                                     for pos in o.logprobs]) for o in r.outputs]) for r in outputs]


def tuples_unpack(packed: list[tuple]) -> list[Any]:
    from toolrl_lib.fast.engine_process import _Logprob

    return [SimpleNamespace(prompt_token_ids=prompt, outputs=[SimpleNamespace(
        token_ids=ids, text=text, finish_reason=finish, logprobs=None if logprobs is None else [
            {t: _Logprob(lp, rank) for t, lp, rank in pos} for pos in logprobs]) for ids, text, finish, logprobs in samples])
        for prompt, samples in packed]


def _same(first: Any, last: Any) -> bool:
    """One sample's token ids and log-probs survived the trip."""
    return list(last.token_ids) == list(first.token_ids) and [
        {t: (e.logprob, e.rank) for t, e in p.items()} for p in last.logprobs] == [
        {t: (e.logprob, e.rank) for t, e in p.items()} for p in first.logprobs]


def time_round(outputs: list[Any], repeats: int, pack: Any, unpack: Any) -> dict[str, float]:
    """Median milliseconds of each leg over ``repeats`` passes; the unpacked round checked against the input."""
    legs: dict[str, list[float]] = {"pack_ms": [], "pickle_ms": [], "unpickle_ms": [], "unpack_ms": []}
    size = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        packed = pack(outputs)
        t1 = time.perf_counter()
        data = pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL)
        t2 = time.perf_counter()
        loaded = pickle.loads(data)
        t3 = time.perf_counter()
        unpacked = unpack(loaded)
        t4 = time.perf_counter()
        for key, seconds in zip(legs, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            legs[key].append(seconds)
        size = len(data)
    if not all(_same(a.outputs[0], b.outputs[0]) for a, b in zip(outputs, unpacked, strict=True)):
        raise SystemExit("the unpacked round differs from the packed one: nothing timed")
    result = {key: round(1000 * statistics.median(values), 2) for key, values in legs.items()}
    result["total_ms"] = round(sum(result.values()), 2)
    result["trainer_ms"] = round(result["unpickle_ms"] + result["unpack_ms"], 2)
    result["megabytes"] = round(size / 1e6, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=106, help="mean completion tokens (run 13's rows: 106)")
    parser.add_argument("--prompt-tokens", type=int, default=406, help="prompt tokens (the smoke set's mean)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    from toolrl_lib.fast.engine_process import pack_outputs, unpack_outputs

    outputs = standin_round(args.requests, args.tokens, args.prompt_tokens)
    formats = {"tuple a token (through run 13)": (tuples_pack, tuples_unpack),
               "flat arrays (engine_process now)": (pack_outputs, unpack_outputs)}
    rows = [{"format": name, **time_round(outputs, args.repeats, *codec)} for name, codec in formats.items()]
    result = {"requests": args.requests, "mean_tokens": args.tokens, "prompt_tokens": args.prompt_tokens,
              "rows": rows, "repeats": args.repeats,
              "command": "python -m benchmarks.engine_transport --out benchmarks/results"}
    print(json.dumps(result))
    table = ["| reply format | pack (ms) | pickle (ms) | unpickle (ms) | unpack (ms) | trainer's side (ms) | total (ms) | MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    table += [f"| {r['format']} | {r['pack_ms']} | {r['pickle_ms']} | {r['unpickle_ms']} | {r['unpack_ms']} | "
              f"{r['trainer_ms']} | {r['total_ms']} | {r['megabytes']} |" for r in rows]
    note = (f"{args.requests} stand-in outputs in vLLM's `RequestOutput` shape ({args.tokens} tokens on average, one "
            f"log-prob a token, prompts of {args.prompt_tokens}); median of {args.repeats} passes each, side by side in "
            "one process on this machine's CPU; each format's round checked intact after the trip. What "
            "`fast.generation_process` adds to a round besides vLLM's own generate and the weight sync: the engine "
            "process packs and pickles, the trainer unpickles and unpacks (on the overlap's worker thread, under the "
            "trainer's interpreter lock); the pipe's own copy is not included. Run 13's engine round took 2.87 s on "
            "an H100.")
    write_result(args.out, "engine_transport", result, table, note, result["command"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
