"""Token tables shared between the positions of a length counter far from its bounds.

A JSON string with ``maxLength`` (or a ``minLength`` floor) is a product of the string's automaton
and a count of characters: the front end unrolls the count into *layers* (the states after ``k``
characters, with the states inside the spelling of the next character), and the lexer makes a new
state at every position. Each new state needed its own token table: a long string typed token by
token built one table per token (a ``maxLength: 5000`` text: thousands of tables, each a walk
of most of a 262k vocabulary).

Layers ``k`` and ``k + 1`` are *uniform* when they have the same states in the same order with the
same readings (live, accepting, universal) and the same edges, a target one layer on (or in the
same layer) taken to the same place in it, any other target the same state. Across a run of uniform
layers ``a .. m``, shifting a state set down by ``j`` layers (each state to the one at its place
``j`` layers lower) is an isomorphism of everything the lexer reads from there on up to layer
``m``. A token of at most ``depth`` bytes (the vocabulary's longest) reads at most ``depth``
characters, so from a lexer state whose counter states lie in layers ``kmin .. kmax`` with
``kmax + depth <= m``, every token reads the same lexemes and ends with the same terminals alive
as from the state shifted down to the run's first layer ``a``; the other NFA states of the lexer
state (other terminals, other counters) evolve on their own and are kept as they are, and a
lexer state's readings are unions over its NFA states, so the verdicts are the same. The shifted
state (a lexer state like any other, made if new) is the *fold* of the state: its table and masks
serve every position of the run more than a token from the bound.

The layers come from :func:`~.jsonstring.json_string_into` (:attr:`~.regex.RegexFragment.layers`);
uniformity is checked here on the NFA itself, vectorised, once per counter.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import LimitExceededError, WorkLimitExceededError
from .lexer import START, ByteDFA
from .tablearrays import concat_ranges

FOLD_MEMO_BYTES = 2 << 20      # bound of the lexer state -> fold memo (cleared past it)
FOLD_ENTRY_BYTES = 120         # one memo entry: two ints and the dict slot
FOLD_BLOCK = 256               # layers checked for uniformity at a time
FOLD_NEW_BLOCKS = 2            # blocks a fold checks below its own before settling for a nearer layer


class LayerFold:
    """The folds of a lexer's states for tokens of at most ``depth`` bytes (see the module)."""

    def __init__(self, dfa: ByteDFA, depth: int):
        self.dfa = dfa
        self.depth = depth
        self._families = []     # (first NFA id, per-state layer array) of the counters deep enough to fold
        self._tops = []         # per family: its last layer
        for lo, raw, shape, _elided in dfa.layers:
            layer = np.frombuffer(raw, dtype=np.int32)
            top = int(layer.max()) if layer.size else -1
            if top > depth + 1:
                self._families.append((lo, layer, np.frombuffer(shape, dtype=np.int32)))
                self._tops.append(top)
        self.active = bool(self._families)
        self._fam: np.ndarray | None = None     # per NFA state: its family, -1 outside every counter
        self._runs: list = [None] * len(self._families)    # per family: its _Runs, made on first use
        self._memo: dict[int, int] = {}
        self.folded = 0         # lexer states folded onto another so far

    def fold(self, q: int) -> int:
        """The lexer state whose token table and masks ``q`` shares: its fold, or ``q`` itself
        (no counter state far enough from the bounds, START, or a limit reached)."""
        if not self.active or q <= START:
            return q
        got = self._memo.get(q)
        if got is not None:
            return got
        if len(self._memo) * FOLD_ENTRY_BYTES > FOLD_MEMO_BYTES:
            self._memo.clear()
        out, final = self._fold(q)
        if final:
            self._memo[q] = out
            self._memo.setdefault(out, out)     # a fold is its own (a run's start found later keeps it)
        return out

    def shifted(self, nfa_set) -> tuple[int, ...] | None:
        """The fold of the NFA state set ``nfa_set`` (sorted ids) as a set, or None if no counter
        of it can shift."""
        if self._fam is None:
            self._fam = family_of(self.dfa, [(lo, layer) for lo, layer, _shape in self._families])
            self._readings = nfa_readings(self.dfa)
        states = np.fromiter(nfa_set, dtype=np.int64, count=len(nfa_set))
        fams = self._fam.take(states)
        if not (fams >= 0).any():
            return None
        out, changed = states.copy(), False
        for f in np.unique(fams[fams >= 0]).tolist():
            at = np.flatnonzero(fams == f)
            lo, layer, _shape = self._families[f]
            local = states.take(at) - lo
            lay = layer.take(local)
            kmin, kmax = int(lay.min()), int(lay.max())
            if kmin == 0 or kmax + self.depth > self._tops[f]:
                continue        # on the first layer already, or a token could read past the top
            runs = self._runs[f]
            if runs is None:    # made at a counter's first state past its first layer
                runs = self._runs[f] = _Runs(self.dfa, f, *self._families[f], self._fam, self._readings)
            new = runs.shift(local, lay, kmin, kmax + self.depth)
            if new is not None:
                out[at] = new
                changed = True
        return tuple(np.sort(out).tolist()) if changed else None

    def _fold(self, q: int) -> tuple[int, bool]:
        """The fold and whether it may be memoised (not after a spent work budget)."""
        dfa = self.dfa
        kept = self.shifted(dfa.nfa_states(q))
        if kept is None:
            return q, True
        p = dfa.find_state(kept)
        if p is not None:
            self.folded += 1
            return p, True
        if not dfa.within_half_bounds():    # the fold's rows and table could pass a limit q's would not
            return q, False
        try:
            p = dfa._intern(kept)
        except WorkLimitExceededError:
            return q, False     # this step's budget is spent: try again at a later one
        except LimitExceededError:
            return q, True      # the lexer is full: q's own table is as exact
        self.folded += 1
        return p, True


