"""Per-lexer-state token tables: the vocabulary walked through the lexer DFA, vectorised.

Lexing restarts at ``START`` after every lexeme (maximal munch without backup), so a
token whose *first* byte kills lexer state ``q`` reads as ``[emit[q]] + walk(START, token)``.
A :class:`TokenTable` therefore stores such tokens as one *restart* row: at mask time
they are allowed iff they are allowed at ``(scan(s, emit[q]), START)``, whose mask is
itself memoised. Only the tokens whose first byte keeps ``q`` alive (for most states a
few hundred) are walked, all at once with numpy over a flat byte layout of the
vocabulary, compacting the set of still-running tokens after every step and jumping
over runs of self-loop bytes (string bodies, identifiers, whitespace) with precomputed
run ends. Each walked token ends up in a *group* keyed by the lexemes it completes and
the set of terminals still alive in its final, unfinished lexeme; the parser decides per
group, never per token, and a mask is a ``bitwise_or`` over the chosen groups' rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..core.bitmask import bitmask_words
from .lexer import DEAD, START, ByteDFA
from .lexer import concat_ranges as _ranges

MAX_TRACKED_BOUNDARIES = 2
SENTINEL = 256          # the byte value that ends every token in the flat layout
_ROW = SENTINEL + 1     # width of the extended transition table
MIN_LOOP_BYTES = 3      # a state with this many self-loop bytes gets precomputed run ends
MIN_REUSED_BYTES = 2    # reuse a hub's table for at least this many first bytes
MIN_INHERITED_TOKENS = 32  # inherit at least this many tokens from a hub or from START
MEET_STEPS = 6             # bytes a walk is compared with the walk from START (see _start_meets)
CHAIN_MIN_TOKENS = 256  # try a counter chain (see _counter_chain) for at least this many candidates
SMALL_WALK = 32         # below this many running tokens the walk finishes in pure Python
SMALL_WALK_TOKENS = 256  # ... and so it does for up to this many tokens with at most
SMALL_WALK_BYTES = 512   # ... this many bytes left in all (a numpy step costs about as much as
                         # walking 100 short tokens in Python, and a walk takes one per byte)
SMALL_GROUP = 96        # up to this many walked tokens are grouped in pure Python
SMALL_TABLE = 96        # ... and walked and grouped in one pass, when their walk is small too
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
DENSE_KEY_SPACE = 1 << 12   # group keys below this are made dense with a lookup table, not a sort
DENSE_KEY_RATIO = 4         # ... and so are keys whose space is at most this many times their number
FEW_KEYS = 32               # up to this many keys are made dense in plain Python
_VOCAB_CACHE_LOCK = threading.Lock()   # guards the per-vocabulary LRU memos (see _byte_set_cached)
SUM_ROWS_TOKENS = 64        # group rows are summed (bincount) from this many tokens per group on


@dataclass(frozen=True)
class TokenTable:
    """Token groups for one lexer state.

    ``groups[g] = (lexemes, alive_bits)``; ``masks[g]`` is the int32 bitmask row of its
    tokens. Tokens in ``restart_mask`` (an int32 row, or None) are those whose first byte
    ends the lexeme of ``state``: each reads as ``restart_lexeme`` followed by its own walk
    from ``START``. ``restart_lexeme`` is -1 when there are no such tokens (the state is
    not accepting, or it is ``START``). ``inherit`` holds ``(hub, row)`` pairs: the tokens
    in ``row`` read from ``state`` exactly as from lexer state ``hub`` (their walks meet
    in ``hub`` before any lexeme ends), so they are allowed iff ``hub``'s mask allows them
    under the same parser state; ``hub`` is ``START`` or a self-loop hub, and the tables
    of hubs and of ``START`` never inherit (no cycles). Every ordinary token that can be
    lexed from ``state`` is in exactly one group, one inherited row or the restart row (which may also hold tokens that then fail from
    ``START``: the START mask leaves those out).
    """

    state: int
    groups: tuple[tuple[tuple[int, ...], int], ...]
    masks: np.ndarray
    restart_lexeme: int = -1
    restart_mask: np.ndarray | None = None
    inherit: tuple[tuple[int, np.ndarray], ...] = ()


def walk_token(dfa: ByteDFA, q: int, data: bytes) -> tuple[list[int], int]:
    """Run ``data`` from lexer state ``q``: (completed lexemes' terminal-set ids, final state).

    The final state is :data:`DEAD` when the bytes cannot be lexed at all.
    """
    lexemes: list[int] = []
    for b in data:
        nq = dfa.step(q, b)
        if nq == DEAD:
            e = dfa.emit[q] if q != DEAD else -1
            if e < 0:
                return lexemes, DEAD
            lexemes.append(e)
            nq = dfa.step(START, b)
            if nq == DEAD:
                return lexemes, DEAD
        q = nq
    return lexemes, q


# -- per-tokenizer layout (cached on the Vocab) --------------------------------------------------
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


def rows_by_group(group: np.ndarray, ids: np.ndarray, n_groups: int, words: int) -> np.ndarray:
    """``(n_groups, words)`` int32 bitmask rows: token ``ids[i]`` set in row ``group[i]``."""
    rows = np.zeros(n_groups * words, dtype=np.uint32)
    if ids.size:
        ids = ids.astype(np.int64, copy=False)
        np.bitwise_or.at(rows, group.astype(np.int64, copy=False) * words + (ids >> 5),
                         np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    return rows.reshape(n_groups, words).view(np.int32)


def ids_row(ids: np.ndarray, words: int) -> np.ndarray:
    """One bitmask row with ``ids`` set (dense scatter and pack: cheap for many ids)."""
    buf = np.zeros(words * 32, dtype=bool)
    buf[ids] = True
    return np.packbits(buf, bitorder="little").view(np.int32)


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


# -- per-grammar builder ---------------------------------------------------------------------------
class TableBuilder:
    """Builds :class:`TokenTable` s for one lexer DFA and vocabulary (caches per-DFA arrays).

    Works on a partially determinised DFA too (rows are computed as the walk needs them);
    a fully built DFA just never needs to.
    """

    def __init__(self, dfa: ByteDFA, vocab, lookup=None):
        self.dfa = dfa
        self.vocab = vocab
        self.lookup = lookup        # optional q -> TokenTable (a cache) for hub reuse
        self.layout = vocab_layout(vocab)
        self._synced = (-1, -1)
        self._hub_index: dict[bytes, int] = {}      # self-loop byte set -> hub slot
        self._hub_loops: list[np.ndarray] = []
        self._hubs: list[LoopRuns | None] = []
        self._alive_index: dict[int, int] = {}
        self._alive_values: list[int] = []
        # per-state arrays with spare capacity (see _sync): extended transitions (flat),
        # emitted terminal set, alive-set id, hub slot, and whether the row was copied
        self._cap = self._n = 0
        self._ext = np.zeros((0, _ROW), dtype=np.int64)
        self.trans = self._ext.reshape(-1)
        self.emit = self.alive_id = self.hub = np.zeros(0, dtype=np.int64)
        self._hub_next = np.zeros(0, dtype=np.int8)    # per state: a byte enters a hub (-1: unknown)
        self._copied = np.zeros(0, dtype=bool)
        self._busy: set[int] = set()   # hubs whose tables are being built (no reuse cycles)
        self._rows: list[list[int]] | None = None      # every row as a list, once all are built
        self._lazy_rows: _RowLists | None = None        # else the rows converted so far
        self.fuel = None   # a core.limits.Fuel charged per token walked (set by the compiled grammar)

    # cached per-state arrays, refreshed incrementally when the DFA grows
    def _sync(self) -> None:
        """Bring the per-state arrays up to date with the (possibly lazily growing) DFA.

        Work is proportional to the states and rows added since the last call: the
        extended transition table keeps spare capacity, and only rows that became
        complete are copied and checked for self-loops. Once every row is built the lexer
        is complete (only building a row adds states), and this returns at once.
        """
        if self._rows is not None:
            return
        dfa = self.dfa
        n = dfa.n_states
        done = dfa.row_done[:n]
        key = (n, int(np.count_nonzero(done)))
        if key == self._synced:
            return
        if n > self._cap:
            self._grow(max(n, 2 * self._cap, 64))
        old = self._n
        if n > old:
            self.emit[old:n] = dfa.emit[old:n]
            alive_id = self.alive_id
            for st in range(old, n):
                bits = dfa.alive[st]
                if bits:
                    i = self._alive_index.get(bits)
                    if i is None:
                        i = self._alive_index[bits] = len(self._alive_values)
                        self._alive_values.append(bits)
                    alive_id[st] = i
            self._n = n
        fresh = _flatnonzero(done & ~self._copied[:n])
        if fresh.size:
            rows = dfa.trans[fresh]
            self._ext[fresh, :256] = rows
            self._copied[fresh] = True
            self._add_hubs(fresh, rows)
        # plain lists for the byte-by-byte walks (fast indexing), once every row is built;
        # then the hubs are final too: fetch their loop runs now, not in some later step
        self._rows = dfa.trans[:n].tolist() if key[1] == n else None
        if self._rows is not None:
            for slot in range(len(self._hubs)):
                self._hub(slot)
        self._synced = key

    def _grow(self, cap: int) -> None:
        """Reallocate the per-state arrays with room for ``cap`` states."""
        old = self._cap
        ext = np.zeros((cap, _ROW), dtype=np.int64)     # rows not built yet read as DEAD
        ext[:old] = self._ext[:old]
        ext[:, SENTINEL] = -1 - np.arange(cap)          # the end of a token: "finished in state s"
        self._ext = ext
        self.trans = ext.reshape(-1)
        for name, fill, dtype in (("emit", -1, np.int64), ("alive_id", -1, np.int64),
                                  ("hub", -1, np.int64), ("_copied", False, bool),
                                  ("_hub_next", -1, np.int8)):
            arr = np.full(cap, fill, dtype=dtype)
            arr[:old] = getattr(self, name)[:old]
            setattr(self, name, arr)
        self._cap = cap

    def _add_hubs(self, states: np.ndarray, rows: np.ndarray) -> None:
        """Record which of ``states`` (rows just completed) are self-loop hubs; hub data is fetched lazily."""
        loops = rows == states[:, None]
        for k in _flatnonzero(loops.sum(axis=1) >= MIN_LOOP_BYTES).tolist():
            st = int(states[k])
            if st == DEAD:
                continue
            key = np.packbits(loops[k]).tobytes()
            slot = self._hub_index.get(key)
            if slot is None:
                slot = self._hub_index[key] = len(self._hubs)
                self._hub_loops.append(loops[k])
                self._hubs.append(None)
            self.hub[st] = slot

    def hub_states(self) -> np.ndarray:
        """A bool per lexer state built so far: whether it is a self-loop hub."""
        self._sync()
        return self.hub[:self.dfa.n_states] >= 0

    def first_byte_row(self, first: np.ndarray) -> np.ndarray:
        """Bitmask row of the ordinary tokens whose first byte is in the 256-bool set ``first``.

        Read-only; see :func:`first_byte_row`.
        """
        return first_byte_row(self.vocab, first)

    def _hub(self, slot: int) -> LoopRuns:
        """The loop runs of hub ``slot`` (fetched on first use)."""
        h = self._hubs[slot]
        if h is None:
            h = self._hubs[slot] = loop_runs(self.vocab, self._hub_loops[slot])
        return h

    # -- the table -----------------------------------------------------------------------------
    def table(self, q: int) -> TokenTable:
        """The token table of lexer state ``q``."""
        self._busy.add(q)
        try:
            return self._table(q)
        finally:
            self._busy.discard(q)

    def _table(self, q: int) -> TokenTable:
        dfa, layout = self.dfa, self.layout
        if self._rows is None:      # a lexer built lazily: the rows this table reads first
            dfa.ensure_rows(np.array([q, START], dtype=np.int32))
            # and the rows one byte on, so that it knows which of them are hubs
            dfa.ensure_rows(np.concatenate([dfa.trans[q], dfa.trans[START]]))
            self._sync()
        row = dfa.trans[q].astype(np.int64)
        live_first = row != DEAD
        restart_lexeme, restart_mask = -1, None
        e = int(self.emit[q])
        if q != START and e >= 0:
            # a token whose first byte kills q (and can start a lexeme) restarts at START
            kill_first = ~live_first & (dfa.trans[START] != DEAD)
            if kill_first.any():
                restart_lexeme = e
                restart_mask = self.first_byte_row(kill_first)  # read-only
        # hubs and START hold their tokens themselves: a hub's table is a base for others,
        # and START must not inherit (a hub's restart row leads back to START)
        base = q == START or bool(self.hub[q] >= 0)
        reused = self._reusable_hubs(q, row)
        if reused:
            row = row.copy()
            for _h, first in reused:
                row[first] = DEAD   # these first bytes are answered by the hub's own table
        cand, first, ptr, stays = self._candidates(row)
        if self.fuel is not None:
            self.fuel.spend(1 + cand.size)
        state = row.take(first)
        inherit: dict[int, np.ndarray] = {}
        chained = None
        if not base and self.lookup is not None:
            cand, state, ptr, inherit = self._second_byte_hubs(row, cand, state, ptr)
            cand, state, ptr, from_start = self._start_meets(row, cand, state, ptr)
            if from_start is not None:
                inherit[START] = from_start
        if not base:
            cand, state, ptr, chained = self._counter_chain(row, cand, state, ptr)
        ends = layout.ends.take(cand)
        if chained is None and cand.size <= SMALL_TABLE and _small_walk(cand.size, ends, ptr, SMALL_TABLE):
            groups, masks = self._walk_group_small(cand, state, ptr, ends, stays)
            return self._finish_table(q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask)
        met: dict[int, list[np.ndarray]] | None = None if base or self.lookup is None else {}
        fin, nb, lex = self._walk(state, ptr, ends, met)
        for h, parts in (met or {}).items():
            r = _row_of(layout.ids.take(cand.take(np.concatenate(parts))), layout.words)
            _add_row(inherit, h, r)
        if chained is not None:   # these end inside the chain, completing no lexeme
            cand = np.concatenate([cand, chained[0]])
            fin = np.concatenate([fin, chained[1]])
            nb = np.concatenate([nb, np.zeros(chained[0].size, dtype=np.int64)])
            lex = np.concatenate([lex, np.full((MAX_TRACKED_BOUNDARIES, chained[0].size), -1, dtype=np.int64)],
                                 axis=1)
        groups, masks = self._group(q, cand, fin, nb, lex, stays)
        return self._finish_table(q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask)

    def _finish_table(self, q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask):
        """Add the reused hubs' tokens (merged into a base table's groups, else inherited) and
        make the :class:`TokenTable`."""
        if reused and base:
            groups, masks = self._merge_hubs(groups, masks, reused)
        else:
            for h, first in reused:
                _add_row(inherit, h, self.first_byte_row(first))
        for r in inherit.values():
            r.setflags(write=False)
        return TokenTable(q, groups, masks, restart_lexeme, restart_mask,
                          tuple(sorted(inherit.items())))

    def _counter_chain(self, row, cand, state, ptr):
        """Split off the candidates that run along a uniform chain of states, without walking them.

        Let ``B`` be the bytes that take this state to its most common successor ``q1``.
        If every byte of ``B`` takes ``q1`` to one state ``q2``, and so on (the positions of a
        length counter such as a string's ``maxLength``, a fixed-width field), a token made
        of ``n`` bytes of ``B`` ends in ``q_n`` without ending a lexeme, as long as the chain
        reaches that far. Returns the remaining ``(cand, state, ptr)`` and ``(tokens, final
        states)`` of the split-off ones (or None).
        """
        dead = (cand, state, ptr, None)
        if cand.size < CHAIN_MIN_TOKENS:
            return dead
        live = row[row != DEAD]
        counts = np.bincount(live)
        q1 = int(counts.argmax())
        if counts[q1] < MIN_LOOP_BYTES or self.hub[q1] >= 0:   # hubs are jumped over by the walk
            return dead
        in_b = row == q1
        # a token is pure when no byte after its first lies outside B
        enter = _flatnonzero(state == q1)
        if enter.size < CHAIN_MIN_TOKENS // 2:
            return dead
        pure = np.zeros(cand.size, dtype=bool)
        pure[enter] = tails_within(self.vocab, in_b).take(cand.take(enter))
        n_pure = int(np.count_nonzero(pure))
        if n_pure < CHAIN_MIN_TOKENS // 2:
            return dead
        lens = self.layout.lens.take(cand)
        need = int(lens.max(where=pure, initial=0))
        b_bytes = _flatnonzero(in_b)
        b0 = int(b_bytes[0])
        rows = self._row_lists()
        chain = [q1]                        # chain[i]: the state after i + 1 bytes of B
        while len(chain) < need:            # follow one byte of B ...
            nxt = rows[chain[-1]][b0]
            if nxt == DEAD:
                break
            chain.append(nxt)
        if len(chain) > 1:                  # ... then cut where some other byte of B leaves the chain
            steps = self.dfa.trans.take(chain[:-1], axis=0).take(b_bytes, axis=1)
            broken = _flatnonzero((steps != np.asarray(chain[1:])[:, None]).any(axis=1))
            if broken.size:
                chain = chain[:int(broken[0]) + 1]
        self._sync()
        sel = pure & (lens <= len(chain))
        idx = _flatnonzero(sel)
        if not idx.size:
            return dead
        fin = np.asarray(chain, dtype=np.int64).take(lens.take(idx) - 1)
        keep = ~sel
        return (*_kept(keep, cand, state, ptr), (cand.take(idx), fin))

    def _second_byte_hubs(self, row, cand, state, ptr):
        """Split off the candidates whose walks from here and from a hub ``h`` meet after two bytes.

        If a token's first two bytes take this state to hub ``h`` and also take ``h`` back
        to ``h`` (no lexeme ends on either walk), the two walks coincide from then on, so
        the token reads as from ``h``. Such tokens (for example every word that leaves a
        property-name trie for the generic key string after one letter) are inherited from
        ``h``'s table instead of walked. Returns the remaining ``(cand, state, ptr)`` and
        ``{h: row}`` of inherited tokens. ``row`` is this state's transition row as the
        candidates were taken (each token's ``state`` is ``row`` at its first byte).
        """
        layout, dfa = self.layout, self.dfa
        if not cand.size or not self._hubs:
            return cand, state, ptr, {}
        # first a check per state one byte on, not per token: can a byte reach a hub?
        after = np.asarray(_distinct(row[row != DEAD]), dtype=np.int64)
        if not self._to_hub(after).any():
            return cand, state, ptr, {}
        second = layout.second.take(cand)          # ptr is still at every token's second byte
        nxt = self.trans.take(state * _ROW + second)
        # a token's end (negative) clips to DEAD, which is never a hub
        slot = self.hub.take(nxt, mode="clip")
        hit = _flatnonzero(slot >= 0)
        if hit.size < MIN_INHERITED_TOKENS:
            return cand, state, ptr, {}
        first = layout.first.take(cand.take(hit))
        second = second.take(hit)
        lands = nxt.take(hit)
        # the hub's own walk over the same two bytes
        via = self.trans.take(lands * _ROW + first)
        if self._rows is None and not dfa.row_done.take(via).all():
            dfa.ensure_rows(via)
            self._sync()
        back = self.trans.take(np.maximum(via, 0) * _ROW + second)
        meet = (via > DEAD) & (back == lands)
        take = np.zeros(cand.size, dtype=bool)
        out: dict[int, np.ndarray] = {}
        for h in _distinct(lands[meet]):
            sel = hit[meet & (lands == h)]
            if sel.size >= MIN_INHERITED_TOKENS:
                take[sel] = True
                out[h] = _row_of(layout.ids.take(cand.take(sel)), layout.words)
        if not out:
            return cand, state, ptr, {}
        keep = ~take
        return (*_kept(keep, cand, state, ptr), out)

    def _to_hub(self, states: np.ndarray) -> np.ndarray:
        """Per state of ``states``: whether some byte takes it into a known hub.

        Memoised per state once the lexer is complete (before, a successor whose row is
        not built yet is not known to be a hub).
        """
        if self._rows is None:
            if not self.dfa.row_done.take(states).all():
                self.dfa.ensure_rows(states)
                self._sync()
            return (self.hub.take(self._ext.take(states, axis=0)[:, :256]) >= 0).any(axis=1)
        known = self._hub_next.take(states)
        todo = states[known < 0]
        if todo.size:
            self._hub_next[todo] = (self.hub.take(self._ext.take(todo, axis=0)[:, :256]) >= 0).any(axis=1)
            known = self._hub_next.take(states)
        return known > 0

    def _start_meets(self, row, cand, state, ptr):
        """Split off the candidates that read from here exactly as from ``START``.

        The walk from here and the walk from ``START`` run in lockstep for at most
        :data:`MEET_STEPS` bytes; a token reads the same both ways when, before either
        walk ends a lexeme, they reach the same state, or both end their lexemes at the
        same byte with the same terminal set (both restart at ``START`` from there), or
        the token ends with the same terminals alive on both. The typical case is a
        whitespace-counter state, whose tokens (``" foo"``: a space, then a new lexeme) read
        as from ``START`` while the run stays under the bound. Returns the remaining
        ``(cand, state, ptr)`` and the row of tokens inherited from ``START`` (or None).
        ``row`` is this state's transition row as the candidates were taken.
        """
        layout, dfa = self.layout, self.dfa
        if cand.size < MIN_INHERITED_TOKENS:
            return cand, state, ptr, None
        # the first two bytes, decided once per byte pair: both walks are functions of them
        bs = _flatnonzero(row != DEAD)        # every candidate's first byte is among these
        a1 = row.take(bs)                       # this state's walk after the first byte
        z1 = self.trans.take(START * _ROW + bs)
        ok1 = (z1 > DEAD) & (self.alive_id.take(a1) == self.alive_id.take(np.maximum(z1, 0)))
        if not ok1.any():
            return cand, state, ptr, None
        first = layout.first.take(cand)
        outcome = np.zeros((256, _ROW), dtype=np.int8)   # 0: differ, 1: same reading, 2: undecided
        a1, z1, bs = a1[ok1], z1[ok1], bs[ok1]
        cs = np.arange(_ROW)
        na = self.trans.take(a1[:, None] * _ROW + cs)
        nz = self.trans.take(z1[:, None] * _ROW + cs)
        e = self.emit.take(a1)[:, None]
        ended = (cs == SENTINEL) & (self.alive_id.take(a1) == self.alive_id.take(z1))[:, None]
        killed = (na == DEAD) & (nz == DEAD) & (e >= 0) & (e == self.emit.take(z1)[:, None])
        met = (a1 == z1)[:, None] | ended | killed
        outcome[bs] = np.where(met, 1, np.where((na > DEAD) & (nz > DEAD), 2, 0))
        second = layout.second.take(cand)          # ptr is still at every token's second byte
        verdict = outcome.take(first * _ROW + second)
        if np.count_nonzero(verdict) < MIN_INHERITED_TOKENS:
            return cand, state, ptr, None
        same = verdict == 1
        idx = _flatnonzero(verdict == 2)
        if idx.size:  # longer shared prefixes (runs of whitespace): follow both walks per token
            b, c = first.take(idx), second.take(idx)
            sa, sz = np.zeros(256, dtype=np.int64), np.zeros(256, dtype=np.int64)
            sa[bs], sz[bs] = a1, z1
            a = self.trans.take(sa.take(b) * _ROW + c)
            z = self.trans.take(sz.take(b) * _ROW + c)
            p = ptr.take(idx) + 1
        for _ in range(MEET_STEPS - 2):
            if not idx.size:
                break
            if self._rows is None and not dfa.row_done.take(np.concatenate([a, z])).all():
                dfa.ensure_rows(np.concatenate([a, z]))
                self._sync()
            c = layout.flat.take(p)
            na = self.trans.take(a * _ROW + c)
            nz = self.trans.take(z * _ROW + c)
            ended = (c == SENTINEL) & (self.alive_id.take(a) == self.alive_id.take(z))
            e = self.emit.take(a)
            killed = (na == DEAD) & (nz == DEAD) & (e >= 0) & (e == self.emit.take(z))
            done = (a == z) | ended | killed
            same[idx[done]] = True
            go = ~done & (na > DEAD) & (nz > DEAD)
            idx, a, z, p = _kept(go, idx, na, nz, p)
            p += 1
        hit = _flatnonzero(same)
        if hit.size < MIN_INHERITED_TOKENS:
            return cand, state, ptr, None
        row = _row_of(layout.ids.take(cand.take(hit)), layout.words)
        keep = ~same
        return (*_kept(keep, cand, state, ptr), row)

    def _reusable_hubs(self, q: int, row: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Hubs ``h != q`` that read a token's first byte the way ``q`` does.

        A token whose first byte ``b`` takes ``q`` and ``h`` to the same state (for example
        ``b`` a self-loop byte of ``h`` that ``q`` sends into ``h``, or a UTF-8 lead byte both
        send to one continuation state) walks from ``q`` exactly as from ``h``, so its group
        is the one ``h``'s table gives it. Returns ``(h, first-byte selector)`` pairs with
        disjoint selectors.
        """
        if self.lookup is None or not self._hubs:
            return []
        out = []
        live = row != DEAD
        targets = row[live]
        for h in _distinct(targets[self.hub.take(targets) >= 0]):
            if h == q or h in self._busy:
                continue
            first = live & (self.dfa.trans[h] == row)
            if first.sum() >= MIN_REUSED_BYTES:
                out.append((h, first))
                live = live & ~first
        return out

    def _merge_hubs(self, groups, masks, reused):
        """Add each reused hub's groups, restricted to the tokens with the selected first bytes."""
        layout = self.layout
        index = {g: i for i, g in enumerate(groups)}
        groups = list(groups)
        extra = []
        for h, first in reused:
            self._busy.add(h)
            try:
                table = self.lookup(h)
            finally:
                self._busy.discard(h)
            sel = self.first_byte_row(first)
            sub = table.masks & sel
            for k in _flatnonzero(sub.any(axis=1)).tolist():
                g = table.groups[k]
                i = index.get(g)
                if i is None:
                    index[g] = len(groups)
                    groups.append(g)
                    extra.append(sub[k][None])
                elif i < masks.shape[0]:
                    masks[i] |= sub[k]
                else:
                    extra[i - masks.shape[0]] |= sub[k][None]
        if extra:
            masks = np.concatenate([masks] + extra)
        return tuple(groups), masks

    def _candidates(self, row: np.ndarray):
        """Tokens to walk from a state with transition ``row`` (their first byte is taken).

        Returns ``(cand, first, ptr, stays)``: the tokens (layout order), their first bytes,
        the flat positions of their second bytes, and ``stays``. A token whose first byte
        enters a hub and whose other bytes all loop there ends in that hub: such tokens
        are returned in ``stays`` as ``(hub state, row)`` instead of walked.
        """
        layout = self.layout
        hub_of = np.where(row != DEAD, self.hub.take(row), -1)
        parts = []
        plain = (row != DEAD) & (hub_of < 0)
        if plain.any():
            parts.append(first_byte_tokens(self.vocab, plain))
        stays = []
        for slot in _distinct(hub_of[hub_of >= 0]):
            h = self._hub(slot)
            via = hub_of == slot
            toks = h.exits.take(_ranges(h.exit_bucket[:-1][via], h.exit_bucket[1:][via]))
            parts.append(CandidateTokens(toks, layout.first.take(toks), layout.starts.take(toks) + 1))
            for target in _distinct(row[via]):
                firsts = self.first_byte_row(row == target)
                stay = firsts & h.stay_row
                if stay.any():
                    stays.append((target, stay))
        if len(parts) == 1:
            c = parts[0]
            return c.tokens, c.first, c.ptr, stays
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, stays
        return (np.concatenate([c.tokens for c in parts]), np.concatenate([c.first for c in parts]),
                np.concatenate([c.ptr for c in parts]), stays)

    def _walk(self, state: np.ndarray, ptr: np.ndarray, ends: np.ndarray, met: dict | None = None):
        """Walk tokens from ``state`` (int64) at flat positions ``ptr`` to their ``ends``.

        ``ptr`` must sit at each token's second byte (``state`` is the state after the first).
        Returns (final state, DEAD if unlexable; number of completed lexemes; the first
        :data:`MAX_TRACKED_BOUNDARIES` lexemes, -1 padded, as rows: ``lex[k]`` holds every
        token's ``k``-th lexeme). One numpy step per byte that
        is not a hub self-loop; the extended transition table sends the sentinel to
        ``-1 - state``, so finished and killed tokens are found with one comparison.

        With ``met`` (a dict), a token that reaches a hub ``h`` before ending a lexeme,
        having read only bytes of ``h``'s self-loop, reads from here exactly as from ``h``
        (from ``h`` the same bytes loop in ``h``, then both walks go on from ``h`` alike):
        it leaves the walk (final state DEAD) and its index goes to ``met[h]``.
        """
        dfa = self.dfa
        flat = self.layout.flat
        n = state.size
        fin = np.zeros(n, dtype=np.int64)
        nb = np.zeros(n, dtype=np.int64)
        lex = np.full((MAX_TRACKED_BOUNDARIES, n), -1, dtype=np.int64)
        idx = np.arange(n)
        origin = ptr - 1
        ptr = ptr.copy()
        fuel = self.fuel
        while idx.size:
            if fuel is not None:
                fuel.spend(idx.size)
            if _small_walk(idx.size, ends.take(idx), ptr, SMALL_WALK_TOKENS):
                self._finish_small(idx, state, ptr, ends, fin, nb, lex)
                break
            if self._hubs:
                hub = self.hub.take(state)
                jump = _flatnonzero(hub >= 0)
                if jump.size and met is not None:
                    gone = self._meet_hubs(jump, hub.take(jump), idx, state, ptr, origin, nb, met)
                    if gone is not None:
                        idx, state, ptr = _kept(~gone, idx, state, ptr)
                        hub = self.hub.take(state)
                        jump = _flatnonzero(hub >= 0)
                if jump.size:
                    self._jump(ptr, jump, hub.take(jump))
            if self._rows is None and not dfa.row_done.take(state).all():
                dfa.ensure_rows(state)
                self._sync()
            b = flat.take(ptr)
            nxt = self.trans.take(state * _ROW + b)
            stop = _flatnonzero(nxt <= DEAD)
            if stop.size:
                self._stop(stop, idx, state, b, nxt, fin, nb, lex)
                keep = nxt > DEAD
                idx, nxt, ptr = _kept(keep, idx, nxt, ptr)
            state = nxt
            ptr += 1
        return fin, nb, lex

    def _meet_hubs(self, jump, slots, idx, state, ptr, origin, nb, met):
        """Running tokens ``jump`` sit in hubs (``slots``): take out those that read as from their hub.

        A token qualifies when it has ended no lexeme and every byte it read so far is a
        self-loop byte of its hub (the hub's run from the token's first byte reaches ``ptr``),
        and the hub's table is not being built. Returns a bool per running token (None if none).
        """
        at = idx.take(jump)
        ok = nb.take(at) == 0
        if not ok.any():
            return None
        gone = None
        for slot in _distinct(slots[ok]):
            sel = _flatnonzero(ok & (slots == slot))
            runs = self._hub(slot).run_ends
            sel = sel[runs.take(origin.take(at.take(sel))) >= ptr.take(jump.take(sel))]
            if not sel.size:
                continue
            where = state.take(jump.take(sel))
            for h in _distinct(where):
                if h in self._busy:
                    continue
                pick = sel[where == h]
                met.setdefault(h, []).append(at.take(pick))
                if gone is None:
                    gone = np.zeros(idx.size, dtype=bool)
                gone[jump.take(pick)] = True
        return gone

    def _stop(self, stop, idx, state, b, nxt, fin, nb, lex) -> None:
        """Tokens ``stop`` reached their end (record the final state) or killed their lexeme.

        A killed lexeme is recorded and the token restarts at START with the same byte
        (``nxt`` updated); ``nxt`` is DEAD for every token that leaves the walk.
        """
        v = nxt.take(stop)
        ended = v < DEAD
        if ended.any():
            fin[idx.take(stop[ended])] = -1 - v[ended]
            nxt[stop[ended]] = DEAD
            stop = stop[~ended]
        if not stop.size:
            return
        e = self.emit.take(state.take(stop))
        restart = self.trans.take(START * _ROW + b.take(stop))
        ok = (e >= 0) & (restart > DEAD)
        nxt[stop] = np.where(ok, restart, DEAD)
        good = idx.take(stop[ok])
        if good.size:
            pos = nb.take(good)
            track = pos < MAX_TRACKED_BOUNDARIES
            lex[pos[track], good[track]] = e[ok][track]
            nb[good] += 1
            if not track.all():  # one lexeme too many: left to the exact regrouping
                nxt[stop[ok][~track]] = DEAD

    def _jump(self, ptr: np.ndarray, jump: np.ndarray, slots: np.ndarray) -> None:
        """Move ``ptr[jump]`` (tokens sitting in hubs ``slots``) past their runs of loop bytes."""
        present = _flatnonzero(np.bincount(slots)).tolist()
        if len(present) == 1:
            ptr[jump] = self._hub(present[0]).run_ends.take(ptr.take(jump))
            return
        for slot in present:
            sel = jump[slots == slot]
            ptr[sel] = self._hub(slot).run_ends.take(ptr.take(sel))

    def _finish_small(self, idx, state, ptr, ends, fin, nb, lex) -> None:
        """Finish the last few running tokens byte by byte in Python (results written back at once)."""
        raw = self.layout.raw
        rows = self._row_lists()
        jobs = zip(idx.tolist(), state.tolist(), ptr.tolist(), ends.take(idx).tolist(), nb.take(idx).tolist())
        emit = self.dfa.emit
        start = rows[START]
        finals, counts, at_k, at_i, at_e = [], [], [], [], []
        for i, q, p, end, count in jobs:
            for b in raw[p:end]:
                nq = rows[q][b]
                if nq == DEAD:          # the lexeme ends before b: record it, restart at START
                    e = emit[q]
                    if e < 0:
                        q = DEAD
                        break
                    if count < MAX_TRACKED_BOUNDARIES:
                        at_k.append(count)
                        at_i.append(i)
                        at_e.append(e)
                    count += 1
                    nq = start[b]
                    if count > MAX_TRACKED_BOUNDARIES or nq == DEAD:   # too many lexemes: regrouped later
                        q = DEAD
                        break
                q = nq
            finals.append(q)
            counts.append(count)
        fin[idx] = finals
        nb[idx] = counts
        if at_i:
            lex[at_k, at_i] = at_e

    def _walk_group_small(self, cand, state, ptr, ends, stays):
        """Walk and group a few tokens in plain Python, all at once: ``(groups, masks)``.

        The same readings as :meth:`_walk` followed by :meth:`_group` (every lexeme kept, so
        no token needs regrouping), without their arrays: for a few tokens, the numpy calls
        cost more than the walk.
        """
        raw = self.layout.raw
        rows = self._row_lists()
        emit, alive = self.dfa.emit, self.dfa.alive
        start = rows[START]
        index: dict[tuple[tuple[int, ...], int], int] = {}
        gid, toks = [], []
        for tok, q, p, end in zip(self.layout.ids.take(cand).tolist(), state.tolist(), ptr.tolist(),
                                  ends.tolist()):
            lexemes = ()
            for b in raw[p:end]:
                nq = rows[q][b]
                if nq == DEAD:          # the lexeme ends before b: record it, restart at START
                    e = emit[q]
                    nq = start[b]
                    if e < 0 or nq == DEAD:
                        q = DEAD
                        break
                    lexemes += (e,)
                q = nq
            bits = alive[q]
            if bits:                    # DEAD has no alive terminals
                key = (lexemes, bits)
                g = index.get(key)
                if g is None:
                    g = index[key] = len(index)
                gid.append(g)
                toks.append(tok)
        words = self.layout.words
        masks = rows_by_group(np.array(gid, dtype=np.int64), np.array(toks, dtype=np.int64), len(index), words)
        return self._add_stays(list(index), masks, {}, stays)

    def _row_lists(self):
        """The transition rows as plain lists for byte-by-byte walks: all of them once the
        lexer is fully built, else a dict that computes and converts rows on first use."""
        if self._rows is not None:
            return self._rows
        if self._lazy_rows is None:
            self._lazy_rows = _RowLists(self.dfa)
        return self._lazy_rows

    def _walk_bytes(self, q: int, data) -> tuple[list[int], int]:
        """:func:`walk_token` on plain rows (for the exact regrouping of many-lexeme tokens)."""
        rows = self._row_lists()
        emit = self.dfa.emit
        start = rows[START]
        lexemes: list[int] = []
        for b in data:
            nq = rows[q][b]
            if nq == DEAD:
                e = emit[q]
                if e < 0:
                    return lexemes, DEAD
                lexemes.append(e)
                nq = start[b]
                if nq == DEAD:
                    return lexemes, DEAD
            q = nq
        return lexemes, q

    def _group_keys(self, cand, fin, nb, lex):
        """(groups, group index of each grouped token, its id) of walked tokens, vectorised.

        A token is grouped when it ends alive with at most :data:`MAX_TRACKED_BOUNDARIES` lexemes.
        """
        alive_id = self.alive_id.take(fin)
        # DEAD has no alive set, and a token with too many lexemes was stopped in DEAD
        live = _flatnonzero(alive_id >= 0)
        # key of a token: (its lexemes, its alive set), each part renumbered densely among
        # the values present. Most tokens complete no lexeme; the lexeme pairs (the count
        # is implied: a missing lexeme is -1) are renumbered among the others only
        alive_u, key = _dense_ids(alive_id.take(live), max(len(self._alive_values), 1))
        n_alive = alive_u.size
        bounded = _flatnonzero(nb.take(live))
        n1 = len(self.dfa.term_sets) + 1
        if bounded.size:
            at = live.take(bounded)
            pair_u, pair_i = _dense_ids((lex[0].take(at) + 1) * n1 + lex[1].take(at) + 1, n1 * n1)
            key = key.copy()
            key[bounded] += (pair_i + 1) * n_alive
            uniq, gid = _dense_ids(key, (pair_u.size + 1) * n_alive)
        else:
            pair_u = np.zeros(0, dtype=np.int64)
            uniq, gid = np.arange(n_alive), key
        lexemes_of = [()]
        for code in pair_u.tolist():
            l1, l2 = divmod(code, n1)
            lexemes_of.append((l1 - 1,) if l2 == 0 else (l1 - 1, l2 - 1))
        alive_values = [self._alive_values[a] for a in alive_u.tolist()]
        groups: list[tuple[tuple[int, ...], int]] = []
        for k in uniq.tolist():
            p, a = divmod(k, n_alive)
            groups.append((lexemes_of[p], alive_values[a]))
        return groups, gid, self.layout.ids.take(cand.take(live))

    def _group_keys_small(self, cand, fin, nb, lex):
        """:meth:`_group_keys` in plain Python, for a few tokens (groups in order of appearance)."""
        alive = self.dfa.alive
        index: dict[tuple[tuple[int, ...], int], int] = {}
        gid, toks = [], []
        for tok, f, count, l1, l2 in zip(self.layout.ids.take(cand).tolist(), fin.tolist(), nb.tolist(),
                                         lex[0].tolist(), lex[1].tolist()):
            bits = alive[f]
            if not bits:            # DEAD, or stopped with too many lexemes
                continue
            key = ((() if count == 0 else (l1,) if count == 1 else (l1, l2)), bits)
            g = index.get(key)
            if g is None:
                g = index[key] = len(index)
            gid.append(g)
            toks.append(tok)
        return list(index), np.array(gid, dtype=np.int64), np.array(toks, dtype=np.int64)

    def _group(self, q: int, cand: np.ndarray, fin, nb, lex, stays):
        """Group walked tokens by (lexemes, alive terminals) and build the groups' rows.

        ``stays`` are extra ``(final state, row)`` groups of tokens that complete no lexeme.
        """
        self._sync()
        layout = self.layout
        words = layout.words
        over = nb > MAX_TRACKED_BOUNDARIES
        if fin.size <= SMALL_GROUP:
            groups, gid, toks = self._group_keys_small(cand, fin, nb, lex)
        else:
            groups, gid, toks = self._group_keys(cand, fin, nb, lex)
        extra: dict[tuple[tuple[int, ...], int], np.ndarray] = {}
        if over.any():  # many boundaries: regroup these few tokens exactly
            sub: dict[tuple[tuple[int, ...], int], list[int]] = {}
            for tok in layout.ids.take(cand[over]).tolist():
                lexemes, f = self._walk_bytes(q, self.vocab.token_bytes[tok])
                if f != DEAD and self.dfa.alive[f]:
                    sub.setdefault((tuple(lexemes), self.dfa.alive[f]), []).append(tok)
            extra = {k: _row_of(np.array(v, dtype=np.int64), words) for k, v in sub.items()}
        rows = _group_rows(gid, toks, len(groups), words)
        return self._add_stays(groups, rows, extra, stays)

    def _add_stays(self, groups, rows, extra, stays):
        """Merge the ``extra`` rows (by group key) and the ``stays`` rows into ``(groups, rows)``."""
        index = {g: i for i, g in enumerate(groups)}
        more = []
        for target, row in stays:
            _add_row(extra, ((), self.dfa.alive[target]), row)
        for k, row in extra.items():
            i = index.get(k)
            if i is None:
                index[k] = len(groups)
                groups.append(k)
                more.append(row[None])
            else:
                rows[i] |= row
        if more:
            rows = np.concatenate([rows] + more)
        return tuple(groups), rows


class _RowLists(dict):
    """Transition rows of a lazily built lexer DFA as plain lists, computed on first use
    (a row never changes once computed)."""

    def __init__(self, dfa: ByteDFA):
        super().__init__()
        self.dfa = dfa

    def __missing__(self, q: int) -> list[int]:
        dfa = self.dfa
        if not dfa.row_done[q]:
            dfa.compute_row(q)
        row = self[q] = dfa.trans[q].tolist()
        return row


def _add_row(rows: dict, key, row: np.ndarray) -> None:
    """``rows[key] |= row``, starting from ``row`` (never modifying a row passed in earlier)."""
    rows[key] = rows[key] | row if key in rows else row


def _distinct(values: np.ndarray) -> list[int]:
    """Sorted distinct values of an array of non-negative ints (states, hub slots).

    Small arrays go through a Python set; larger ones are checked for a single value,
    then counted (no sort; ``np.unique`` would also import ``numpy.ma`` lazily).
    """
    if values.size <= FEW_KEYS:
        return sorted(set(values.tolist()))
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return [lo]
    if hi - lo <= DENSE_KEY_RATIO * values.size + DENSE_KEY_SPACE:
        return (_flatnonzero(np.bincount(values - lo)) + lo).tolist()
    return sorted(set(values.tolist()))


def _flatnonzero(a: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` without its Python wrappers (a table build makes dozens of calls)."""
    return a.nonzero()[0] if a.ndim == 1 else np.flatnonzero(a)


def _small_walk(n: int, ends: np.ndarray, ptr: np.ndarray, max_tokens: int) -> bool:
    """Whether ``n`` tokens with these ``ends`` and positions ``ptr`` are walked in plain Python."""
    return n <= SMALL_WALK or (n <= max_tokens and int((ends - ptr).sum()) <= SMALL_WALK_BYTES)


def _kept(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``a[keep]`` for each array (one ``flatnonzero``, then ``take``: boolean indexing of
    large arrays with an irregular mask is several times slower)."""
    idx = _flatnonzero(keep)
    return tuple(a.take(idx) for a in arrays)


def _row_of(ids: np.ndarray, words: int) -> np.ndarray:
    """One bitmask row with ``ids`` set (scatter-and-pack for many ids, ``bitwise_or.at`` for few)."""
    if ids.size >= words // 4:
        return ids_row(ids, words)
    return rows_by_group(np.zeros(ids.size, dtype=np.int64), ids, 1, words)[0]


def _dense_ids(keys: np.ndarray, key_space: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, index of each key among them) for keys in ``range(key_space)``.

    Counts into a table (no sort) when the key space is small, or not much larger than
    the number of keys; sorts otherwise.
    """
    if keys.size == 0:
        return keys, keys
    if keys.size <= FEW_KEYS:       # a few keys: plain Python beats any array pass
        values = keys.tolist()
        uniq = sorted(set(values))
        at = {k: i for i, k in enumerate(uniq)}
        return np.array(uniq, dtype=np.int64), np.array([at[k] for k in values], dtype=np.int64)
    lo = int(keys.min())
    if lo == int(keys.max()):       # one key (no token completes a lexeme, say)
        return np.array([lo], dtype=np.int64), np.zeros(keys.size, dtype=np.int64)
    if key_space <= max(DENSE_KEY_SPACE, DENSE_KEY_RATIO * keys.size):
        counts = np.bincount(keys, minlength=key_space)
        uniq = _flatnonzero(counts)
        lut = np.zeros(key_space, dtype=np.int64)
        lut[uniq] = np.arange(uniq.size)
        return uniq, lut.take(keys)
    uniq, gid = np.unique(keys, return_inverse=True)
    return uniq, gid.ravel()


def _group_rows(gid: np.ndarray, toks: np.ndarray, n_groups: int, words: int) -> np.ndarray:
    """Bitmask rows of ``n_groups`` groups (token ``toks[i]`` in group ``gid[i]``; tokens distinct).

    Few tokens per group are scattered with ``bitwise_or.at``. Many are summed with one
    ``bincount`` per (group, word): the bits of distinct tokens are distinct powers of two
    below 2**32, so their sum is exact in float64 and equals their OR.
    """
    if n_groups == 0:
        return np.zeros((0, words), dtype=np.int32)
    if n_groups == 1:
        return _row_of(toks, words)[None]
    if toks.size < SUM_ROWS_TOKENS * n_groups:
        return rows_by_group(gid, toks, n_groups, words)
    sums = np.bincount(gid * words + (toks >> 5), weights=np.left_shift(1, toks & 31),
                       minlength=n_groups * words)
    return sums.astype(np.uint32).view(np.int32).reshape(n_groups, words)


def build_table(dfa: ByteDFA, q: int, vocab) -> TokenTable:
    """The token table of lexer state ``q`` (a one-off :class:`TableBuilder`; see its docs)."""
    return TableBuilder(dfa, vocab).table(q)
