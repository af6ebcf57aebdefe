"""Allocator settings (glibc): hand freed heap pages back, map large blocks on their own.

glibc keeps freed heap pages mapped until asked to trim them (``trim_c_heap``, which
``toolrl_lib.models.release_memory`` calls after each stage), and leaves holes in the heap
where large blocks were freed; ``set_mmap_threshold`` / ``mapped_blocks`` give blocks above a
size their own mapping, returned to the OS when freed: a lower peak for some speed
(``benchmarks/results/grpo_memory.md``; the ``fast.loss_mmap_threshold`` and
``fast.priming_mmap_threshold`` options). Everything here is a no-op off glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from collections.abc import Iterator
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
GLIBC_MAX_MMAP_THRESHOLD = 32 * 2**20  # the ceiling glibc's own sliding threshold reaches (64-bit)


def trim_c_heap() -> bool:
    """``malloc_trim(0)``: return free heap pages to the OS; False where libc has no such call.

    >>> isinstance(trim_c_heap(), bool)
    True
    """
    trim = _libc_call("malloc_trim")  # musl and others: none
    return bool(trim(0)) if trim is not None else False


def _libc_call(name: str) -> Any | None:
    """The C library's function ``name`` (Linux), or None where there is no such call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


def set_mmap_threshold(nbytes: int) -> bool:
    """glibc: every allocation of at least ``nbytes`` gets its own mapping, handed back to the OS
    when freed instead of staying in the heap as a hole. False where libc has no ``mallopt``.

    Each such block is mapped afresh (page faults on first touch), so a low threshold trades
    speed for a lower peak. Setting it at all ends glibc's sliding default for the process.

    >>> isinstance(set_mmap_threshold(GLIBC_MAX_MMAP_THRESHOLD), bool)
    True
    """
    mallopt = _libc_call("mallopt")
    if mallopt is None or nbytes <= 0:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(nbytes)))


@contextlib.contextmanager
def mapped_blocks(nbytes: int) -> Iterator[bool]:
    """Within the body, blocks >= ``nbytes`` are mapped on their own (``set_mmap_threshold``);
    after it, glibc's ceiling again. Yields whether the setting took (False for 0 or off glibc)."""
    mapped = set_mmap_threshold(nbytes)
    try:
        yield mapped
    finally:
        if mapped:
            set_mmap_threshold(GLIBC_MAX_MMAP_THRESHOLD)