def family_of(dfa: ByteDFA, families) -> np.ndarray:
    """Per NFA state, the index of the counter (``(lo, layer)`` in ``families``) it belongs to, -1
    outside them."""
    fam = np.full(len(dfa.nfa.eps), -1, dtype=np.int32)
    for f, (lo, layer) in enumerate(families):
        fam[lo + np.flatnonzero(layer >= 0)] = f
    return fam


def nfa_readings(dfa: ByteDFA) -> np.ndarray:
    """Per NFA state, what the lexer reads there: live 1, accepting 2, universal 4."""
    readings = np.frombuffer(dfa.live, dtype=np.uint8).copy()
    readings[list(dfa.accept_of)] |= 2
    readings[list(dfa._universal)] |= 4
    return readings


class _Runs:
    """One counter's layers in order, and which consecutive layers are uniform: checked a block of
    :data:`FOLD_BLOCK` layers at a time, as folds need them (see the module)."""

    def __init__(self, dfa: ByteDFA, f: int, lo: int, layer: np.ndarray, shape: np.ndarray, fam: np.ndarray,
                 readings: np.ndarray):
        self.dfa, self.f, self.fam, self.readings, self.shape = dfa, f, fam, readings, shape
        self.lo, self.layer = lo, layer
        local = np.flatnonzero(layer >= 0).astype(np.int32)
        lay = layer.take(local)
        order = np.argsort(lay, kind="stable")     # ids ascend within a layer; layers come nearly in order
        local = local.take(order)
        self.ids = ids = local + lo             # states by (layer, id): layer L is ids[seg[L]:seg[L + 1]]
        self.lay = lay = lay.take(order)
        self.top = top = int(lay[-1])
        self.seg = seg = np.zeros(top + 2, dtype=np.int64)
        np.cumsum(np.bincount(lay, minlength=top + 1), out=seg[1:])
        slot = np.full(layer.size, -1, dtype=np.int32)      # a state's place in its layer
        slot[local] = np.arange(ids.size, dtype=np.int32) - seg.take(lay).astype(np.int32)
        self.slot = slot
        self._blocks: dict[int, np.ndarray] = {}    # block -> uniform[L] for its pairs (L, L + 1)

    def shift(self, local: np.ndarray, lay: np.ndarray, kmin: int, m: int) -> np.ndarray | None:
        """This counter's states in one lexer state (``local``: their offsets from the counter's
        first id; ``lay``: their layers, ``kmin`` the least; ``m``: the highest layer a token can
        reach from them, at most the top) shifted down as far as their block of layers allows: to
        the first layer ``a`` at or after the block's start with layers ``a .. m`` all uniform. None
        where that is no lower. Every state of a block folds to the same layer, so the tables of a
        long counter are one per block."""
        a = self._run_start(kmin, m)
        j = kmin - a
        if j <= 0:
            return None
        return self.shift_by(local, lay, j)

    def shift_by(self, local: np.ndarray, lay: np.ndarray, j: int) -> np.ndarray:
        """This counter's states ``local`` (offsets from its first id, in layers ``lay``) each moved
        ``j`` layers down to the state at its place there (the caller knows the layers uniform)."""
        return self.ids.take(self.seg.take(lay - j) + self.slot.take(local))

    def last_run(self) -> tuple[int, int]:
        """``(a, m)``: the last (highest) run of uniform layers ``a .. m``, ``(0, 0)`` if none (every
        block checked, where folds look at a few: see :meth:`_run_start`)."""
        pairs = np.concatenate([self._block(c) for c in range((self.top + FOLD_BLOCK - 1) // FOLD_BLOCK)] or
                               [np.zeros(0, dtype=bool)])[:self.top]
        edges = np.flatnonzero(np.diff(np.concatenate(([0], pairs.astype(np.int8), [0]))))
        if not edges.size:
            return 0, 0
        return int(edges[-2]), int(edges[-1])       # pairs a .. m - 1: layers a .. m

    def _run_start(self, kmin: int, m: int) -> int:
        """The first layer of the run of uniform layers that ends at ``m``, looked for down to layer
        0 a block at a time; where more than :data:`FOLD_NEW_BLOCKS` blocks below ``kmin``'s would
        be checked first, the lowest layer checked (a fold just as exact, shared by fewer states)."""
        c = (m - 1) // FOLD_BLOCK
        low = kmin // FOLD_BLOCK
        new = 0
        while True:
            known = c in self._blocks
            if not known and c < low and new >= FOLD_NEW_BLOCKS:
                return (c + 1) * FOLD_BLOCK
            new += not known
            pairs = self._block(c)
            upto = min(FOLD_BLOCK, m - c * FOLD_BLOCK)      # this block's pairs below m
            broken = np.flatnonzero(~pairs[:upto])
            if broken.size:
                return c * FOLD_BLOCK + int(broken[-1]) + 1
            if c == 0:
                return 0
            c -= 1

    def _block(self, c: int) -> np.ndarray:
        """uniform[L] for the pairs ``(L, L + 1)`` with ``L`` in block ``c`` (fewer past the top)."""
        got = self._blocks.get(c)
        if got is None:
            first = c * FOLD_BLOCK
            got = self._blocks[c] = self._uniform(first, min(first + FOLD_BLOCK, self.top))
        return got

    def _uniform(self, first: int, last: int) -> np.ndarray:
        """uniform[L] for ``first <= L < last``: layers of one shape (the front end's, see
        :func:`~.jsonstring._counter_layers`: the same automaton state for state, edges one layer
        on) whose states read alike place for place (live: liveness is the whole NFA's) and hold no
        universal state. :meth:`checked_uniform` is the reference, on the NFA's edges."""
        shape = self.shape[first:last + 1]
        seg = self.seg[first:last + 2]
        base = int(seg[0])
        readings = self.readings.take(self.ids[base:int(seg[-1])])
        sizes = np.diff(seg)
        uniform = (shape[:-1] == shape[1:]) & (sizes[:-1] == sizes[1:])
        same = np.zeros(uniform.size, dtype=bool)
        cut = (np.flatnonzero(sizes[1:] != sizes[:-1]) + 1).tolist()
        for a, z in zip([0] + cut, cut + [sizes.size]):     # runs of layers of one size: one 2-D compare
            if z - a >= 2:
                rows = readings[int(seg[a]) - base:int(seg[z]) - base].reshape(z - a, -1)
                same[a:z - 1] = (rows[1:] == rows[:-1]).all(axis=1)
        univ = np.bincount(self.lay[base:int(seg[-1])] - first, weights=(readings & 4) > 0,
                           minlength=sizes.size) > 0
        return uniform & same & ~(univ[:-1] | univ[1:])

    def checked_uniform(self, first: int, last: int) -> np.ndarray:
        """uniform[L] for ``first <= L < last`` from the NFA itself: layers with the same readings
        and edge counts state for state, the same byte ranges, and targets at the same place one
        layer on (or in the same layer), any other target the same state (vectorised)."""
        dfa, f, fam, lo, layer, slot = self.dfa, self.f, self.fam, self.lo, self.layer, self.slot
        ids = self.ids[self.seg[first]:self.seg[last + 1]]
        lay = self.lay[self.seg[first]:self.seg[last + 1]] - first
        top = last - first
        # per state: its readings and edge counts; per edge and epsilon move: where it goes
        offsets, b_lo, b_end, dst = dfa._edges_np()
        e_off, e_dst = dfa._eps_np()
        readings = self.readings.take(ids)
        univ = readings & 4
        n_edges = offsets.take(ids + 1) - offsets.take(ids)
        n_eps = e_off.take(ids + 1) - e_off.take(ids)
        seg = _starts(lay, top)
        uniform = _same_next(np.stack([readings, n_edges, n_eps], axis=1), lay, seg)
        uniform &= ~_any_per_layer(univ > 0, lay, top)

        def targets(t: np.ndarray, src_layer: np.ndarray) -> np.ndarray:
            inside = fam.take(t) == f
            at = np.where(inside, t - lo, 0)
            rel = np.where(inside, layer.take(at) - first - src_layer, 0)
            ref = np.where(inside, slot.take(at), t)
            return np.stack([inside.astype(np.int64), rel, ref], axis=1)

        idx = concat_ranges(offsets.take(ids), offsets.take(ids + 1))
        src = np.repeat(lay, n_edges)
        codes = np.concatenate([np.stack([b_lo.take(idx), b_end.take(idx)], axis=1), targets(dst.take(idx), src)], axis=1)
        uniform &= _same_next(codes, src, _starts(src, top))
        idx = concat_ranges(e_off.take(ids), e_off.take(ids + 1))
        src = np.repeat(lay, n_eps)
        uniform &= _same_next(targets(e_dst.take(idx), src), src, _starts(src, top))
        return uniform


def _starts(seg_of_row: np.ndarray, top: int) -> np.ndarray:
    """Segment starts (``top + 2`` entries) of rows sorted by segment ``seg_of_row``."""
    return np.concatenate(([0], np.cumsum(np.bincount(seg_of_row, minlength=top + 1))))


def _any_per_layer(flag: np.ndarray, lay: np.ndarray, top: int) -> np.ndarray:
    """Per pair of layers ``(L, L + 1)`` (``top`` entries): whether either has a flagged state."""
    has = np.bincount(lay, weights=flag, minlength=top + 1) > 0
    return has[:-1] | has[1:]


def _same_next(rows: np.ndarray, seg_of_row: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per pair of segments ``(L, L + 1)``: whether segment ``L``'s rows equal segment ``L + 1``'s,
    row by row (``rows`` sorted by segment; ``starts`` the segments' starts, one past the last)."""
    top = starts.size - 2
    lens = np.diff(starts)
    same = lens[:-1] == lens[1:]
    if not rows.shape[0]:
        return same
    inner = seg_of_row < top
    at = np.flatnonzero(inner)
    at = at[same.take(seg_of_row.take(at))]
    seg = seg_of_row.take(at)
    partner = at - starts.take(seg) + starts.take(seg + 1)
    differs = np.zeros(at.size, dtype=bool)
    for col in rows.T:          # a column at a time: take on a 2-D array's rows is slow
        col = np.ascontiguousarray(col)
        differs |= col.take(at) != col.take(partner)
    bad = np.zeros(top, dtype=bool)
    bad[seg[differs]] = True
    return same & ~bad
