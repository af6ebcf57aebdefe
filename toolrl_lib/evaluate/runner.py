"""Evaluate one model on BFCL v4 single-turn categories: generate -> result files -> score.

Layout of an evaluation directory ``out``::

    out/generations/<category>.jsonl    every completion made so far (the resume cache)
    out/result/<name>/<group>/BFCL_v4_<category>_result.json   what BFCL scores (this request)
    out/score/<name>/...                BFCL's own score files and CSVs (fresh each time)
    out/entries.csv                     one row per (category, entry): correct, error_type, calls
    out/summary.csv                     one row per category: accuracy, n, call/valid rates
    out/run.json                        model, family, categories, limit, timings, aggregates

Generation is resumable: ids already in ``generations/<category>.jsonl`` are skipped, and
the model is only loaded when something is left to generate.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import (
    MULTI_TURN,
    SCORED_SINGLE_TURN,
    load_bfcl_entries,
    load_bfcl_examples,
)
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.fast.profiling import stage


def parse_categories(spec: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``"a,b"``/list -> validated categories; ``None``/``"all"`` -> all single-turn ones.

    Group names ``non_live``, ``live``, ``single_turn`` and ``multi_turn`` expand; anything
    unknown is refused, naming it. (``all`` stays single-turn: multi-turn is much slower.)
    """
    from toolrl_lib.data.bfcl import LIVE, NON_LIVE

    if spec is None or spec == "all" or spec == ["all"]:
        return list(SCORED_SINGLE_TURN)
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in items:
        if not item:
            continue
        expanded = {"non_live": NON_LIVE, "live": LIVE, "single_turn": SCORED_SINGLE_TURN,
                    "multi_turn": MULTI_TURN}.get(item, (item,))  # fmt: skip
        for category in expanded:
            if category not in SCORED_SINGLE_TURN and category not in MULTI_TURN:
                raise ValueError(
                    f"unknown or unsupported BFCL category {category!r}; this evaluation "
                    f"scores the single-turn categories: {', '.join(SCORED_SINGLE_TURN)} "
                    f"and the multi-turn ones: {', '.join(MULTI_TURN)}"
                )
            if category not in out:
                out.append(category)
    if not out:
        raise ValueError("no BFCL category given")
    return out


@dataclass
class BfclRun:
    """What ``evaluate_bfcl`` produced (paths and headline numbers)."""

    out_dir: str
    model: str
    name: str
    family: str
    categories: list[str]
    limit: int | None
    summary: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def generate_pending(
    loader: Any,
    out_dir: Path,
    categories: list[str],
    family: str | None,
    limit: int | None,
    chunk: int = 64,
    progress: bool = False,
    state: dict[str, Any] | None = None,
    max_batch_tokens: int | None = None,
    max_new_tokens: int = 256,
) -> int:
    """Complete every entry of ``categories`` not yet in its generations file; returns how many.

    The pending entries of all categories form one pool, sorted by prompt length and cut
    into chunks of ``chunk`` prompts: a small category (BFCL has some of 16 entries) then
    shares a ``generate`` call instead of paying a whole one (on a GPU a call costs about
    the same for 16 prompts as for 512). Each chunk is appended to its categories' files
    as soon as it is done, so an interrupted run resumes where it stopped.

    ``max_batch_tokens`` also caps a chunk's padded size, prompts x (longest prompt +
    ``max_new_tokens``) tokens: the KV cache and the prefill's attention mask grow with it,
    and BFCL's long live prompts at a short-prompt batch size ran an H200 out of memory.

    ``loader()`` returns a ``LoadedModel``; it is only called when work is left, and the
    result is cached in ``state`` so several calls share one loaded model.
    """
    state = state if state is not None else {}
    todo = []
    for category in categories:
        done = results.done_ids(results.generations_file(out_dir, category))
        todo += [(category, ex) for ex in load_bfcl_examples(category, limit=limit)
                 if ex.id not in done]
    if not todo:
        return 0
    if "model" not in state:
        state["model"] = loader()
    loaded = state["model"]
    if family is None:
        from toolrl_lib.prompts import detect_family

        family = detect_family(loaded.tokenizer)
    from toolrl_lib.prompts import get_adapter

    adapter = get_adapter(family)
    rendered = [(adapter.render_prompt(ex, loaded.tokenizer), category, ex) for category, ex in todo]
    counted = [(_token_count(loaded.tokenizer, item[0]), item) for item in rendered]
    counted.sort(key=lambda pair: pair[0])  # similar lengths per batch: less padding
    rendered = [item for _, item in counted]
    spans = results.plan_chunks([n for n, _ in counted], chunk, max_batch_tokens, max_new_tokens)
    label = categories[0] if len(categories) == 1 else f"{len(categories)} categories"
    bar = _bar(len(todo), label, progress)
    for start, stop in spans:
        part = rendered[start:stop]
        texts = loaded.complete([prompt for prompt, _, _ in part])
        by_category: dict[str, list[dict[str, Any]]] = {}
        for (_, category, ex), text in zip(part, texts, strict=True):
            by_category.setdefault(category, []).append(results.to_result_entry(ex.id, text, family))
        for category, rows in by_category.items():
            results.append_results(results.generations_file(out_dir, category), rows)
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    return len(todo)


