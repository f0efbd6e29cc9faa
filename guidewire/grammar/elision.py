"""Long length counters with their middle elided: the characters left out carried as credit.

A JSON string with ``maxLength: 32767`` is a product of its character automaton and a count that
would take tens of thousands of NFA layers (``2**31 - 1`` could not be built at all). The front
end (:func:`~.jsonstring.json_counted_into`) builds such a counter only up to a layer ``top`` well
past the first layer ``a`` of its repeating run, and records the ``E = maxLength - top`` layers it
left out. Its NFA alone accepts at most ``top`` characters; the compiled grammar makes up the rest.

*Credit.* A lexer state inside an elided counter's lexeme is carried with the layers the counter
has skipped so far (``used``, at most ``E``). After each step (a token, and every ``depth`` bytes
of a longer input), a counter whose states reach within a token of the run's last layer ``m``
(``kmax + depth > m``) moves down ``j = min(E - used, kmin - a)`` layers and ``used`` grows by
``j``: the real count ``k + used`` is unchanged, and so is the real room left,
``(top - k) + (E - used)``. Between moves the counter walks the lexer's own states, whose classes
and tables a whole counter would have used too.

*Exactness.* Layers ``a .. m`` (the counter's last run, past its floor) are uniform (built by the
same steps, checked on the NFA as :mod:`~.layerfold` does), so a state moved down within them reads
every byte string as before, but for where the top is. While credit is left the counter sits at
least a token below ``m`` after each step (a move lands at ``a + 1`` at most, and
``a + depth + 2 <= m``), so a token (``depth`` bytes at most, so at most ``depth`` characters)
stays inside the run: neither the NFA's top nor the real bound is in reach, and every reading
(lexemes, alive terminals) is the same. Once the credit is spent, the NFA's room is the real room. So masks and token tables depend on the lexer state alone, never on the credit,
and are shared as before. Each elided counter must have ``a + 2 * depth + 2 <= m`` for the
vocabulary's longest token (``depth`` bytes); a grammar where it does not is refused
(:class:`ElisionRefusedError`, and :func:`~.jsonschema.compile_json_schema` builds it whole).

*State ids.* A lexer state with credit is a *virtual* lexer state: an id from
:data:`VIRTUAL_BASE` up, interned in a table bounded like the lexer's states. A lexeme that ends
takes its credit with it (the next starts at ``START``, with none), so a grammar without an elided
counter never sees a virtual id, and one with them only inside their lexemes.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import LimitExceededError
from .layerfold import _Runs, family_of, nfa_readings
from .lexer import START, ByteDFA

VIRTUAL_BASE = 1 << 31          # virtual lexer state ids start here (lexer states stay below)
VIRTUAL_ENTRY_BYTES = 240       # one virtual state: its (state, credit) tuples, the index entry
PLAN_MEMO_BYTES = 2 << 20       # bound of the lexer state -> counters-to-shift memo (cleared past it)
PLAN_ENTRY_BYTES = 160


class ElisionRefusedError(LimitExceededError):
    """An elided counter's repeating run leaves less room than two of the vocabulary's longest
    tokens need (the front end sizes it to fit, so this is a safeguard: the caller builds whole)."""


class CounterElision:
    """The elided counters of a lexer, for tokens of at most ``depth`` bytes (see the module).

    Raises :class:`ElisionRefusedError` when a counter's repeating run leaves less room above it
    than two tokens of ``depth`` bytes need. ``max_states`` bounds the virtual states."""

    def __init__(self, dfa: ByteDFA, depth: int, max_states: int):
        self.dfa, self.depth, self.max_states = dfa, depth, max_states
        fams = [(lo, np.frombuffer(raw, dtype=np.int32), np.frombuffer(shape, dtype=np.int32), elided)
                for lo, raw, shape, elided in dfa.layers if elided > 0]
        self.active = bool(fams)
        self._virtual: list[tuple[int, tuple]] = []     # id - VIRTUAL_BASE -> (lexer state, credit)
        self._index: dict[tuple[int, tuple], int] = {}
        self._plans: dict[int, tuple] = {}              # lexer state -> ((counter, least layer), ...)
        self._moves: dict[tuple, int] = {}              # (lexer state, shifts) -> the moved state
        if not self.active:
            return
        self._fam = family_of(dfa, [(lo, layer) for lo, layer, _s, _e in fams])
        readings = nfa_readings(dfa)
        self._lo = [lo for lo, _l, _s, _e in fams]
        self._layer = [layer for _lo, layer, _s, _e in fams]
        self._elided = [elided for _lo, _l, _s, elided in fams]
        self._runs, self._start, self._end = [], [], []
        for f, (lo, layer, shape, elided) in enumerate(fams):
            runs = _Runs(dfa, f, lo, layer, shape, self._fam, readings)
            a, m = runs.last_run()
            if a + 2 * depth + 2 > m:
                raise ElisionRefusedError(
                    f"a length counter with {elided} elided characters repeats over characters {a}..{m} "
                    f"of {runs.top} built: tokens of up to {depth} bytes need {2 * depth + 2}")
            self._runs.append(runs)
            self._start.append(a)
            self._end.append(m)

    @property
    def nbytes(self) -> int:
        """Estimated bytes of the virtual states and memos."""
        return (len(self._virtual) * VIRTUAL_ENTRY_BYTES
                + (len(self._plans) + len(self._moves)) * PLAN_ENTRY_BYTES)

    def real(self, q: int) -> tuple[int, tuple]:
        """``(lexer state, credit)`` of a (virtual or plain) lexer state id."""
        if q < VIRTUAL_BASE:
            return q, ()
        return self._virtual[q - VIRTUAL_BASE]

    def virtual(self, q: int, credit: tuple) -> int:
        """The id of lexer state ``q`` with ``credit`` (``((counter, used), ...)``; ``q`` if none)."""
        if not credit:
            return q
        key = (q, credit)
        vid = self._index.get(key)
        if vid is None:
            if len(self._virtual) >= self.max_states:
                raise LimitExceededError(f"more than {self.max_states} lexer states with elided length credit")
            vid = self._index[key] = VIRTUAL_BASE + len(self._virtual)
            self._virtual.append(key)
        return vid

    def elide(self, q: int, credit: tuple) -> tuple[int, tuple]:
        """Lexer state ``q`` with ``credit``, its elided counters moved down to their runs' first
        layers as far as their credit allows (see the module)."""
        plan = self._plan(q)
        if not plan:
            return q, credit
        used = dict(credit)
        shifts = []
        for f, kmin in plan:
            had = used.get(f, 0)
            j = min(self._elided[f] - had, kmin - self._start[f])
            if j > 0:
                shifts.append((f, j))
                used[f] = had + j
        if not shifts:
            return q, credit
        return self._moved(q, tuple(shifts)), tuple(sorted(used.items()))

    def _plan(self, q: int) -> tuple:
        """The elided counters of ``q`` to move: inside their runs, past the first layer and within a
        token of the last, each with its least layer."""
        plan = self._plans.get(q)
        if plan is not None:
            return plan
        if q <= START:
            return ()
        states = np.fromiter(self.dfa.nfa_states(q), dtype=np.int64)
        fams = self._fam.take(states)
        out = []
        for f in np.unique(fams[fams >= 0]).tolist():
            lay = self._layer[f].take(states[fams == f] - self._lo[f])
            kmin, kmax = int(lay.min()), int(lay.max())
            # inside the run, past its start, and a token from its end: moved back only then, so
            # the counter walks the lexer's own states (their classes and tables) most of the way
            if self._start[f] < kmin and self._end[f] - self.depth < kmax <= self._end[f]:
                out.append((f, kmin))
        if len(self._plans) * PLAN_ENTRY_BYTES > PLAN_MEMO_BYTES:
            self._plans.clear()
        plan = self._plans[q] = tuple(out)
        return plan

    def _moved(self, q: int, shifts: tuple) -> int:
        """The lexer state of ``q``'s NFA states with counter ``f``'s moved ``j`` layers down for
        each ``(f, j)`` of ``shifts`` (made if new)."""
        key = (q, shifts)
        got = self._moves.get(key)
        if got is not None:
            return got
        states = np.fromiter(self.dfa.nfa_states(q), dtype=np.int64)
        fams = self._fam.take(states)
        out = states.copy()
        for f, j in shifts:
            at = np.flatnonzero(fams == f)
            local = states.take(at) - self._lo[f]
            out[at] = self._runs[f].shift_by(local, self._layer[f].take(local), j)
        moved = tuple(np.sort(out).tolist())
        p = self.dfa.find_state(moved)
        if p is None:
            p = self.dfa._intern(moved)
        if len(self._moves) * PLAN_ENTRY_BYTES > PLAN_MEMO_BYTES:
            self._moves.clear()
        self._moves[key] = p
        return p
