"""quiet_known_warnings: the known-benign notices disappear, nothing else does."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from toolrl_lib.quiet import KNOWN_NOTICES, _DropKnown, quiet_known_warnings

TOKENIZER_LOGGER = "transformers.tokenization_utils_tokenizers"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def collected() -> Iterator[_Collect]:
    logger = logging.getLogger(TOKENIZER_LOGGER)
    handler, filters = _Collect(), list(logger.filters)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.filters[:] = filters


def _decode_with_cleanup() -> None:
    """What the embedded tokenizer does on every decode: ask for a clean-up BPE ignores."""
    from toolrl_lib.models import make_tiny_tokenizer

    logging.Logger.warning_once.cache_clear()  # transformers emits this notice once per process
    tokenizer = make_tiny_tokenizer()
    tokenizer.clean_up_tokenization_spaces = True
    assert tokenizer.decode([70, 71, 72]) == "def"


def test_the_tokenizer_notice_is_dropped_and_would_otherwise_show(collected: _Collect) -> None:
    pytest.importorskip("transformers")
    _decode_with_cleanup()
    assert any(m.startswith(KNOWN_NOTICES[0][1]) for m in collected.messages)  # the notice is real
    collected.messages.clear()
    assert TOKENIZER_LOGGER in quiet_known_warnings()
    _decode_with_cleanup()
    assert collected.messages == []


def test_other_messages_of_the_same_logger_still_show(collected: _Collect) -> None:
    quiet_known_warnings()
    logger = logging.getLogger(TOKENIZER_LOGGER)
    logger.warning("%s but a different notice", "Ignoring something else")
    logger.warning(KNOWN_NOTICES[0][1] + " TokenizersBackend. ...")
    assert collected.messages == ["Ignoring something else but a different notice"]


def test_installing_twice_keeps_one_filter(collected: _Collect) -> None:
    quiet_known_warnings()
    quiet_known_warnings()
    logger = logging.getLogger(TOKENIZER_LOGGER)
    assert sum(isinstance(f, _DropKnown) for f in logger.filters) == 1
