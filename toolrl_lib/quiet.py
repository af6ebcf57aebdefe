"""Known-benign library notices, filtered narrowly so executed notebooks read cleanly.

Each entry names the logger that emits the notice and the start of its message; nothing else
from that logger (or any other) is hidden. The notebooks' set-up cell calls
``quiet_known_warnings()``; add an entry here only with a note saying why it is harmless.
"""

from __future__ import annotations

import logging

# (logger, message prefix, why it is harmless)
KNOWN_NOTICES: tuple[tuple[str, str, str], ...] = (
    ("transformers.tokenization_utils_tokenizers",
     "Ignoring clean_up_tokenization_spaces=True for BPE tokenizer",
     "the embedded SmolLM2 tokenizer's config asks for a clean-up that transformers skips for "
     "BPE tokenizers anyway: decoding is already what we want, the notice changes nothing"),
)


class _DropKnown(logging.Filter):
    """Drops records whose message starts with one of ``prefixes``; passes everything else."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def quiet_known_warnings() -> list[str]:
    """Install the filters (idempotent); returns the loggers that have one."""
    by_logger: dict[str, tuple[str, ...]] = {}
    for name, prefix, _why in KNOWN_NOTICES:
        by_logger[name] = (*by_logger.get(name, ()), prefix)
    for name, prefixes in by_logger.items():
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, _DropKnown)]:
            logger.removeFilter(old)
        logger.addFilter(_DropKnown(prefixes))
    return sorted(by_logger)
