"""The CPU allocator policy: keep freed memory in the process instead of handing it back to the OS.

glibc serves blocks above `M_MMAP_THRESHOLD` (128 KiB, rising dynamically to at most 32 MiB) with
a fresh `mmap` and unmaps them on free, and it trims the heap's free top above `M_TRIM_THRESHOLD`.
A training step allocates and frees the same large activations and gradients every iteration, so
by default every step faults their pages in again, zeroed by the kernel: measured here at +25–60%
on a NumPy CNN step and ~1.5x on a batch-1000 CNN inference (docs/performance.md). Raising both
thresholds to 1 GiB keeps those blocks in the heap, where the next step reuses them.

The cost: memory freed after a peak stays resident (and reusable) rather than returning to the
OS. Set `EMBER_MALLOC_TUNING=0` in the environment before importing ember to keep glibc's
defaults. Other C libraries (musl, macOS, Windows) are left alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["tuned", "THRESHOLD"]

THRESHOLD = 1 << 30  # bytes: larger than any single activation of the models ember targets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)
_tuned = False


def tuned() -> bool:
    """Whether ember raised glibc's malloc thresholds in this process."""
    return _tuned


def _tune() -> None:
    global _tuned
    if os.environ.get("EMBER_MALLOC_TUNING", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (musl's mallopt does nothing)
        return
    libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; an older glibc may refuse a threshold this large (its default stays)
    mmap_ok = libc.mallopt(_M_MMAP_THRESHOLD, THRESHOLD) == 1
    trim_ok = libc.mallopt(_M_TRIM_THRESHOLD, THRESHOLD) == 1
    _tuned = mmap_ok and trim_ok


_tune()
