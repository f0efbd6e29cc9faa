"""End tokens: a constraint that lets special tokens other than EOS end a generation.

FIM models end the middle with their own token (``<|fim_pad|>``, ``▁<EOT>``, ``<|file_sep|>`` ...)
that is not always among the vocabulary's EOS ids. :class:`EndTokens` allows every token; after
one of ``end_ids`` it is terminated and accepting, so the decoding loops (which stop when a
constraint is terminated) end there without a change to them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..core.bitmask import allocate_token_bitmask, fill_row


class EndTokens:
    """A ``Constraint`` that allows everything and ends after any of ``end_ids``."""

    def __init__(self, vocab_size: int, end_ids: Iterable[int]):
        self.vocab_size = int(vocab_size)
        self.end_ids = frozenset(int(i) for i in end_ids)
        self._all = np.full(allocate_token_bitmask(1, self.vocab_size)[0].shape, -1, dtype=np.int32)
        self._ended_at: int | None = None      # number of tokens when an end token came
        self._n = 0

    def current_mask(self) -> np.ndarray:
        """Every token (the row is all ones)."""
        return self._all

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Allow every token in ``bitmask[row]``."""
        fill_row(bitmask, row, self._all)

    def advance(self, token_id: int) -> bool:
        """Consume a token (any; False only after the generation ended)."""
        if self._ended_at is not None:
            return False
        self._n += 1
        if int(token_id) in self.end_ids:
            self._ended_at = self._n
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Tokens accepted up to and including the first end token."""
        if self._ended_at is not None:
            return 0
        for k, t in enumerate(tokens):
            if int(t) in self.end_ids:
                return k + 1
        return len(tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens."""
        if n < 0 or n > self._n:
            raise ValueError(f"cannot roll back {n} tokens; {self._n} consumed")
        self._n -= n
        if self._ended_at is not None and self._ended_at > self._n:
            self._ended_at = None

    def is_accepting(self) -> bool:
        """Always: the text may end anywhere."""
        return True

    def is_terminated(self) -> bool:
        """Whether an end token was consumed."""
        return self._ended_at is not None

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """None: every token is allowed."""
        return []

    def fork(self) -> "EndTokens":
        """An independent copy."""
        e = EndTokens(self.vocab_size, self.end_ids)
        e._ended_at, e._n = self._ended_at, self._n
        return e
