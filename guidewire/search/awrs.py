"""AWRS (after Lipkin et al. 2025): adaptive weighted rejection sampling of one token.

Instead of masking the whole vocabulary, tokens are checked lazily in the order of their
Gumbel-perturbed log-probs (sampling without replacement from ``p``); the first allowed one is
an exact draw from the locally masked distribution ``p(t) 1[t allowed] / Z`` with
``Z = sum of p over allowed tokens``. Expected checks ~ 1 + (invalid mass ranked above it).

The weight is an unbiased estimate of ``Z`` from a second, independent stage: with ``R`` the
tokens the first stage rejected (known invalid), ``Z = (1 - p(R)) * s`` where ``s`` is the
chance that a draw from ``p`` restricted to the rest is allowed; ``s`` is estimated by the
negative-binomial estimator ``(r - 1) / (N - 1)`` (``N`` draws with replacement until ``r``
allowed ones), which is unbiased for ``r >= 2``. Checks are memoised, so repeated draws of a
token cost nothing. Given the first stage, the estimate is unbiased and independent of the
token drawn, so ``E[Zhat * f(t)] = sum over allowed t of p(t) f(t)``: the product of the
estimates along a sequence is a proper importance weight for the target.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .errors import SearchBudgetExceeded
from ..runtime.errors import ConstraintViolationError
from .problem import Problem

_FIRST_CHUNK = 16
MAX_DRAWS = 10_000_000


def awrs_step(pb: Problem, matcher, lp: np.ndarray, depth: int, *, successes: int = 2,
              accept: Callable[[int], bool] | None = None) -> tuple[int | None, float]:
    """``(token, log Zhat)`` for one step after ``depth`` tokens; ``(None, -inf)`` when no token
    is allowed (the estimate is then exactly zero). ``accept``, when given, is a further test a
    token must pass after the grammar's (e.g. a potential that must stay non-zero); it is part
    of "allowed" for the sample and the estimate."""
    p = np.exp(lp.astype(np.float64))
    pool = pb.length_pool(depth)
    if pool is not None:
        p = np.where(pool, p, 0.0)
    memo: dict[int, bool] = {}

    def ok(t: int) -> bool:
        v = memo.get(t)
        if v is None:
            v = memo[t] = pb.check(matcher, t, depth) and (accept is None or bool(accept(t)))
        return v

    # stage 1: Gumbel order, first allowed token
    keys = np.where(p > 0, lp.astype(np.float64) + pb.rng.gumbel(size=p.size), -np.inf)
    token = None
    rejected_mass = 0.0
    k = _FIRST_CHUNK
    start = 0
    order = None
    while token is None:
        if order is None or start >= order.size:
            remaining = int(np.isfinite(keys).sum())
            if remaining == 0:
                return None, float("-inf")
            k = min(max(k, 1), remaining)
            top = np.argpartition(-keys, k - 1)[:k] if k < keys.size else np.arange(keys.size)
            order = top[np.argsort(-keys[top], kind="stable")]
            order = order[np.isfinite(keys[order])]
            start = 0
            k *= 4
        t = int(order[start])
        start += 1
        keys[t] = -np.inf
        if ok(t):
            token = t
        else:
            rejected_mass += p[t]
    # stage 2: negative-binomial estimate of the allowed share of the remaining pool
    rest = p.copy()
    for t, good in memo.items():
        if not good:
            rest[t] = 0.0
    cdf = np.cumsum(rest)
    total = cdf[-1]
    hits = 0
    draws = 0
    chunk = 64
    while hits < successes:
        if draws > MAX_DRAWS:
            raise SearchBudgetExceeded(f"AWRS weight estimate needed more than {MAX_DRAWS} draws "
                                       "(allowed mass below ~1e-7)")
        idx = np.minimum(np.searchsorted(cdf, pb.rng.random(chunk) * total, side="right"), p.size - 1)
        uniq, inv = np.unique(idx, return_inverse=True)
        good = np.array([ok(int(t)) for t in uniq], dtype=bool)[inv]
        csum = np.cumsum(good)
        if csum[-1] + hits >= successes:
            draws += int(np.searchsorted(csum, successes - hits)) + 1
            hits = successes
        else:
            hits += int(csum[-1])
            draws += chunk
            chunk = min(chunk * 4, 1 << 16)
    zhat = total * (successes - 1) / (draws - 1)
    return token, math.log(zhat)


def awrs_sequence(pb: Problem, *, successes: int = 2) -> tuple[list[int], float]:
    """One AWRS sequence and its log weight (the sum of the steps' ``log Zhat``; ``-inf`` when it
    ran into a dead end, which then ends it)."""
    m = pb.grammar.matcher()
    toks: list[int] = []
    log_w = 0.0
    while True:
        lp = pb.logprobs(toks)
        t, lz = awrs_step(pb, m, lp, len(toks), successes=successes)
        if t is None:
            return toks, float("-inf")
        log_w += lz
        pb.stats.tokens_sampled += 1
        if pb.is_eos(t):
            return toks, log_w
        if not m.advance(t):
            raise ConstraintViolationError(f"the grammar refused token {t} that it had allowed")
        toks.append(t)


def run_awrs(pb: Problem, n: int, *, successes: int = 2) -> tuple[list[list[int]], np.ndarray]:
    """``n`` independent AWRS sequences and their (unnormalised) log weights."""
    seqs, logw = [], []
    for _ in range(n):
        pb.new_proposal(n)
        toks, lw = awrs_sequence(pb, successes=successes)
        seqs.append(toks)
        logw.append(lw)
        if np.isfinite(lw):
            pb.stats.accepted += 1
        else:
            pb.stats.rejected += 1
    return seqs, np.array(logw, dtype=np.float64)