def _token_count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def evaluate_bfcl(
    model: str,
    out_dir: str | Path,
    *,
    family: str | None = None,
    label: str | None = None,
    categories: str | list[str] | None = None,
    limit: int | None = None,
    max_new_tokens: int = 256,
    batch_size: int = 16,
    backend: str = "auto",
    dtype: str = "auto",
    progress: bool = False,
    run_scorer: bool = True,
    generate: bool = True,
    only_ids: set[str] | None = None,
    max_batch_tokens: int | None = None,
    multi_turn: Any = None,
) -> BfclRun:
    """Generate (resumably), write BFCL result files, score them officially, tabulate.

    ``only_ids`` (with ``generate=False``) scores just those entries, e.g. the entries every
    model of an interrupted comparison has; BFCL's partial evaluation scores what is there.
    Multi-turn categories run through ``bfcl_multi_turn.runner`` under ``multi_turn``
    (a ``MultiTurnSettings``; default: 128 new tokens per step, the model's own window)."""
    if only_ids is not None and generate:
        raise ValueError("only_ids restricts scoring of existing generations: pass generate=False")
    results.check_batch_limits(batch_size, max_batch_tokens)  # before any model loads
    from toolrl_lib.evaluate.analysis import aggregates, entries_table, summary_table
    from toolrl_lib.evaluate.backends import load_for_eval, pick_backend

    if generate:  # a backend that cannot run fails now, in one line, not after the tokenizer loads
        backend = pick_backend(backend)

    cats = parse_categories(categories)
    multi = [c for c in cats if c in MULTI_TURN]
    cats = [c for c in cats if c not in MULTI_TURN]  # single-turn below; multi-turn joins later
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = results.bfcl_model_name(label or Path(model).name or model)
    state: dict[str, Any] = {}

    def loader() -> Any:
        return load_for_eval(
            model, backend=backend, dtype=dtype, max_new_tokens=max_new_tokens, batch_size=batch_size
        )

    timings: dict[str, float] = {}
    if family is None:
        # Resolve it once up front so every category (and run.json) agrees.
        from toolrl_lib.evaluate.backends import eval_tokenizer
        from toolrl_lib.prompts import detect_family

        family = detect_family(eval_tokenizer(model))
    settings = {"model": str(model), "family": family, "max_new_tokens": max_new_tokens,
                "dtype": dtype, "format": results.RESULT_FORMAT}  # fmt: skip
    check_generation_settings(out, settings)
    t0 = time.perf_counter()
    generated = 0
    if generate:  # generate=False: score what is there (no model load)
        with stage(f"BFCL generation: {label or name}"):
            generated = generate_pending(loader, out, cats, family, limit,
                                         chunk=max(64, batch_size),
                                         progress=progress, state=state,
                                         max_batch_tokens=max_batch_tokens,
                                         max_new_tokens=max_new_tokens)
    timings["generate_s"] = time.perf_counter() - t0
    timings["generated"] = generated

    wanted = {c: [ex.id for ex in load_bfcl_examples(c, limit=limit)
                  if only_ids is None or ex.id in only_ids] for c in cats}
    if only_ids is not None:
        cats = [c for c in cats if wanted[c]]  # a category with nothing in common is left out
    for category in cats:
        rows = {r["id"]: r for r in results.read_results(results.generations_file(out, category))}
        missing = [i for i in wanted[category] if i not in rows]
        if missing:
            raise RuntimeError(f"{category}: {len(missing)} entries were not generated, e.g. {missing[0]}")
        results.write_results(
            results.result_file(out, name, category), (rows[i] for i in wanted[category])
        )
    if multi:
        multi = _run_multi_turn(model, out, name, family, multi, limit, multi_turn, timings,
                                generate=generate, only_ids=only_ids, backend=backend, dtype=dtype,
                                batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                                progress=progress)  # fmt: skip
        cats = cats + multi
    run = BfclRun(str(out), model, name, family, cats, limit, timings=timings)
    if run_scorer:
        from toolrl_lib.evaluate.scorer import score

        t1 = time.perf_counter()
        with stage(f"BFCL scoring: {label or name}"):
            scores = score(out, name, cats)
        timings["score_s"] = time.perf_counter() - t1
        entries = entries_table(out, name, cats, scores, label=label or name)
        entries.to_csv(out / "entries.csv", index=False)
        summary = summary_table(entries)
        summary.to_csv(out / "summary.csv", index=False)
        run.summary = summary.to_dict(orient="records")
        run.aggregates = aggregates(summary, full_categories=limit is None and only_ids is None
                                    and not getattr(multi_turn, "entry_ids", None))
        _add_overall(run, out, name, multi, scores, summary)
    (out / "run.json").write_text(json.dumps(run.to_dict(), indent=2, default=str))
    return run


