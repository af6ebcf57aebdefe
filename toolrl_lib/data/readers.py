"""Read raw rows from local files (JSON, JSON lines, parquet) or the Hugging Face hub.

Rows come back as ``(row_label, record)`` where ``record`` is a dict, or a ``RowError`` for
a line that is not (strict, bounded) JSON or is nested too deep (so one broken line costs one
row, not the whole file). A file that is not data at all is a ``ValueError`` saying so.

JSON lines are split at ``\n`` only: U+2028, U+0085 and friends are legal inside JSON
strings (``ensure_ascii=False`` writes them raw), so ``str.splitlines`` would cut one row
in two. Labels are ``file:line`` (1-based) for JSON lines, ``file:index`` for arrays/parquet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolrl_lib.data.errors import RowError
from toolrl_lib.parsing import (
    DATA_LIMITS,
    ParseRefused,
    decode_json_prefix,
    load_json,
    skip_space,
    too_deep,
)

DATA_SUFFIXES = (".json", ".jsonl", ".parquet")
HUB_PREFIX = "hub:"

Row = tuple[str, dict[str, Any] | RowError]


def iter_records(path: str | Path) -> Iterator[Row]:
    """Rows of one file, or of every data file in a folder (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in DATA_SUFFIXES)
        if not files:
            raise ValueError(f"{path}: folder holds no {'/'.join(DATA_SUFFIXES)} files")
        for file in files:
            yield from iter_records(file)
        return
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        yield from _json_rows(path)


def _parquet_rows(path: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as error:  # pyarrow raises several unrelated types for "not parquet"
        raise ValueError(f"{path}: not a parquet file ({error})") from error
    for index, record in enumerate(table.to_pylist()):
        yield f"{path.name}:{index}", _as_record(record, f"{path.name}:{index}", check_depth=True)


def _json_rows(path: Path) -> Iterator[Row]:
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith("[") and not _first_line_is_a_value(stripped):
        rows, closed = _array_rows(stripped, path.name)
        if closed:  # a JSON array of rows (bad elements are bad rows, the others are kept)
            yield from rows
            return
    if stripped.startswith("{") and "\n" not in stripped.rstrip():
        try:
            data = load_json(stripped.rstrip())
        except ParseRefused:
            data = None
        lists = list(data.values()) if isinstance(data, dict) and len(data) == 1 else []
        if lists and isinstance(lists[0], list) and all(isinstance(r, dict) for r in lists[0]):
            # {"data": [...]}: one key holding the rows
            for index, record in enumerate(lists[0]):
                yield f"{path.name}:{index}", record
            return
    good = 0
    rows: list[Row] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        label = f"{path.name}:{number}"
        try:
            record = load_json(line.strip())
            good += 1
        except ParseRefused as error:
            record = RowError("bad_json", "line", str(error))
        rows.append((label, _as_record(record, label)))
    if good == 0:
        raise ValueError(f"{path}: not a data file (expected a JSON array or JSON lines of objects)")
    yield from rows


def _as_record(record: Any, label: str, check_depth: bool = False) -> dict[str, Any] | RowError:
    """Rows must be objects; parquet and hub rows (which did not pass through our JSON reader)
    must also nest no deeper than the data limit."""
    if isinstance(record, RowError):
        return record
    if not isinstance(record, dict):
        return RowError("bad_json", "row", f"expected a JSON object, got {type(record).__name__}")
    if check_depth and too_deep(record, DATA_LIMITS.max_depth):
        return RowError("bad_json", "row", f"nested deeper than {DATA_LIMITS.max_depth}")
    return record


def _first_line_is_a_value(text: str) -> bool:
    """A JSON-lines file whose first row is a (hostile) array line such as ``[1, 2]``."""
    head, newline, rest = text.partition("\n")
    if not newline or not rest.strip():
        return False
    try:
        load_json(head.strip())
    except ParseRefused:
        return False
    return True


def _array_rows(text: str, name: str) -> tuple[list[Row], bool]:
    """Elements of a JSON array file, each decoded on its own with the data limits, so that
    a bad element costs that element only (it is skipped by bracket matching). Returns the
    rows and whether the array closed at the end of the text (else: not an array file)."""
    rows: list[Row] = []
    pos, index, end = skip_space(text, 1), 0, len(text.rstrip())
    if text.startswith("]", pos):
        return rows, pos + 1 == end
    while pos < end:
        label = f"{name}:{index}"
        value, stop, error = decode_json_prefix(text, pos, DATA_LIMITS)
        if error:
            stop = _skip_value(text, pos)
            if stop == -1:
                return rows, False
            rows.append((label, RowError("bad_json", "row", error)))
        else:
            rows.append((label, _as_record(value, label)))
        index += 1
        pos = skip_space(text, stop)
        if text.startswith(",", pos):
            pos = skip_space(text, pos + 1)
        elif text.startswith("]", pos):
            return rows, pos + 1 == end
        else:
            return rows, False
    return rows, False


def _skip_value(text: str, pos: int) -> int:
    """End of the (possibly invalid) value at ``pos``: matching brackets outside strings, or
    the next top-level ``,``/``]``; -1 when the array never closes. Only runs after a decode
    failure, so its Python-level loop costs hostile rows only."""
    depth, quote, index = 0, False, pos
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == '"':
                quote = False
        elif char == '"':
            quote = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            if depth == 0:
                return index
            depth -= 1
            if depth == 0:
                return index + 1
        elif char == "," and depth == 0:
            return index
        index += 1
    return -1


def iter_hub(dataset_id: str, split: str = "train", config: str | None = None) -> Iterator[Row]:
    """Rows of a hub data set via ``datasets.load_dataset`` (full profile, needs the hub)."""
    try:
        import datasets

        data = datasets.load_dataset(dataset_id, config, split=split)
    except Exception as error:
        raise ValueError(
            f"cannot load {dataset_id!r} from the Hugging Face hub ({type(error).__name__}: "
            f"{str(error)[:200]}). Offline? Download it elsewhere and pass a local "
            "JSON/JSONL/parquet file instead (--input, or xlam_input/toolace_input in notebook "
            "01); gated sets (xLAM) need `huggingface-cli login`."
        ) from error
    for index, record in enumerate(data):
        yield f"{dataset_id}:{index}", _as_record(dict(record), f"{dataset_id}:{index}",
                                                  check_depth=True)


def open_rows(input_path: str | Path | None, default_hub_id: str | None) -> Iterator[Row]:
    """``hub:<id>`` or no path (with a default hub id) reads the hub; anything else is local."""
    if input_path is None:
        if default_hub_id is None:
            raise ValueError("this source needs --input PATH")
        return iter_hub(default_hub_id)
    text = str(input_path)
    if text.startswith(HUB_PREFIX):
        return iter_hub(text[len(HUB_PREFIX):])
    return iter_records(text)
