"""Tokenizer-level indexes for the token-table walk, built once per vocabulary and cached on it.

The flat byte layout of the ordinary tokens (:class:`VocabLayout`), the run ends of a set of
self-loop bytes (:class:`LoopRuns`), the tokens and bitmask rows selected by a first-byte set,
and per-token tail byte sets. They depend on the vocabulary and a byte set only, so every
grammar compiled for a vocabulary shares them; each memo is an LRU bounded in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..core.bitmask import bitmask_words
from . import native
from . import tabletuning as tuning
from .tablearrays import concat_ranges as _ranges
from .tablearrays import _flatnonzero, ids_row, rows_by_group

SENTINEL = 256          # the byte value that ends every token in the flat layout
_LAYOUT_KEY = "tokentable.layout"
_LOOPS_KEY = "tokentable.loops"
_RUN_ENDS_KEY = "tokentable.run_ends"
_FIRST_KEY = "tokentable.first_rows"
_TAILS_KEY = "tokentable.tail_bytes"
_ORDINARY_KEY = "tokentable.ordinary_row"
_CANDIDATES_KEY = "tokentable.first_tokens"
_WITHIN_KEY = "tokentable.tails_within"
_UTF8_KEY = "tokentable.utf8_tokens"
_SLICE_KEY = "tokentable.utf8_slices"
# Per-vocabulary memo bounds: at least the first figure, and the second per token of the vocabulary
# (an entry holds a few arrays over the vocabulary, so a fixed bound held a fifth as many entries of
# Gemma-3's 262k tokens as of SmolLM2's 49k: a long-lived process rebuilt slices and loop runs,
# 1-4 ms each, inside the first-visit masks that needed them again; see :func:`cache_budget`)
SLICE_CACHE_BYTES = (96 << 20, 1024)        # for :func:`utf8_slice` (Gemma-3: 256 MiB)
WITHIN_CACHE_BYTES = (8 << 20, 64)          # for :func:`tails_within`
CANDIDATE_CACHE_BYTES = (64 << 20, 0)       # candidate token lists
FIRST_ROW_UNION = 16       # build a first-byte row as a union of at most this many byte rows
FIRST_ROW_CACHE_BYTES = (32 << 20, 256)     # first-byte rows
LOOP_CACHE_BYTES = (32 << 20, 384)          # for :func:`loop_runs` (Gemma-3: 96 MiB)
RUN_ENDS_CACHE_BYTES = (96 << 20, 0)        # for :func:`loop_run_ends` (the numpy walk's)
_VOCAB_CACHE_LOCK = threading.Lock()   # guards the per-vocabulary LRU memos (see _byte_set_cached)


@dataclass(frozen=True)
class VocabLayout:
    """The ordinary tokens of a vocabulary in the shapes the vectorised walk needs.

    Tokens are ordered by first byte, then second byte (a one-byte token first), then id:
    token ``i`` has id ``ids[i]`` and first byte ``first[i]``; the tokens starting with byte
    ``b`` are ``bucket[b]:bucket[b+1]``, and those starting with ``b`` then ``c`` are
    ``pair_bucket[b * 257 + c + 1]:pair_bucket[b * 257 + c + 2]`` (``c = -1``: ``b`` alone);
    ``pair_count[b, c + 1]`` is how many there are, ``bucket_size[b]`` how many start with ``b``.
    ``flat`` (int64) holds every token's bytes followed by :data:`SENTINEL`; token ``i``
    starts at ``starts[i]`` and its sentinel sits at ``ends[i]``; ``second[i]`` is its
    second byte (:data:`SENTINEL` for a one-byte token). ``first_rows[b]`` is the
    bitmask row of the tokens starting with ``b``; ``max_len`` is the longest token's length.
    ``raw`` is ``flat`` as bytes (each sentinel a zero byte), for fast slicing in Python.
    ``first_of_id[t]`` is the first byte of token id ``t`` (256 for special tokens and the
    padding up to a whole bitmask word); ``lens[i]`` is token ``i``'s length in bytes.
    ``flat16`` is ``flat`` as uint16 (a quarter of the memory traffic, for the compiled walk).
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
    flat16: np.ndarray
    pair_bucket: np.ndarray
    pair_count: np.ndarray
    bucket_size: np.ndarray


