"""The protocol every mask producer in guidewire follows."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable


@runtime_checkable
class Constraint(Protocol):
    """A per-request, forkable token constraint.

    ``fill_bitmask`` writes row ``row`` of an int32 ``(batch, ceil(V/32))`` bitmask (numpy or
    torch), with the EOS bits set iff the text so far is complete. ``advance`` consumes one token
    and returns False (leaving the state unchanged) when the token is not allowed.
    """

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed-token bits for the current state into ``bitmask[row]``."""

    def advance(self, token_id: int) -> bool:
        """Consume ``token_id``; False and no state change if it is not allowed."""

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix of ``tokens``; the state is not changed."""

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` advanced tokens."""

    def is_accepting(self) -> bool:
        """Whether the text so far is a complete sentence (EOS allowed)."""

    def is_terminated(self) -> bool:
        """Whether nothing but EOS can follow (or the constraint reached an error state)."""

    def forced_tokens(self) -> list[int]:
        """Tokens the constraint forces from here, each the only allowed token in turn."""

    def fork(self) -> "Constraint":
        """An independent copy of this constraint's state."""
