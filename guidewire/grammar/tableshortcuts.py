"""Inheritance shortcuts of the token-table build: tokens answered without walking them.

Tokens whose walk from a state meets a hub's or ``START``'s walk before any lexeme ends are
inherited from that state's table; tokens that run along a uniform counter chain get their
final state by arithmetic; hubs that read a first byte as this state does lend their groups.
"""

from __future__ import annotations

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD, START
from .tablearrays import _add_row, _distinct, _flatnonzero, _kept, _row_of
from .dfamirror import _ROW
from .vocabindex import SENTINEL, tails_within


class InheritanceShortcuts:
    """Mixin of :class:`TableBuilder`: split candidates off before the walk (see module docs)."""

    _CHAIN_MEMO_STATES = 4096   # states the memo of the last chain followed holds at most

    def _follow(self, q1: int, b: int, need: int) -> list[int]:
        """``[q1, q2, ...]``: the states reading byte ``b`` over and over from ``q1``, at most
        ``need`` of them (fewer where ``b`` kills one). The states of a counter chain are visited
        in order (a string's ``maxLength`` positions, one table each), and the chain from the
        next one is the tail of this one: the last chain followed is kept, and a state on it
        starts from there (rows never change once built, so a kept chain stays true)."""
        memo = getattr(self, "_chain_memo", None)   # (byte, states, first index of each, ended)
        if memo is None or memo[0] != b or q1 not in memo[2] or len(memo[1]) > self._CHAIN_MEMO_STATES:
            memo = self._chain_memo = (b, [q1], {q1: 0}, [False])
        _b, states, index, ended = memo
        i = index[q1]
        if len(states) - i < need and not ended[0]:
            rows = self._row_lists()
            last = states[-1]
            while len(states) - i < need:
                last = rows[last][b]
                if last == DEAD:
                    ended[0] = True
                    break
                index.setdefault(last, len(states))
                states.append(last)
        return states[i:i + need] if need > 0 else [q1]

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
        if cand.size < tuning.CHAIN_MIN_TOKENS:
            return dead
        live = row[row != DEAD]
        counts = np.bincount(live)
        q1 = int(counts.argmax())
        if counts[q1] < tuning.MIN_LOOP_BYTES or self.hub[q1] >= 0:   # hubs are jumped over by the walk
            return dead
        in_b = row == q1
        tails = tails_within(self.vocab, in_b)   # per token: every byte after its first is in B
        lens_all = self.layout.lens
        compiled = native.module()
        if compiled is not None:   # the counts and the longest pure entrant in one pass
            n_enter, n_pure, need = compiled.chain_scan(tails, lens_all, cand, state, q1)
            if n_enter < tuning.CHAIN_MIN_TOKENS // 2 or n_pure < tuning.CHAIN_MIN_TOKENS // 2:
                return dead
        else:
            # a token is pure when no byte after its first lies outside B
            enter = _flatnonzero(state == q1)
            if enter.size < tuning.CHAIN_MIN_TOKENS // 2:
                return dead
            pure = np.zeros(cand.size, dtype=bool)
            pure[enter] = tails.take(cand.take(enter))
            n_pure = int(np.count_nonzero(pure))
            if n_pure < tuning.CHAIN_MIN_TOKENS // 2:
                return dead
            lens = lens_all.take(cand)
            need = int(lens.max(where=pure, initial=0))
        b_bytes = _flatnonzero(in_b)
        chain = self._follow(q1, int(b_bytes[0]), need)   # chain[i]: the state after i + 1 bytes of B
        if len(chain) > 1:                  # ... then cut where some other byte of B leaves the chain
            steps = self.dfa.trans.take(chain[:-1], axis=0).take(b_bytes, axis=1)
            broken = _flatnonzero((steps != np.asarray(chain[1:])[:, None]).any(axis=1))
            if broken.size:
                chain = chain[:int(broken[0]) + 1]
        self._sync()
        if compiled is not None:   # split and compaction in one pass
            out = np.empty((5, cand.size), dtype=np.int64)
            kept, n_split = compiled.chain_split(tails, lens_all, cand, state, ptr, q1,
                                                 np.asarray(chain, dtype=np.int64), *out)
            if not n_split:
                return dead
            return out[0, :kept], out[1, :kept], out[2, :kept], (out[3, :n_split], out[4, :n_split])
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
        layout = self.layout
        if cand.size < tuning.MIN_INHERITED_TOKENS or not self._hubs:
            return cand, state, ptr, {}
        # first a check per state one byte on, not per token: can a byte reach a hub?
        if not self._to_hub(row[row != DEAD]):
            return cand, state, ptr, {}
        second = layout.second.take(cand)          # ptr is still at every token's second byte
        nxt = self.trans.take(state * _ROW + second)
        if self._rows is None:      # hubs are known by their copied rows
            self._need(nxt, build=False)
        # a token's end (negative) clips to DEAD, which is never a hub
        slot = self.hub.take(nxt, mode="clip")
        hit = _flatnonzero(slot >= 0)
        if hit.size < tuning.MIN_INHERITED_TOKENS:
            return cand, state, ptr, {}
        first = layout.first.take(cand.take(hit))
        second = second.take(hit)
        lands = nxt.take(hit)
        # the hub's own walk over the same two bytes
        via = self.trans.take(lands * _ROW + first)
        if self._rows is None:
            self._need(via)
        back = self.trans.take(np.maximum(via, 0) * _ROW + second)
        meet = (via > DEAD) & (back == lands)
        take = np.zeros(cand.size, dtype=bool)
        out: dict[int, np.ndarray] = {}
        for h in _distinct(lands[meet]):
            sel = hit[meet & (lands == h)]
            if sel.size >= tuning.MIN_INHERITED_TOKENS:
                take[sel] = True
                out[h] = _row_of(layout.ids.take(cand.take(sel)), layout.words)
        if not out:
            return cand, state, ptr, {}
        keep = ~take
        return (*_kept(keep, cand, state, ptr), out)

    def _start_meets(self, row, cand, state, ptr):
        """Split off the candidates that read from here exactly as from ``START``.

        The walk from here and the walk from ``START`` run in lockstep for at most
        :data:`~.tabletuning.MEET_STEPS` bytes; a token reads the same both ways when, before either
        walk ends a lexeme, they reach the same state, or both end their lexemes at the
        same byte with the same terminal set (both restart at ``START`` from there), or
        the token ends with the same terminals alive on both. The typical case is a
        whitespace-counter state, whose tokens (``" foo"``: a space, then a new lexeme) read
        as from ``START`` while the run stays under the bound. Returns the remaining
        ``(cand, state, ptr)`` and the row of tokens inherited from ``START`` (or None).
        ``row`` is this state's transition row as the candidates were taken.
        """
        layout = self.layout
        if cand.size < tuning.MIN_INHERITED_TOKENS:
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
        if np.count_nonzero(verdict) < tuning.MIN_INHERITED_TOKENS:
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
        for _ in range(tuning.MEET_STEPS - 2):
            if not idx.size:
                break
            if self._rows is None:
                self._need(np.concatenate([a, z]))
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
        if hit.size < tuning.MIN_INHERITED_TOKENS:
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
        disjoint selectors. The first pair's selector also holds the *quiet* bytes: dead from
        both states and restarting neither, so ``h``'s mask holds no token they start and adding
        them changes no mask; they make the selector's complement small (a property-name trie
        state differs from its key-string hub in a byte or two), so its row is cheap and shared.
        """
        if self.lookup is None or not self._hubs:
            return []
        compiled = native.module()
        if compiled is None:
            return reusable_hubs_numpy(self.dfa.trans, self.hub, self.dfa.emit, q, row, self._busy,
                                       tuning.MIN_REUSED_BYTES)
        busy = np.fromiter(self._busy, dtype=np.int64, count=len(self._busy))
        return [(h, np.frombuffer(sel, dtype=bool))
                for h, sel in compiled.reusable_hubs(self.dfa.trans, self.hub, self.emit, q, row, busy,
                                                     tuning.MIN_REUSED_BYTES, START)]

    def _class_of(self, q: int) -> int:
        """The representative of ``q``'s class of equivalent states (tables are built per class)."""
        return q if self.canon is None else self.canon(q)

    def _may_inherit(self, q: int, h: int) -> bool:
        """Whether the table of hub ``q`` may inherit from hub ``h``: not ``START`` (it inherits
        nothing), and the inheritance of the hub tables built so far never leads from ``h`` back to
        ``q`` (their edges are kept, evicted tables' too), so a mask that follows it ends."""
        if q == START or h == START:
            return False
        rep = self._class_of
        q, seen, todo = rep(q), set(), [rep(h)]
        while todo:
            a = todo.pop()
            if a == q:
                return False
            if a not in seen:
                seen.add(a)
                todo.extend(self._hub_edges.get(a, ()))
        return True

    def _inherits_from(self, q: int, h: int) -> None:
        """Record that hub ``q``'s table inherits from hub ``h`` (see :meth:`_may_inherit`)."""
        self._hub_edges.setdefault(self._class_of(q), set()).add(self._class_of(h))

    def _merge_plan(self, q: int, reused: list) -> list:
        """How a base table of ``q`` merges the reused hubs ``(h, first)`` it can: a list of
        ``(h, first, pieces, kept)``, ``pieces`` the ``(table, row)`` pairs whose groups it takes
        (restricted to ``row``) and ``kept`` the rows it inherits itself.

        A hub's table may inherit (from other hubs, acyclically); its inherited rows go along with
        its groups, restricted to the selected first bytes: kept as ``q``'s own inherited rows where
        :meth:`_may_inherit` allows it (never for ``START``), else merged from the inherited table in
        turn (each class's table once per token: a row reaching it again adds only new tokens). The
        kept edges are recorded at once, so no table built later in this build can close a cycle
        through ``q``; the tables are looked up here once and the merge reads these very tables. A
        hub is not reused where that would read the table of a state being built (``q``'s own,
        say), nor one equivalent to such a state (the same class: its lookup built that table again,
        inside itself): its first bytes are then walked with the rest."""
        rep = self._class_of
        busy = {rep(b) for b in self._busy}
        plan = []
        for h, first in reused:
            if rep(h) in busy:
                continue
            pieces, kept, reached, ok = [], {}, {}, True
            todo = [(self._busy_lookup(h), self.first_byte_row(first))]
            while todo and ok:
                table, part = todo.pop()
                pieces.append((table, part))
                for h2, r in table.inherit:
                    sub = r & part
                    if not sub.any():
                        continue
                    if self._may_inherit(q, h2):
                        _add_row(kept, h2, sub)
                        continue
                    c = rep(h2)
                    if c in busy:
                        ok = False
                        break
                    seen = reached.get(c)
                    if seen is not None:
                        sub = sub & ~seen
                        if not sub.any():
                            continue
                    reached[c] = sub if seen is None else seen | sub
                    todo.append((self._busy_lookup(h2), sub))
            if ok:
                for h2 in kept:
                    self._inherits_from(q, h2)
                plan.append((h, first, pieces, kept))
        return plan

    def _busy_lookup(self, h: int):
        """``lookup(h)``, with ``h`` marked busy while its table is built (no reuse cycles)."""
        if h in self._busy:
            return self.lookup(h)
        self._busy.add(h)
        try:
            return self.lookup(h)
        finally:
            self._busy.discard(h)

    def _merge_hubs(self, groups, masks, plan):
        """Add the groups of a :meth:`_merge_plan`'s pieces, each restricted to its row: returns
        ``(groups, masks, inherited rows to keep)``."""
        index = {g: i for i, g in enumerate(groups)}
        groups = list(groups)
        extra = []
        kept: dict[int, np.ndarray] = {}
        for _h, _first, pieces, kept_here in plan:
            for table, part in pieces:
                sub = table.masks & part
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
            for h2, r in kept_here.items():
                _add_row(kept, h2, r)
        if extra:
            masks = np.concatenate([masks] + extra)
        return tuple(groups), masks, kept


def reusable_hubs_numpy(trans: np.ndarray, hub: np.ndarray, emit, q: int, row: np.ndarray, busy,
                        min_bytes: int) -> list[tuple[int, np.ndarray]]:
    """The hubs a table of ``q`` reuses, with their first-byte selectors (see
    :meth:`InheritanceShortcuts._reusable_hubs`): ``trans`` the lexer's rows, ``hub`` per state its
    hub slot or -1, ``emit`` per state its emitted terminal set or -1, ``row`` q's row (int64)
    with the bytes answered elsewhere DEAD, ``busy`` states whose tables are being built."""
    out = []
    live = row != DEAD
    targets = row[live]
    for h in _distinct(targets[hub.take(targets) >= 0]):
        if h == q or h in busy:
            continue
        first = live & (trans[h] == row)
        if first.sum() >= min_bytes:
            if not out:
                quiet = ~live & (trans[h] == DEAD)
                if emit[h] >= 0 or (q != START and emit[q] >= 0):
                    quiet &= trans[START] == DEAD
                first = first | quiet
            out.append((h, first))
            live = live & ~first
    return out
