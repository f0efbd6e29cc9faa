"""Lexer states projected onto what the parser can accept: unexpected sealed terminals dropped.

The lexer reads every terminal at once (maximal munch over all of them), so inside a JSON string
its state is the product of every string terminal of the schema: each property's pattern, each
``maxLength`` counter, each key. Where the parser expects one of them, the others only decide
where the lexeme ends, and for a *sealed* class they never do (see :class:`Projection`). Dropping
their NFA states gives a lexer state that reads every token to the same verdict, with far fewer
distinct states to build token tables for (a schema's product lexer: 76k states -> 24k).
"""

from __future__ import annotations

from ..core.errors import LimitExceededError, WorkLimitExceededError
from .lexer import START, ByteDFA

PROJECTION_MEMO_BYTES = 2 << 20    # bound of the (lexer state, expected terminals) -> projected state memo
PROJECTION_ENTRY_BYTES = 160       # one memo entry: its key tuple, the int bitset and the dict slot
_NO_PRIORITY = 1 << 62


class Projection:
    """The projection of lexer states onto the terminals a parser state expects.

    A class of terminals is *sealed* when the front end declares that the union of their
    languages is prefix-free (JSON strings: a word ends at its closing quote, and no JSON string
    is a proper prefix of another; :attr:`~.lexer.Terminal.sealed`), and the lexer checks that no
    terminal outside the class shares a first byte with it and that none of it is ignored. Then,
    in a lexer state ``q`` reached from ``START`` by a lexeme's bytes ``w`` and a parser state
    expecting the terminals ``x``, a sealed terminal ``B`` not in ``x`` changes no verdict:

    - while some expected terminal is alive, the lexeme goes on with or without ``B``;
    - where the rest of the state dies and ``B`` lives on, no expected terminal accepts ``w``
      (it would be a word of the class, and ``w`` followed by a byte still a prefix of another:
      not prefix-free), so both readings are refused: without ``B`` the lexeme ends unaccepted,
      with it the lexeme goes on with no expected terminal alive, and ends in a reading the
      parser refuses;
    - where a lexeme ends, the reading loses ``B``, which the parser does not expect, and keeps
      every expected terminal provided ``B`` shadows none of them: it outranks no expected
      terminal of its family (or of the free terminals, family -1) and is not a literal.

    So every token reads to the same verdict from ``q`` and from ``q`` less ``B``'s NFA states, and
    the masks are equal. The projected state is a lexer state like any other (its rows and
    table are built on demand). ``START`` is never projected (its table is every restart's).
    """

    def __init__(self, dfa: ByteDFA):
        self.dfa = dfa
        terms = dfa.terminals
        self.sealed = _sealed_terminals(dfa)
        self.active = any(self.sealed)
        self._priority = [t.priority for t in terms]
        self._family = [t.family for t in terms]
        self._ignored = [t.ignored for t in terms]
        self._memo: dict[tuple[int, int], int] = {}
        self._floors: dict[int, tuple[int, dict[int, int]]] = {}   # x -> (free floor, family floors)
        self.made = 0   # projected states interned so far
        # an eagerly built lexer's rows are all built: a new state's rows, and its successors', are
        # built inside a mask, and its table is not shared with a class; so there a new state is
        # interned only when it keeps at most half of q's NFA states and at most max_kept of them
        # (a state the lexer has is always used)
        self.max_kept: int | None = None

    def project(self, q: int, x: int) -> int:
        """The lexer state ``q`` with the sealed terminals ``x`` does not expect dropped (``q``
        itself when none is, for ``START`` and ``DEAD``, and when the lexer is past half its state
        or byte bound or interning the state hits a limit)."""
        if q <= START:
            return q
        key = (q, x)
        got = self._memo.get(key)
        if got is not None:
            return got
        if len(self._memo) * PROJECTION_ENTRY_BYTES > PROJECTION_MEMO_BYTES:
            self._memo.clear()
            self._floors.clear()
        out, final = self._project(q, x)
        if final:
            self._memo[key] = out
        return out

    def _project(self, q: int, x: int) -> tuple[int, bool]:
        """The projected state, and whether it may be memoised (not after a spent work budget)."""
        dfa = self.dfa
        nfa_set = dfa.nfa_states(q)
        owner = dfa._owner_list
        present = {owner[n] for n in nfa_set}
        drop = {b for b in present if self._droppable(b, x)}
        if not drop or drop == present:     # nothing to drop, or nothing expected alive
            return q, True
        kept = tuple(n for n in nfa_set if owner[n] not in drop)
        p = dfa.find_state(kept)
        if p is not None:
            return p, True
        if self.max_kept is not None and (len(kept) > self.max_kept or 2 * len(kept) > len(nfa_set)):
            return q, True      # too large a new state for an eager lexer (see max_kept)
        if not dfa.within_half_bounds():   # a projected state's rows and table could pass a limit q's would not
            return q, False     # near the lexer's bounds: the state itself, as exact
        try:
            p = dfa._intern(kept)
        except WorkLimitExceededError:
            return q, False     # this step's budget is spent: try again at a later one
        except LimitExceededError:
            return q, True      # the lexer is full: the state itself is as exact
        self.made += 1
        return p, True

    def _droppable(self, b: int, x: int) -> bool:
        if not self.sealed[b] or (x >> b) & 1:
            return False
        free, fams = self._floor(x)
        fam = self._family[b]
        floor = free if fam < 0 else fams.get(fam, _NO_PRIORITY)
        return self._priority[b] <= floor

    def _floor(self, x: int) -> tuple[int, dict[int, int]]:
        """The lowest priority among the expected free terminals (family -1) and per family
        among its expected members: a dropped terminal must rank no higher to shadow none."""
        got = self._floors.get(x)
        if got is None:
            free = _NO_PRIORITY
            fams: dict[int, int] = {}
            bits = x
            while bits:
                low = bits & -bits
                t = low.bit_length() - 1
                bits ^= low
                if t >= len(self._priority) or self._ignored[t]:
                    continue
                pr, fam = self._priority[t], self._family[t]
                if fam < 0:
                    free = min(free, pr)
                else:
                    fams[fam] = min(fams.get(fam, _NO_PRIORITY), pr)
            got = self._floors[x] = (free, fams)
        return got


def _sealed_terminals(dfa: ByteDFA) -> list[bool]:
    """Per terminal: whether it belongs to a sealed class the lexer accepts (no member ignored or
    a literal, no terminal outside the class starting with a byte a member starts with)."""
    terms = dfa.terminals
    out = [False] * len(terms)
    classes = {t.sealed for t in terms if t.sealed >= 0}
    if not classes:
        return out
    firsts = [dfa.first_bytes(i) for i in range(len(terms))]
    for c in classes:
        members = [i for i, t in enumerate(terms) if t.sealed == c]
        if any(terms[i].ignored or terms[i].literal for i in members):
            continue
        lead = 0
        for i in members:
            lead |= firsts[i]
        if any(firsts[j] & lead for j, t in enumerate(terms) if t.sealed != c):
            continue
        for i in members:
            out[i] = True
    return out
