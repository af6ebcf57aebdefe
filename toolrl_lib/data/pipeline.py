"""``prepare``: raw rows -> validated, de-duplicated, decontaminated train/val JSONL.

    load (per source) -> convert -> validate   (bad rows counted by reason, or strict: stop)
      -> exact / near-duplicate removal -> contamination check vs BFCL scored sets
      -> deterministic train/val split (by dialogue, so steps of one dialogue stay together)
      -> out_dir/{train,val}.jsonl, summary.json, dropped.jsonl

Nothing is lost silently: every dropped row is in ``dropped.jsonl`` with its reason, field,
message and ``input_row`` (the raw row's label, ``file:line``), and the counts are in the
summary. Every kept example carries the same label in ``meta["row"]``, so each input row is
either kept (at least one example) or listed as dropped. No row stops the job: an error the
loaders did not foresee becomes a ``loader_error`` drop (``--strict`` stops instead).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from toolrl_lib.data.errors import RowError, id_part
from toolrl_lib.data.example import Example
from toolrl_lib.data.validate import validate_example

MAX_DROP_RECORDS = 100_000


@dataclass
class SourceResult:
    """What one source produced before de-duplication."""

    source: str
    rows: int = 0
    examples: list[Example] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    drops: list[dict[str, Any]] = field(default_factory=list)

    def drop(self, label: str, error: RowError, input_row: str | None = None) -> None:
        self.dropped[error.reason] += 1
        if len(self.drops) < MAX_DROP_RECORDS:
            self.drops.append({"source": self.source, "row": label, "reason": error.reason,
                               "field": error.field, "message": error.message,
                               "input_row": label if input_row is None else input_row})


@dataclass
class PrepareReport:
    """The summary printed by ``toolrl data prepare`` and saved as ``summary.json``."""

    kept: int
    train: int
    val: int
    dropped: dict[str, int]
    sources: dict[str, dict[str, Any]]
    kinds: dict[str, int]
    duplicates: int
    near_duplicates: int
    contaminated: int
    contamination: list[dict[str, str]]
    contamination_check: str
    seed: int
    val_fraction: float
    seconds: float
    out_dir: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``json.dumps(report.to_json())`` for text)."""
        return asdict(self)

    def __str__(self) -> str:
        return json.dumps(self.to_json(), indent=2)


# --- loading -------------------------------------------------------------------------------


def _detect_format(record: dict[str, Any]) -> str:
    if "conversations" in record:
        return "toolace"
    if "reward_model" in record or "prompt" in record:
        return "parquet"
    return "xlam"


Rows = Iterator[tuple[str, Any, Any]]  # (label, raw record or RowError, per-row extra)
Convert = Callable[[dict[str, Any], str, Any], list[Example]]


@dataclass(frozen=True)
class DataSource:
    """A data source: where its raw rows come from and how one row becomes examples.

    ``rows(input_path, opts)`` yields ``(label, record, extra)``; ``converter(opts, partial)``
    returns the row converter (``partial`` collects a ToolACE dialogue's bad later steps when
    not strict; sources without partial rows ignore it)."""

    name: str
    rows: Callable[[str | Path | None, dict[str, Any]], Rows]
    converter: Callable[[dict[str, Any], list[RowError] | None], Convert]


SOURCE_REGISTRY: dict[str, DataSource] = {}


def register_source(source: DataSource) -> DataSource:
    """Add a source under its name (``load_source``/``prepare`` and the CLI accept it)."""
    SOURCE_REGISTRY[source.name] = source
    return source


def _file_rows(hub: str | None) -> Callable[[str | Path | None, dict[str, Any]], Rows]:
    def rows(input_path: str | Path | None, opts: dict[str, Any]) -> Rows:
        from toolrl_lib.data.readers import open_rows

        return ((label, record, None) for label, record in open_rows(input_path, hub))
    return rows


