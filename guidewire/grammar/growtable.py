"""Row tables that grow without copying: zeroed anonymous maps, grown in place.

A lazily built lexer and the table builder's mirror of it add rows as masks need them. Their
tables are private anonymous maps (pages are faulted in only where written); growing one
remaps it (``mremap`` through :meth:`mmap.mmap.resize`: the pages stay where they are, nothing is
copied) when no other view of it is alive, and copies it into a new map otherwise. Copying a
64k-row lexer table into a fresh map took 100+ ms inside one mask on the benchmark machine
(faulting in and zeroing every page it wrote); remapping it takes under a millisecond.
"""

from __future__ import annotations

import mmap

import numpy as np

MAP_FROM = 1 << 20   # tables of at least this many bytes are maps (smaller ones plain numpy arrays)


def zeroed_table(rows: int, width: int, dtype) -> np.ndarray:
    """A zeroed ``(rows, width)`` table whose pages are faulted in only where written, as 4 KiB
    pages: from :data:`MAP_FROM` on a private anonymous map without huge-page advice (numpy advises
    2 MiB pages for large arrays, and writing scattered rows then zeroes a huge page per row)."""
    size = rows * width * np.dtype(dtype).itemsize
    if size < MAP_FROM:
        return np.zeros((rows, width), dtype=dtype)
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)   # anonymous: zero-filled on first touch
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


def grow_rows(owner, name: str, rows: int, views: tuple[str, ...] = (), keep: np.ndarray | None = None) -> np.ndarray:
    """Give the table ``owner.<name>`` (from :func:`zeroed_table`) room for ``rows`` rows, the new
    ones zeroed, and return it (also set on ``owner``). The attributes ``views`` (views of it) are
    set to None: the caller makes them again. Its map is grown in place when nothing but
    ``owner.<name>`` and those views refers to it; otherwise, or if the kernel refuses, the rows are copied into a new table
    (only the rows ``keep``, when given: the others are never read)."""
    table = getattr(owner, name)
    have, width, dtype = table.shape[0], table.shape[1], table.dtype
    for attr in views:
        setattr(owner, attr, None)
    mm = _map_of(table)
    if mm is not None and rows * width * dtype.itemsize >= MAP_FROM:
        setattr(owner, name, None)
        del table
        try:
            mm.resize(rows * width * dtype.itemsize)
        except (BufferError, OSError):   # another view is alive, or no room to remap: copy below
            table = np.frombuffer(mm, dtype=dtype).reshape(have, width)
        else:
            grown = np.frombuffer(mm, dtype=dtype).reshape(rows, width)
            setattr(owner, name, grown)
            return grown
    grown = zeroed_table(rows, width, dtype)
    if keep is None:
        grown[:have] = table
    elif keep.size:
        grown[keep] = table[keep]
    setattr(owner, name, grown)
    return grown
