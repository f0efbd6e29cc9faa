"""The lexer's subset construction on the compiled path (``_native_subset.c``): a fresh DFA built
whole (``determinize``), the rows of a lazily built one in batches (``lazy_rows``), and the
appending of the states they make. :class:`~.lexer.ByteDFA` takes these methods from
:class:`CompiledBuild`; its Python loops (``build_all``, ``_row_python``, ``_intern``) are the
reference they are tested against.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import LimitExceededError

DEAD = 0
START = 1
STATE_BYTES = 3400  # a lexer state: its int32 row, the table builder's int64 row, labels, the NFA set
_UNBOUNDED = 1 << 62   # limits past this are passed to C as this (no work or table reaches it)


def states_refused(max_states: int) -> LimitExceededError:
    """The error of a lexer refusing a state past ``max_states`` (both paths raise the same)."""
    return LimitExceededError(f"lexer DFA exceeds {max_states} states")


def bytes_refused(max_bytes: int, n_states: int) -> LimitExceededError:
    """The error of a lexer refusing a state past ``max_bytes`` with ``n_states`` states kept."""
    return LimitExceededError(f"lexer DFA exceeds {max_bytes} bytes ({n_states} states; raise Limits.lexer_bytes "
                              f"or GUIDEWIRE_LEXER_BYTES)")


#: bound on the lexer's memo of readings met by the compiled rows, in estimated bytes (an entry:
#: READING_ENTRY_BYTES plus READING_TERM_BYTES per terminal id in its two tuples); cleared when full
READING_MEMO_BYTES = 4 << 20
READING_ENTRY_BYTES = 300
READING_TERM_BYTES = 40


class CompiledBuild:
    """The compiled-path half of :class:`~.lexer.ByteDFA` (a mixin: it reads the lexer's NFA
    tables, dicts, labels and limits)."""

    def _rows_compiled(self, compiled, sids: list[int]) -> None:
        """The rows of states ``sids`` (not yet done, distinct) in one C call (``lazy_rows``): what
        :meth:`_row_python` does for each in turn, new states interned in the same order into the
        same dicts (the target cache is kept in C, in a memo made once), work charged and limits
        taken at the same points (a refused state leaves its row undone and the states made before
        it in place); the new states' readings come back
        grouped by distinct reading, as from ``determinize``. The fuel is charged once for the
        batch, so a step's deadline is looked at after the batch (its work is bounded all the same).
        An error inside the call (no memory, a bad state) undoes the batch before it propagates."""
        base = len(self._states)
        got = compiled.lazy_rows(*self._lazy_args(compiled), self.trans, self.row_done, sids, base,
                                 *self._lazy_limits())   # the rows are written into trans and row_done
        self._rows_taken(base, *got)

    def rows_below(self, compiled, trie, emit: np.ndarray, nodes: np.ndarray, states: np.ndarray, out: np.ndarray,
                   made: np.ndarray, fresh: bool, sliced: tuple = ()) -> tuple[int, int, bool]:
        """The rows of the states below trie ``nodes`` (reached in ``states``), a byte layer at a
        time, in one C call (``ahead_rows``: the layers of ``TrieTables._rows_ahead``, each one's
        rows built as :meth:`_rows_compiled` builds a batch; ``emit``: the mirrored emitted sets,
        up to date with this lexer; ``sliced``: the walk's slice arrays and limit).
        ``(n_front, n_made, again)``: the distinct states of each layer are in ``made[:n_made]``;
        ``again``: the table had to grow first, and ``out[:, :n_front]`` is the layer to call again
        with (``fresh`` False; True: the entries' rows are built and they are not listed)."""
        base = len(self._states)
        n_front, n_made, *got = compiled.ahead_rows(
            *self._lazy_args(compiled), self.trans, self.row_done, base, *self._lazy_limits(),
            trie.node_byte, trie.node_end, trie.node_tok, emit, nodes, states, out[0], out[1], made, fresh,
            DEAD, START, *sliced)
        self._rows_taken(base, *got)
        return n_front, n_made, got[4] == "room"

    def _lazy_args(self, compiled) -> tuple:
        """The arguments of ``lazy_rows`` and ``ahead_rows`` that name the NFA, the dicts and the memo (made once)."""
        args = self._subset_args
        if args is None:
            accept = self._accept_tids()
            if self._lazy_np is None:
                self._lazy_np = self._lazy_tids(accept)
            args = self._subset_args = (
                *self._edges_np(), *self._eps_np(), np.frombuffer(self.live, dtype=np.uint8), self._owner_np(),
                self._lazy_np, accept, *self._univ_np(), self._states, self._index, compiled.subset_memo(len(self.nfa.eps)))
        return args

    def _lazy_limits(self) -> tuple:
        """``(max_states, fuel_left, bytes_left, STATE_BYTES)`` for a C batch (-1: no bound)."""
        fuel = self.fuel
        bytes_left = -1 if self.max_bytes is None else min(max(0, self.max_bytes - self.nbytes), _UNBOUNDED)
        fuel_left = -1 if fuel is None else min(max(0, fuel.left), _UNBOUNDED)
        return min(self.max_states, _UNBOUNDED), fuel_left, bytes_left, STATE_BYTES

    def _rows_taken(self, base: int, n_done: int, n_new: int, spent: int, nbytes: int, stopped,
                    readings, reading_of) -> None:
        """Take in what a C batch made from ``base`` states: the new states' labels, room for their
        rows, the work charged; a refusal raises as the Python loop would ("room" is the caller's)."""
        self.nbytes += nbytes
        self.rows_built += n_done
        if n_new:
            self._take_readings(np.frombuffer(reading_of, dtype=np.int32).tolist(), readings)
            while base + n_new > self.trans.shape[0]:
                self._grow()
        if self.fuel is not None:
            self.fuel.spend(spent)   # raises where the Python loop would have (the budget), or past the deadline
        if stopped == "states":
            raise states_refused(self.max_states)
        if stopped == "bytes":
            raise bytes_refused(self.max_bytes, base + n_new)
        if stopped == "fuel":   # pragma: no cover - fuel.spend above raised
            raise AssertionError("a C batch stopped on fuel that was not spent")

    def _owner_np(self) -> np.ndarray:
        """Per NFA state, its terminal (int64, made once)."""
        if self._owner64 is None:
            self._owner64 = self.owner.astype(np.int64)
        return self._owner64

    def _lazy_tids(self, accept: np.ndarray) -> np.ndarray:
        """Per NFA state, the terminal it accepts where that terminal is lazy, else -1."""
        is_lazy = np.zeros(len(self.terminals) + 1, dtype=bool)   # the last slot answers -1 (no terminal)
        is_lazy[list(self.lazy)] = True
        return np.where(is_lazy[accept], accept, -1)

    def _build_all_compiled(self, compiled, limit: int, work: int | None) -> None:
        """:meth:`build_all` of a fresh DFA with the subset construction in C (``determinize``:
        the same states in the same order, so the same numbering, and the same work tally). The new
        states' readings come back from C grouped by distinct (accepting, growing) pair, so the
        shadowing choice runs once per pair; :meth:`_add_states` then takes the limits on states
        and bytes in id order, as :meth:`_intern` would one state at a time."""
        accept = self._accept_tids()
        if self._lazy_np is None:
            self._lazy_np = self._lazy_tids(accept)
        live = np.frombuffer(self.live, dtype=np.uint8)   # a bytearray (a byte per NFA state)
        start = np.array(sorted(self._states[START]), dtype=np.int64)
        sets, rows, n_rows, stopped, readings, reading_of = compiled.determinize(
            *self._edges_np(), *self._eps_np(), live, self._owner_np(), self._lazy_np,
            accept, *self._univ_np(), start, limit, self.max_states, -1 if work is None else int(work))
        rows = np.frombuffer(rows, dtype=np.int32).reshape(n_rows, 256)
        try:
            self._add_states(sets, np.frombuffer(reading_of, dtype=np.int32).tolist(), readings)
        except LimitExceededError:
            # as build_all's loop stops inside the row that makes the first refused state: the
            # rows before it are kept (they only name kept states), that row and later ones not
            over = (rows[START:] >= self.n_states).any(axis=1)
            self._take_rows(rows[:START + int(over.argmax())] if over.any() else rows)
            raise
        self._take_rows(rows)
        if stopped == "limit":
            raise LimitExceededError(f"lexer DFA exceeds {limit} states")
        if stopped == "states":
            raise states_refused(self.max_states)
        if stopped == "work":
            raise LimitExceededError(f"lexer DFA takes over {work} work units to build ({n_rows} rows so far)")

    def _take_rows(self, rows: np.ndarray) -> None:
        """Rows ``START .. len(rows)-1`` from a compiled build, marked done."""
        n_rows = len(rows)
        if n_rows <= START:
            return
        self.trans[START:n_rows] = rows[START:]
        self.rows_built += int(n_rows - START - np.count_nonzero(self.row_done[START:n_rows]))
        self.row_done[START:n_rows] = True

    def _accept_tids(self) -> np.ndarray:
        """Per NFA state, the terminal it accepts, else -1 (int64)."""
        acc = np.full(len(self.nfa.eps), -1, dtype=np.int64)
        for st, tid in self.accept_of.items():
            acc[st] = tid
        return acc

    def _add_states(self, sets: list[tuple[int, ...]], reading_of: list[int],
                    readings: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        """Append new states (sorted, untracked NFA-set tuples not yet interned) read as
        ``readings[reading_of[i]]`` (accepting terminals, owners of growing NFA states; numbered in
        order of first use): :meth:`_intern` for many states at once. Its limits on states and bytes
        are checked in the same order (the states before the first one over a limit are kept and the
        same error raised) and the shadowing choice runs once per reading, in the same order."""
        base = len(self._states)
        n = len(sets)
        refused = None
        if base + n > self.max_states:
            n = max(0, self.max_states - base)
            refused = states_refused(self.max_states)
        if self.max_bytes is not None:
            sizes = np.fromiter(map(len, sets[:n]), dtype=np.int64, count=n) * 32 + STATE_BYTES
            total = self.nbytes + np.cumsum(sizes)
            over = int(np.searchsorted(total, self.max_bytes, side="right"))
            if over < n:
                n = over
                refused = bytes_refused(self.max_bytes, base + n)
            self.nbytes = int(total[n - 1]) if n else self.nbytes
        else:
            self.nbytes += n * STATE_BYTES + 32 * sum(map(len, sets[:n]))
        kept = sets[:n]
        self._states.update(zip(range(base, base + n), kept))
        self._index.update(zip(kept, range(base, base + n)))
        self._take_readings(reading_of[:n], readings)
        while base + n > self.trans.shape[0]:
            self._grow()
        if refused is not None:
            raise refused

    def _take_readings(self, picks: list[int], readings: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        """Append the labels (``alive``, ``emit``) of new states read as ``readings[picks[i]]``
        (accepting terminals, owners of growing NFA states; numbered in order of first use): the
        shadowing choice runs once per reading, in the same order as :meth:`_intern` meets them.
        A reading met in an earlier batch is answered from a memo (a pure function of the
        reading; at most :data:`READING_MEMO_BYTES`, cleared when full)."""
        alive_of, emit_of = [], []
        memo = self._reading_memo
        for reading in readings[:max(picks, default=-1) + 1]:
            got = memo.get(reading)
            if got is None:
                accepting, growing = reading
                alive = 0
                for t in growing:
                    alive |= 1 << t
                best = self._best(accepting)
                if best >= 0:   # a terminal shadowed on this lexeme and unable to grow is dead
                    for t in self.term_sets[best]:
                        alive |= 1 << t
                got = (self._alive_memo.setdefault(alive, alive), best)
                size = READING_ENTRY_BYTES + READING_TERM_BYTES * (len(accepting) + len(growing))
                if self._reading_memo_bytes + size > READING_MEMO_BYTES:
                    memo.clear()
                    self._reading_memo_bytes = 0
                if size <= READING_MEMO_BYTES:
                    self._reading_memo_bytes += size
                    memo[reading] = got
            alive_of.append(got[0])
            emit_of.append(got[1])
        self.alive.extend([alive_of[r] for r in picks])
        self.emit.extend([emit_of[r] for r in picks])