def _run_multi_turn(
    model: str, out: Path, name: str, family: str, categories: list[str], limit: int | None,
    settings: Any, timings: dict[str, float], *, generate: bool, only_ids: set[str] | None,
    backend: str, dtype: str, batch_size: int, max_batch_tokens: int | None, progress: bool,
) -> list[str]:
    """Generate (resumably) and write the sanitised result files of multi-turn categories;
    returns the categories that have entries to score."""
    from dataclasses import replace

    from toolrl_lib.evaluate.backends import load_for_eval
    from toolrl_lib.evaluate.bfcl_multi_turn.runner import (
        MultiTurnSettings,
        check_multi_turn_settings,
        generate_multi_turn_pending,
        model_window,
        write_multi_turn_results,
    )

    settings = settings or MultiTurnSettings()
    if settings.window is None:
        settings = replace(settings, window=model_window(model))
    check_multi_turn_settings(out, settings.key(model, family), categories)
    t0 = time.perf_counter()
    if generate:
        def loader() -> Any:
            return load_for_eval(model, backend=backend, dtype=dtype,
                                 max_new_tokens=settings.max_new_tokens, batch_size=batch_size)

        timings["multi_turn_generated"] = generate_multi_turn_pending(
            loader, out, categories, family, limit, settings, chunk=max(64, batch_size),
            max_batch_tokens=max_batch_tokens, progress=progress)  # fmt: skip
    timings["multi_turn_generate_s"] = time.perf_counter() - t0
    kept = []
    for category in categories:
        ids = [str(e["id"]) for e in load_bfcl_entries(category)[:limit]
               if (only_ids is None or str(e["id"]) in only_ids) and settings.wanted(e["id"])]
        if ids:
            write_multi_turn_results(out, name, category, ids)
            kept.append(category)
    return kept


def _add_overall(run: BfclRun, out: Path, name: str, multi: list[str], scores: dict[str, Any],
                 summary: Any) -> None:
    """BFCL's Overall over the parts that ran (named), and the multi-turn table."""
    from toolrl_lib.evaluate.bfcl_multi_turn.report import multi_turn_summary, multi_turn_table
    from toolrl_lib.evaluate.bfcl_summary import bfcl_overall, overall_note

    if multi:
        table = multi_turn_table(out, name, multi, scores)
        table.to_csv(out / "multi_turn.csv", index=False)
        run.aggregates["multi_turn"] = multi_turn_summary(table).to_dict(orient="records")
    run.aggregates["overall"] = bfcl_overall(summary, full_categories=not run.aggregates.get("partial"))
    run.aggregates["note"] = overall_note(run.aggregates["overall"])


def check_generation_settings(out: Path, settings: dict[str, Any]) -> None:
    """Cached generations are only reused under the same settings; otherwise they are moved
    aside to ``generations.stale-<n>/`` (kept, not deleted) and generation starts fresh."""
    path = out / "generation.json"
    cache = out / "generations"
    if path.is_file() and cache.is_dir():
        previous = json.loads(path.read_text())
        if previous != settings:
            n = 1
            while (out / f"generations.stale-{n}").exists():
                n += 1
            cache.rename(out / f"generations.stale-{n}")
            print(f"generation settings changed ({previous} -> {settings}); "
                  f"old generations kept in {out / f'generations.stale-{n}'}")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


def _bar(total: int, category: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"bfcl {category}", unit="entry")
