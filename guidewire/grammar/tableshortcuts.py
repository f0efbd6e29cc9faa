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
from .vocabindex import SENTINEL, UTF8_LEAD_NEXT, UTF8_RANGES, tails_within, utf8_slice, utf8_tokens

ALL_LEADS = np.arange(0xC2, 0xF5, dtype=np.int64)    # every lead byte of well-formed UTF-8
_NO_LIMIT = 1 << 62


def slice_count(member: np.ndarray, chars: np.ndarray, cand: np.ndarray, limit: int = _NO_LIMIT) -> tuple[int, int]:
    """(how many, most characters among) the candidates ``cand`` that are members (``member``, bool
    per layout index) of fewer than ``limit`` characters (``chars``, int64). In C when it is built
    (no vocabulary-sized copies); the numpy lines below are its reference."""
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    compiled = native.module()
    if compiled is not None:
        return compiled.slice_scan(member, chars, cand, limit)
    k = chars.take(cand)
    sel = member.take(cand) & (k < limit)
    return int(np.count_nonzero(sel)), int(k.max(where=sel, initial=0))


def slice_drop(member: np.ndarray, chars: np.ndarray, limit: int, cand, first, ptr):
    """``(cand, first, ptr)`` without the candidates :func:`slice_count` counts (order kept)."""
    compiled = native.module()
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    if compiled is None:
        return _kept(~(member.take(cand) & (chars.take(cand) < limit)), cand, first, ptr)
    out = np.empty((3, cand.size), dtype=np.int64)
    kept = compiled.slice_drop(member, chars, limit, cand, np.ascontiguousarray(first, dtype=np.int64),
                               np.ascontiguousarray(ptr, dtype=np.int64), out[0], out[1], out[2])
    return out[0, :kept], out[1, :kept], out[2, :kept]


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

    def _chars_land(self, s: int, t: int, leads: np.ndarray) -> bool:
        """Whether every UTF-8 character whose lead byte is in ``leads`` takes lexer state ``s`` to
        ``t`` without killing any state on the way (so no lexeme ends inside it)."""
        if not leads.size:
            return True
        firsts = self.dfa.trans[s].take(leads)
        if (firsts == DEAD).any():
            return False
        pairs = set(zip(firsts.tolist(), UTF8_LEAD_NEXT.take(leads).tolist()))
        return all(self._rest_lands(p, u, t) for p, u in pairs)

    def _rest_lands(self, p: int, u: int, t: int) -> bool:
        """Whether, from lexer state ``p`` inside a character (UTF-8 acceptor state ``u``), every
        way to finish the character reaches ``t`` without killing a state: a walk of the lexer DFA
        in product with the acceptor :data:`~.vocabindex.UTF8_RANGES` (at most 3 bytes deep).
        Memoised per ``(p, u, t)``."""
        key = (p, u, t)
        known = self._lands.get(key)
        if known is not None:
            return known
        dfa = self.dfa
        if not dfa.row_done[p]:
            dfa.compute_row(p)
        trans = dfa.trans[p].copy()     # a copy: a view would pin the lexer's table, copied when it grows
        ok = True
        for lo, hi, nu in UTF8_RANGES[u]:
            nxt = trans[lo:hi + 1]
            if nu == 0:         # the character ends: in t, nothing killed
                ok = bool((nxt == t).all())
            elif (nxt == DEAD).any():
                ok = False
            else:
                states = _distinct(nxt.astype(np.int64))
                ok = len(states) <= tuning.UTF8_PRODUCT_STATES and all(self._rest_lands(r, nu, t) for r in states)
            if not ok:
                break
        self._lands[key] = ok
        return ok

    def _char_step(self, s: int, key: bytes, ascii_bytes: np.ndarray, leads: np.ndarray) -> int:
        """The one lexer state every character of a class takes ``s`` to, or DEAD if there is none.

        The class: the ASCII bytes ``ascii_bytes`` and the UTF-8 characters whose lead byte is in
        ``leads`` (``key`` names the class); see :meth:`_chars_land`. Memoised.
        """
        known = self._char_steps.get((s, key))
        if known is not None:
            return known
        dfa = self.dfa
        dfa.ensure_rows(np.array([s], dtype=np.int64))
        targets = dfa.trans[s].take(ascii_bytes)
        t = int(targets[0])
        ok = t != DEAD and bool((targets == t).all()) and self._chars_land(s, t, leads)
        out = t if ok else DEAD
        self._char_steps[(s, key)] = out
        return out

    def _slice_leads(self, q: int, t: int) -> np.ndarray:
        """The lead bytes whose characters all take ``q`` to ``t`` (usually all of them; a pattern's
        ``\\d`` sends Unicode digits elsewhere, say). Decided once per distinct state after the lead."""
        firsts = self.dfa.trans[q].take(ALL_LEADS)
        good = firsts != DEAD
        nexts = UTF8_LEAD_NEXT.take(ALL_LEADS)
        verdict = {pair: self._rest_lands(pair[0], pair[1], t)
                   for pair in set(zip(firsts[good].tolist(), nexts[good].tolist()))}
        good[good] = [verdict[pair] for pair in zip(firsts[good].tolist(), nexts[good].tolist())]
        return ALL_LEADS[good]

    def _utf8_slice(self, q: int, row, cand, first, ptr, stays):
        """Take out the candidates made of whole UTF-8 characters of one class that step ``q``
        along a chain of states (see :func:`~.vocabindex.utf8_slice`), instead of walking them.

        The class is the ASCII bytes that take ``q`` to its most common ASCII successor, plus every
        non-ASCII character. If every character of the class takes ``q`` to one state ``q1``, and
        ``q1`` to one ``q2`` and so on (:meth:`_char_step`), a member of ``k`` characters reads from
        ``q`` as ``((), alive[q_k])`` and ends no lexeme: a string body (the chain loops at once,
        ``q1 = q``) or the positions of a ``maxLength`` counter, in product with other terminals or
        not. The members join ``stays`` as one row per final state. ``row`` is this state's
        transition row as the candidates were taken (reused hubs' first bytes DEAD).
        Returns ``(cand, first, ptr)``.
        """
        if cand.size < tuning.SLICE_MIN_TOKENS:
            return cand, first, ptr
        index = utf8_tokens(self.vocab)
        # bounds from the candidates' first bytes (whole buckets hold them) come before any scan:
        # START's table has ~140k candidates on a 262k vocabulary and no slice worth taking
        firsts = _flatnonzero(row != DEAD)
        if int(index.non_ascii_by_first.take(firsts).sum()) < tuning.SLICE_MIN_NON_ASCII:
            return cand, first, ptr
        plan = self._slice_plan(q, lambda sl: slice_count(sl.member, sl.chars, cand)[1],
                                enough=lambda sl: int(sl.by_first[firsts, -1].sum()) >= tuning.SLICE_MIN_TOKENS)
        if plan is None:
            return cand, first, ptr
        if slice_count(index.non_ascii, index.chars, cand)[0] < tuning.SLICE_MIN_NON_ASCII:
            return cand, first, ptr
        sl, chain, loops, _class = plan
        limit = _NO_LIMIT if loops else len(chain)      # longer members run past the chain: walked
        taken = slice_count(sl.member, sl.chars, cand, limit)[0]
        if taken < tuning.SLICE_MIN_TOKENS:
            return cand, first, ptr
        self._slice_stays(q, row, sl, chain, loops, stays)
        self._slice_hits[q] = taken
        return slice_drop(sl.member, sl.chars, limit, cand, first, ptr)

    def _utf8_slice_buckets(self, q: int, row, plain: np.ndarray, stays):
        """:meth:`_utf8_slice` for candidates that are whole first-byte buckets (the tokens whose
        first byte is in the 256-bool set ``plain``), without making them: the slice's per-first-byte
        counts decide, and what is left to walk comes from its list of non-members. Members too
        long for a chain that ends where no class character can follow (and no lexeme can end) are
        dead and left out. Returns ``(cand, first, ptr)``, or None where the slice does not apply
        here (take the candidates and :meth:`_utf8_slice` them)."""
        layout = self.layout
        firsts = _flatnonzero(plain)
        if int((layout.bucket.take(firsts + 1) - layout.bucket.take(firsts)).sum()) < tuning.SLICE_MIN_TOKENS:
            return None
        if int(utf8_tokens(self.vocab).non_ascii_by_first.take(firsts).sum()) < tuning.SLICE_MIN_NON_ASCII:
            return None
        plan = self._slice_plan(q, lambda sl: int(sl.most.take(firsts).max()))
        if plan is None:
            return None
        sl, chain, loops, class_set = plan
        limit = _NO_LIMIT if loops else len(chain)
        counts = sl.by_first[firsts]
        taken = int(counts[:, min(limit, counts.shape[1] - 1)].sum())
        if taken < tuning.SLICE_MIN_TOKENS:
            return None
        if taken < int(counts[:, -1].sum()) and not self._ends_chain(chain[-1], class_set):
            return None
        self._slice_stays(q, row, sl, chain, loops, stays)
        self._slice_hits[q] = taken
        rest = sl.outside.take(_flatnonzero(plain.take(layout.first.take(sl.outside))))
        return rest, layout.first.take(rest), layout.starts.take(rest) + 1

    def _ends_chain(self, s: int, class_set: np.ndarray) -> bool:
        """Whether no character of the class (the 256-bool byte set ``class_set``) can follow lexer state ``s``
        and ``s`` ends no lexeme: a token that reaches ``s`` with characters of the class left is dead."""
        dfa = self.dfa
        dfa.ensure_rows(np.array([s], dtype=np.int64))
        return int(dfa.emit[s]) < 0 and bool((dfa.trans[s][class_set] == DEAD).all())

    def _slice_plan(self, q: int, need_of, enough=None):
        """The UTF-8 slice of ``q`` and its chain (see :meth:`_utf8_slice`): ``(slice, chain, loops,
        class)`` (the class as a 256-bool byte set), or None if the class does not step ``q`` along a chain, or if
        ``enough(slice)`` is false (too few members could be candidates). ``need_of(slice)`` is the
        most characters of a member among the candidates (the chain is followed no further)."""
        own = self.dfa.trans[q].copy()     # a copy: a view would pin the lexer's table (see growtable)
        ascii_row = own[:128].astype(np.int64)
        live = ascii_row[ascii_row != DEAD]
        if live.size < tuning.MIN_LOOP_BYTES:
            return None
        q1 = int(np.bincount(live).argmax())
        ascii_set = np.zeros(256, dtype=bool)
        ascii_set[:128] = ascii_row == q1
        if np.count_nonzero(ascii_set) < tuning.MIN_LOOP_BYTES:
            return None
        ascii_bytes = _flatnonzero(ascii_set)
        leads = self._slice_leads(q, q1)
        ascii_set[leads] = True          # the class, as one byte set: ASCII bytes and lead bytes
        key = np.packbits(ascii_set).tobytes()
        if self._char_step(q, key, ascii_bytes, leads) == DEAD:
            return None
        sl = utf8_slice(self.vocab, ascii_set)
        if enough is not None and not enough(sl):
            return None
        # follow the chain no further than the longest member needs (each step determinises rows)
        need = min(tuning.SLICE_MAX_CHARS, need_of(sl))
        chain, loops = [q], False
        while len(chain) <= need:
            t = self._char_step(chain[-1], key, ascii_bytes, leads)
            if t == DEAD:
                break
            if t == chain[-1]:
                loops = True
                break
            chain.append(t)
        if len(chain) == 1 and not loops:
            return None
        return sl, chain, loops, ascii_set

    def _slice_stays(self, q: int, row, sl, chain: list[int], loops: bool, stays) -> None:
        """Add the slice's members to ``stays``: one row per state of the chain they end in."""
        own = self.dfa.trans[q].copy()     # a copy: a view would pin the lexer's table (see growtable)
        live_first = None
        if (row != own).any():          # first bytes answered elsewhere (a reused hub's) stay out
            live_first = self.first_byte_row(row != DEAD)
        parts = []
        if loops and len(chain) == 1:
            parts.append((q, sl.row))
        else:
            rest = sl.row.copy() if loops else None
            for k in range(1, len(chain)):
                if k <= sl.by_chars.shape[0]:
                    parts.append((chain[k], sl.by_chars[k - 1]))
                    if rest is not None:
                        rest &= ~sl.by_chars[k - 1]
            if rest is not None:        # every member of more characters ends in the loop
                parts.append((chain[-1], rest))
        for target, r in parts:
            if not self.dfa.alive[target]:      # never for a trimmed lexer; such tokens are dead
                continue
            stays.append((target, r if live_first is None else r & live_first))


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
