"""pass@k on BFCL v4's non-live AST categories, each sample judged by BFCL's own AST checker.

``evaluate.pass_at_k`` gives the ceiling on our validation split with our binary reward as the
judge; this module gives it where the course's result is read: BFCL. Each entry gets ``n``
sampled completions; sample ``i`` of every entry becomes the result file of a pseudo-model
``s<i>`` (BFCL scores whole result files), all ``n`` are scored in one scorer process, and an
entry's ``c`` is how many of its samples BFCL accepted. pass@k per category is then the
unbiased estimator averaged over entries, and the non-live AST curve weighs categories as
BFCL's own non-live AST accuracy does (``bfcl_summary.non_live_ast``).

Layout of an output folder ``out`` (generation is resumable; scoring can run elsewhere)::

    out/samples/<category>.jsonl          one row per entry: id, its n raw completions
    out/sampling.json                     the settings the samples were drawn with
    out/result/s<i>/non_live/...          sample i of every entry, as BFCL result files
    out/pass_at_k.json                    the curves (after scoring)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.bfcl_summary import (
    NON_LIVE_AST,
    NON_LIVE_OTHER,
    NON_LIVE_SIMPLE,
    non_live_ast,
)
from toolrl_lib.evaluate.pass_at_k import default_ks, pass_at_k


def samples_file(out: str | Path, category: str) -> Path:
    return Path(out) / "samples" / f"{category}.jsonl"


def sample_name(index: int) -> str:
    """The pseudo-model that holds sample ``index`` of every entry (BFCL names: no '_' or '/')."""
    return f"s{index}"


def check_categories(categories: list[str] | tuple[str, ...]) -> list[str]:
    """pass@k needs an AST verdict per sample: the non-live AST categories only."""
    unknown = [c for c in categories if c not in NON_LIVE_AST]
    if unknown or not categories:
        raise ValueError(f"BFCL pass@k runs on the non-live AST categories {list(NON_LIVE_AST)}; "
                         f"got {unknown or 'none'}")
    return list(categories)


def check_sampling_settings(out: Path, settings: dict[str, Any]) -> None:
    """Samples drawn under other settings (model, n, temperature, ...) are never mixed in:
    a folder that holds some is refused, naming both settings."""
    path = out / "sampling.json"
    if path.is_file():
        previous = json.loads(path.read_text())
        if previous != settings:
            raise ValueError(f"{out} holds samples drawn with {previous}; asked for {settings}: "
                             f"use another --out (or delete {out / 'samples'})")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


def sample_pending(
    load_sampler: Callable[[], Any],
    out: str | Path,
    categories: list[str],
    family: str,
    *,
    n: int,
    limit: int | None = None,
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    chunk: int = 64,
) -> int:
    """Draw ``n`` completions for every entry not yet in its samples file; returns how many
    entries were sampled. ``load_sampler()`` returns a ``LoadedSampler`` and is only called
    when work is left. Entries are sorted by prompt length and sampled ``chunk`` at a time,
    each chunk appended as soon as it is done (an interrupted run resumes)."""
    from toolrl_lib.data.bfcl import load_bfcl_examples
    from toolrl_lib.prompts import get_adapter

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if temperature <= 0 and n > 1:
        raise ValueError("n > 1 samples need temperature > 0 (greedy repeats itself)")
    out = Path(out)
    todo = []
    for category in check_categories(categories):
        done = results.done_ids(samples_file(out, category))
        todo += [(category, ex) for ex in load_bfcl_examples(category, limit=limit) if ex.id not in done]
    if not todo:
        return 0
    loaded = load_sampler()
    adapter = get_adapter(family)
    rendered = sorted(((adapter.render_prompt(ex, loaded.tokenizer), category, ex) for category, ex in todo),
                      key=lambda item: len(item[0]))
    for start in range(0, len(rendered), chunk):
        part = rendered[start:start + chunk]
        texts = loaded.sample([prompt for prompt, _, _ in part], n, max_new_tokens, temperature, top_p,
                              seed + start)
        by_category: dict[str, list[dict[str, Any]]] = {}
        for (_, category, ex), samples in zip(part, texts, strict=True):
            if len(samples) != n:
                raise RuntimeError(f"{ex.id}: the sampler returned {len(samples)} completions, expected {n}")
            by_category.setdefault(category, []).append({"id": ex.id, "samples": samples})
        for category, rows in by_category.items():
            results.append_results(samples_file(out, category), rows)
    return len(todo)


def write_sample_results(out: str | Path, categories: list[str], family: str, n: int,
                         limit: int | None = None) -> None:
    """Sample ``i`` of every entry -> the BFCL result files of pseudo-model ``s<i>``, entries in
    BFCL's order; a missing entry is an error naming it (sample first)."""
    from toolrl_lib.data.bfcl import load_bfcl_examples

    out = Path(out)
    for category in check_categories(categories):
        rows = {row["id"]: row for row in results.read_results(samples_file(out, category))}
        ids = [ex.id for ex in load_bfcl_examples(category, limit=limit)]
        missing = [i for i in ids if i not in rows]
        if missing:
            raise RuntimeError(f"{category}: {len(missing)} entries have no samples in "
                               f"{samples_file(out, category)}, e.g. {missing[0]}")
        short = [i for i in ids if len(rows[i]["samples"]) < n]
        if short:
            raise RuntimeError(f"{category}: entry {short[0]} has {len(rows[short[0]]['samples'])} "
                               f"samples, expected {n}")
        for index in range(n):
            results.write_results(
                results.result_file(out, sample_name(index), category),
                (results.to_result_entry(i, rows[i]["samples"][index], family) for i in ids))


