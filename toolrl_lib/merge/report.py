"""What a merge is asked to do (``MergeOptions``), what it measured (``MergeReport``, saved as
``toolrl_merge.json``) and how it fails (``MergeError``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MERGE_INFO = "toolrl_merge.json"
BACKENDS = ("auto", "peft", "unsloth")


class MergeError(RuntimeError):
    """The adapter/base cannot be merged (missing files, mismatched base); says why."""


class MergeVerificationError(MergeError):
    """A verification check failed; ``report`` holds everything that was measured."""

    def __init__(self, message: str, report: MergeReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class MergeOptions:
    """How to merge and how hard to check.

    Attributes:
        dtype: dtype of the saved weights (``bf16`` | ``fp16`` | ``fp32``); the merge
            itself is always done in fp32.
        device: where to run the merge and the checks (``auto`` = cuda when present).
        backend: ``auto`` (the run's backend), ``peft`` or ``unsloth`` (merged 16-bit save,
            used only when importable and the base is stored in ``dtype``, since it writes the
            base's own dtype; otherwise PEFT with a note).
        n_generations: how many validation prompts to compare greedy generations on.
        max_new_tokens: length of each compared greedy generation.
        max_generation_mismatch: largest fraction of differing generations that still
            passes (rounding to 16 bits can flip near-ties; a merge that loses training
            changes most of them).
        logit_tolerance: overrides of ``LOGIT_TOLERANCE[dtype]`` keys.
        min_delta_survival: smallest fraction of changed weights that must still differ
            from the base after rounding to ``dtype`` (0 = only a total loss fails).
        overwrite: replace an existing complete output folder.
    """

    dtype: str = "bf16"
    device: str = "auto"
    backend: str = "auto"
    n_generations: int = 4
    max_new_tokens: int = 32
    max_generation_mismatch: float = 0.5
    logit_tolerance: dict[str, float] = field(default_factory=dict)
    min_delta_survival: float = 0.0
    overwrite: bool = False


@dataclass
class MergeReport:
    """What a merge did and measured; saved as ``toolrl_merge.json`` in the output."""

    output: str
    base_model: str
    adapter: str
    dtype: str
    backend: str
    passed: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    delta: dict[str, Any] = field(default_factory=dict)
    logits: dict[str, Any] = field(default_factory=dict)
    generations: list[dict[str, Any]] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append({"check": name, "passed": bool(passed), "detail": detail})

    def failed_checks(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["passed"]]

    def table(self) -> list[dict[str, Any]]:
        """Rows ``{check, passed, detail}`` for a DataFrame in the notebook."""
        return [dict(c) for c in self.checks]
