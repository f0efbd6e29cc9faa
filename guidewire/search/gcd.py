"""GCD, the baseline: mask the vocabulary and renormalise locally at every step.

This is what ``generate`` does. It samples ``prod_i p(w_i | w_<i) / Z_i(w_<i)`` over allowed
tokens, which is *not* the target ``P(w · EOS) / Z`` whenever the local normalisers ``Z_i``
differ between prefixes: a prefix whose continuations the model finds unlikely is entered as
often as its unconstrained probability says and then forced through.
"""

from __future__ import annotations

import numpy as np

from ..runtime.errors import ConstraintViolationError
from .problem import Problem, collect_samples


def gcd_sequence(pb: Problem) -> list[int] | None:
    """One locally masked sample; ``None`` when it runs into ``max_tokens`` (a dead end)."""
    m = pb.grammar.matcher()
    toks: list[int] = []
    while True:
        allowed = pb.allowed(m, len(toks))
        ids = np.flatnonzero(allowed)
        if ids.size == 0:
            return None
        if ids.size == 1:          # the only allowed token: probability one, no model call
            t = int(ids[0])
        else:
            lp = pb.logprobs(toks).astype(np.float64)
            top = lp[ids].max()
            if not np.isfinite(top):
                return None
            w = np.where(allowed, np.exp(lp - top), 0.0)
            t = pb.draw(w)
        pb.stats.tokens_sampled += 1
        if pb.is_eos(t):
            return toks
        if not m.advance(t):
            raise ConstraintViolationError(f"the grammar refused token {t} that its mask allowed")
        toks.append(t)


def run_gcd(pb: Problem, n: int, *, max_proposals: int | None = None) -> list[list[int]]:
    """``n`` GCD samples (dead ends are retried, up to ``max_proposals``)."""
    limit = max_proposals if max_proposals is not None else 100 * n + 100
    return collect_samples(pb, n, limit, gcd_sequence)