def _format_converters(opts: dict[str, Any], partial: list[RowError] | None) -> dict[str, Convert]:
    from toolrl_lib.data.parquet import parquet_row_to_example
    from toolrl_lib.data.toolace import toolace_row_to_examples
    from toolrl_lib.data.xlam import xlam_row_to_example

    no_call = bool(opts.get("no_call_steps", True))
    return {
        "xlam": lambda r, label, _: [xlam_row_to_example(r, label)],
        "toolace": lambda r, label, _: toolace_row_to_examples(r, label, no_call_steps=no_call,
                                                               errors=partial),
        "parquet": lambda r, label, _: [parquet_row_to_example(r, label)],
    }


def _format_source(name: str, hub: str | None) -> DataSource:
    return DataSource(name, _file_rows(hub),
                      lambda opts, partial: _format_converters(opts, partial)[name])


def _synthetic_rows(input_path: str | Path | None, opts: dict[str, Any]) -> Rows:
    """Generated examples emitted as raw xLAM / ToolACE rows (alternating), or such rows read
    from a file (``toolrl data generate``)."""
    if input_path is not None:
        yield from _file_rows(None)(input_path, opts)
        return
    from toolrl_lib.data.synthetic import generate_examples, to_raw

    examples = generate_examples(int(opts.get("n", 1000)), seed=int(opts.get("synthetic_seed",
                                 opts.get("seed", 0))), kinds=opts.get("kinds"))
    formats = tuple(opts.get("formats", ("xlam", "toolace")))
    for index, example in enumerate(examples):
        fmt = formats[index % len(formats)]
        row = to_raw([example], fmt)[0]
        yield f"{fmt}:{example.id.removeprefix('synthetic-')}", row, None


def _synthetic_converter(opts: dict[str, Any], partial: list[RowError] | None) -> Convert:
    """xLAM or ToolACE rows, told apart by their columns, relabelled as synthetic."""
    by_format = _format_converters(opts, partial)

    def convert(record: dict[str, Any], label: str, extra: Any) -> list[Example]:
        examples = by_format[_detect_format(record)](record, label, extra)
        stem = "synthetic-" + id_part(label)
        for step, example in enumerate(examples):
            example.source = "synthetic"
            example.id = stem if len(examples) == 1 else f"{stem}-{step}"
        return examples
    return convert


def _bfcl_rows(input_path: str | Path | None, opts: dict[str, Any]) -> Rows:
    from toolrl_lib.data.bfcl_source import TRAINABLE_UNSCORED, iter_bfcl_rows

    return ((label, record, (category, answer)) for label, record, category, answer in
            iter_bfcl_rows(input_path, tuple(opts.get("categories") or TRAINABLE_UNSCORED)))


def _bfcl_converter(opts: dict[str, Any], partial: list[RowError] | None) -> Convert:
    from toolrl_lib.data.bfcl_source import bfcl_row_to_example

    return lambda record, label, extra: [bfcl_row_to_example(record, *extra)]


def _register_builtin_sources() -> None:
    from toolrl_lib.data.toolace import HUB_ID as TOOLACE_HUB
    from toolrl_lib.data.xlam import HUB_ID as XLAM_HUB

    register_source(_format_source("xlam", XLAM_HUB))
    register_source(_format_source("toolace", TOOLACE_HUB))
    register_source(DataSource("bfcl", _bfcl_rows, _bfcl_converter))
    register_source(DataSource("synthetic", _synthetic_rows, _synthetic_converter))
    register_source(_format_source("parquet", None))


_register_builtin_sources()
SOURCES = tuple(SOURCE_REGISTRY)  # the built-in sources: xlam, toolace, bfcl, synthetic, parquet


