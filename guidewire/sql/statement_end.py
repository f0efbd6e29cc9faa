"""End generation at the statement's ``;``.

A grammar with ``%ignore WS`` allows whitespace after the final ``;`` until EOS, and a small
model fills ``max_tokens`` with newlines there. :class:`StatementEnd` wraps a grammar matcher and
reports it terminated once the output is a complete statement whose last non-blank byte is
``;`` (inside a string literal the matcher is not accepting, so a ``;`` there does not count).
"""

from __future__ import annotations

from typing import Sequence


class StatementEnd:
    """A ``Constraint`` that is ``matcher`` plus "terminated after the closing ``;``"."""

    def __init__(self, matcher, vocab, _last: list[bytes] | None = None):
        self.matcher = matcher
        self.vocab = vocab
        self._last = list(_last) if _last is not None else [b""]

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """The matcher's mask."""
        self.matcher.fill_bitmask(bitmask, row)

    def advance(self, token_id: int) -> bool:
        """Advance the matcher; remember the last non-blank byte emitted."""
        if not self.matcher.advance(token_id):
            return False
        data = self.vocab.token_bytes[token_id].rstrip() if 0 <= token_id < len(self.vocab.token_bytes) else b""
        self._last.append(data[-1:] if data else self._last[-1])
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """The matcher's longest accepted prefix (no state change)."""
        return self.matcher.validate(tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo ``n`` tokens."""
        self.matcher.rollback(n)
        del self._last[len(self._last) - n:]

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete statement."""
        return self.matcher.is_accepting()

    def is_terminated(self) -> bool:
        """Whether generation must stop: the matcher is done, or the statement ended with ``;``."""
        return self.matcher.is_terminated() or (self._last[-1] == b";" and self.matcher.is_accepting())

    def forced_tokens(self) -> list[int]:
        """The matcher's forced tokens (none once terminated)."""
        return [] if self.is_terminated() else self.matcher.forced_tokens()

    def fork(self) -> "StatementEnd":
        """An independent copy."""
        return StatementEnd(self.matcher.fork(), self.vocab, self._last)

    @property
    def error(self):
        """The matcher's error message, if any."""
        return getattr(self.matcher, "error", None)
