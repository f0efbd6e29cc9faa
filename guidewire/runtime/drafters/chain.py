"""A drafter made of drafters: the first non-empty draft wins, and a short deterministic draft
may be continued by a later drafter that can propose from a hypothetical history.

For example ``DrafterChain([forced, lookup, sam])`` proposes the grammar's forced text when there
is some, and -- when that is shorter than asked -- appends what prompt lookup predicts *after* the
forced text (``lookup.propose(..., prefix=forced_tokens)``, validated against the constraint after
the forced tokens), so the combined draft is still a valid token sequence; its ``source`` names
both parts (``"forced+lookup"``). Draft-model drafts (with ``probs``) are never combined.
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
        combine: continue a short deterministic draft with a later deterministic drafter's
            proposal from after it.
        name: the chain's name (default ``"chain"``).

    ``last_parts`` lists ``(drafter, n_tokens)`` for the latest draft, in order;
    :meth:`record_accepted` credits accepted tokens to the parts.
    """

    supports_prefix = True

    def __init__(self, drafters: Sequence, *, combine: bool = True, name: str = "chain"):
        super().__init__()
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
        """The first non-empty member draft, possibly continued by a later member."""
        self.calls += 1
        self.last_parts = []
        prefix = tuple(int(t) for t in prefix)
        for i, d in enumerate(self.drafters):
            draft = _propose(d, constraint, max_tokens, prefix)
            if not draft.tokens:
                continue
            draft.source = draft.source or d.name
            parts = [(d, len(draft.tokens))]
            if self.combine and draft.probs is None and len(draft.tokens) < max_tokens:
                head = prefix + tuple(draft.tokens)
                for e in self.drafters[i + 1:]:
                    if not getattr(e, "supports_prefix", False) or not getattr(e, "deterministic", False):
                        continue
                    more = e.propose(constraint, max_tokens - len(draft.tokens), prefix=head)
                    if more.tokens and more.probs is None:
                        draft = Draft(draft.tokens + list(more.tokens), None,
                                      f"{draft.source}+{more.source or e.name}")
                        parts.append((e, len(more.tokens)))
                        break
            self.last_parts = parts
            self.proposed += len(draft.tokens)
            return draft
        return Draft([], None, self.name)

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
