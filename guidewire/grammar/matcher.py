"""GrammarMatcher: the per-request state over a compiled grammar (the ``Constraint`` protocol).

A matcher is a stack of ``(earley_set, lexer_state, done)`` entries, one per consumed token:
``fork`` copies a list, ``rollback`` pops. Everything it computes comes from its
:class:`~guidewire.grammar.compiled.CompiledGrammar`, which many matchers share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..core.bitmask import fill_row
from ..core.errors import GuidewireError, LimitExceededError

if TYPE_CHECKING:
    from .compiled import CompiledGrammar

__all__ = ["GrammarMatcher"]


class GrammarMatcher:
    """Per-request state over a :class:`CompiledGrammar`; implements the ``Constraint`` protocol.

    Work per call is bounded by the compiled grammar's limits (the step budget, Earley items
    per set, number of Earley sets, lexer states); when one is exceeded the matcher enters a
    terminal error state: ``exception`` holds the typed error (a
    :class:`~guidewire.core.LimitExceededError`, :class:`~guidewire.core.WorkLimitExceededError`
    for the step budget), ``error`` its message, the mask allows nothing (not even EOS),
    ``advance`` refuses every token and ``is_terminated()`` is true, until ``rollback``/``reset``.
    A matcher is per request: share the compiled grammar across threads, not one matcher.
    """

    __slots__ = ("grammar", "_stack", "error", "exception")

    def __init__(self, grammar: CompiledGrammar, stack):
        self.grammar = grammar
        self._stack = stack
        self.error: str | None = None
        self.exception: GuidewireError | None = None

    # state accessors
    @property
    def state(self) -> tuple[int, int]:
        """The current ``(earley_set, lexer_state)`` pair."""
        s, q, _done = self._stack[-1]
        return s, q

    @property
    def num_tokens(self) -> int:
        """Number of tokens consumed so far (rollback depth available)."""
        return len(self._stack) - 1

    def _fail(self, exc: GuidewireError) -> None:
        # Kept without its traceback: the traceback's frames hold this matcher (a reference cycle), so
        # the matcher and every table those frames reached would wait for a full collection of the
        # cyclic GC, which then frees them inside whatever call triggered it (a mask elsewhere).
        self.error = str(exc)
        self.exception = exc.with_traceback(None)
        exc.__context__ = exc.__cause__ = None       # (their tracebacks would hold frames too)
        exc.__suppress_context__ = False             # which assigning __cause__ set

    def current_mask(self) -> np.ndarray:
        """The current bitmask row (1-D int32, read-only)."""
        g = self.grammar
        if self.error is not None:
            return g._zero
        s, q, done = self._stack[-1]
        if done:
            return g.eos_row
        try:
            return g.mask(s, q)
        except LimitExceededError as exc:
            self._fail(exc)
            return g._zero

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed tokens into ``bitmask[row]`` (numpy or torch int32, width ceil(V/32))."""
        fill_row(bitmask, row, self.current_mask())

    def _next(self, entry, token_id: int):
        g = self.grammar
        s, q, done = entry
        if done:
            return None
        if token_id in g._eos_ids:
            return (s, q, True) if g.can_end(s, q) else None
        vocab = g.vocab
        if token_id < 0 or token_id >= len(vocab.token_bytes):
            return None
        data = vocab.token_bytes[token_id]
        if not data:
            return None
        nxt = g.step_bytes(s, q, data)
        return None if nxt is None else (nxt[0], nxt[1], False)

    def advance(self, token_id: int) -> bool:
        """Consume one token; False (state unchanged) if it is not allowed."""
        if self.error is not None:
            return False
        try:
            nxt = self._next(self._stack[-1], int(token_id))
        except LimitExceededError as exc:
            self._fail(exc)
            return False
        if nxt is None:
            return False
        self._stack.append(nxt)
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest prefix of ``tokens`` that would be accepted; no state change."""
        if self.error is not None:
            return 0
        entry = self._stack[-1]
        n = 0
        try:
            for t in tokens:
                entry = self._next(entry, int(t))
                if entry is None:
                    break
                n += 1
        except LimitExceededError:
            pass
        return n

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens (clears an error state reached after them)."""
        if n < 0 or n > len(self._stack) - 1:
            raise ValueError(f"cannot roll back {n} tokens; {len(self._stack) - 1} consumed")
        if n:
            del self._stack[-n:]
        self.error = None
        self.exception = None

    def reset(self) -> None:
        """Back to the start of the grammar."""
        del self._stack[1:]
        self.error = None
        self.exception = None

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete sentence (EOS is allowed)."""
        if self.error is not None:
            return False
        s, q, done = self._stack[-1]
        if done:
            return True
        try:
            return self.grammar.can_end(s, q)
        except LimitExceededError as exc:
            self._fail(exc)
            return False

    def is_terminated(self) -> bool:
        """True once EOS has been consumed or the matcher is in its error state."""
        return self.error is not None or self._stack[-1][2]

    def allowed_tokens(self) -> np.ndarray:
        """Ids of the allowed tokens (slow helper for tests and debugging)."""
        from ..core.bitmask import bitmask_to_ids

        return bitmask_to_ids(self.current_mask(), self.grammar.vocab.vocab_size)

    def forced_bytes(self, limit: int = 4096) -> bytes:
        """The bytes the grammar forces from here (each the only viable next byte), up to ``limit``."""
        if self.error is not None or self._stack[-1][2]:
            return b""
        g = self.grammar
        s, q, _ = self._stack[-1]
        out = bytearray()
        try:
            with g._lock:    # one acquire for the whole probe (the lock is re-entrant)
                self._forced_loop(g, s, q, out, limit)
        except LimitExceededError:
            pass
        return bytes(out)

    @staticmethod
    def _forced_loop(g: CompiledGrammar, s: int, q: int, out: bytearray, limit: int) -> None:
        while len(out) < limit and not g.can_end(s, q):
            nexts = [(b, st) for b in range(256) if (st := g.step_bytes(s, q, bytes([b]))) is not None]
            if len(nexts) != 1:
                break
            b, (s, q) = nexts[0]
            out.append(b)

    def forced_tokens(self, limit: int = 4096) -> list[int]:
        """A tokenization of :meth:`forced_bytes` (greedy longest match; every token is allowed).

        Callers that feed these to a model should back off the last token or two so the
        model can choose its own split at the boundary (see the speculative runtime).
        """
        data = self.forced_bytes(limit)
        vocab = self.grammar.vocab
        b2t = vocab.bytes_to_tokens()
        longest = max(len(data), 1)
        out: list[int] = []
        i = 0
        while i < len(data):
            for j in range(min(len(data), i + longest), i, -1):
                t = b2t.get(data[i:j])
                if t is not None:
                    out.append(t)
                    i = j
                    break
            else:  # the vocabulary cannot spell the next byte alone: stop here
                break
        return out

    def fork(self) -> "GrammarMatcher":
        """An independent copy (shares the immutable compiled grammar)."""
        m = GrammarMatcher(self.grammar, list(self._stack))
        m.error = self.error
        m.exception = self.exception
        return m
