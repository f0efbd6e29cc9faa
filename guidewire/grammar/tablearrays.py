"""Small numpy helpers of the token-table build: bitmask rows from token ids, distinct values, selections."""

from __future__ import annotations

import numpy as np

from . import native
from . import tabletuning as tuning

FEW_RUNS = 24      # concat_ranges fills up to this many runs of merged ranges with arange


def rows_by_group(group: np.ndarray, ids: np.ndarray, n_groups: int, words: int) -> np.ndarray:
    """``(n_groups, words)`` int32 bitmask rows: token ``ids[i]`` set in row ``group[i]`` (a
    negative group: no row). In C (``scatter``) when it is built; :func:`_rows_by_group_numpy` is
    its reference."""
    compiled = native.module()
    if compiled is None:
        return _rows_by_group_numpy(group, ids, n_groups, words)
    rows = np.zeros((n_groups, words), dtype=np.int32)
    if ids.size:
        compiled.scatter(rows, np.ascontiguousarray(group, dtype=np.int64),
                         np.ascontiguousarray(ids, dtype=np.int64), words)
    return rows


def _rows_by_group_numpy(group: np.ndarray, ids: np.ndarray, n_groups: int, words: int) -> np.ndarray:
    rows = np.zeros(n_groups * words, dtype=np.uint32)
    if ids.size:
        group = group.astype(np.int64, copy=False)
        ids = ids.astype(np.int64, copy=False)
        if group.size and group.min() < 0:
            mine = group >= 0
            group, ids = group[mine], ids[mine]
        np.bitwise_or.at(rows, group * words + (ids >> 5),
                         np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    return rows.reshape(n_groups, words).view(np.int32)


def admitted_numbers(admitted: list[bool]) -> np.ndarray:
    """Per group, its index among the admitted groups, or -1 if refused; one more entry (-1) at the
    end, so that the group id -1 (a dead token) maps to -1 too."""
    keep = np.fromiter(admitted, dtype=bool, count=len(admitted))
    out = np.full(keep.size + 1, -1, dtype=np.int64)
    idx = _flatnonzero(keep)
    out[idx] = np.arange(idx.size)
    return out


def ids_row(ids: np.ndarray, words: int) -> np.ndarray:
    """One bitmask row with ``ids`` set (in C when it is built, else a dense scatter and pack)."""
    if native.module() is not None:
        return rows_by_group(np.zeros(ids.size, dtype=np.int64), ids, 1, words)[0]
    buf = np.zeros(words * 32, dtype=bool)
    buf[ids] = True
    return np.packbits(buf, bitorder="little").view(np.int32)


def _row_of(ids: np.ndarray, words: int) -> np.ndarray:
    """One bitmask row with ``ids`` set (C; else scatter-and-pack for many ids, ``bitwise_or.at`` for few)."""
    if native.module() is None and ids.size < words // 4:
        return _rows_by_group_numpy(np.zeros(ids.size, dtype=np.int64), ids, 1, words)[0]
    return ids_row(ids, words)


def _add_row(rows: dict, key, row: np.ndarray) -> None:
    """``rows[key] |= row``, starting from ``row`` (never modifying a row passed in earlier)."""
    rows[key] = rows[key] | row if key in rows else row


def _distinct(values: np.ndarray) -> list[int]:
    """Sorted distinct values of an array of non-negative ints (states, hub slots).

    Small arrays go through a Python set; larger ones are checked for a single value,
    then counted (no sort; ``np.unique`` would also import ``numpy.ma`` lazily).
    """
    if values.size <= tuning.FEW_KEYS:
        return sorted(set(values.tolist()))
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return [lo]
    if hi - lo <= tuning.DENSE_KEY_RATIO * values.size + tuning.DENSE_KEY_SPACE:
        return (_flatnonzero(np.bincount(values - lo)) + lo).tolist()
    return sorted(set(values.tolist()))


def grow_row_form_numpy(masks: np.ndarray, slot: np.ndarray, sel: np.ndarray, small_below: int,
                        n_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference of the compiled ``row_form_grow`` (see ``CompiledGrammar._row_form``): the
    groups of ``sel`` with ``slot`` -2, ascending and distinct, become dense (slot -1) with at
    least ``small_below`` tokens, else sparse (slots ``n_slots ..`` in that order). Returns the
    sparse groups' token counts (int64) and their token ids back to back (int32); ``slot`` is
    written in place."""
    new = np.array(sorted(set(sel[slot[sel] == -2].tolist())), dtype=np.int64)
    bits = np.unpackbits(masks[new].view(np.uint8), axis=1, bitorder="little") if new.size else None
    counts = bits.sum(axis=1).astype(np.int64) if new.size else np.zeros(0, dtype=np.int64)
    small = counts < small_below
    slot[new[~small]] = -1
    sparse = new[small]
    slot[sparse] = np.arange(n_slots, n_slots + sparse.size)
    ids = [np.flatnonzero(bits[k]) for k in np.flatnonzero(small)] if new.size else []
    return counts[small], (np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)).astype(np.int32)


def _flatnonzero(a: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` without its Python wrappers (a table build makes dozens of calls)."""
    return a.nonzero()[0] if a.ndim == 1 else np.flatnonzero(a)


def _kept(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``a[keep]`` for each array (one ``flatnonzero``, then ``take``: boolean indexing of
    large arrays with an irregular mask is several times slower)."""
    idx = _flatnonzero(keep)
    return tuple(a.take(idx) for a in arrays)


def concat_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[k], hi[k])`` over all k (vectorised).

    Ranges that continue one another (``lo[k + 1] == hi[k]``, such as the token buckets
    of consecutive first bytes) are merged first; a few merged runs are filled with
    ``arange``, many with one cumulative sum.
    """
    lens = hi - lo
    keep = lens > 0
    if not keep.all():
        lo, hi, lens = lo[keep], hi[keep], lens[keep]
    if lo.size == 0:
        return np.zeros(0, dtype=np.int64)
    heads = np.flatnonzero(lo[1:] != hi[:-1]) + 1
    if heads.size < FEW_RUNS:
        firsts = [int(lo[0])] + lo.take(heads).tolist()
        lasts = hi.take(heads - 1).tolist() + [int(hi[-1])]
        if len(firsts) == 1:
            return np.arange(firsts[0], lasts[0], dtype=np.int64)
        return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in zip(firsts, lasts)])
    total = int(lens.sum())
    step = np.ones(total, dtype=np.int64)
    starts = np.cumsum(lens) - lens
    step[0] = lo[0]
    step[starts[1:]] = lo[1:] - (lo[:-1] + lens[:-1]) + 1
    return np.cumsum(step)
