"""Data pipeline: raw rows (xLAM, ToolACE, BFCL, verl parquet, synthetic) -> ``Example``.

Entry points: ``prepare`` / ``prepare_sources`` (``pipeline``) write a processed train/val
set with a report; ``generate_examples`` (``synthetic``) makes offline examples.
"""

from toolrl_lib.data.example import KINDS, Example, infer_kind, read_jsonl, write_jsonl
from toolrl_lib.data.pipeline import PrepareReport, prepare, prepare_sources
from toolrl_lib.data.synthetic import generate_examples

__all__ = [
    "KINDS",
    "Example",
    "PrepareReport",
    "generate_examples",
    "infer_kind",
    "prepare",
    "prepare_sources",
    "read_jsonl",
    "write_jsonl",
]
