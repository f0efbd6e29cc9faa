"""The drafter protocol of the speculative runtime.

A drafter proposes a short continuation (a *draft*) of the tokens so far; the target model then
verifies every draft token in one forward pass (see :mod:`guidewire.runtime.speculative`). A draft
never changes what is generated, only how many target forwards it takes: rejected draft tokens are
discarded and the KV cache is truncated back.

Drafters see the whole token history (prompt + accepted output) through :meth:`Drafter.begin` and
:meth:`Drafter.extend`, and may inspect (never advance) the request's constraint in
:meth:`Drafter.propose` -- fork it to look ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

import torch


@dataclass
class Draft:
    """A proposed continuation.

    Attributes:
        tokens: the draft token ids, in order (possibly empty: nothing to propose).
        probs: ``None`` for a deterministic draft (each token proposed with probability 1, as
            model-free drafters do), else a ``(len(tokens), V)`` float tensor whose row ``i`` is the
            distribution token ``i`` was sampled from (a draft model). Modified rejection sampling
            uses it to keep the target distribution exact.
        source: the drafter's name (per-drafter statistics).
    """

    tokens: list[int] = field(default_factory=list)
    probs: torch.Tensor | None = None
    source: str = ""

    def __len__(self) -> int:
        return len(self.tokens)


@runtime_checkable
class Drafter(Protocol):
    """Proposes draft tokens; keeps its own view of the token history."""

    name: str

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start a new request whose history is ``prompt_ids``."""

    def extend(self, tokens: Sequence[int]) -> None:
        """Append accepted output tokens to the history."""

    def propose(self, constraint, max_tokens: int) -> Draft:
        """A draft of at most ``max_tokens`` tokens continuing the history.

        ``constraint`` is the request's constraint (or ``None``) in its current state; a drafter
        must not change its state (use ``constraint.fork()``). Draft tokens should be allowed by
        the constraint in turn; the verifier cuts a draft at its first disallowed token.
        """
