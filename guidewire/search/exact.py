"""The exact conditional of a finite (or quickly vanishing) language by best-first enumeration.

Every token sequence the grammar allows is walked from the most probable prefix down, with the
full mask at each prefix, so every tokenization of every sentence is counted. The walk stops
when the probability mass of the prefixes not yet expanded (the *frontier*, an upper bound of
everything not yet found) is at most ``tol`` times the mass found, or after ``max_expansions``
forward passes; the result says which, and bounds the error: the true ``Z`` lies in
``[found, found + frontier]``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ..runtime.errors import ConstraintViolationError
from .problem import Problem


@dataclass
class ExactResult:
    """Per-text target probabilities (unnormalised, ``P(text · EOS)``), their sum, the frontier
    mass left unexplored, the expansions made and the number of complete token sequences."""

    masses: dict[str, float]
    found: float
    frontier: float
    expansions: int
    sequences: int

    def conditional(self) -> dict[str, float]:
        """The found masses normalised to sum to one."""
        return {k: v / self.found for k, v in sorted(self.masses.items(), key=lambda kv: -kv[1])}

    @property
    def relative_error_bound(self) -> float:
        """``frontier / found``: no text's conditional probability is off by more than this
        (relative), and the unexplored texts hold at most this share."""
        return self.frontier / self.found if self.found > 0 else math.inf


def enumerate_exact(pb: Problem, *, tol: float = 1e-3, max_expansions: int = 2000) -> ExactResult:
    """Best-first walk of the allowed token sequences of ``pb`` (see the module docstring)."""
    masses: dict[str, float] = {}
    found = 0.0
    sequences = 0
    heap = [(-0.0, 0, [], pb.grammar.matcher())]
    frontier = 1.0
    tick = 1
    expansions = 0
    while heap and expansions < max_expansions and frontier > tol * found:
        neg, _, toks, m = heapq.heappop(heap)
        frontier -= math.exp(-neg)
        expansions += 1
        lp = pb.logprobs(toks).astype(np.float64)
        allowed = pb.allowed(m, len(toks))
        ids = np.flatnonzero(allowed)
        eos = [t for t in ids if pb.is_eos(t)]
        if eos:
            mass = math.exp(-neg) * float(np.exp(lp[eos]).sum())
            text = pb.text(toks)
            masses[text] = masses.get(text, 0.0) + mass
            found += mass
            sequences += 1
        for t in ids:
            if pb.is_eos(t) or not np.isfinite(lp[t]):
                continue
            child = m.fork()
            if not child.advance(int(t)):
                raise ConstraintViolationError(f"the grammar refused token {t} that its mask allowed")
            logp = -neg + float(lp[t])
            frontier += math.exp(logp)
            heapq.heappush(heap, (-logp, tick, toks + [int(t)], child))
            tick += 1
    frontier = max(frontier, 0.0) if heap else 0.0
    return ExactResult(masses, found, frontier, expansions, sequences)
