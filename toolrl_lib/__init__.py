"""ToolRL Workbook library: data, prompts, rewards, GRPO training, merge and BFCL evaluation.

Every notebook in ``notebooks/`` is a narrative over calls into this package; the logic
lives here so it can be unit-tested and reused from the ``toolrl`` CLI.
"""

__version__ = "0.1.0"
