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

Kept memory is not all of it: a process whose live set still grows (memos filling toward their
bounds, a new schema's lexer tables) takes fresh pages from the top of the heap, and each faults
inside whichever mask first writes it (MaskBench's worker after 1,025 schemas: one schema's
masks 4,020 faults, 59.5 ms, largest 22.5 ms; the same masks 43.7 ms and 12.0 ms with the top of
the heap faulted in beforehand). :class:`HeapReserve` keeps a bounded amount of free memory at
the top of the heap faulted in, and is topped up between units of work (between schemas, when a
server is idle), off the path a mask waits on -- as a JVM's ``AlwaysPreTouch`` does at start-up.

This changes the whole process's allocator, so the library never calls it on import: entry
points that own their process do (``guidewire serve``, MaskBench's workers for every engine).
"""

from __future__ import annotations

import ctypes
import platform
import resource
import time

import numpy as np

__all__ = ["keep_heap_mapped", "heap_top_bytes", "one_arena", "HeapReserve", "MMAP_THRESHOLD", "TRIM_THRESHOLD",
           "RESERVE_BYTES", "RESERVE_MB"]

_M_TRIM_THRESHOLD = -1    # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_PAGE = 4096

#: allocations below this come from the heap (glibc's default starts at 128 KiB and moves)
MMAP_THRESHOLD = 256 << 20
#: free memory at the top of the heap kept mapped, at most (glibc's default: 128 KiB and moving)
TRIM_THRESHOLD = 1 << 30
#: :class:`HeapReserve`'s default: free memory kept faulted in at the top of the heap
RESERVE_BYTES = 128 << 20
RESERVE_MB = RESERVE_BYTES >> 20


def _glibc():
    """glibc's ``CDLL``, or None where the C library is not glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(None)


def _mallopt(param: int, value: int) -> bool:
    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(param, value) == 1


def keep_heap_mapped(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Fix glibc's mmap and trim thresholds (see the module docstring) for this process.

    Returns True when both were set, False where the C library is not glibc (nothing changed).
    Raises ``ValueError`` for a threshold that is not a positive C ``int``."""
    for name, value in (("mmap_threshold", mmap_threshold), ("trim_threshold", trim_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < (1 << 31):
            raise ValueError(f"{name} must be a positive int below 2**31 bytes, got {value!r}")
    ok = _mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
    return _mallopt(_M_TRIM_THRESHOLD, trim_threshold) and ok


def one_arena() -> bool:
    """Make every thread allocate from glibc's main arena (``M_ARENA_MAX`` = 1), so that a
    :class:`HeapReserve` topped up on one thread serves the allocations of all (other threads
    otherwise get arenas of their own, made of 64 MiB heaps). Call it before threads start.
    Returns False where the C library is not glibc (nothing changed)."""
    return _mallopt(_M_ARENA_MAX, 1)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_top_bytes() -> int | None:
    """Free bytes at the top of glibc's main heap (``mallinfo2().keepcost``: the part a trim
    could give back), or None where that cannot be read (not glibc, or a glibc before 2.33)."""
    libc = _glibc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _Mallinfo2
    fn.argtypes = []
    return int(fn().keepcost)


class HeapReserve:
    """Keeps at least ``nbytes`` of free memory faulted in at the top of glibc's main heap.

    :meth:`top_up`, called between units of work, allocates a block that reaches past the top's
    faulted part, writes one byte per page of it (the kernel maps and zeroes each page now, not
    inside a later mask) and frees it again, where it joins the top of the heap. It only keeps
    what it faulted in when freed memory stays mapped: call :func:`keep_heap_mapped` first
    (``nbytes`` must stay under its mmap threshold, and the top under its trim threshold).
    The reserve is part of the process's resident memory (a bound in bytes, ``nbytes``).
    What it reads is the top's size, not its residency: a block allocated past the top and freed
    without being written counts as reserve until the next top-up finds the top short again.
    Where the C library is not glibc, :attr:`available` is False and :meth:`top_up` does nothing.
    """

    def __init__(self, nbytes: int = RESERVE_BYTES):
        """A reserve of ``nbytes`` (a positive int under :data:`MMAP_THRESHOLD`); nothing is
        faulted in until :meth:`top_up`."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 < nbytes < MMAP_THRESHOLD:
            raise ValueError(f"heap reserve must be a positive int below {MMAP_THRESHOLD} bytes, got {nbytes!r}")
        self.nbytes = nbytes
        libc = _glibc()
        self.available = libc is not None and heap_top_bytes() is not None
        self._malloc = self._free = None
        if self.available:
            self._malloc, self._free = libc.malloc, libc.free
            self._malloc.restype, self._malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
            self._free.restype, self._free.argtypes = None, [ctypes.c_void_p]
        #: top-ups that found the top short, the pages they faulted in, and their wall time (ms)
        self.stats = {"top_ups": 0, "faulted_pages": 0, "ms": 0.0}

    def top_up(self) -> int:
        """Fault in free memory at the heap's top until ``nbytes`` are there (when less is);
        returns the pages faulted in (0 when the reserve was full or is unavailable)."""
        if not self.available:
            return 0
        top = heap_top_bytes()
        if top is None or top >= self.nbytes:
            return 0
        t0, f0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        size = self.nbytes
        ptr = self._malloc(size)
        if not ptr:
            return 0
        try:
            pages = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))
            pages[::_PAGE] = 0      # a write per page: the kernel maps each one now
            del pages
        finally:
            self._free(ptr)
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        self.stats["top_ups"] += 1
        self.stats["faulted_pages"] += faulted
        self.stats["ms"] += (time.perf_counter() - t0) * 1e3
        return faulted