def per_vocab(vocab, key: str, build):
    """``build(vocab)``, made once per vocabulary and kept on it under ``key`` (a whole-vocabulary
    index: built with the first grammar that needs it, never evicted)."""
    out = vocab._cache.get(key)
    if out is None:
        out = vocab._cache[key] = build(vocab)
    return out


def vocab_layout(vocab) -> VocabLayout:
    """The :class:`VocabLayout` of ``vocab`` (built once per vocabulary and cached on it)."""
    return per_vocab(vocab, _LAYOUT_KEY, _build_layout)


def _build_layout(vocab) -> VocabLayout:
    normal = np.asarray(vocab.normal_ids, dtype=np.int64)
    firsts = np.fromiter((vocab.token_bytes[i][0] for i in normal.tolist()), dtype=np.int64,
                         count=normal.size)
    seconds = np.fromiter((vocab.token_bytes[i][1] if len(vocab.token_bytes[i]) > 1 else -1
                           for i in normal.tolist()), dtype=np.int64, count=normal.size)
    pair = firsts * 257 + seconds + 1
    order = np.argsort(pair, kind="stable")
    ids, first = normal[order], firsts[order]
    pair_bucket = np.searchsorted(pair[order], np.arange(256 * 257 + 1))
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
    pair_count = np.diff(pair_bucket).reshape(256, 257)
    bucket_size = np.diff(bucket)
    for arr in (ids, first, bucket, starts, ends, flat, first_rows, second, pair_bucket, pair_count, bucket_size):
        arr.setflags(write=False)
    max_len = int(lens.max(initial=0))
    first_of_id = np.full(words * 32, 256, dtype=np.uint16)
    first_of_id[ids] = first
    first_of_id.setflags(write=False)
    lens.setflags(write=False)
    flat16 = flat.astype(np.uint16)
    flat16.setflags(write=False)
    return VocabLayout(ids, first, bucket, starts, ends, flat, first_rows, words, second, max_len, raw,
                       first_of_id, lens, flat16, pair_bucket, pair_count, bucket_size)


@dataclass(frozen=True)
class LoopRuns:
    """How the tokens of a vocabulary run through a set of self-loop bytes (a lexer "hub").

    ``exits``: the tokens (layout order) whose bytes after the first leave the loop,
    with ``exit_bucket`` their first-byte buckets and ``exit_byte`` the byte that leaves it
    (the first byte after the first not in the loop); ``stay_row``: the bitmask row of the
    tokens whose bytes after the first all stay in it. Where a run of loop bytes ends inside a
    token, the walks find out themselves (the compiled walk scans the loop bytes; the numpy walk
    reads :func:`loop_run_ends`).
    """

    exits: np.ndarray
    exit_bucket: np.ndarray
    stay_row: np.ndarray
    exit_byte: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return self.exits.nbytes + self.exit_bucket.nbytes + self.stay_row.nbytes + self.exit_byte.nbytes


def cache_budget(vocab, bound: tuple[int, int]) -> int:
    """The byte bound of a per-vocabulary memo: ``bound = (floor, bytes per token)``, the larger
    of the floor and the per-token figure times the vocabulary's size."""
    floor, per_token = bound
    return max(floor, per_token * len(vocab.token_bytes))


