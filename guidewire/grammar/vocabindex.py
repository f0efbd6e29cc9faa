"""Tokenizer-level indexes for the token-table walk, built once per vocabulary and cached on it.

The flat byte layout of the ordinary tokens (:class:`VocabLayout`), the run ends of a set of
self-loop bytes (:class:`LoopRuns`), the tokens and bitmask rows selected by a first-byte set,
and per-token tail byte sets. They depend on the vocabulary and a byte set only, so every
grammar compiled for a vocabulary shares them; each memo is an LRU bounded in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..core.bitmask import bitmask_words
from .lexer import concat_ranges as _ranges
from .tablearrays import _flatnonzero, ids_row, rows_by_group

SENTINEL = 256          # the byte value that ends every token in the flat layout
_LAYOUT_KEY = "tokentable.layout"
_LOOPS_KEY = "tokentable.loops"
_FIRST_KEY = "tokentable.first_rows"
_TAILS_KEY = "tokentable.tail_bytes"
_ORDINARY_KEY = "tokentable.ordinary_row"
_CANDIDATES_KEY = "tokentable.first_tokens"
_WITHIN_KEY = "tokentable.tails_within"
WITHIN_CACHE_BYTES = 8 << 20       # per vocabulary, for :func:`tails_within`
CANDIDATE_CACHE_BYTES = 64 << 20   # candidate token lists memoised per vocabulary
FIRST_ROW_UNION = 16       # build a first-byte row as a union of at most this many byte rows
FIRST_ROW_CACHE_BYTES = 32 << 20   # first-byte rows memoised per vocabulary
LOOP_CACHE_BYTES = 96 << 20   # per vocabulary, for :func:`loop_runs`
_VOCAB_CACHE_LOCK = threading.Lock()   # guards the per-vocabulary LRU memos (see _byte_set_cached)


@dataclass(frozen=True)
class VocabLayout:
    """The ordinary tokens of a vocabulary in the shapes the vectorised walk needs.

    Tokens are ordered by first byte (then id): token ``i`` has id ``ids[i]`` and first
    byte ``first[i]``; the tokens starting with byte ``b`` are ``bucket[b]:bucket[b+1]``.
    ``flat`` (int64) holds every token's bytes followed by :data:`SENTINEL`; token ``i``
    starts at ``starts[i]`` and its sentinel sits at ``ends[i]``; ``second[i]`` is its
    second byte (:data:`SENTINEL` for a one-byte token). ``first_rows[b]`` is the
    bitmask row of the tokens starting with ``b``; ``max_len`` is the longest token's length.
    ``raw`` is ``flat`` as bytes (each sentinel a zero byte), for fast slicing in Python.
    ``first_of_id[t]`` is the first byte of token id ``t`` (256 for special tokens and the
    padding up to a whole bitmask word); ``lens[i]`` is token ``i``'s length in bytes.
    """

    ids: np.ndarray
    first: np.ndarray
    bucket: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    flat: np.ndarray
    first_rows: np.ndarray
    words: int
    second: np.ndarray
    max_len: int
    raw: bytes
    first_of_id: np.ndarray
    lens: np.ndarray


def vocab_layout(vocab) -> VocabLayout:
    """The :class:`VocabLayout` of ``vocab`` (built once per vocabulary and cached on it)."""
    layout = vocab._cache.get(_LAYOUT_KEY)
    if layout is None:
        layout = vocab._cache[_LAYOUT_KEY] = _build_layout(vocab)
    return layout


def _build_layout(vocab) -> VocabLayout:
    normal = np.asarray(vocab.normal_ids, dtype=np.int64)
    firsts = np.fromiter((vocab.token_bytes[i][0] for i in normal.tolist()), dtype=np.int64,
                         count=normal.size)
    order = np.argsort(firsts, kind="stable")
    ids, first = normal[order], firsts[order]
    data = [vocab.token_bytes[i] for i in ids.tolist()]
    lens = np.fromiter((len(d) for d in data), dtype=np.int64, count=len(data))
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    raw = b"\0".join(data) + b"\0"
    flat = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    flat[ends] = SENTINEL
    bucket = np.searchsorted(first, np.arange(257))
    words = bitmask_words(vocab.vocab_size)
    first_rows = rows_by_group(first, ids, 256, words)
    second = flat[starts + 1]
    for arr in (ids, first, bucket, starts, ends, flat, first_rows, second):
        arr.setflags(write=False)
    max_len = int(lens.max(initial=0))
    first_of_id = np.full(words * 32, 256, dtype=np.uint16)
    first_of_id[ids] = first
    first_of_id.setflags(write=False)
    lens.setflags(write=False)
    return VocabLayout(ids, first, bucket, starts, ends, flat, first_rows, words, second, max_len, raw,
                       first_of_id, lens)


@dataclass(frozen=True)
class LoopRuns:
    """How the tokens of a vocabulary run through a set of self-loop bytes (a lexer "hub").

    ``run_ends[p]``: the first flat position at or after ``p`` whose byte is not in the
    loop. ``exits``: the tokens (layout order) whose bytes after the first leave the loop,
    with ``exit_bucket`` their first-byte buckets; ``stay_row``: the bitmask row of the
    tokens whose bytes after the first all stay in it.
    """

    run_ends: np.ndarray
    exits: np.ndarray
    exit_bucket: np.ndarray
    stay_row: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return self.run_ends.nbytes + self.exits.nbytes + self.exit_bucket.nbytes + self.stay_row.nbytes


def _byte_set_cached(vocab, name: str, byte_set: np.ndarray, build, nbytes, budget: int):
    """Per-vocabulary LRU memo keyed by a 256-bool byte set, bounded by ``budget`` bytes.

    ``build(vocab, byte_set)`` makes a missing value (a pure function: it runs outside the
    lock, and two threads may build the same value, of which the first stored is kept);
    ``nbytes(value)`` is its size. The memo itself is guarded by one process-wide lock, as
    a vocabulary is shared by every grammar compiled for it.
    """
    key = np.packbits(byte_set).tobytes()
    with _VOCAB_CACHE_LOCK:
        cache: OrderedDict = vocab._cache.setdefault(name, OrderedDict())
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
            return value
    value = build(vocab, byte_set)
    with _VOCAB_CACHE_LOCK:
        old = cache.get(key)
        if old is not None:
            cache.move_to_end(key)
            return old
        cache[key] = value
        total = vocab._cache.get(name + ".bytes", 0) + nbytes(value)   # running total
        while len(cache) > 1 and total > budget:
            total -= nbytes(cache.popitem(last=False)[1])
        vocab._cache[name + ".bytes"] = total
    return value


def loop_runs(vocab, loop: np.ndarray) -> LoopRuns:
    """The :class:`LoopRuns` of ``vocab`` for the 256-bool byte set ``loop``.

    A tokenizer-level index (it depends on the vocabulary and a byte set only), kept in a
    small per-vocabulary LRU cache bounded by :data:`LOOP_CACHE_BYTES`.
    """
    return _byte_set_cached(vocab, _LOOPS_KEY, loop, lambda v, b: _loop_runs(vocab_layout(v), b),
                            lambda r: r.nbytes, LOOP_CACHE_BYTES)


def _loop_runs(layout: VocabLayout, loop: np.ndarray) -> LoopRuns:
    flat = layout.flat
    member = np.zeros(SENTINEL + 1, dtype=bool)
    member[:256] = loop
    pos = np.arange(flat.size, dtype=np.int32)
    pos[member.take(flat)] = flat.size
    # contiguous: ``take`` on the reversed view would copy the whole array on every call
    run_ends = np.ascontiguousarray(np.minimum.accumulate(pos[::-1])[::-1])
    leaves = run_ends.take(layout.starts + 1) != layout.ends
    exits = _flatnonzero(leaves)
    exit_bucket = np.searchsorted(exits, layout.bucket)
    stay_row = ids_row(layout.ids[~leaves], layout.words)
    for arr in (run_ends, exits, exit_bucket, stay_row):
        arr.setflags(write=False)
    return LoopRuns(run_ends, exits, exit_bucket, stay_row)


@dataclass(frozen=True)
class CandidateTokens:
    """Ordinary tokens in layout order (``tokens``), with their first bytes and the flat
    positions of their second bytes (``ptr``; a one-byte token's sentinel)."""

    tokens: np.ndarray
    first: np.ndarray
    ptr: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return self.tokens.nbytes + self.first.nbytes + self.ptr.nbytes


def first_byte_tokens(vocab, first: np.ndarray) -> CandidateTokens:
    """The ordinary tokens of ``vocab`` whose first byte is in the 256-bool set ``first``, in
    layout order, as read-only :class:`CandidateTokens`.

    Memoised per vocabulary (bounded by :data:`CANDIDATE_CACHE_BYTES`): the same byte sets
    recur across lexer states and grammars, and a table build starts from one.
    """
    return _byte_set_cached(vocab, _CANDIDATES_KEY, first, _first_byte_tokens, lambda c: c.nbytes,
                            CANDIDATE_CACHE_BYTES)


def _first_byte_tokens(vocab, first: np.ndarray) -> CandidateTokens:
    layout = vocab_layout(vocab)
    toks = _ranges(layout.bucket[:-1][first], layout.bucket[1:][first])
    out = CandidateTokens(toks, layout.first.take(toks), layout.starts.take(toks) + 1)
    for arr in (out.tokens, out.first, out.ptr):
        arr.setflags(write=False)
    return out


def tails_within(vocab, byte_set: np.ndarray) -> np.ndarray:
    """A bool per ordinary token (layout order): whether every byte after its first is in the
    256-bool set ``byte_set``. Read-only; memoised per vocabulary and byte set."""
    return _byte_set_cached(vocab, _WITHIN_KEY, byte_set, _tails_within, lambda r: r.nbytes,
                            WITHIN_CACHE_BYTES)


def _tails_within(vocab, byte_set: np.ndarray) -> np.ndarray:
    outside = (~np.packbits(byte_set, bitorder="little").view(np.uint64)).tolist()
    bad = np.zeros(vocab_layout(vocab).ids.size, dtype=np.uint64)
    for word, out in zip(tail_bytes(vocab), outside):
        if out:
            bad |= word & np.uint64(out)
    out = bad == 0
    out.setflags(write=False)
    return out


def tail_bytes(vocab) -> np.ndarray:
    """Per ordinary token (layout order): the set of its bytes after the first, as 4 rows of uint64 words.

    Built once per vocabulary (cached on it); read-only.
    """
    out = vocab._cache.get(_TAILS_KEY)
    if out is None:
        layout = vocab_layout(vocab)
        n = layout.ids.size
        lens = layout.ends - layout.starts
        owner = np.repeat(np.arange(n), np.maximum(lens - 1, 0))
        pos = _ranges(layout.starts + 1, layout.ends)
        b = layout.flat.take(pos)
        words = np.zeros(n * 4, dtype=np.uint64)
        np.bitwise_or.at(words, owner * 4 + (b >> 6), np.left_shift(np.uint64(1), (b & 63).astype(np.uint64)))
        out = vocab._cache[_TAILS_KEY] = np.ascontiguousarray(words.reshape(n, 4).T)
        out.setflags(write=False)
    return out


def first_byte_row(vocab, first: np.ndarray) -> np.ndarray:
    """Bitmask row of the ordinary tokens of ``vocab`` whose first byte is in the 256-bool set ``first``.

    Read-only and memoised per vocabulary (the same byte sets recur across lexer states
    and grammars). A set is built from its smaller side: the union of its first-byte rows,
    or all ordinary tokens minus the rows of the bytes it leaves out.
    """
    return _byte_set_cached(vocab, _FIRST_KEY, first, _first_byte_row, lambda r: r.nbytes,
                            FIRST_ROW_CACHE_BYTES)


def _first_byte_row(vocab, first: np.ndarray) -> np.ndarray:
    layout = vocab_layout(vocab)
    n = int(first.sum())
    if n <= FIRST_ROW_UNION:
        row = np.bitwise_or.reduce(layout.first_rows[first], axis=0)
    elif 256 - n <= FIRST_ROW_UNION:
        row = _ordinary_row(vocab, layout) & ~np.bitwise_or.reduce(layout.first_rows[~first], axis=0)
    else:   # look every token's first byte up in the set, then pack
        member = np.append(first, False)
        row = np.packbits(member.take(layout.first_of_id), bitorder="little").view(np.int32)
    row.setflags(write=False)
    return row


def _ordinary_row(vocab, layout: VocabLayout) -> np.ndarray:
    row = vocab._cache.get(_ORDINARY_KEY)
    if row is None:
        row = vocab._cache[_ORDINARY_KEY] = ids_row(layout.ids, layout.words)
        row.setflags(write=False)
    return row