def load_source(source: str, input_path: str | Path | None = None, *, strict: bool = False,
                **opts: Any) -> SourceResult:
    """Convert and validate one source's rows. ``opts``: ``limit`` (rows to read),
    ``n``/``kinds``/``formats``/``seed`` (synthetic), ``categories`` (bfcl),
    ``no_call_steps`` (toolace)."""
    if source not in SOURCE_REGISTRY:
        raise ValueError(f"unknown source {source!r}; choose from {', '.join(SOURCE_REGISTRY)}")
    result = SourceResult(source=source)
    limit = opts.get("limit")
    partial_errors: list[RowError] = []  # ToolACE: a bad later step keeps earlier steps
    spec = SOURCE_REGISTRY[source]
    convert = spec.converter(opts, None if strict else partial_errors)
    rows = spec.rows(input_path, opts)
    for label, record, extra in rows:
        if limit is not None and result.rows >= int(limit):
            break
        result.rows += 1
        if result.rows == 1:
            first_columns = sorted(record) if isinstance(record, dict) else []
        try:
            if isinstance(record, RowError):
                raise record
            for example in convert(record, label, extra):
                example.meta.setdefault("row", str(label))
                try:
                    result.examples.append(validate_example(example))
                except RowError as error:
                    if strict:
                        raise
                    result.drop(f"{label} ({example.id})", error, str(label))
            while partial_errors:
                result.drop(f"{label} (later steps)", partial_errors.pop(), str(label))
        except RowError as error:
            partial_errors.clear()
            if strict:
                raise ValueError(f"{source} {error.at_row(label)}") from error
            result.drop(str(label), error)
        except Exception as error:  # noqa: BLE001 - one hostile row must not stop the job
            partial_errors.clear()
            if strict:
                raise ValueError(f"{source} row {label}: loader failed: "
                                 f"{type(error).__name__}: {str(error)[:200]}") from error
            result.drop(str(label), RowError("loader_error", "row",
                                             f"{type(error).__name__}: {str(error)[:200]}"))
    if result.rows == 0:
        raise ValueError(f"{source}: no rows found in {input_path or 'the default input'}")
    if not result.examples and result.dropped["missing_field"] == result.rows:
        raise ValueError(f"{input_path}: does not look like {source} rows (every row lacks a "
                         f"needed column; first problem: {result.drops[0]['message']}; "
                         f"columns found: {first_columns})")
    return result


def write_examples(examples: Sequence[Example], path: Path) -> int:
    """Same output as ``example.write_jsonl`` (atomic), without ``asdict``'s deep copies,
    which made writing 70k examples take longer than everything else together."""
    names = [f.name for f in fields(Example)]
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for example in examples:
            record = {name: getattr(example, name) for name in names}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return len(examples)


# --- de-duplication, contamination, split ----------------------------------------------------


def _group_hash(example: Example, seed: int) -> bytes:
    group = str(example.meta.get("group", example.id))
    return hashlib.sha256(f"{seed}:{group}".encode()).digest()


def split_examples(examples: Sequence[Example], seed: int, val_fraction: float
                   ) -> tuple[list[Example], list[Example]]:
    """Deterministic train/val split by dialogue group (steps of one dialogue stay together):
    the ``round(val_fraction * groups)`` groups with the smallest seeded hash (at least one
    when there are two or more groups) go to val; order within each split is kept."""
    hashes = {_group_hash(e, seed) for e in examples}
    n_val = round(val_fraction * len(hashes))
    if val_fraction > 0 and len(hashes) >= 2:
        n_val = max(n_val, 1)
    val_groups = set(sorted(hashes)[:n_val])
    train = [e for e in examples if _group_hash(e, seed) not in val_groups]
    val = [e for e in examples if _group_hash(e, seed) in val_groups]
    return train, val


def _contamination_index(enabled: bool) -> tuple[Any, str]:
    if not enabled:
        return None, "off"
    try:
        from toolrl_lib.data.contamination import bfcl_index

        return bfcl_index(), "bfcl scored single-turn + multi-turn user turns"
    except (FileNotFoundError, ImportError, ValueError) as error:
        print(f"warning: contamination check skipped: {error}", file=sys.stderr)
        return None, f"skipped: {error}"


