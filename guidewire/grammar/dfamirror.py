"""The token-table builder's mirror of a (lazily growing) lexer DFA, kept in sync incrementally.

Per-state numpy arrays the vectorised walk indexes: the extended transition table (a row per
state, 257 wide: the sentinel column sends a token's end to ``-1 - state``), emitted terminal
sets, alive-set ids and self-loop hub slots; plus the rows as plain lists for byte-by-byte walks.
"""

from __future__ import annotations

import numpy as np

from . import tabletuning as tuning
from .growtable import grow_rows, zeroed_table
from .lexer import DEAD, ByteDFA
from .tablearrays import _distinct, _flatnonzero
from .vocabindex import SENTINEL, LoopRuns, loop_run_ends, loop_runs, vocab_layout

_ROW = SENTINEL + 1     # width of the extended transition table


class DfaMirror:
    """Per-state arrays of one lexer DFA for one vocabulary (the base of :class:`TableBuilder`).

    Works on a partially determinised DFA too (rows are computed as the walk needs them);
    a fully built DFA just never needs to.
    """

    def __init__(self, dfa: ByteDFA, vocab, lookup=None):
        self.dfa = dfa
        self.vocab = vocab
        self.lookup = lookup        # optional q -> TokenTable (a cache) for hub reuse
        self.admit = None           # optional group keys -> bools: False for a group no parser state allows
        self.has_table = None       # optional q -> whether q's table is built (a shadow is used only then)
        self.canon = None           # optional q -> its class representative (tables are built per class)
        self.layout = vocab_layout(vocab)
        self._synced = (-1, -1)
        self._hub_index: dict[bytes, int] = {}      # self-loop byte set -> hub slot
        self._hub_loops: list[np.ndarray] = []
        self._loop_table = np.zeros((0, 256), dtype=np.uint8)   # each slot's loop bytes, for the compiled walk
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
        self._char_steps: dict[tuple[int, bytes], int] = {}   # (state, class) -> its characters' target
        self._lands: dict[tuple[int, int, int], bool] = {}   # (state, UTF-8 state, target) -> see _rest_lands
        self._slice_hits: dict[int, int] = {}     # lexer state -> tokens its UTF-8 slice took
        self._busy: set[int] = set()   # hubs whose tables are being built (no reuse cycles)
        self._hub_edges: dict[int, set[int]] = {}   # hub -> the hubs its table inherits from (acyclic)
        self._rows: _RowLists | None = None      # once every row is built: rows as lists, on first use
        self.may_grow = False   # the lexer may get new states after it is complete (projection): never copied whole
        self._lazy_rows: _RowLists | None = None        # else the rows converted so far
        self.fuel = None   # a core.limits.Fuel charged per token walked (set by the compiled grammar)

    def allow_growth(self, grow: bool) -> None:
        """Say whether the lexer may get new states once it is complete (projection): its mirror
        is then never copied whole (rows are copied, the checks stay). Set before the first table;
        the next sync looks at the lexer afresh."""
        self.may_grow = grow
        self._synced = (-1, -1)

    def sync(self) -> None:
        """Bring the per-state arrays up to date with the lexer now (see :meth:`_sync`): called
        between tables, it keeps each catch-up to the states made since the last call."""
        self._sync()

    # cached per-state arrays, refreshed incrementally when the DFA grows
    def _sync(self) -> None:
        """Bring the per-state arrays up to date with the (possibly lazily growing) DFA.

        Work is proportional to the states added since the last call (their emitted and alive
        sets); transition rows are copied only when a walk asks for them (:meth:`_need`), never
        all at once: a product lexer of 150k states would otherwise copy (and fault in) 300 MB
        of rows it mostly never reads. Once every row is built and the lexer is small
        (:data:`~.tabletuning.MIRROR_ALL_ROWS`), every row is copied and this returns at once.
        """
        if self._rows is not None:
            return
        dfa = self.dfa
        n = dfa.n_states
        if n > self._n:
            if n > self._cap:
                self._grow(max(n, 2 * self._cap, 64))
            old = self._n
            self.emit[old:n] = dfa.emit[old:n]
            alive = dfa.alive[old:n]
            index = self._alive_index
            for bits in dict.fromkeys(alive):      # the distinct sets, in order of first use
                if bits and bits not in index:
                    index[bits] = len(self._alive_values)
                    self._alive_values.append(bits)
            get = index.get     # a lexer grown by thousands of states between tables: one pass
            self.alive_id[old:n] = [get(bits, -1) for bits in alive]
            self._n = n
        key = (n, dfa.rows_built)
        if key == self._synced:
            return
        self._synced = key
        # once every row is built the lexer is complete: a small one is copied whole, its rows as
        # plain lists (converted on first use) for the byte-by-byte walks, and its hubs are final
        # (a lexer that may grow, by projection, has its rows copied but stays row by row)
        if key[1] == n and n <= tuning.MIRROR_ALL_ROWS:
            self._copy_rows(_flatnonzero(~self._copied[:n]))
            if self.may_grow:
                return
            self._rows = _RowLists(dfa)
            for slot in range(len(self._hubs)):
                self._hub(slot)

    def _need(self, states, build: bool = True) -> None:
        """Make the transition rows of ``states`` readable in the mirror: built in the lexer (a
        lazy one) and copied here. Every read of a row of :attr:`trans` is preceded by this (or
        by a walk that stops at a row not copied, ``_copied`` false, and asks for it). With
        ``build`` false only rows the lexer has built already are copied (to learn which of
        them are hubs, say, where an unknown one is just not used)."""
        if self._rows is not None:
            return
        self._sync()
        states = np.asarray(states, dtype=np.int64).reshape(-1)
        states = states[states > DEAD]
        if not states.size:
            return
        miss = states[~self._copied.take(states)]
        if not miss.size:
            return
        miss = np.asarray(_distinct(miss), dtype=np.int64)
        if not build:
            miss = miss[self.dfa.row_done.take(miss)]
        elif not self.dfa.row_done.take(miss).all():
            self.dfa.ensure_rows(miss)
            self._sync()        # building rows interns their targets
        if self._rows is None:
            self._copy_rows(miss[~self._copied.take(miss)])

    def _copy_rows(self, states: np.ndarray) -> None:
        """Copy the built rows of ``states`` (none copied yet) into the extended table."""
        if not states.size:
            return
        rows = self.dfa.trans[states]
        self._ext[states, :256] = rows
        self._ext[states, SENTINEL] = -1 - states    # the end of a token: "finished in state s"
        self._copied[states] = True
        self._add_hubs(states, rows)

    def _grow(self, cap: int) -> None:
        """Reallocate the per-state arrays with room for ``cap`` states (only copied rows move:
        the rest of the new table stays untouched, zero pages the OS maps on first write)."""
        old = self._cap
        # rows not copied are never read; 4 KiB pages faulted in where written (writing the scattered
        # rows a walk copies into a huge-page table zeroed a 2 MiB page per row: a 77k-state table
        # with 5k rows copied took 37-160 ms against 15 ms)
        if self._ext.shape[0] == 0:
            self._ext = zeroed_table(cap, _ROW, np.int64)
            self.trans = self._ext.reshape(-1)
        else:   # in place where it can (rows not copied are zero pages, never read)
            grow_rows(self, "_ext", cap, views={"trans": lambda t: t.reshape(-1)},
                      keep=_flatnonzero(self._copied[:old]))
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
        for k in _flatnonzero(loops.sum(axis=1) >= tuning.MIN_LOOP_BYTES).tolist():
            st = int(states[k])
            if st == DEAD:
                continue
            key = np.packbits(loops[k]).tobytes()
            slot = self._hub_index.get(key)
            if slot is None:
                slot = self._hub_index[key] = len(self._hubs)
                self._hub_loops.append(loops[k])
                self._hubs.append(None)
                self._loop_table = np.concatenate([self._loop_table, loops[k:k + 1].astype(np.uint8)])
            self.hub[st] = slot

    def hub_states(self) -> np.ndarray:
        """A bool per lexer state built so far: whether it is a self-loop hub (read off the
        lexer's built rows, copied into the mirror or not)."""
        dfa = self.dfa
        n = dfa.n_states
        out = self_loop_hubs(dfa.trans[:n], np.arange(n, dtype=dfa.trans.dtype)) & dfa.row_done[:n]
        out[DEAD] = False
        return out

    def _hub(self, slot: int) -> LoopRuns:
        """The loop runs of hub ``slot`` (fetched on first use)."""
        h = self._hubs[slot]
        if h is None:
            h = self._hubs[slot] = loop_runs(self.vocab, self._hub_loops[slot])
        return h

    def _run_ends(self, slot: int) -> np.ndarray:
        """Run ends of hub ``slot``'s loop bytes over the layout (the numpy walk's jumps)."""
        return loop_run_ends(self.vocab, self._hub_loops[slot])

    def _to_hub(self, states: np.ndarray) -> bool:
        """Whether some byte takes one of ``states`` (repeats allowed) into a known hub.

        Memoised per state once the lexer is complete (before, a successor whose row is
        not built yet is not known to be a hub).
        """
        if self._rows is None:
            states = np.asarray(_distinct(states), dtype=np.int64)
            self._need(states)
            succ = self._ext.take(states, axis=0)[:, :256]
            self._need(succ, build=False)       # hubs are known by their copied rows
            return bool((self.hub.take(succ) >= 0).any())
        known = self._hub_next.take(states)
        if (known > 0).any():
            return True
        todo = np.asarray(_distinct(states[known < 0]), dtype=np.int64)
        if todo.size:
            self._hub_next[todo] = (self.hub.take(self._ext.take(todo, axis=0)[:, :256]) >= 0).any(axis=1)
            return bool(self._hub_next.take(todo).any())
        return False

    def _row_lists(self):
        """The transition rows as plain lists for byte-by-byte walks: all of them once the
        lexer is fully built, else a dict that computes and converts rows on first use."""
        if self._rows is not None:
            return self._rows
        if self._lazy_rows is None:
            self._lazy_rows = _RowLists(self.dfa)
        return self._lazy_rows


class _RowLists(dict):
    """Transition rows of a lazily built lexer DFA as tuples, computed on first use (a row
    never changes once computed; tuples of ints, unlike lists, leave CPython's cyclic collector)."""

    def __init__(self, dfa: ByteDFA):
        super().__init__()
        self.dfa = dfa

    def __missing__(self, q: int) -> tuple[int, ...]:
        dfa = self.dfa
        if not dfa.row_done[q]:
            dfa.compute_row(q)
        row = self[q] = tuple(dfa.trans[q].tolist())
        return row


def self_loop_hubs(rows: np.ndarray, states: np.ndarray) -> np.ndarray:
    """A bool per state of ``states`` (its transition row in ``rows``): whether it is a hub, a state
    with at least :data:`~.tabletuning.MIN_LOOP_BYTES` self-loop bytes."""
    return np.count_nonzero(rows == states[:, None], axis=1) >= tuning.MIN_LOOP_BYTES
