"""Give a finished stage's memory back to the operating system.

A notebook kernel runs validation, priming, GRPO and validation again in one process. Each
stage drops its model, but the trainer's reference cycles (callbacks, accelerator) keep the
tensors alive until Python's cycle collector runs, and glibc keeps freed heap pages mapped
until asked to trim them, so the kernel's RSS ratchets up stage after stage. ``release_memory``
does both, plus the CUDA cache where there is one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
GLIBC_MAX_MMAP_THRESHOLD = 32 * 2**20  # the ceiling glibc's own sliding threshold reaches (64-bit)


def release_memory() -> None:
    """Collect reference cycles, empty the CUDA cache and trim the C heap (glibc only)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    trim_c_heap()


def trim_c_heap() -> bool:
    """``malloc_trim(0)``: return free heap pages to the OS; False where libc has no such call.

    >>> isinstance(trim_c_heap(), bool)
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # musl and others: no malloc_trim
        return False


def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


def set_mmap_threshold(nbytes: int) -> bool:
    """glibc: every allocation of at least ``nbytes`` gets its own mapping, handed back to the OS
    when freed instead of staying in the heap as a hole. False where libc has no ``mallopt``.

    Each such block is mapped afresh (page faults on first touch), so a low threshold trades
    speed for a lower peak. Setting it at all ends glibc's sliding default for the process.

    >>> isinstance(set_mmap_threshold(GLIBC_MAX_MMAP_THRESHOLD), bool)
    True
    """
    libc = _libc()
    if libc is None or nbytes <= 0:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, int(nbytes)))