def _byte_set_cached(vocab, name: str, byte_set: np.ndarray, build, nbytes, bound: tuple[int, int]):
    """Per-vocabulary LRU memo keyed by a 256-bool byte set, bounded by :func:`cache_budget` of ``bound``.

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
        budget = cache_budget(vocab, bound)
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
    return _byte_set_cached(vocab, _LOOPS_KEY, loop, _loop_runs, lambda r: r.nbytes, LOOP_CACHE_BYTES)


def _loop_runs(vocab, loop: np.ndarray) -> LoopRuns:
    layout = vocab_layout(vocab)
    stays = tails_within(vocab, loop)       # every byte after the first loops
    exits = _flatnonzero(~stays)
    exit_bucket = np.searchsorted(exits, layout.bucket)
    stay_row = ids_row(layout.ids[stays], layout.words)
    second = layout.starts.take(exits) + 1
    compiled = native.module()
    if compiled is not None:    # each exit scanned from its second byte (no whole-layout run ends)
        where = np.empty(exits.size, dtype=np.int64)
        compiled.first_outside(layout.flat16, second, np.ascontiguousarray(loop, dtype=np.uint8), where)
    else:
        where = loop_run_ends(vocab, loop).take(second)
    # from the raw bytes (a sentinel reads as 0 there, as 256 does cast to uint8): an eighth of the
    # memory ``flat`` (int64) spans
    exit_byte = np.frombuffer(layout.raw, dtype=np.uint8).take(where)
    for arr in (exits, exit_bucket, stay_row, exit_byte):
        arr.setflags(write=False)
    return LoopRuns(exits, exit_bucket, stay_row, exit_byte)


def loop_run_ends(vocab, loop: np.ndarray) -> np.ndarray:
    """Per flat position of ``vocab``'s layout, where the run of ``loop`` bytes starting there ends
    (:func:`loop_run_ends_numpy`): the numpy walk's hub jumps. Memoised per vocabulary and byte set
    (:data:`RUN_ENDS_CACHE_BYTES`); the compiled walk never needs it."""
    return _byte_set_cached(vocab, _RUN_ENDS_KEY, loop, lambda v, b: loop_run_ends_numpy(vocab_layout(v).flat, b),
                            lambda r: r.nbytes, RUN_ENDS_CACHE_BYTES)


def loop_run_ends_numpy(flat: np.ndarray, loop: np.ndarray) -> np.ndarray:
    """Per flat position ``p``: the first position at or after ``p`` whose byte is not in the
    256-bool set ``loop`` (``flat.size`` if none), int32 (read-only): the reference of ``first_outside``."""
    member = np.zeros(SENTINEL + 1, dtype=bool)
    member[:256] = loop
    pos = np.arange(flat.size, dtype=np.int32)
    pos[member.take(flat)] = flat.size
    # contiguous: ``take`` on the reversed view would copy the whole array on every call
    out = np.ascontiguousarray(np.minimum.accumulate(pos[::-1])[::-1])
    out.setflags(write=False)
    return out


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


def pair_tokens(vocab, firsts: np.ndarray, cells: np.ndarray) -> CandidateTokens:
    """The ordinary tokens whose first byte is ``firsts[i]`` and whose second byte is a cell of
    ``cells[i]`` (a (len(firsts), 257) bool: ``cells[i, c + 1]`` for the second byte ``c``,
    ``cells[i, 0]`` for the one-byte token ``firsts[i]``), in layout order (``firsts``
    ascending). Not memoised: the cells of a lexer state are its own."""
    layout = vocab_layout(vocab)
    i, c = np.nonzero(cells)
    at = firsts.take(i) * 257 + c
    toks = _ranges(layout.pair_bucket.take(at), layout.pair_bucket.take(at + 1))
    return CandidateTokens(toks, layout.first.take(toks), layout.starts.take(toks) + 1)


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
        out = vocab._cache[_TAILS_KEY] = _byte_words(vocab_layout(vocab), True)   # first bytes add nothing
    return out


def _byte_words(layout: VocabLayout, skip_first: bool) -> np.ndarray:
    """Per token (layout order), the set of its bytes (after the first with ``skip_first``; never
    its sentinel), as 4 rows of uint64 words. In C one pass (Gemma-3: ~70 ms in numpy, inside
    the first mask that needed it); else :func:`byte_words_numpy`."""
    compiled = native.module()
    if compiled is None:
        skip = np.zeros(layout.flat.size, dtype=bool)
        if skip_first:
            skip[layout.starts] = True
        skip[layout.ends] = True        # a sentinel reads as byte 0 in ``raw``
        return byte_words_numpy(layout, skip, 4)
    out = np.zeros((4, layout.ids.size), dtype=np.uint64)
    compiled.byte_words(layout.raw, layout.starts, layout.ends, skip_first, out)
    out.setflags(write=False)
    return out


def byte_words_numpy(layout: VocabLayout, skip: np.ndarray, n_words: int) -> np.ndarray:
    """Per token (layout order), the set of its bytes below ``64 * n_words`` at flat positions not
    in ``skip``, as ``n_words`` rows of uint64 words (an OR over each token's span, ``reduceat``):
    the reference of ``byte_words``."""
    u8 = np.frombuffer(layout.raw, dtype=np.uint8)
    out = np.zeros((n_words, layout.ids.size), dtype=np.uint64)
    if layout.ids.size:
        bits = np.left_shift(np.uint64(1), (u8 & 63).astype(np.uint64))
        bits[skip] = 0
        word = u8 >> 6
        for w in range(n_words):
            out[w] = np.bitwise_or.reduceat(np.where(word == w, bits, np.uint64(0)), layout.starts)
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
        row = _union(layout, first)
    elif 256 - n <= FIRST_ROW_UNION:
        row = _ordinary_row(vocab, layout) & ~_union(layout, ~first)
    else:   # look every token's first byte up in the set, then pack
        member = np.append(first, False)
        compiled = native.module()
        if compiled is not None:    # in C: no index array converted, no bool array packed
            row = np.empty(layout.words, dtype=np.int32)
            compiled.byte_row(member.view(np.uint8), layout.first_of_id, row)
        else:
            row = np.packbits(member.take(layout.first_of_id), bitorder="little").view(np.int32)
    row.setflags(write=False)
    return row


def _union(layout: VocabLayout, byte_set: np.ndarray) -> np.ndarray:
    """OR of the first-byte rows of the bytes in ``byte_set`` (in C: no copy of the chosen rows)."""
    compiled = native.module()
    if compiled is None:
        return np.bitwise_or.reduce(layout.first_rows[byte_set], axis=0)
    row = np.empty(layout.words, dtype=np.int32)
    compiled.or_rows(row, layout.first_rows, _flatnonzero(byte_set))
    return row


def _ordinary_row(vocab, layout: VocabLayout) -> np.ndarray:
    row = vocab._cache.get(_ORDINARY_KEY)
    if row is None:
        row = vocab._cache[_ORDINARY_KEY] = ids_row(layout.ids, layout.words)
        row.setflags(write=False)
    return row


# -- UTF-8 slices ---------------------------------------------------------------------------------
# Well-formed UTF-8 (RFC 3629, as Python's strict decoder reads it): for each state of the
# acceptor (0: on a character boundary), the ``(lo, hi, next state)`` byte ranges it takes.
# States: 1/2/3 continuation bytes to go; 4: after E0; 5: after ED; 6: after F0; 7: after F4.
UTF8_RANGES = (
    ((0xC2, 0xDF, 1), (0xE0, 0xE0, 4), (0xE1, 0xEC, 2), (0xED, 0xED, 5), (0xEE, 0xEF, 2),
     (0xF0, 0xF0, 6), (0xF1, 0xF3, 3), (0xF4, 0xF4, 7)),
    ((0x80, 0xBF, 0),),
    ((0x80, 0xBF, 1),),
    ((0x80, 0xBF, 2),),
    ((0xA0, 0xBF, 1),),
    ((0x80, 0x9F, 1),),
    ((0x90, 0xBF, 2),),
    ((0x80, 0x8F, 2),),
)
UTF8_LEAD_NEXT = np.zeros(256, dtype=np.int64)    # the acceptor's state after each lead byte
for _lo, _hi, _next in UTF8_RANGES[0]:
    UTF8_LEAD_NEXT[_lo:_hi + 1] = _next
UTF8_LEAD_NEXT.setflags(write=False)


@dataclass(frozen=True)
class Utf8Tokens:
    """Per ordinary token (layout order): whether its bytes are well-formed UTF-8 (whole
    characters only: it starts and ends on a character boundary), and the set of ASCII bytes
    it holds as two rows of uint64 words (``ascii_bits[w]`` bit ``k``: byte ``64 * w + k``), and
    its number of characters ``chars`` (bytes that are not continuation bytes), and the set of
    its bytes from 0xC0 up (the lead bytes) as one uint64 word each (``lead_bits``, bit ``b - 0xC0``),
    and whether it holds any of them (``non_ascii``, bool; ``non_ascii_by_first[b]`` counts those
    that start with byte ``b``)."""

    whole: np.ndarray
    ascii_bits: np.ndarray
    chars: np.ndarray
    lead_bits: np.ndarray
    non_ascii: np.ndarray
    non_ascii_by_first: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return (self.whole.nbytes + self.ascii_bits.nbytes + self.chars.nbytes + self.lead_bits.nbytes
                + self.non_ascii.nbytes + self.non_ascii_by_first.nbytes)


def utf8_tokens(vocab) -> Utf8Tokens:
    """The :class:`Utf8Tokens` of ``vocab`` (built once per vocabulary and cached on it)."""
    out = vocab._cache.get(_UTF8_KEY)
    if out is None:
        out = vocab._cache[_UTF8_KEY] = _utf8_tokens(vocab)
    return out


def _whole_utf8(layout: VocabLayout) -> np.ndarray:
    """Per token (layout order): whether its bytes are well-formed UTF-8, vectorised over the layout.

    Each lead byte must be followed by as many continuation bytes as it announces (a sentinel
    is not one, so a character cannot run past its token), with the narrower second-byte ranges
    after E0, ED, F0 and F4; then the continuation bytes so claimed are distinct, and the token
    is whole iff it holds no other continuation byte and no byte that is never valid.
    """
    u8 = np.frombuffer(layout.raw, dtype=np.uint8)      # sentinels read as 0 here
    need = np.zeros(256, dtype=np.int32)                # continuation bytes a lead announces
    need[0xC2:0xE0], need[0xE0:0xF0], need[0xF0:0xF5] = 1, 2, 3
    balance = need.take(u8)
    balance[(u8 >= 0x80) & (u8 <= 0xBF)] -= 1
    lo = np.full(256, 0x80, dtype=np.uint8)             # the second byte's range after a lead
    hi = np.full(256, 0xBF, dtype=np.uint8)
    lo[0xE0], hi[0xED], lo[0xF0], hi[0xF4] = 0xA0, 0x9F, 0x90, 0x8F
    leads = (balance > 0).nonzero()[0]
    lead = u8.take(leads)
    k = need.take(lead)
    second = u8.take(leads + 1, mode="clip")
    wrong = [leads[(second < lo.take(lead)) | (second > hi.take(lead))]]
    for j in (2, 3):
        sel = leads[k >= j]
        after = u8.take(sel + j, mode="clip")           # past the end: the last sentinel
        wrong.append(sel[(after < 0x80) | (after > 0xBF)])
    wrong.append(((u8 == 0xC0) | (u8 == 0xC1) | (u8 >= 0xF5)).nonzero()[0])
    whole = np.add.reduceat(balance, layout.starts) == 0 if layout.ids.size else np.zeros(0, dtype=bool)
    bad = np.concatenate(wrong)
    whole[np.searchsorted(layout.starts, bad, side="right") - 1] = False
    return whole


def _utf8_tokens(vocab) -> Utf8Tokens:
    layout = vocab_layout(vocab)
    whole = _whole_utf8(layout)
    words = _byte_words(layout, False)
    ascii_bits, lead_bits = np.ascontiguousarray(words[:2]), words[3]
    u8 = np.frombuffer(layout.raw, dtype=np.uint8)
    starting = ((u8 < 0x80) | (u8 > 0xBF)).astype(np.int32)
    starting[layout.ends] = 0
    chars = np.add.reduceat(starting, layout.starts) if layout.ids.size else np.zeros(0, dtype=np.int32)
    non_ascii = lead_bits != 0
    non_ascii_by_first = np.bincount(layout.first, weights=non_ascii, minlength=256).astype(np.int64)
    for arr in (whole, chars, ascii_bits, lead_bits, non_ascii, non_ascii_by_first):
        arr.setflags(write=False)
    return Utf8Tokens(whole, ascii_bits, chars, lead_bits, non_ascii, non_ascii_by_first)


@dataclass(frozen=True)
class Utf8Slice:
    """The tokens made of whole UTF-8 characters whose ASCII bytes and lead bytes all lie in a set: ``member``
    (a bool per ordinary token, layout order), ``row`` (their bitmask row), ``chars`` (each
    token's number of characters, layout order) and ``by_chars[k - 1]``, the row of the members
    of exactly ``k`` characters, for ``k`` up to ``n_rows`` (the most characters of a member of at
    most :data:`~.tabletuning.SLICE_MAX_CHARS`; longer members are in ``row`` only).

    Per first byte, so that a state whose candidates are whole first-byte buckets never touches
    the vocabulary: ``outside`` lists the tokens that are not members (layout indexes, ascending),
    ``by_first[b, k]`` counts the members starting with byte ``b`` of fewer than ``k`` characters
    (``k`` up to ``SLICE_MAX_CHARS + 2``, the last column counting them all) and ``most[b]`` is
    the most characters among them (0 if none).

    ``by_chars`` (read by counter chains only) and ``outside`` (by the from-buckets path only) are
    made on first use (1.5 MiB and 0.6 ms of a 262k vocabulary's slice that a string body never
    reads); :attr:`nbytes` counts them from the start, so the memo's bound holds either way."""

    member: np.ndarray
    row: np.ndarray
    chars: np.ndarray
    by_first: np.ndarray
    most: np.ndarray
    n_rows: int
    ids: np.ndarray         # the layout's token ids (shared by every slice of the vocabulary)
    _made: dict = field(default_factory=dict, compare=False, repr=False)     # by_chars, outside once made

    @property
    def by_chars(self) -> np.ndarray:
        """``(n_rows, words)`` int32: row ``k - 1`` holds the members of exactly ``k`` characters."""
        got = self._made.get("by_chars")
        if got is None:
            got = self._made["by_chars"] = _rows_by_chars(self.member, self.chars, self.ids, self.n_rows,
                                                          self.row.size)
        return got

    @property
    def outside(self) -> np.ndarray:
        """The layout indexes of the ordinary tokens that are not members, ascending (int64)."""
        got = self._made.get("outside")
        if got is None:
            got = _flatnonzero(~self.member)
            got.setflags(write=False)
            self._made["outside"] = got
        return got

    @property
    def nbytes(self) -> int:
        """Memory held, ``by_chars`` and ``outside`` included whether made yet or not (``chars`` and
        ``ids`` are shared by every slice of the vocabulary)."""
        n_out = self.member.size - self.count
        return (self.member.nbytes + self.row.nbytes + self.n_rows * self.row.nbytes + n_out * 8
                + self.by_first.nbytes + self.most.nbytes)

    @property
    def count(self) -> int:
        """The number of members."""
        return int(self.by_first[:, -1].sum())


def utf8_slice(vocab, ascii_set: np.ndarray) -> Utf8Slice:
    """The :class:`Utf8Slice` of ``vocab`` for the 256-bool byte set ``ascii_set``: its ASCII bytes
    and its lead bytes (from 0xC0 up) are read, continuation bytes are always allowed. Memoised per vocabulary (bounded by :data:`SLICE_CACHE_BYTES`)."""
    return _byte_set_cached(vocab, _SLICE_KEY, ascii_set, _utf8_slice, lambda s: s.nbytes, SLICE_CACHE_BYTES)


def _utf8_slice(vocab, ascii_set: np.ndarray) -> Utf8Slice:
    layout = vocab_layout(vocab)
    index = utf8_tokens(vocab)
    out0, out1 = (~np.packbits(ascii_set[:128], bitorder="little").view(np.uint64)).tolist()
    no_lead = int(~np.packbits(ascii_set[192:], bitorder="little").view(np.uint64)[0])
    width = tuning.SLICE_MAX_CHARS + 3
    compiled = native.module()
    if compiled is not None:    # one pass in C (members, counts, row); the numpy lines below are the reference
        member = np.empty(layout.ids.size, dtype=bool)
        hist = np.zeros(256 * width, dtype=np.int64)
        most = np.zeros(256, dtype=np.int64)
        row = np.zeros(layout.words, dtype=np.int32)
        _count, n_rows = compiled.slice_members(index.whole, index.ascii_bits, index.lead_bits, index.chars,
                                                layout.first, out0, out1, no_lead, tuning.SLICE_MAX_CHARS, width,
                                                member, hist, most, layout.ids, row, layout.words)
        by_first = np.cumsum(hist.reshape(256, width), axis=1)
    else:
        member = index.whole.copy()
        for w, out in enumerate((out0, out1)):
            if out:
                member &= (index.ascii_bits[w] & np.uint64(out)) == 0
        if no_lead:
            member &= (index.lead_bits & np.uint64(no_lead)) == 0
        row = ids_row(layout.ids[member], layout.words)
        at = member.nonzero()[0]
        k = index.chars.take(at)
        short = k <= tuning.SLICE_MAX_CHARS
        n_rows = int(k.max(where=short, initial=0))
        first = layout.first.take(at)
        hist = np.bincount(first * width + np.minimum(k, width - 2) + 1, minlength=256 * width).reshape(256, width)
        by_first = np.cumsum(hist, axis=1)
        most = np.zeros(256, dtype=np.int64)
        np.maximum.at(most, first, k)
    for arr in (member, row, by_first, most):
        arr.setflags(write=False)
    return Utf8Slice(member, row, index.chars, by_first, most, int(n_rows), layout.ids)


def _rows_by_chars(member: np.ndarray, chars: np.ndarray, ids: np.ndarray, n_rows: int, words: int) -> np.ndarray:
    """``(n_rows, words)`` int32 rows: the members (layout order) of exactly ``k`` characters in row ``k - 1``."""
    compiled = native.module()
    if compiled is not None:
        by_chars = np.zeros((n_rows, words), dtype=np.int32)
        compiled.slice_rows(member, chars, ids, n_rows, np.zeros(words, dtype=np.int32), by_chars, words)
    else:
        at = member.nonzero()[0]
        k = chars.take(at)
        short = k <= n_rows
        by_chars = _sum_rows(k[short] - 1, ids.take(at[short]), n_rows, words)
    by_chars.setflags(write=False)
    return by_chars


def _sum_rows(gid: np.ndarray, toks: np.ndarray, n_rows: int, words: int) -> np.ndarray:
    """``(n_rows, words)`` int32 rows, token ``toks[i]`` in row ``gid[i]`` (tokens distinct): the bits
    of distinct tokens are distinct powers of two, so their float64 sum is exact and is their OR.
    Scattered in C when it is built (:func:`rows_by_group`)."""
    if native.module() is not None:
        return rows_by_group(gid, toks, n_rows, words)
    toks = toks.astype(np.int64, copy=False)
    sums = np.bincount(gid.astype(np.int64) * words + (toks >> 5), weights=np.left_shift(1, toks & 31),
                       minlength=n_rows * words)
    return sums.astype(np.uint32).view(np.int32).reshape(n_rows, words)
