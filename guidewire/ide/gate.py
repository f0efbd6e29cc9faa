"""The suffix gate: a grammar constraint on the middle of a fill-in-the-middle completion.

Given a compiled grammar of the *whole document*, the text before the cursor (``prefix``) and the
text after it (``suffix``), the middle ``m`` must make ``prefix + m + suffix`` a sentence of the
grammar. The gate starts the grammar's matcher after ``prefix`` and then masks like it, so every
token keeps ``prefix + m`` a viable prefix of the language, except for EOS: EOS is allowed exactly
where the suffix can follow, i.e. where the grammar can consume ``suffix`` from the current state
and end there. A finished middle (EOS sampled, or a cut accepted by :meth:`SuffixGate.accepts`) is
therefore always consistent with the suffix; a middle the model never closes ends with
``finish_reason == "length"`` and ``complete == False``.

The suffix check costs one pass over the suffix's bytes per new parser state (memoised on the
``(earley_set, lexer_state)`` pair, at most :data:`MEMO_ENTRIES` of them).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.bitmask import fill_row
from .fim import InfillError
from ..monitors.base import validate_on_fork

MEMO_ENTRIES = 4096


def _line_col(text: bytes, offset: int) -> tuple[int, int]:
    head = text[:offset].decode("utf-8", "replace")
    line = head.count("\n") + 1
    return line, len(head) - (head.rfind("\n") + 1) + 1


def _viable_prefix_state(grammar, prefix: bytes) -> tuple[int, int]:
    s, q = grammar.matcher().state
    st = grammar.step_bytes(s, q, prefix)
    if st is not None:
        return st
    # locate the first byte that leaves the language, for the error message
    lo, hi = 0, len(prefix)
    while lo < hi:          # the longest viable prefix is prefix[:lo]
        mid = (lo + hi + 1) // 2
        if grammar.step_bytes(s, q, prefix[:mid]) is not None:
            lo = mid
        else:
            hi = mid - 1
    line, col = _line_col(prefix, lo)
    raise InfillError(f"the text before the cursor is not a prefix of the grammar's language: it goes wrong "
                      f"at line {line}, column {col} ({prefix[lo:lo + 20].decode('utf-8', 'replace')!r})")


class SuffixGate:
    """A ``Constraint`` on the middle: ``grammar``'s mask after ``prefix``, EOS only where ``suffix``
    can follow (see the module docstring). Raises :class:`InfillError` when ``prefix`` is not a
    viable prefix of the grammar."""

    def __init__(self, grammar, prefix: str, suffix: str = "", *, _state=None, _memo=None):
        from ..grammar.matcher import GrammarMatcher

        self.grammar = grammar
        self.suffix = suffix.encode("utf-8")
        start = _state if _state is not None else _viable_prefix_state(grammar, prefix.encode("utf-8"))
        self.matcher = GrammarMatcher(grammar, [(start[0], start[1], False)])
        self._eos_ids = grammar.vocab.eos_ids
        self._eos_row = grammar.eos_row
        self._not_eos = ~grammar.eos_row
        self._ended: list[bool] = []            # per advanced token: was it EOS
        self._memo: dict = _memo if _memo is not None else {}
        self._start = start

    @property
    def error(self) -> str | None:
        """The grammar matcher's error message (a work limit hit), if any."""
        return self.matcher.error

    def _fits(self, s: int, q: int) -> bool:
        key = (s, q)
        hit = self._memo.get(key)
        if hit is None:
            st = self.grammar.step_bytes(s, q, self.suffix)
            hit = st is not None and self.grammar.can_end(*st)
            if len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def suffix_fits(self) -> bool:
        """Whether ``prefix + middle so far + suffix`` is a sentence of the grammar."""
        if self.matcher.error is not None:
            return False
        return self._fits(*self.matcher.state)

    def accepts(self, middle: str) -> bool:
        """Whether ``prefix + middle + suffix`` is a sentence (independent of the tokens advanced)."""
        st = self.grammar.step_bytes(*self._start, middle.encode("utf-8"))
        return st is not None and self._fits(*st)

    def current_mask(self) -> np.ndarray:
        """The current bitmask row (1-D int32)."""
        if self._ended and self._ended[-1]:
            return self._eos_row.copy()
        row = self.matcher.current_mask() & self._not_eos
        if self.suffix_fits():
            row |= self._eos_row
        return row

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed tokens into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask())

    def advance(self, token_id: int) -> bool:
        """Consume a token; EOS only where the suffix fits. False (no change) if not allowed."""
        if self._ended and self._ended[-1]:
            return False
        if int(token_id) in self._eos_ids:
            if not self.suffix_fits():
                return False
            self._ended.append(True)
            return True
        if not self.matcher.advance(token_id):
            return False
        self._ended.append(False)
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix of ``tokens``; no state change."""
        return validate_on_fork(self, tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens."""
        if n < 0 or n > len(self._ended):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._ended)} consumed")
        for _ in range(n):
            if not self._ended.pop():
                self.matcher.rollback(1)

    def is_accepting(self) -> bool:
        """Whether the middle may end here (the suffix fits)."""
        return bool(self._ended and self._ended[-1]) or self.suffix_fits()

    def is_terminated(self) -> bool:
        """True after EOS or in the grammar's error state."""
        return bool(self._ended and self._ended[-1]) or self.matcher.error is not None

    def forced_tokens(self, limit: int = 4096) -> list[int]:
        """The tokens forced from here (the grammar's forced tokens, unless EOS is also allowed)."""
        if self.is_terminated() or self.suffix_fits():
            return []
        return self.matcher.forced_tokens(limit)

    def fork(self) -> "SuffixGate":
        """An independent copy (the compiled grammar and the suffix memo are shared)."""
        g = SuffixGate(self.grammar, "", "", _state=self._start, _memo=self._memo)
        g.suffix = self.suffix
        g.matcher = self.matcher.fork()
        g._ended = list(self._ended)
        return g
