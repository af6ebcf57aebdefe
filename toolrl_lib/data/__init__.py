"""Data pipeline: raw rows (xLAM, ToolACE, BFCL, verl parquet, synthetic) -> ``Example``."""

from toolrl_lib.data.example import KINDS, Example, infer_kind, read_jsonl, write_jsonl

__all__ = ["KINDS", "Example", "infer_kind", "read_jsonl", "write_jsonl"]
