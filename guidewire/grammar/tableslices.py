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

from dataclasses import dataclass

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD
from .tablearrays import _distinct, _flatnonzero, _kept
from .vocabindex import UTF8_LEAD_NEXT, UTF8_RANGES, Utf8Slice, utf8_slice, utf8_tokens

_ALL_LEADS = np.arange(0xC2, 0xF5, dtype=np.int64)    # every lead byte of well-formed UTF-8
_NO_LIMIT = 1 << 62
# a pair (lexer state, UTF-8 acceptor state) as one key: state << 3 | acceptor state (_native.utf8_lands
# reads the keys so, with its own copy of UTF8_RANGES past the lead byte: one byte range per state)
_NEXT_BITS = 3
_ACCEPTOR = (1 << _NEXT_BITS) - 1
assert len(UTF8_RANGES) <= 1 << _NEXT_BITS


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
        keys = np.asarray(_distinct((firsts.astype(np.int64) << _NEXT_BITS) | UTF8_LEAD_NEXT.take(leads)),
                          dtype=np.int64)
        return bool(self._lands_of(keys, t, every=True).all())

    def _lands_of(self, keys: np.ndarray, t: int, every: bool = False) -> np.ndarray:
        """:meth:`_rest_lands` of the pairs ``keys`` (distinct; ``p << 3 | u``): in C
        (``_native.utf8_lands``) when it is built, all pairs in one call, the rows it finds missing
        built in one batch and the call made again (a character has at most 4 bytes, so a few
        rounds). ``every``: only whether all of them land matters (a pair that does not makes the
        verdicts all False, and no more rows are built for the others). Memoised per pair as
        :meth:`_rest_lands` is."""
        lands = self._lands
        known = [lands.get((k >> _NEXT_BITS, k & _ACCEPTOR, t)) for k in keys.tolist()]
        if None not in known:
            out = np.array(known, dtype=bool)
            return out if not every or out.all() else np.zeros(keys.size, dtype=bool)
        compiled = native.module()
        if compiled is None:
            out = np.zeros(keys.size, dtype=bool)
            for i, k in enumerate(keys.tolist()):
                out[i] = self._rest_lands(k >> _NEXT_BITS, k & _ACCEPTOR, t)
                if every and not out[i]:
                    return np.zeros(keys.size, dtype=bool)
            return out
        dfa = self.dfa
        verdict = np.empty(keys.size, dtype=np.int8)
        while True:
            missing = compiled.utf8_lands(dfa.trans, dfa.row_done.view(np.uint8), keys, t,
                                          tuning.UTF8_PRODUCT_STATES, DEAD, verdict)
            if every and (verdict == 0).any():
                return np.zeros(keys.size, dtype=bool)
            if not missing:
                break
            dfa.ensure_rows(np.sort(np.frombuffer(missing, dtype=np.int64)))
        for k, v in zip(keys.tolist(), verdict.tolist()):
            lands[(k >> _NEXT_BITS, k & _ACCEPTOR, t)] = bool(v)
        return verdict > 0

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
        if not good.any():
            return _ALL_LEADS[good]
        pair = (firsts[good].astype(np.int64) << _NEXT_BITS) | UTF8_LEAD_NEXT.take(_ALL_LEADS[good])
        keys = np.asarray(_distinct(pair), dtype=np.int64)
        good[good] = self._lands_of(keys, t).take(np.searchsorted(keys, pair))
        return _ALL_LEADS[good]

    def _utf8_slice(self, q: int, row, cand, first, ptr, stays):
        """Take out the candidates made of whole UTF-8 characters of one class that step ``q``
        along a chain of states (see :func:`~.vocabindex.utf8_slice`), instead of walking them.

        The class (:meth:`_slice_plan`): ASCII bytes and lead bytes whose characters take ``q`` to
        one state ``q1``. If every character of the class takes ``q`` to ``q1``, and
        ``q1`` to one ``q2`` and so on (:meth:`_char_step`), a member of ``k`` characters reads from
        ``q`` as ``((), alive[q_k])`` and ends no lexeme: a string body (the chain loops at once,
        ``q1 = q``) or the positions of a ``maxLength`` counter, in product with other terminals or
        not (or two chains, see :meth:`_product_plan`). The members join ``stays`` as one row per
        final state. ``row`` is this state's transition row as the candidates were taken (reused
        hubs' first bytes DEAD). Returns ``(cand, first, ptr)``.
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
        sl = plan.sl
        taken = slice_count(sl.member, sl.chars, cand, plan.limit)[0]
        if taken < tuning.SLICE_MIN_TOKENS:
            return cand, first, ptr
        self._slice_stays(q, row, plan, stays)
        self._slice_hits[q] = taken
        return slice_drop(sl.member, sl.chars, plan.limit, cand, first, ptr)

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
        sl = plan.sl
        counts = sl.by_first[firsts]
        taken = int(counts[:, min(plan.limit, counts.shape[1] - 1)].sum())
        if taken < tuning.SLICE_MIN_TOKENS:
            return None
        if taken < int(counts[:, -1].sum()) and not self._plan_ends_dead(plan):
            return None
        self._slice_stays(q, row, plan, stays)
        self._slice_hits[q] = taken
        rest = sl.outside.take(_flatnonzero(plain.take(layout.first.take(sl.outside))))
        return rest, layout.first.take(rest), layout.starts.take(rest) + 1

    def _plan_ends_dead(self, plan: SlicePlan) -> bool:
        """Whether a member of ``plan.limit`` characters or more is dead: every way its characters
        can go reaches, before its last, a state no character of its class can leave and where no
        lexeme ends."""
        if plan.loops:
            return True
        if plan.inner is None:
            return self._ends_chain(plan.chain[-1], plan.class_set)
        _isl, ichain, iloops, _iset = plan.inner
        if not self._ends_chain(plan.chain[-1], plan.class_set):
            return False
        if not iloops and len(ichain) < plan.limit:
            return True             # B's chain ran out before (checked dead where it did)
        return self._ends_chain(ichain[min(plan.limit - 1, len(ichain) - 1)], plan.class_set)

    def _ends_chain(self, s: int, class_set: np.ndarray) -> bool:
        """Whether no character of the class (the 256-bool byte set ``class_set``) can follow lexer state ``s``
        and ``s`` ends no lexeme: a token that reaches ``s`` with characters of the class left is dead."""
        dfa = self.dfa
        dfa.ensure_rows(np.array([s], dtype=np.int64))
        return int(dfa.emit[s]) < 0 and bool((dfa.trans[s][class_set] == DEAD).all())

    def _slice_plan(self, q: int, need_of, enough=None) -> SlicePlan | None:
        """The UTF-8 slice of ``q`` and its chain (see :meth:`_utf8_slice`), or None if no class
        steps ``q`` along a chain, or if ``enough(slice)`` is false (too few members could be
        candidates). ``need_of(slice)`` is the most characters of a member among the candidates
        (the chain is followed no further).

        Classes tried, each the ASCII bytes that take ``q`` to one state ``q1`` and the lead
        bytes whose characters all do: the one a non-ASCII character goes to, then (before an
        unanchored pattern has matched, where a second class leaves that chain) both together
        (:meth:`_product_plan`), and where that does not hold to the end, the class of the state
        most ASCII bytes go to. They are one for a string body; before an unanchored pattern of ASCII
        letters has matched (``[a-zA-Z0-9]`` in a key), letters leave ``q`` and non-ASCII text
        stays, and only the second class holds the ~100k non-ASCII tokens of a 262k vocabulary.
        The plan taking more of ``q``'s live first bytes' tokens wins (ties: the first)."""
        own = self.dfa.trans[q].copy()     # a copy: a view would pin the lexer's table (see growtable)
        ascii_row = own[:128].astype(np.int64)
        live = ascii_row[ascii_row != DEAD]
        if live.size < tuning.MIN_LOOP_BYTES:
            return None
        states, counts = np.unique(live, return_counts=True)     # not bincount: state ids run high
        most = int(states[counts.argmax()])
        firsts = _flatnonzero(own != DEAD)
        q1 = self._non_ascii_step(q)
        plans = []
        if q1 != DEAD:
            inner = self._class_plan(q, q1, ascii_row, need_of, enough)
            if inner is not None:
                wide = self._product_plan(q, inner, ascii_row, need_of, enough)
                if wide is not None and wide.whole:
                    return wide         # every member of both classes, so more than either alone
                plans = [p for p in (wide, inner) if p is not None]
        if most != q1:
            plan = self._class_plan(q, most, ascii_row, need_of, enough)
            if plan is not None:
                plans.insert(0, plan)
        best, best_taken = None, -1
        for plan in plans:
            col = min(plan.limit, plan.sl.by_first.shape[1] - 1)
            taken = int(plan.sl.by_first[firsts, col].sum())
            if taken > best_taken:
                best, best_taken = plan, taken
        return best

    def _product_plan(self, q: int, inner: SlicePlan, ascii_row: np.ndarray, need_of, enough) -> SlicePlan | None:
        """Two chains in product: before an unanchored pattern of one character class has matched
        (``[A-Za-z0-9_.-]+`` beside ``maxLength``), the characters of ``inner``'s class B step
        ``q`` along ``s_1, s_2, ...`` (the pattern waiting) and those of a class A (the most common
        other ASCII target ``t_1``) along ``t_1, t_2, ...`` (matched); once matched, every character of
        ``U = A + B`` steps ``t_k`` to ``t_{k+1}``. Checked for every ``k`` as far as the members
        need: ``B(s_k) = s_{k+1}``, ``A(s_k) = t_{k+1}``, ``U(t_k) = t_{k+1}``. A member of ``U`` of
        ``k`` characters then ends in ``s_k`` if all its characters are in B, in ``t_k`` otherwise,
        whichever order they come in: a token mixing the classes (`` Hello``, ``_id``; ~150k of a
        262k vocabulary) is answered by its slice rows, not walked.

        None where no such A exists, its characters do not keep stepping the chain (a quote or a
        backslash: after them ``U`` does not step), or the slice of ``U`` is not ``enough``."""
        b_set = inner.class_set
        other = ascii_row[(~b_set[:128]) & (ascii_row != DEAD)]
        if not other.size:
            return None
        states, counts = np.unique(other, return_counts=True)
        t1 = int(states[counts.argmax()])
        a_set = np.zeros(256, dtype=bool)
        a_set[:128] = ascii_row == t1
        a_set[self._slice_leads(q, t1)] = True
        u_set = a_set | b_set
        a_step, b_step, u_step = (self._class_stepper(c) for c in (a_set, b_set, u_set))
        if u_step(t1) == DEAD or a_step(q) != t1:       # cheap first: no slice is made for a quote's class
            return None
        sl = utf8_slice(self.vocab, u_set)
        if enough is not None and not enough(sl):
            return None
        need = min(tuning.SLICE_MAX_CHARS, need_of(sl))
        s_chain, s_loops = list(inner.chain), inner.loops
        s_dead = False              # B's chain ran out: longer members of B are dead (a counter, a pattern unmet)
        t_chain = [q, t1]           # t_chain[k] = t_k (k >= 1)
        loops = False
        n = 2                       # members of n - 1 characters are checked
        while n <= need:
            s_prev = s_chain[min(n - 1, len(s_chain) - 1)] if s_loops or n - 1 < len(s_chain) else None
            s_n = None
            if s_prev is not None:
                if n < len(s_chain):
                    s_n = s_chain[n]
                elif s_loops:
                    s_n = s_prev
                else:
                    s_n = b_step(s_prev)
                    if s_n == DEAD:
                        if not self._ends_chain(s_prev, b_set):
                            break
                        s_dead, s_n = True, None
                    elif s_n == s_prev:
                        s_loops = True
                    else:
                        s_chain.append(s_n)
            t_n = u_step(t_chain[-1])
            if t_n == DEAD or (s_prev is not None and a_step(s_prev) != t_n):
                break
            if t_n == t_chain[-1] and (s_dead or s_n == s_prev):
                loops = True        # both chains loop (or B's is dead) from here on: every further check is this one
                break
            t_chain.append(t_n)
            n += 1
        if n == 2 and not loops:
            return None
        return SlicePlan(sl, u_set, t_chain, loops, inner=(inner.sl, s_chain, s_loops, b_set),
                         limit=_NO_LIMIT if loops else n, whole=loops or n > need)

    def _class_stepper(self, class_set: np.ndarray):
        """``step(s)``: the one state every character of the class (a 256-bool byte set: ASCII
        bytes and lead bytes) takes ``s`` to, or DEAD (see :meth:`_char_step`)."""
        key = np.packbits(class_set).tobytes()
        ascii_bytes = _flatnonzero(class_set[:128])
        leads = _flatnonzero(class_set[128:]) + 128
        return lambda s: self._char_step(s, key, ascii_bytes, leads)

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

    def _class_plan(self, q: int, q1: int, ascii_row: np.ndarray, need_of, enough) -> SlicePlan | None:
        """:meth:`_slice_plan` for the class of the ASCII bytes taking ``q`` to ``q1`` (and the lead
        bytes whose characters all do)."""
        ascii_set = np.zeros(256, dtype=bool)
        ascii_set[:128] = ascii_row == q1
        if np.count_nonzero(ascii_set) < tuning.MIN_LOOP_BYTES:
            return None
        ascii_set[self._slice_leads(q, q1)] = True     # the class, as one byte set: ASCII bytes and lead bytes
        step = self._class_stepper(ascii_set)
        if step(q) == DEAD:
            return None
        sl = utf8_slice(self.vocab, ascii_set)
        if enough is not None and not enough(sl):
            return None
        # follow the chain no further than the longest member needs (each step determinises rows)
        need = min(tuning.SLICE_MAX_CHARS, need_of(sl))
        chain, loops = [q], False
        while len(chain) <= need:
            t = step(chain[-1])
            if t == DEAD:
                break
            if t == chain[-1]:
                loops = True
                break
            chain.append(t)
        if len(chain) == 1 and not loops:
            return None
        return SlicePlan(sl, ascii_set, chain, loops, limit=_NO_LIMIT if loops else len(chain),
                         whole=loops or len(chain) > need)

    def _slice_stays(self, q: int, row, plan: SlicePlan, stays) -> None:
        """Add the plan's members to ``stays``: one row per state of the chains they end in."""
        own = self.dfa.trans[q].copy()     # a copy: a view would pin the lexer's table (see growtable)
        live_first = None
        if (row != own).any():          # first bytes answered elsewhere (a reused hub's) stay out
            live_first = self.first_byte_row(row != DEAD)
        parts: dict[int, np.ndarray] = {}
        if plan.inner is None:
            _chain_rows(plan.sl, None, plan.chain, plan.loops, plan.limit, parts)
        else:
            isl, ichain, iloops, _iset = plan.inner
            _chain_rows(isl, None, ichain, iloops, plan.limit, parts)
            _chain_rows(plan.sl, isl, plan.chain, plan.loops, plan.limit, parts)
        for target, r in parts.items():
            if not self.dfa.alive[target]:      # never for a trimmed lexer; such tokens are dead
                continue
            stays.append((target, r if live_first is None else r & live_first))


