"""The lexer: all terminals of a grammar in one lazily determinised byte-level DFA.

Lexing semantics (like a classic ``lex`` scanner without backup): a lexeme grows while
the next byte keeps *some* terminal alive (maximal munch over all terminals); when a
byte kills every terminal, the lexeme ends there and must be accepted by at least one
terminal. The lexeme is then reported as the set of accepting terminals of the highest
``priority``, where a literal beats an *infinite* regex terminal for the same lexeme
(keywords are reserved words, while ``"+"`` and ``ADD_OP: "+"|"-"`` both read ``+``); ignored terminals (``%ignore``) only count when
no grammar terminal accepts. A terminal written with a lazy quantifier (``*?``) ends at
its first accepting position (its language is made prefix-free).

DFA states are interned sets of NFA states; rows of the transition table are computed
on first use. State 0 is the dead state, state 1 the start of a lexeme.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core.errors import LimitExceededError
from ..core.limits import Fuel
from . import native, refine
from .fragments import FragmentFacts
from .growtable import grow_rows
from .lexerbuild import DEAD, START, STATE_BYTES, CompiledBuild, bytes_refused, states_refused
from .nfagraph import coreachable, narrow_terminal, reachable, with_counts
from .regex import NFA
from .tablearrays import concat_ranges

SWEEP_EDGES = 64   # a row whose NFA states hold more edges than this is swept with numpy
VECTOR_SET = 64    # a new DFA state with more NFA states than this is classified with numpy
RESERVE_FROM = 8192  # lexer tables past this many rows grow RESERVE_STEP-fold, then to their limit (ByteDFA._grow)
RESERVE_STEP = 8
CHOOSE_VECTOR = 48  # a lexeme accepted by more terminals than this is read with numpy (_choose_numpy)


@dataclass(frozen=True)
class Terminal:
    """One terminal of a grammar as the lexer sees it."""

    name: str
    start: int          # NFA entry state
    accept: int         # NFA exit state
    priority: int = 0
    literal: bool = False
    lazy: bool = False
    ignored: bool = False
    infinite: bool = False   # language is infinite (identifier-like); set by the lexer
    narrow: bool = False     # at most NARROW_STRINGS strings (a property name, an enum constant); set by the lexer
    family: int = -1         # terminals of one family compete by priority; others coexist
    sealed: int = -1         # a class whose words together are prefix-free (JSON strings), see projection.py


class ByteDFA(CompiledBuild):
    """Lazily built DFA over bytes for a set of terminals sharing one :class:`NFA`."""

    def __init__(self, nfa: NFA, terminals: list[Terminal], max_states: int = 200_000, *,
                 fragments: list[tuple[int, FragmentFacts]] | None = None, universal=(), layers=()):
        """``fragments`` (from the front end): per terminal, the first NFA state of its closed
        fragment and the fragment's :class:`FragmentFacts`; the owner of each NFA state, its
        liveness and each terminal's ``infinite`` then come from them, not whole-NFA searches.
        ``universal``: NFA states from which every rest of their terminal's word is accepted
        (:attr:`~.regex.RegexFragment.universal`; see :meth:`_closure`). ``layers``: the length
        counters' layers (:attr:`~.regex.RegexFragment.layers`; see :mod:`~.layerfold`)."""
        self.nfa = nfa
        self.max_states = max_states
        n = len(nfa)
        owner = np.full(n, -1, dtype=np.int32)
        if fragments is None:
            for tid, term in enumerate(terminals):
                for s in reachable(nfa, term.start):
                    owner[s] = tid
            self.live = coreachable(nfa, {t.accept for t in terminals})
            self.terminals = [with_counts(nfa, t, self.live) for t in terminals]
        else:
            live = bytearray(n)
            for tid, (first, facts) in enumerate(fragments):
                owner[first:first + len(facts.live)] = tid
                live[first:first + len(facts.live)] = facts.live
            self.live = live
            self.terminals = [replace(t, infinite=facts.infinite, narrow=narrow_terminal(facts.infinite, facts.strings))
                              for t, (_f, facts) in zip(terminals, fragments)]
        self.owner = owner
        # the same, for per-state loops (no numpy scalars); a tuple of ints, which the GC untracks
        self._owner_list = tuple(owner.tolist())
        self.accept_of = {term.accept: tid for tid, term in enumerate(terminals)}
        self.lazy = {tid for tid, t in enumerate(terminals) if t.lazy}
        self.ignored_bits = sum(1 << tid for tid, t in enumerate(terminals) if t.ignored)
        # NFA state sets as sorted tuples: tuples of ints drop out of CPython's cyclic collector,
        # frozensets never do (a 36k-state product lexer held 1.2M set elements that every full
        # collection visited: 75 ms each). Made untracked (int_key), in a dict by state id: a dict
        # of untracked tuples and ints is never tracked, a list always is (a full collection
        # walked a 150k-state lexer's list, index and target cache, each entry a cache miss)
        self._states: dict[int, tuple[int, ...]] = {}
        self._index: dict[tuple[int, ...], int] = {}
        # per-state arrays of ints, appended to only: lists the cyclic GC does not walk (see
        # native.gc_free_list), as the per-set arrays of the Earley automaton
        self.alive: list[int] = native.gc_free_list()          # bitset of terminals alive in each state
        self.emit: list[int] = native.gc_free_list()           # id of the emitted terminal set, -1 if not accepting
        self._alive_memo: dict[int, int] = {}   # each distinct alive bitset, as one shared int
        self.term_sets: list[tuple[int, ...]] = native.gc_free_list()
        self._term_set_index: dict[tuple[int, ...], int] = {}
        self._best_memo: dict[tuple[int, ...], int] = {}    # accepting terminals, sorted -> emitted set id
        # (accepting, growing) reading from the compiled rows -> (alive bitset, emitted set id); cleared
        # past READING_MEMO_BYTES (see lexerbuild.CompiledBuild._take_readings)
        self._reading_memo: dict[tuple, tuple[int, int]] = {}
        self._reading_memo_bytes = 0
        self.term_set_ignored: list[bool] = native.gc_free_list()
        self.trans = np.zeros((64, 256), dtype=np.int32)
        self.row_done = np.zeros(64, dtype=bool)
        self.rows_built = 0     # how many entries of row_done are true
        self._target_cache: dict[tuple[int, ...], int] = {}   # sorted NFA target tuple -> DFA state
        self._edge_table: tuple[np.ndarray, ...] | None = None
        self._eps_table: tuple[np.ndarray, np.ndarray] | None = None
        self._lazy_np: np.ndarray | None = None   # per NFA state: its lazy terminal if it accepts one, else -1
        self._eps_closure: dict[int, tuple[int, ...]] = {}     # NFA state -> its epsilon closure (a tuple: untracked by the GC)
        self._accept_np: tuple[np.ndarray, np.ndarray] | None = None
        self._term_arrays: tuple[np.ndarray, ...] | None = None   # per terminal, for _choose_numpy
        self._owner64: np.ndarray | None = None   # owner as int64 (for C)
        self._subset_args: tuple | None = None   # lazy_rows' NFA arrays, dicts and memo (scratch, target cache)
        self.fuel = None   # a core.limits.Fuel charged for lazily built states and rows (set by the grammar)
        self.max_bytes: int | None = None   # bound on nbytes (set by the compiled grammar)
        self.nbytes = 0    # estimated memory of the states built (see STATE_BYTES)
        # universal NFA state -> its epsilon closure (live states only); and as arrays for C
        self._universal = {u: int_key(self._closure_dfs(u)) for u in sorted(set(universal)) if self.live[u]}
        self._univ_table: tuple[np.ndarray, np.ndarray] | None = None
        self.layers: tuple[tuple[int, bytes, bytes, int], ...] = tuple(layers)
        self._intern(frozenset())
        self.trans[DEAD] = DEAD
        self.row_done[DEAD] = True
        self.rows_built = 1
        self._intern(self._closure([t.start for t in terminals]))

    # -- state construction ---------------------------------------------------------------
    def _closure(self, seeds) -> frozenset[int] | tuple[int, ...]:
        """The live NFA states reachable from ``seeds`` by epsilon moves: a sorted tuple from the
        compiled ``eps_closure``, else a union of memoised per-state closures (the reference);
        then :meth:`_drop_dominated`."""
        compiled = native.module()
        if compiled is not None:
            out = compiled.eps_closure(*self._eps_np(), self.live, seeds)
        else:
            memo = self._eps_closure
            parts = []
            for s in seeds:
                c = memo.get(s)
                if c is None:
                    c = memo[s] = int_key(self._closure_dfs(s))
                parts.append(c)
            out = frozenset().union(*parts)
        return self._drop_dominated(out) if self._universal else out

    def _drop_dominated(self, members):
        """``members`` less, for each terminal holding a universal NFA state there, its states
        outside the closure of its least such state (the C ``closure`` of ``_native_subset.c``
        does the same). Exact: the terminal's threads have all read the same bytes (JSON spellings
        decode one way, so all stand between the same characters), a universal state accepts every
        rest of the word from there, so the others' words are among its own; the state's
        readings (alive, accepting) and every later row are the same, and the lexer makes one
        state where an unanchored pattern that has matched made a new one per character."""
        univ = self._universal
        if univ.keys().isdisjoint(members):
            return members
        owner, members = self._owner_list, sorted(members)
        kept: dict[int, set[int]] = {}      # terminal -> the closure of its least universal state
        for s in members:
            if s in univ and owner[s] not in kept:
                kept[owner[s]] = set(univ[s])
        return tuple(s for s in members if owner[s] not in kept or s in kept[owner[s]])

    def _closure_dfs(self, seed: int) -> frozenset[int]:
        eps, live = self.nfa.eps, self.live
        if not live[seed]:
            return frozenset()
        out = set()
        stack = [seed]
        while stack:
            s = stack.pop()
            if s in out:
                continue
            out.add(s)
            for t in eps[s]:
                if live[t] and t not in out:
                    stack.append(t)
        return frozenset(out)

    def _intern(self, nfa_set) -> int:
        """The id of the DFA state of NFA state set ``nfa_set`` (any iterable of NFA state ids),
        made (with its readings) if new."""
        nfa_set = int_key(nfa_set)
        sid = self._index.get(nfa_set)
        if sid is not None:
            return sid
        sid = len(self._states)
        if sid >= self.max_states:
            raise states_refused(self.max_states)
        if self.fuel is not None:
            self.fuel.spend(1 + len(nfa_set))
        size = STATE_BYTES + 32 * len(nfa_set)
        if self.max_bytes is not None and self.nbytes + size > self.max_bytes:
            raise bytes_refused(self.max_bytes, sid)
        self.nbytes += size
        self._states[sid] = nfa_set
        self._index[nfa_set] = sid
        if len(nfa_set) > VECTOR_SET:
            accepting, alive = self._readings_numpy(nfa_set)
        else:
            owner, edges = self._owner_list, self.nfa.edges
            alive = 0
            accepting = []
            for s in nfa_set:
                tid = self.accept_of.get(s)
                if tid is not None:
                    accepting.append(tid)
                    if not edges[s]:  # a finished lexeme: alive only if it is read (below)
                        continue
                alive |= 1 << owner[s]
        best = self._best(accepting)
        if best >= 0:  # a terminal shadowed on this lexeme and unable to grow is dead
            for tid in self.term_sets[best]:
                alive |= 1 << tid
        # one int object per distinct bitset: a full collection walks this list, and 150k
        # separately allocated ints cost it a cache miss each, a few shared ones next to nothing
        self.alive.append(self._alive_memo.setdefault(alive, alive))
        self.emit.append(best)
        if sid >= self.trans.shape[0]:
            self._grow()
        return sid

    def _grow(self) -> None:
        """Room for more states: double the rows while small; past :data:`RESERVE_FROM` rows, room
        for :data:`RESERVE_STEP` times as many, and past that for every state the limits allow, each
        a zeroed anonymous map (pages are faulted in only as rows are written): a large lazy lexer
        copies its table twice at most. Doubling a 150k-state product lexer's table copied 128 MB
        inside one mask (~40-60 ms each time; the table now grows in place where it can,
        see :func:`~.growtable.grow_rows`); the middle step keeps the address space a lexer of
        some thousands of states reserves small (a benchmark worker runs under ``RLIMIT_AS``)."""
        have = self.trans.shape[0]
        cap = 2 * have
        if cap > RESERVE_FROM:
            most = self.max_states
            if self.max_bytes is not None:
                most = min(most, self.max_bytes // STATE_BYTES + 1)
            cap = max(cap, min(most, have * RESERVE_STEP) if have <= RESERVE_FROM else most)
        grow_rows(self, "trans", cap)
        self.row_done = np.concatenate([self.row_done, np.zeros(cap - have, dtype=bool)])

    def _readings_numpy(self, nfa_set: frozenset[int]) -> tuple[list[int], int]:
        """(accepting terminals, alive bits before shadowing) of a large NFA state set, vectorised.

        A terminal is alive when one of its states in the set can still read a byte; an
        accepting state without edges (a finished lexeme) does not count.
        """
        if self._accept_np is None:
            accept = self._accept_tids()
            ends = np.fromiter((not e for e in self.nfa.edges), dtype=bool, count=len(self.nfa.edges))
            self._accept_np = (accept, ends)
        accept, ends = self._accept_np
        states = np.fromiter(nfa_set, dtype=np.int64, count=len(nfa_set))
        tids = accept.take(states)
        hit = tids >= 0
        growing = states[~(hit & ends.take(states))]
        alive = 0
        for t in set(self.owner.take(growing).tolist()):
            alive |= 1 << t
        return tids[hit].tolist(), alive

    def _best(self, accepting: list[int]) -> int:
        """The terminal set a lexeme ending here reads as (its id), from the terminals accepting
        here; -1 if none. Depends on the set of ``accepting`` alone, so it is memoised per set."""
        if not accepting:
            return -1
        key = tuple(sorted(set(accepting)))   # a tuple of ints: untracked by the GC, where a frozenset is not
        best = self._best_memo.get(key)
        if best is None:
            best = self._best_memo[key] = self._choose(accepting)
        return best

    def _choose(self, accepting: list[int]) -> int:
        if len(accepting) > CHOOSE_VECTOR:
            return self.term_set_id(self._choose_numpy(accepting))
        terms = self.terminals
        real = [t for t in accepting if not terms[t].ignored]
        pool = real or accepting
        free = [t for t in pool if terms[t].family < 0]
        families: dict[int, list[int]] = {}
        for t in pool:
            if terms[t].family >= 0:
                families.setdefault(terms[t].family, []).append(t)
        if free:
            top = max(terms[t].priority for t in free)
            free = [t for t in free if terms[t].priority == top]
            if any(terms[t].literal for t in free):
                free = [t for t in free if terms[t].literal or not terms[t].infinite]
        for members in families.values():  # within a family the highest priority wins
            top = max(terms[t].priority for t in members)
            free.extend(t for t in members if terms[t].priority == top)
        chosen = tuple(sorted(free))
        return self.term_set_id(chosen)

    def _choose_numpy(self, accepting: list[int]) -> tuple[int, ...]:
        """The reading :meth:`_choose` picks among many accepting terminals, vectorised over
        per-terminal arrays (priority, literal, infinite, ignored, family)."""
        if self._term_arrays is None:
            ts = self.terminals
            self._term_arrays = tuple(np.array([getattr(t, f) for t in ts], dtype=d) for f, d in (
                ("priority", np.int64), ("literal", bool), ("infinite", bool), ("ignored", bool), ("family", np.int64)))
        priority, literal, infinite, ignored, family = self._term_arrays
        pool = np.array(accepting, dtype=np.int64)
        real = pool[~ignored.take(pool)]
        pool = real if real.size else pool
        fam = family.take(pool)
        free = pool[fam < 0]
        if free.size:
            pr = priority.take(free)
            free = free[pr == pr.max()]
            lit = literal.take(free)
            if lit.any():
                free = free[lit | ~infinite.take(free)]
        grouped = pool[fam >= 0]
        if grouped.size:    # within a family the highest priority wins
            _u, inv = np.unique(family.take(grouped), return_inverse=True)
            pr = priority.take(grouped)
            top = np.full(_u.size, np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(top, inv, pr)
            free = np.concatenate((free, grouped[pr == top[inv]]))
        return tuple(sorted(free.tolist()))

    def term_set_id(self, terms: tuple[int, ...]) -> int:
        """Intern a sorted tuple of terminal ids (a lexeme's reading)."""
        i = self._term_set_index.get(terms)
        if i is None:
            i = self._term_set_index[terms] = len(self.term_sets)
            self.term_sets.append(terms)
            self.term_set_ignored.append(all(self.terminals[t].ignored for t in terms))
        return i

    def within_half_bounds(self) -> bool:
        """Whether the lexer holds at most half the states and bytes its bounds allow (work that
        only saves time, building rows ahead or projecting states, stops past that)."""
        return self.n_states * 2 <= self.max_states and (self.max_bytes is None or self.nbytes * 2 <= self.max_bytes)

    def first_bytes(self, tid: int) -> int:
        """The bytes a lexeme of terminal ``tid`` can start with, as a 256-bit int."""
        edges, live = self.nfa.edges, self.live
        out = 0
        for s in self._closure([self.terminals[tid].start]):
            for lo, hi, target in edges[s]:
                if live[target]:
                    out |= (1 << (hi + 1)) - (1 << lo)
        return out

    def nfa_states(self, sid: int) -> tuple[int, ...]:
        """The NFA states of DFA state ``sid`` (sorted)."""
        return self._states[sid]

    @property
    def owner_of(self) -> tuple[int, ...]:
        """Per NFA state, the terminal that owns it."""
        return self._owner_list

    def find_state(self, nfa_states) -> int | None:
        """The DFA state of a set of NFA states if it was made already, else None."""
        return self._index.get(tuple(sorted(nfa_states)))

    def compute_row(self, sid: int) -> None:
        """Fill the transition row of state ``sid``."""
        if self.row_done[sid]:
            return
        compiled = native.module()
        if compiled is not None:
            self._rows_compiled(compiled, [sid])
            return
        self._row_python(sid)

    def _row_python(self, sid: int) -> None:
        """:meth:`compute_row` in Python: the reference of :meth:`_rows_compiled`."""
        nfa_set = self._states[sid]
        owner, edges = self._owner_list, self.nfa.edges
        stop = set()
        if self.lazy:
            for s in nfa_set:
                tid = self.accept_of.get(s)
                if tid is not None and tid in self.lazy:
                    stop.add(tid)
        movers = [x for x in nfa_set if not (stop and owner[x] in stop)] if stop else nfa_set
        n_edges = sum(len(edges[x]) for x in movers)
        if self.fuel is not None:
            self.fuel.spend(1 + n_edges)
        if n_edges > SWEEP_EDGES:
            row = self._sweep_numpy(movers)
        else:
            row = self._sweep(movers)
        self.trans[sid] = row
        self.row_done[sid] = True
        self.rows_built += 1

    def _row_of_runs(self, runs) -> np.ndarray:
        """A row from ``(first, stop, targets)`` runs in ascending byte order (what every sweep
        computes), interning new states in that order."""
        row = np.zeros(256, dtype=np.int32)
        cache = self._target_cache
        for a, b, key in runs:
            nid = cache.get(key)
            if nid is None:
                nid = cache[key] = self._intern(self._closure(key))
            row[a:b] = nid
        return row

    def _sweep(self, movers: list[int]) -> np.ndarray:
        """The row of the NFA states ``movers``: a sweep over the byte ranges of their edges.

        Each elementary byte range has one set of targets; its DFA state is the closure.
        """
        edges = self.nfa.edges
        opens: dict[int, list[int]] = {}
        closes: dict[int, list[int]] = {}
        for s in movers:
            for lo, hi, t in edges[s]:
                opens.setdefault(lo, []).append(t)
                closes.setdefault(hi + 1, []).append(t)
        runs = []
        active: dict[int, int] = {}
        points = sorted(opens.keys() | closes.keys())
        for i, p in enumerate(points[:-1]):
            for t in closes.get(p, ()):
                if active[t] == 1:
                    del active[t]
                else:
                    active[t] -= 1
            for t in opens.get(p, ()):
                active[t] = active.get(t, 0) + 1
            if active:
                runs.append((p, points[i + 1], tuple(sorted(active))))
        return self._row_of_runs(runs)

    def _edges_np(self) -> tuple[np.ndarray, ...]:
        """All NFA edges as arrays: per-state offsets, range starts, range ends (exclusive), targets."""
        if self._edge_table is None:
            self._nfa_tables()
        return self._edge_table

    def _nfa_tables(self) -> None:
        """Fill ``_edge_table`` and ``_eps_table`` from the NFA's lists: in one C pass
        (``nfa_arrays``) when the compiled module is on, else with numpy."""
        compiled = native.module()
        if compiled is not None:
            arrays = [np.frombuffer(a, dtype=np.int64) for a in compiled.nfa_arrays(self.nfa.eps, self.nfa.edges)]
            self._edge_table, self._eps_table = tuple(arrays[:4]), tuple(arrays[4:])
            return
        edges = self.nfa.edges
        counts = np.fromiter((len(e) for e in edges), dtype=np.int64, count=len(edges))
        flat = np.array([x for e in edges for x in e], dtype=np.int64).reshape(-1, 3)
        offsets = np.zeros(len(edges) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        self._edge_table = (offsets, flat[:, 0].copy(), flat[:, 1] + 1, flat[:, 2].copy())
        eps = self.nfa.eps
        counts = np.fromiter((len(e) for e in eps), dtype=np.int64, count=len(eps))
        offsets = np.zeros(len(eps) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        dst = np.fromiter((t for e in eps for t in e), dtype=np.int64, count=int(offsets[-1]))
        self._eps_table = (offsets, dst)

    def _sweep_numpy(self, movers: list[int]) -> np.ndarray:
        """:meth:`_sweep` vectorised, for NFA state sets with many edges (large character classes).

        Produces the same row and interns new states in the same order (ascending byte
        ranges), so the DFA is identical whichever sweep builds it.
        """
        offsets, lo, end, dst = self._edges_np()
        states = np.fromiter(movers, dtype=np.int64, count=len(movers))
        idx = concat_ranges(offsets.take(states), offsets.take(states + 1))
        lo, end, dst = lo.take(idx), end.take(idx), dst.take(idx)
        points = np.sort(np.concatenate((lo, end)))
        points = points[np.concatenate(([True], points[1:] != points[:-1]))]
        first = np.searchsorted(points, lo)
        last = np.searchsorted(points, end)
        # one (elementary range, target) pair per range an edge covers; sorted and deduplicated
        span = np.int64(len(self.nfa.edges) + 1)
        keys = np.sort(concat_ranges(first, last) * span + np.repeat(dst, last - first))
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
        ranges, targets = np.divmod(keys, span)
        heads = np.flatnonzero(np.concatenate(([True], ranges[1:] != ranges[:-1])))
        bounds = np.append(heads, keys.size).tolist()
        targets = targets.tolist()
        pts = points.tolist()
        return self._row_of_runs([(pts[k], pts[k + 1], tuple(targets[bounds[j]:bounds[j + 1]]))
                                  for j, k in enumerate(ranges.take(heads).tolist())])

    def ensure_rows(self, states: np.ndarray) -> None:
        """Make sure the rows of all ``states`` are computed (vectorised check), in ascending order."""
        if states.size and not self.row_done[states].all():
            todo = np.unique(states[~self.row_done[states]]).tolist()
            compiled = native.module()
            if compiled is not None:
                self._rows_compiled(compiled, todo)
                return
            for s in todo:
                self._row_python(s)

    def step(self, sid: int, byte: int) -> int:
        """One transition (computing the row if needed)."""
        if not self.row_done[sid]:
            self.compute_row(sid)
        return int(self.trans[sid, byte])

    @property
    def n_states(self) -> int:
        """Number of DFA states built so far."""
        return len(self._states)

    def build_all(self, limit: int | None = None, work: int | None = None) -> None:
        """Determinise everything reachable from the start state, bounded by ``limit`` states and,
        if given, by ``work`` units (counted as :class:`~guidewire.core.limits.Fuel` is charged: a
        row costs 1 + its movers' edges, a new state 1 + its NFA states; checked before each row,
        so the build stops at the same row on every machine). Either bound raises
        :class:`LimitExceededError` and leaves the rows built so far in place; the DFA goes on lazily."""
        limit = limit or self.max_states
        compiled = native.module()
        if compiled is not None and len(self._states) == 2 and not self.row_done[START] and self.fuel is None:
            self._build_all_compiled(compiled, limit, work)
            return
        own = self.fuel is None
        fuel = self.fuel = Fuel(1 << 62, None) if own else self.fuel
        base = fuel.spent
        try:
            i = 0
            while i < len(self._states):
                if i >= limit:
                    raise LimitExceededError(f"lexer DFA exceeds {limit} states")
                if work is not None and fuel.spent - base > work:
                    raise LimitExceededError(f"lexer DFA takes over {work} work units to build ({i} rows so far)")
                self.compute_row(i)
                i += 1
        finally:
            if own:
                self.fuel = None

    def _eps_np(self) -> tuple[np.ndarray, np.ndarray]:
        """All epsilon moves as arrays: per-state offsets, targets."""
        if self._eps_table is None:
            self._nfa_tables()
        return self._eps_table

    def _univ_np(self) -> tuple[np.ndarray, np.ndarray]:
        """The closures of the universal NFA states as arrays (per-state offsets, members; empty
        for the other states), for the C subset construction's :meth:`_drop_dominated`."""
        if self._univ_table is None:
            n = len(self.nfa.eps)
            counts = np.zeros(n, dtype=np.int64)
            for u, c in self._universal.items():
                counts[u] = len(c)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            members = [x for u in sorted(self._universal) for x in self._universal[u]]
            self._univ_table = (offsets, np.array(members, dtype=np.int64))
        return self._univ_table

    def equivalent_states(self, prefer: np.ndarray | None = None, depth: int | None = None) -> np.ndarray:
        """Representative of each state's class of indistinguishable states.

        Two states are equivalent when every byte string drives them through states with
        the same ``emit`` and ``alive`` labels (Moore's partition refinement), so they lex
        every continuation identically. With ``depth``, only strings of at most ``depth``
        bytes count (refinement stops after that many rounds): states that no token of at
        most ``depth`` bytes can tell apart, such as the positions of a long ``maxLength``
        counter far from its bound, share one class. The representative is the smallest
        id in the class, or the smallest id among its ``prefer`` states (a bool per state)
        when the class has any. Call on a fully built DFA (:meth:`build_all`).
        """
        n = self.n_states
        trans = self.trans[:n]
        trans = trans[:, refine.byte_classes(trans)]   # bytes with identical columns are interchangeable
        index: dict[tuple[int, int], int] = {}
        label0 = np.array([index.setdefault(pair, len(index)) for pair in zip(self.emit, self.alive)],
                          dtype=np.int64)
        label0[DEAD] = len(index)  # the dead state is never equivalent to a live one
        compiled = native.module()
        if compiled is not None:   # exact, in C, by splitters: no hashes, no round over every state
            label = np.empty(n, dtype=np.int64)
            n_classes, _stable = compiled.refine_split(label0, np.ascontiguousarray(trans, dtype=np.int32),
                                                       -1 if depth is None else depth, label)
        else:
            label, n_classes = refine.refine_numpy(label0, trans, depth)
        first = np.full(n_classes, n, dtype=np.int64)
        np.minimum.at(first, label, np.arange(n))
        if prefer is not None and prefer[:n].any():
            picked = np.flatnonzero(prefer[:n])
            best = np.full(n_classes, n, dtype=np.int64)
            np.minimum.at(best, label[picked], picked)
            first = np.where(best < n, best, first)
        return first[label]



def int_key(states) -> tuple[int, ...]:
    """The distinct NFA state ids of ``states`` as a sorted tuple (a lexer state's key), made
    untracked by the cyclic collector on the compiled path (``_native.int_key``; the reference
    is ``tuple(sorted(set(states)))``)."""
    compiled = native.module()
    if compiled is not None:
        return compiled.int_key(states)
    return tuple(sorted(set(states)))
