"""AWRS (after Lipkin et al. 2025): adaptive weighted rejection sampling of one token.

Instead of masking the whole vocabulary, tokens are checked lazily in the order of their
Gumbel-perturbed log-probs, which is successive sampling without replacement from ``p`` (each
next token drawn in proportion to ``p`` among those not yet drawn). The first allowed one is an
exact draw from the locally masked distribution ``p(t) 1[t allowed] / Z`` with ``Z`` the sum of
``p`` over the allowed tokens. Expected checks ~ 1 + (invalid tokens ranked above it).

The weight is an unbiased estimate of ``Z`` from the *same* ordering, continued (Des Raj's
ordered estimator for sampling without replacement, stopped). Write ``x_1, x_2, ...`` for the
tokens in Gumbel order, ``F_j`` for what is known after checking ``x_1..x_j``, ``K_j`` for the
allowed mass among them and ``M_j`` for the mass of the tokens not yet drawn. Given ``F_j``, the
next token is drawn with probability ``p(x) / M_j`` from the undrawn ones, so
``D_{j+1} = K_j + 1[x_{j+1} allowed] * M_j`` has ``E[D_{j+1} | F_j] = K_j + (Z - K_j) = Z``. Let
``S`` be any stopping time (here: the ``successes``-th allowed token is found, or
``max_checks`` tokens have been checked after the first allowed one, or nothing is left); ``S``
is decided from ``F_S`` alone, so the estimate ``Zhat = D_{S+1}`` (one more token checked;
``K_S`` exactly when ``M_S = 0``) satisfies ``E[Zhat | F_S] = Z``. The token drawn ``t`` is known
in ``F_S`` (it is the first allowed token, found at or before ``S``), hence
``E[Zhat f(t)] = E[f(t) E[Zhat | F_S]] = Z E[f(t)] = sum over allowed t of p(t) f(t)``: the
pair is properly weighted, and the product of the steps' estimates along a sequence is a proper
importance weight for the target. Every token is checked at most once (no replacement), and
the estimate is exact (``Zhat = Z``) as soon as every allowed token has been found, e.g. when
only one token (an EOS) is allowed.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..runtime.errors import ConstraintViolationError
from .problem import Problem

_FIRST_CHUNK = 16
MAX_CHECKS = 16


def awrs_step(pb: Problem, matcher, lp: np.ndarray, depth: int, *, successes: int = 2,
              max_checks: int = MAX_CHECKS,
              accept: Callable[[int], bool] | None = None) -> tuple[int | None, float]:
    """``(token, log Zhat)`` for one step after ``depth`` tokens; ``(None, -inf)`` when no token
    is allowed (the estimate is then exactly zero). After the first allowed token the Gumbel
    order goes on until ``successes`` allowed tokens are found or ``max_checks`` more tokens are
    checked, then one more is checked for the estimate (see the module docstring). ``accept``,
    when given, is a further test a token must pass after the grammar's (e.g. a potential that
    must stay non-zero); it is part of "allowed" for the sample and the estimate."""
    if successes < 1 or max_checks < 0:
        raise ValueError(f"successes must be >= 1 and max_checks >= 0, got {successes}, {max_checks}")
    p = np.exp(lp.astype(np.float64))
    pool = pb.length_pool(depth)
    if pool is not None:
        p = np.where(pool, p, 0.0)
    keys = np.where(p > 0, lp.astype(np.float64) + pb.rng.gumbel(size=p.size), -np.inf)
    order = _gumbel_order(keys.copy())
    token = None
    found_mass = 0.0                       # K: allowed mass among the checked tokens
    found = 0
    after = 0                              # checks after the first allowed token
    nxt = None
    for t in order:
        if found >= successes or (token is not None and after >= max_checks):
            nxt = t                        # the stopping time S has passed: x_{S+1}
            break
        good = _allowed(pb, matcher, t, depth, accept)
        keys[t] = -np.inf                  # drawn: no longer part of M
        if token is not None:
            after += 1
        if good:
            found += 1
            found_mass += p[t]
            if token is None:
                token = t
    if token is None:
        return None, float("-inf")
    if nxt is None:                        # every token drawn: K is Z
        return token, math.log(found_mass)
    rest = float(p[np.isfinite(keys)].sum())          # M_S, including x_{S+1}
    zhat = found_mass + (rest if _allowed(pb, matcher, nxt, depth, accept) else 0.0)
    return token, math.log(zhat)


def _allowed(pb: Problem, matcher, t: int, depth: int, accept) -> bool:
    return pb.check(matcher, t, depth) and (accept is None or bool(accept(t)))


def _gumbel_order(keys: np.ndarray):
    """Token ids with finite keys in decreasing key order, sorted lazily in growing chunks
    (``keys`` must not change while the generator runs)."""
    remaining = int(np.isfinite(keys).sum())
    done = 0
    k = _FIRST_CHUNK
    while done < remaining:
        k = min(k, remaining)
        top = np.argpartition(-keys, k - 1)[:k] if k < keys.size else np.arange(keys.size)
        top = top[np.argsort(-keys[top], kind="stable")]
        for t in top[done:]:
            yield int(t)
        done = k
        k *= 4


def awrs_sequence(pb: Problem, *, successes: int = 2, max_checks: int = MAX_CHECKS) -> tuple[list[int], float]:
    """One AWRS sequence and its log weight (the sum of the steps' ``log Zhat``; ``-inf`` when it
    ran into a dead end, which then ends it)."""
    m = pb.grammar.matcher()
    toks: list[int] = []
    log_w = 0.0
    while True:
        lp = pb.logprobs(toks)
        t, lz = awrs_step(pb, m, lp, len(toks), successes=successes, max_checks=max_checks)
        if t is None:
            return toks, float("-inf")
        log_w += lz
        pb.stats.tokens_sampled += 1
        if pb.is_eos(t):
            return toks, log_w
        if not m.advance(t):
            raise ConstraintViolationError(f"the grammar refused token {t} that it had allowed")
        toks.append(t)


def run_awrs(pb: Problem, n: int, *, successes: int = 2,
             max_checks: int = MAX_CHECKS) -> tuple[list[list[int]], np.ndarray]:
    """``n`` independent AWRS sequences and their (unnormalised) log weights."""
    seqs, logw = [], []
    for _ in range(n):
        pb.new_proposal(n)
        toks, lw = awrs_sequence(pb, successes=successes, max_checks=max_checks)
        seqs.append(toks)
        logw.append(lw)
        if np.isfinite(lw):
            pb.stats.accepted += 1
        else:
            pb.stats.rejected += 1
    return seqs, np.array(logw, dtype=np.float64)
