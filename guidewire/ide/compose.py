"""The conjunction of constraints: a token is allowed iff every part allows it (AND of bitmasks)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.bitmask import allocate_token_bitmask, bitmask_to_ids, fill_row


class AllOf:
    """A ``Constraint`` that intersects ``parts`` (each a grammar matcher, monitor or gate).

    ``advance`` succeeds only if every part accepts the token (parts that already advanced are
    rolled back otherwise); ``is_accepting`` needs every part to accept; it is terminated once any
    part is.
    """

    def __init__(self, parts: Sequence, vocab_size: int):
        if not parts:
            raise ValueError("AllOf needs at least one constraint")
        self.parts = list(parts)
        self.vocab_size = int(vocab_size)
        self._scratch = allocate_token_bitmask(1, self.vocab_size)

    @property
    def error(self) -> str | None:
        """The first part's error message, if any part has one."""
        for p in self.parts:
            err = getattr(p, "error", None)
            if err:
                return err
        return None

    def current_mask(self) -> np.ndarray:
        """The intersected bitmask row (1-D int32)."""
        scratch = self._scratch
        self.parts[0].fill_bitmask(scratch, 0)
        row = scratch[0].copy()
        for p in self.parts[1:]:
            p.fill_bitmask(scratch, 0)
            row &= scratch[0]
        return row

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the intersection of the parts' masks into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask())

    def advance(self, token_id: int) -> bool:
        """Advance every part; False (nothing changed) if any refuses."""
        done = []
        for p in self.parts:
            if not p.advance(token_id):
                for q in done:
                    q.rollback(1)
                return False
            done.append(p)
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest prefix of ``tokens`` every part accepts; no state change."""
        return min(p.validate(tokens) for p in self.parts)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens in every part."""
        for p in self.parts:
            p.rollback(n)

    def is_accepting(self) -> bool:
        """Whether every part accepts."""
        return all(p.is_accepting() for p in self.parts)

    def is_terminated(self) -> bool:
        """Whether any part is terminated."""
        return any(p.is_terminated() for p in self.parts)

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """Tokens forced by the intersection (each the only allowed token in
        turn; none once EOS is allowed)."""
        f = self.fork()
        out: list[int] = []
        while len(out) < limit and not f.is_terminated() and not f.is_accepting():
            ids = bitmask_to_ids(f.current_mask(), self.vocab_size)
            if len(ids) != 1 or not f.advance(int(ids[0])):
                break
            out.append(int(ids[0]))
        return out

    def fork(self) -> "AllOf":
        """An independent copy (each part forked)."""
        return AllOf([p.fork() for p in self.parts], self.vocab_size)

