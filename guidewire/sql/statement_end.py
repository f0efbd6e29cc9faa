"""End generation at the statement's ``;`` or at a blank line after a complete statement.

A grammar with ``%ignore WS`` allows whitespace after the final ``;`` until EOS, and a small
model fills ``max_tokens`` with newlines there. :class:`StatementEnd` wraps a grammar matcher and
reports it terminated once the output is a complete statement whose last non-blank byte is
``;``, or a complete statement followed by a blank line (where a model ends a statement in prose
and would otherwise be led on into clauses it never meant). Inside a string literal the matcher
is not accepting, so a ``;`` or a blank line there does not count.
"""

from __future__ import annotations

from typing import Sequence


class StatementEnd:
    """A ``Constraint`` that is ``matcher`` plus "terminated after the closing ``;`` or a blank
    line that follows a complete statement"."""

    def __init__(self, matcher, vocab, _last: list[tuple[bytes, int]] | None = None):
        self.matcher = matcher
        self.vocab = vocab
        # per step: (the last non-blank byte so far, newlines after it)
        self._last = list(_last) if _last is not None else [(b"", 0)]

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """The matcher's mask."""
        self.matcher.fill_bitmask(bitmask, row)

    def advance(self, token_id: int) -> bool:
        """Advance the matcher; remember the last non-blank byte emitted and the newlines after it."""
        if not self.matcher.advance(token_id):
            return False
        data = self.vocab.token_bytes[token_id] if 0 <= token_id < len(self.vocab.token_bytes) else b""
        body = data.rstrip()
        if body:
            self._last.append((body[-1:], data[len(body):].count(b"\n")))
        else:
            last, newlines = self._last[-1]
            self._last.append((last, newlines + data.count(b"\n")))
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
        """Whether generation must stop: the matcher is done, or a complete statement ended with
        ``;`` or is followed by a blank line."""
        if self.matcher.is_terminated():
            return True
        last, newlines = self._last[-1]
        return (last == b";" or newlines >= 2) and self.matcher.is_accepting()

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