@dataclass(frozen=True)
class SlicePlan:
    """How a lexer state answers a UTF-8 slice without a walk (:meth:`SliceShortcuts._slice_plan`):
    the members of ``sl`` (the slice of the 256-bool byte set ``class_set``) of fewer than
    ``limit`` characters; one of ``k`` characters ends in ``chain[k]`` (in ``chain[-1]`` past
    its end where ``loops``), no lexeme ended. A product of two chains (``inner`` is ``(slice,
    chain, loops, class)`` of a narrower class, :meth:`SliceShortcuts._product_plan`) sends the
    inner slice's members along the inner chain and the others along ``chain``. ``whole``: no
    member the candidates hold was left out for want of a checked step."""

    sl: Utf8Slice
    class_set: np.ndarray
    chain: list
    loops: bool
    limit: int
    whole: bool = True
    inner: tuple | None = None


def _chain_rows(sl: Utf8Slice, minus: Utf8Slice | None, chain: list, loops: bool, limit: int,
                parts: dict) -> None:
    """OR into ``parts`` (state -> row) the members of ``sl`` that are not members of ``minus``:
    those of ``k < limit`` characters into ``chain[k]`` (``chain[-1]`` past the chain's end where it
    loops; a chain that does not loop and ends before ``limit`` ran out: longer members are dead),
    and where the chain loops with no limit every longer one into ``chain[-1]``."""
    by_chars = sl.by_chars
    minus_rows = minus.by_chars if minus is not None else None
    if loops:
        top = min(by_chars.shape[0], len(chain) - 1 if limit >= _NO_LIMIT else limit - 1)
    else:
        top = min(by_chars.shape[0], limit - 1, len(chain) - 1)
    counted = None
    for k in range(1, top + 1):
        r = by_chars[k - 1]
        if minus_rows is not None and k <= minus_rows.shape[0]:
            r = r & ~minus_rows[k - 1]
        counted = r.copy() if counted is None else counted | r
        _or_into(parts, chain[min(k, len(chain) - 1)], r)
    if loops and limit >= _NO_LIMIT:    # every member of more characters ends in the loop
        rest = sl.row if minus is None else sl.row & ~minus.row
        if counted is not None:
            rest = rest & ~counted
        _or_into(parts, chain[-1], rest)


def _or_into(parts: dict, state: int, r: np.ndarray) -> None:
    got = parts.get(state)
    parts[state] = r.copy() if got is None else got | r
