"""Row tables that grow without copying: zeroed anonymous maps, grown in place.

A lazily built lexer and the table builder's mirror of it add rows as masks need them. Their
tables are private anonymous maps (pages are faulted in only where written); growing one
remaps it (``mremap`` through :meth:`mmap.mmap.resize`: the pages stay where they are, nothing is
copied) when no other view of it is alive, and copies it into a new table otherwise (or where the
platform cannot remap). Copying a 64k-row lexer table into a fresh map took 100+ ms inside one
mask on the benchmark machine (faulting in and zeroing every page it wrote); remapping it takes
under a millisecond.
"""

from __future__ import annotations

import mmap
from typing import Callable

import numpy as np

MAP_FROM = 1 << 20   # tables of at least this many bytes are maps (smaller ones plain numpy arrays)
_PRIVATE = getattr(mmap, "MAP_PRIVATE", None)   # absent on Windows: plain arrays there


def zeroed_table(rows: int, width: int, dtype) -> np.ndarray:
    """A zeroed ``(rows, width)`` table whose pages are faulted in only where written, as 4 KiB
    pages: from :data:`MAP_FROM` on a private anonymous map without huge-page advice (numpy advises
    2 MiB pages for large arrays, and writing scattered rows then zeroes a huge page per row)."""
    size = rows * width * np.dtype(dtype).itemsize
    if size < MAP_FROM or _PRIVATE is None:
        return np.zeros((rows, width), dtype=dtype)
    mm = mmap.mmap(-1, size, flags=_PRIVATE)   # anonymous: zero-filled on first touch
    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        try:
            mm.madvise(mmap.MADV_NOHUGEPAGE)
        except OSError:     # pragma: no cover - a kernel without transparent huge pages
            pass
    return np.frombuffer(mm, dtype=dtype).reshape(rows, width)


def _map_of(table: np.ndarray) -> mmap.mmap | None:
    """The anonymous map under ``table`` (from :func:`zeroed_table`), if it is one."""
    base = table.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):   # np.frombuffer's hold on the map
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def grow_rows(owner, name: str, rows: int, views: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
              keep: np.ndarray | None = None) -> np.ndarray:
    """Give the table ``owner.<name>`` (from :func:`zeroed_table`) room for ``rows`` rows, the new
    ones zeroed, and return it (also set on ``owner``); each attribute of ``views`` is then set to
    its function of the table (views the owner keeps of it, dropped while the map is remapped).
    The map is grown in place when nothing else refers to it; otherwise, or where the platform
    refuses, the rows are copied into a new table (only the rows ``keep``, when given: the others
    are never read). If even that fails the owner keeps its old table and views, and the error
    propagates."""
    views = views or {}
    table = getattr(owner, name)
    have, width, dtype = table.shape[0], table.shape[1], table.dtype
    grown = None
    mm = _map_of(table)
    try:
        if mm is not None and rows * width * dtype.itemsize >= MAP_FROM:
            for attr in (name, *views):
                setattr(owner, attr, None)
            table = None    # the map's last views gone: it can be remapped
            try:
                mm.resize(rows * width * dtype.itemsize)
                grown = np.frombuffer(mm, dtype=dtype).reshape(rows, width)
            except (BufferError, OSError, SystemError, ValueError):   # another view alive, no room, no mremap
                table = np.frombuffer(mm, dtype=dtype).reshape(have, width)
        if grown is None:
            grown = zeroed_table(rows, width, dtype)
            if keep is None:
                grown[:have] = table
            elif keep.size:
                grown[keep] = table[keep]
    finally:
        final = grown if grown is not None else table
        setattr(owner, name, final)
        for attr, make in views.items():
            setattr(owner, attr, make(final))
    return grown
