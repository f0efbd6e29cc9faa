"""Shared pieces of the drafters: statistics counters, stop ids, draft cutting, copy-ahead."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from ...core.bitmask import allocate_token_bitmask, ids_to_bitmask
from ..drafting import Draft


class DrafterBase:
    """Counters every drafter keeps for per-drafter statistics.

    ``calls`` counts :meth:`propose` calls, ``proposed`` the draft tokens returned; the verifier
    adds ``accepted`` (initialised here to 0; :meth:`record_accepted` increments it).

    Class attributes: ``supports_prefix`` (``propose`` honours a non-empty ``prefix=``) and
    ``deterministic`` (drafts carry ``probs=None``).
    """

    name = "drafter"
    supports_prefix = False
    deterministic = True

    def __init__(self) -> None:
        self.calls = 0
        self.proposed = 0
        self.accepted = 0

    def stats(self) -> dict:
        """``{"name", "calls", "proposed", "accepted", "acceptance"}`` (acceptance = accepted / proposed)."""
        rate = self.accepted / self.proposed if self.proposed else 0.0
        return {"name": self.name, "calls": self.calls, "proposed": self.proposed,
                "accepted": self.accepted, "acceptance": rate}

    def record_accepted(self, source, accepted: int | None = None) -> None:
        """Count accepted tokens of the latest draft: ``record_accepted(source, n)`` (as the
        speculative verifier calls it) or ``record_accepted(n)``."""
        self.accepted += int(source if accepted is None else accepted)

    def reset_stats(self) -> None:
        """Zero the counters."""
        self.calls = self.proposed = self.accepted = 0

    def _emit(self, tokens: list[int], probs=None) -> Draft:
        self.proposed += len(tokens)
        return Draft(list(tokens), probs, self.name)


def stop_ids(vocab=None, eos_ids: Iterable[int] | None = None) -> frozenset[int]:
    """Ids a deterministic drafter never proposes: EOS and other special ids of ``vocab``, plus ``eos_ids``."""
    out: set[int] = set()
    if vocab is not None:
        out.update(int(i) for i in vocab.eos_ids)
        out.update(int(i) for i in vocab.special_ids)
    if eos_ids is not None:
        out.update(int(i) for i in ([eos_ids] if isinstance(eos_ids, int) else eos_ids))
    return frozenset(out)


def cut_at_stop(tokens: list[int], stop: frozenset[int]) -> list[int]:
    """``tokens`` up to (excluding) the first id in ``stop``."""
    if stop:
        for i, t in enumerate(tokens):
            if t in stop:
                return tokens[:i]
    return tokens


def validate_cut(constraint, tokens: list[int], prefix: Sequence[int] = ()) -> list[int]:
    """The longest prefix of ``tokens`` the constraint accepts after ``prefix`` (state unchanged)."""
    if constraint is None or not tokens:
        return tokens
    if prefix:
        n = constraint.validate(list(prefix) + tokens) - len(prefix)
    else:
        n = constraint.validate(tokens)
    return tokens[:max(0, n)]


def copy_ahead(get: Callable[[int], int], start: int, end: int, k: int) -> list[int]:
    """``k`` tokens copied from position ``start`` of a text of length ``end`` (``get(i)`` reads it).

    Copying runs past the end LZ77-style: position ``end + j`` is the ``j``-th copied token, so a
    repeated pattern is proposed for as long as asked.
    """
    out: list[int] = []
    for j in range(k):
        i = start + j
        out.append(get(i) if i < end else out[i - end])
    return out


class EosCheck:
    """Whether a constraint allows nothing but EOS: one vectorised pass over its bitmask row."""

    def __init__(self, vocab):
        self.vocab_size = int(vocab.vocab_size)
        self._not_eos = ~ids_to_bitmask(sorted(vocab.eos_ids), self.vocab_size)
        self._buf = allocate_token_bitmask(1, self.vocab_size)

    def row(self, constraint) -> np.ndarray:
        """The constraint's current bitmask row (a reused buffer)."""
        constraint.fill_bitmask(self._buf, 0)
        return self._buf[0]

    def only_eos(self, constraint) -> bool:
        """True when no non-EOS token is allowed."""
        return not bool((self.row(constraint) & self._not_eos).any())
