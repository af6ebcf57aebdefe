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