def finalize(results: Sequence[SourceResult], out_dir: str | Path, *, seed: int = 0,
             val_fraction: float = 0.1, dedup: bool = True, near_dup_threshold: float = 0.8,
             contamination: bool = True, started: float | None = None) -> PrepareReport:
    """De-duplicate, decontaminate, split and write; returns the report."""
    from toolrl_lib.data.dedup import Deduplicator

    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    started = time.perf_counter() if started is None else started
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    index, check_note = _contamination_index(contamination)
    dedupe = Deduplicator(threshold=near_dup_threshold, seed=seed)
    kept: list[Example] = []
    overlaps: list[dict[str, str]] = []
    dropped: Counter = Counter()
    drops: list[dict[str, Any]] = []
    seen_ids: Counter = Counter()
    sources: dict[str, dict[str, Any]] = {}
    for result in results:
        dropped.update(result.dropped)
        drops.extend(result.drops)
        local: Counter = Counter()
        for example in result.examples:
            seen_ids[example.id] += 1
            if seen_ids[example.id] > 1:  # same id from two inputs: keep both, make unique
                example.id = f"{example.id}~{seen_ids[example.id]}"
            verdict = dedupe.check(example) if dedup else None
            hit = index.check(example) if index is not None and verdict is None else None
            if hit:
                verdict = ("contaminated", hit["bfcl_id"])
                overlaps.append(hit)
            if verdict:
                local[verdict[0]] += 1
                drops.append({"source": result.source, "row": example.id, "reason": verdict[0],
                              "field": "messages", "message": f"matches {verdict[1]}",
                              "input_row": str(example.meta.get("row", example.id))})
                continue
            kept.append(example)
        dropped.update(local)
        entry = sources.setdefault(result.source, {"rows": 0, "examples": 0, "kept": 0,
                                                   "dropped": Counter()})
        entry["rows"] += result.rows
        entry["examples"] += len(result.examples)
        entry["kept"] += len(result.examples) - sum(local.values())
        entry["dropped"].update(result.dropped + local)
    for entry in sources.values():
        entry["dropped"] = dict(sorted(entry["dropped"].items()))
    train, val = split_examples(kept, seed, val_fraction)
    write_examples(train, out / "train.jsonl")
    write_examples(val, out / "val.jsonl")
    with (out / "dropped.jsonl").open("w", encoding="utf-8") as handle:
        for record in drops:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    report = PrepareReport(
        kept=len(kept), train=len(train), val=len(val), dropped=dict(sorted(dropped.items())),
        sources=sources, kinds=dict(sorted(Counter(e.kind for e in kept).items())),
        duplicates=dropped.get("duplicate", 0), near_duplicates=dropped.get("near_duplicate", 0),
        contaminated=len(overlaps), contamination=overlaps[:50], contamination_check=check_note,
        seed=seed, val_fraction=val_fraction, seconds=round(time.perf_counter() - started, 3),
        out_dir=str(out))
    (out / "summary.json").write_text(json.dumps(report.to_json(), indent=2) + "\n",
                                      encoding="utf-8")
    return report


def prepare(source: str, input_path: str | Path | None, out_dir: str | Path, strict: bool = False,
            seed: int = 0, val_fraction: float = 0.1, **opts: Any) -> PrepareReport:
    """Prepare one source into ``out_dir`` (see module docstring). ``opts`` go to
    ``load_source`` except ``dedup``, ``near_dup_threshold`` and ``contamination``."""
    return prepare_sources([{"source": source, "input": input_path, **opts}], out_dir,
                           strict=strict, seed=seed, val_fraction=val_fraction)


_FINALIZE_OPTS = ("dedup", "near_dup_threshold", "contamination")


def prepare_sources(specs: Sequence[dict[str, Any]], out_dir: str | Path, *, strict: bool = False,
                    seed: int = 0, val_fraction: float = 0.1) -> PrepareReport:
    """Several sources into one data set: ``specs`` are ``{"source", "input", **opts}``."""
    started = time.perf_counter()
    results, final_opts = [], {}
    for spec in specs:
        spec = dict(spec)
        source, input_path = spec.pop("source"), spec.pop("input", None)
        final_opts.update({k: spec.pop(k) for k in _FINALIZE_OPTS if k in spec})
        spec.setdefault("seed", seed)
        results.append(load_source(source, input_path, strict=strict, **spec))
    return finalize(results, out_dir, seed=seed, val_fraction=val_fraction, started=started,
                    **final_opts)
