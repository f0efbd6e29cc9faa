"""A drafter made of drafters: the first non-empty draft wins, and a short deterministic draft
may be continued by a later drafter that can propose from a hypothetical history.

For example ``DrafterChain([forced, lookup, sam])`` proposes the grammar's forced text when there
is some, and -- while the draft is shorter than asked -- appends, piece by piece, what the members
predict *after* it (``lookup.propose(..., prefix=draft_so_far)``, validated against the constraint
after the draft so far): copied text, then the key the grammar forces, then copied text again. The
combined draft is still a valid token sequence; its ``source`` names the parts
(``"lookup+forced"``). Draft-model drafts (with ``probs``) are never combined.
"""

from __future__ import annotations

from typing import Sequence

from ..drafting import Draft
from ._common import DrafterBase


def _propose(drafter, constraint, max_tokens: int, prefix: Sequence[int]) -> Draft:
    if prefix:
        if not getattr(drafter, "supports_prefix", False):
            return Draft([], None, getattr(drafter, "name", ""))
        return drafter.propose(constraint, max_tokens, prefix=prefix)
    return drafter.propose(constraint, max_tokens)


class DrafterChain(DrafterBase):
    """Tries ``drafters`` in order; see the module docstring.

    Args:
        drafters: the drafters, highest priority first.
        combine: continue a short deterministic draft with the members' proposals from after it
            (the first member with a proposal wins each piece).
        max_pieces: at most this many pieces per draft.
        name: the chain's name (default ``"chain"``).

    ``last_parts`` lists ``(drafter, n_tokens)`` for the latest draft, in order;
    :meth:`record_accepted` credits accepted tokens to the parts.
    """

    supports_prefix = True

    def __init__(self, drafters: Sequence, *, combine: bool = True, name: str = "chain",
                 max_pieces: int = 4):
        super().__init__()
        self.max_pieces = max(1, int(max_pieces))
        self.drafters = list(drafters)
        self.combine = bool(combine)
        self.name = name
        self.last_parts: list[tuple[object, int]] = []

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        """Whether every member drafts deterministically."""
        return all(getattr(d, "deterministic", False) for d in self.drafters)

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start every member on ``prompt_ids``."""
        prompt_ids = list(prompt_ids)
        for d in self.drafters:
            d.begin(prompt_ids)
        self.last_parts = []

    def extend(self, tokens: Sequence[int]) -> None:
        """Append ``tokens`` to every member's history."""
        tokens = list(tokens)
        for d in self.drafters:
            d.extend(tokens)

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """The first non-empty member draft, continued piece by piece by the members (see the
        module docstring); a draft with ``probs`` is returned alone."""
        self.calls += 1
        self.last_parts = []
        prefix = tuple(int(t) for t in prefix)
        tokens: list[int] = []
        names: list[str] = []
        parts: list[tuple[object, int]] = []
        for _piece in range(self.max_pieces):
            room = max_tokens - len(tokens)
            if room <= 0:
                break
            for d in self.drafters:
                if tokens and not getattr(d, "deterministic", False):
                    continue
                draft = _propose(d, constraint, room, prefix + tuple(tokens))
                if not draft.tokens:
                    continue
                if draft.probs is not None:  # a draft model's proposal is verified on its own
                    draft.source = draft.source or d.name
                    self.last_parts = [(d, len(draft.tokens))]
                    self.proposed += len(draft.tokens)
                    return draft
                tokens.extend(int(t) for t in draft.tokens[:room])
                names.append(draft.source or d.name)
                parts.append((d, min(room, len(draft.tokens))))
                break
            else:
                break  # no member can continue
            if not self.combine:
                break
        if not tokens:
            return Draft([], None, self.name)
        self.last_parts = parts
        self.proposed += len(tokens)
        return Draft(tokens, None, "+".join(dict.fromkeys(names)))

    def record_accepted(self, source, accepted: int | None = None) -> None:
        """Credit accepted tokens of the latest draft to the chain and to its parts, in order:
        ``record_accepted(source, n)`` (as the speculative verifier calls it) or ``record_accepted(n)``."""
        n = int(source if accepted is None else accepted)
        self.accepted += n
        for d, size in self.last_parts:
            take = min(n, size)
            if take <= 0:
                break
            d.accepted = getattr(d, "accepted", 0) + take
            n -= take

    def stats(self) -> dict:
        """The chain's counters plus each member's under ``"members"``."""
        out = super().stats()
        out["members"] = [d.stats() if hasattr(d, "stats") else {"name": getattr(d, "name", "?")}
                          for d in self.drafters]
        return out
