"""UTF-8 slices in the token-table build: tokens made of one class of characters, not walked.

A lexer state that reads a class of characters alike (a string body loops on every character
but the quote and the backslash; a ``maxLength`` counter steps along a chain; an unanchored
pattern waits in one state for the character it needs) answers its class's tokens by the class:
a member of ``k`` characters ends in the chain's ``k``-th state with no lexeme ended. The class
(ASCII bytes and whole lead bytes, see :func:`~.vocabindex.utf8_slice`) is chosen per state by
where its characters take the state, and checked exactly against the lexer (every character of
each lead byte is followed through the DFA, :meth:`SliceShortcuts._rest_lands`).
"""

from __future__ import annotations

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD
from .tablearrays import _distinct, _flatnonzero, _kept
from .vocabindex import UTF8_LEAD_NEXT, UTF8_RANGES, utf8_slice, utf8_tokens

_ALL_LEADS = np.arange(0xC2, 0xF5, dtype=np.int64)    # every lead byte of well-formed UTF-8
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


class SliceShortcuts:
    """Mixin of the token-table builder: UTF-8 slices (needs ``dfa``, ``vocab``, ``layout``,
    ``first_byte_row``, ``_char_steps``, ``_lands`` and ``_slice_hits``)."""

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
        firsts = self.dfa.trans[q].take(_ALL_LEADS)
        good = firsts != DEAD
        nexts = UTF8_LEAD_NEXT.take(_ALL_LEADS)
        verdict = {pair: self._rest_lands(pair[0], pair[1], t)
                   for pair in set(zip(firsts[good].tolist(), nexts[good].tolist()))}
        good[good] = [verdict[pair] for pair in zip(firsts[good].tolist(), nexts[good].tolist())]
        return _ALL_LEADS[good]

    def _utf8_slice(self, q: int, row, cand, first, ptr, stays):
        """Take out the candidates made of whole UTF-8 characters of one class that step ``q``
        along a chain of states (see :func:`~.vocabindex.utf8_slice`), instead of walking them.

        The class (:meth:`_slice_plan`): ASCII bytes and lead bytes whose characters take ``q`` to
        one state ``q1``. If every character of the class takes ``q`` to ``q1``, and
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
        class)`` (the class as a 256-bool byte set), or None if no class steps ``q`` along a chain, or if
        ``enough(slice)`` is false (too few members could be candidates). ``need_of(slice)`` is the
        most characters of a member among the candidates (the chain is followed no further).

        Two classes are tried, each the ASCII bytes that take ``q`` to one state ``q1`` and the lead
        bytes whose characters all do: ``q1`` the state most ASCII bytes go to, and the one a
        non-ASCII character goes to. They are one for a string body; before an unanchored pattern
        of ASCII letters has matched (``[a-zA-Z0-9]`` in a key), letters leave ``q`` and non-ASCII
        text stays, and only the second class holds the ~100k non-ASCII tokens of a 262k
        vocabulary. The plan taking more of ``q``'s live first bytes' tokens wins (ties: the first)."""
        own = self.dfa.trans[q].copy()     # a copy: a view would pin the lexer's table (see growtable)
        ascii_row = own[:128].astype(np.int64)
        live = ascii_row[ascii_row != DEAD]
        if live.size < tuning.MIN_LOOP_BYTES:
            return None
        states, counts = np.unique(live, return_counts=True)     # not bincount: state ids run high
        most = int(states[counts.argmax()])
        best, best_taken = None, -1
        firsts = _flatnonzero(own != DEAD)
        for q1 in dict.fromkeys((most, self._non_ascii_step(q))):
            if q1 == DEAD:
                continue
            plan = self._class_plan(q, q1, ascii_row, need_of, enough)
            if plan is None:
                continue
            sl, chain, loops, _class = plan
            col = min(_NO_LIMIT if loops else len(chain), sl.by_first.shape[1] - 1)
            taken = int(sl.by_first[firsts, col].sum())
            if taken > best_taken:
                best, best_taken = plan, taken
        return best

    def _non_ascii_step(self, q: int) -> int:
        """Where the lowest character of a lead byte takes ``q`` (of the lead bytes whose next state
        is the most common), or DEAD: the candidate ``q1`` of a class around non-ASCII text (only a
        candidate: :meth:`_class_plan` checks every character of its lead bytes)."""
        dfa = self.dfa
        after = dfa.trans[q].take(_ALL_LEADS)
        good = after != DEAD
        if not good.any():
            return DEAD
        states, counts = np.unique(after[good], return_counts=True)    # not bincount: state ids run high
        p = int(states[counts.argmax()])
        lead = int(_ALL_LEADS[_flatnonzero(after == p)[0]])
        s, u = p, int(UTF8_LEAD_NEXT[lead])
        while u and s != DEAD:
            lo = UTF8_RANGES[u][0][0]
            u = UTF8_RANGES[u][0][2]
            if not dfa.row_done[s]:
                dfa.compute_row(s)
            s = int(dfa.trans[s][lo])
        return s

    def _class_plan(self, q: int, q1: int, ascii_row: np.ndarray, need_of, enough):
        """:meth:`_slice_plan` for the class of the ASCII bytes taking ``q`` to ``q1`` (and the lead
        bytes whose characters all do)."""
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
