"""Keep the C heap's freed memory mapped in a long-lived process (glibc's malloc).

glibc gives freed memory back to the kernel: a block over the mmap threshold is unmapped when
freed, and the top of the heap is trimmed once more than the trim threshold is free. The next
allocation of that size faults every page in again, and the kernel zeroes each one; on a
virtual machine a minor fault costs microseconds. A first-visit mask allocates vocabulary-sized
arrays (trie-walk buffers, group rows: 32 KiB a row on a 262k vocabulary), so in a process that
has run for a while (glibc's dynamic thresholds have moved) each new schema's masks faulted
thousands of pages again: MaskBench's worker after 831 schemas, one schema's masks 3,100-3,600
faults and 1.2-1.5x the time they took in a fresh process (`bench/maskbench_replay.py`). With the
thresholds fixed high, freed memory stays mapped for the next allocation: 0 faults, and the
process keeps what it used at its peak instead of returning it.

This changes the whole process's allocator, so the library never calls it on import: entry
points that own their process do (``guidewire serve``, MaskBench's workers for every engine).
"""

from __future__ import annotations

import ctypes
import platform

__all__ = ["keep_heap_mapped", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

_M_TRIM_THRESHOLD = -1    # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3

#: allocations below this come from the heap (glibc's default starts at 128 KiB and moves)
MMAP_THRESHOLD = 256 << 20
#: free memory at the top of the heap kept mapped, at most (glibc's default: 128 KiB and moving)
TRIM_THRESHOLD = 1 << 30


def keep_heap_mapped(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Fix glibc's mmap and trim thresholds (see the module docstring) for this process.

    Returns True when both were set, False where the C library is not glibc (nothing changed).
    Raises ``ValueError`` for a threshold that is not a positive C ``int``."""
    for name, value in (("mmap_threshold", mmap_threshold), ("trim_threshold", trim_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < (1 << 31):
            raise ValueError(f"{name} must be a positive int below 2**31 bytes, got {value!r}")
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    return mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1 and ok
