"""Read raw rows from local files (JSON, JSON lines, parquet) or the Hugging Face hub.

Rows come back as ``(row_label, record)`` where ``record`` is a dict, or a ``RowError`` for
a line that is not JSON (so one broken line costs one row, not the whole file). A file that
is not data at all is a ``ValueError`` saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolrl_lib.data.errors import RowError

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
        yield f"{path.name}:{index}", record


def _json_rows(path: Path) -> Iterator[Row]:
    text = path.read_text(encoding="utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            for index, record in enumerate(data):
                yield f"{path.name}:{index}", _as_record(record, f"{path.name}:{index}")
            return
    if stripped.startswith("{") and "\n" not in stripped.rstrip():
        data = json.loads(stripped)
        lists = list(data.values()) if isinstance(data, dict) and len(data) == 1 else []
        if lists and isinstance(lists[0], list) and all(isinstance(r, dict) for r in lists[0]):
            # {"data": [...]}: one key holding the rows
            for index, record in enumerate(lists[0]):
                yield f"{path.name}:{index}", record
            return
    good = 0
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label = f"{path.name}:{number}"
        try:
            record = json.loads(line)
            good += 1
        except json.JSONDecodeError as error:
            record = RowError("bad_json", "line", f"not JSON ({error.msg})")
        rows.append((label, _as_record(record, label)))
    if good == 0:
        raise ValueError(f"{path}: not a data file (expected a JSON array or JSON lines of objects)")
    yield from rows


def _as_record(record: Any, label: str) -> dict[str, Any] | RowError:
    if isinstance(record, dict | RowError):
        return record
    return RowError("bad_json", "row", f"expected a JSON object, got {type(record).__name__}")


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
        yield f"{dataset_id}:{index}", dict(record)


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