def solved_counts(out: str | Path, categories: list[str], n: int, python: str | Path | None = None
                  ) -> dict[str, dict[str, int]]:
    """Score every sample with BFCL's scorer (one process); ``category -> entry id -> c``."""
    from toolrl_lib.evaluate.scorer import score_models

    out = Path(out)
    names = [sample_name(i) for i in range(n)]
    scores = score_models(out, names, categories, python)
    counts: dict[str, dict[str, int]] = {}
    for category in categories:
        ids = [str(row["id"]) for row in results.read_results(results.result_file(out, names[0], category))]
        counts[category] = dict.fromkeys(ids, 0)
        for name in names:
            failed = scores[name][category].failed_ids()
            total = scores[name][category].total
            if total != len(ids):
                raise RuntimeError(f"BFCL scored {total} entries of {category} for {name}, expected {len(ids)}")
            for entry in ids:
                counts[category][entry] += entry not in failed
    return counts


def curves(counts: dict[str, dict[str, int]], n: int, ks: list[int] | None = None) -> dict[str, Any]:
    """pass@k per category (mean over entries) and the non-live AST curve (BFCL's weighting,
    only when all six categories are present); k as strings, for JSON.

    >>> c = curves({"multiple": {"a": 1, "b": 0}}, n=2)
    >>> c["by_category"]["multiple"], c["non_live_ast"]
    ({'1': 0.25, '2': 0.5}, None)
    """
    ks = ks or default_ks(n)
    by_category = {
        category: {str(k): round(sum(pass_at_k(n, c, k) for c in per.values()) / len(per), 6) for k in ks}
        for category, per in counts.items() if per}
    complete = all(c in by_category for c in NON_LIVE_SIMPLE + NON_LIVE_OTHER)
    overall = ({str(k): round(non_live_ast({c: by_category[c][str(k)] for c in NON_LIVE_AST}), 6) for k in ks}
               if complete else None)
    return {"n": n, "ks": ks, "entries": {c: len(per) for c, per in counts.items()},
            "by_category": by_category, "non_live_ast": overall}


def bfcl_pass_at_k(
    model: str,
    out: str | Path,
    *,
    n: int = 64,
    categories: list[str] | None = None,
    ks: list[int] | None = None,
    family: str | None = None,
    limit: int | None = None,
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    backend: str = "auto",
    dtype: str = "auto",
    batch_size: int = 64,
    chunk: int = 64,
    score: bool = True,
) -> dict[str, Any] | None:
    """Sample (resumably), then score with BFCL and write ``out/pass_at_k.json``; returns the
    curves, or None with ``score=False`` (sample on a GPU box, score here later by running the
    same call again: finished entries are not sampled twice)."""
    from toolrl_lib.evaluate.backends import eval_tokenizer, load_sampler, pick_backend
    from toolrl_lib.prompts import detect_family

    categories = check_categories(categories or list(NON_LIVE_AST))
    if ks and (min(ks) < 1 or max(ks) > n):
        raise ValueError(f"every k must be between 1 and n ({n}); got {ks}")
    out = Path(out)
    family = family or detect_family(eval_tokenizer(model))
    check_sampling_settings(out, {"model": str(model), "family": family, "n": n, "limit": limit,
                                  "max_new_tokens": max_new_tokens, "temperature": temperature,
                                  "top_p": top_p, "seed": seed})
    picked: dict[str, str] = {}

    def loader() -> Any:
        picked["backend"] = pick_backend(backend)
        return load_sampler(model, backend=backend, dtype=dtype, batch_size=batch_size)

    sampled = sample_pending(loader, out, categories, family, n=n, limit=limit, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_p=top_p, seed=seed, chunk=chunk)
    print(f"BFCL pass@k: sampled {sampled} entries x {n} ({picked.get('backend', 'nothing to sample')})",
          flush=True)
    if not score:
        return None
    return score_samples(out, categories, ks)


def score_samples(out: str | Path, categories: list[str] | None = None, ks: list[int] | None = None
                  ) -> dict[str, Any]:
    """Score the samples of a folder (drawn anywhere) with BFCL and write ``out/pass_at_k.json``;
    no model is loaded. ``categories``: those with a samples file (default)."""
    out = Path(out)
    settings_path = out / "sampling.json"
    if not settings_path.is_file():
        raise FileNotFoundError(f"{settings_path} not found: sample first (toolrl eval bfcl-pass-at-k --no-score)")
    settings = json.loads(settings_path.read_text())
    categories = check_categories(categories or [c for c in NON_LIVE_AST if samples_file(out, c).is_file()])
    n = int(settings["n"])
    write_sample_results(out, categories, settings["family"], n, settings.get("limit"))
    result = {**settings, **curves(solved_counts(out, categories, n), n, ks)}
    (out / "pass_at_k.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
