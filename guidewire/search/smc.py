"""Sequential Monte Carlo with AWRS proposals (after Loula et al. 2025).

``N`` particles grow one token per round by :func:`~.awrs.awrs_step`, each weight multiplied
by the step's unbiased local-normaliser estimate; with a ``potential`` (a callable on the text
so far returning a factor >= 0, e.g. "the partial SQL parses", "the JSON satisfies a semantic
rule"), by ``potential(new) / potential(old)`` every ``potential_every`` tokens and always at
EOS, so the target becomes ``P(x · EOS) * potential(x) / Z`` (a prefix scored 0 is dropped,
so a potential should score 0 only prefixes that no completion can rescue). When the effective
sample size falls below ``ess_threshold * N`` the particles are resampled (multinomial) and the
log of the mean weight is added to the normaliser estimate, whose exponential is unbiased. When
every particle dies, the call returns them all with weight zero and ``log Z = -inf`` (a valid
outcome of an unbiased estimator, not an error; :meth:`SampleSet.distribution` is then empty).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .awrs import MAX_CHECKS, awrs_step
from ..runtime.errors import ConstraintViolationError
from .problem import Problem
from .sampleset import log_mean_exp


@dataclass
class _Particle:
    matcher: object
    tokens: list[int] = field(default_factory=list)
    log_w: float = 0.0
    log_phi: float = 0.0
    done: bool = False

    def copy(self) -> "_Particle":
        return _Particle(self.matcher.fork(), list(self.tokens), 0.0, self.log_phi, self.done)


def _log_potential(pb: Problem, potential: Callable[[str], float], tokens: list[int]) -> float:
    pb.stats.potential_calls += 1
    v = float(potential(pb.text(tokens)))
    if not v >= 0 or math.isnan(v):
        raise ValueError(f"potential returned {v!r}; it must be a number >= 0")
    return math.log(v) if v > 0 else float("-inf")


def _nonzero_after(pb: Problem, potential: Callable[[str], float], tokens: list[int]) -> Callable[[int], bool]:
    def accept(t: int) -> bool:
        return _log_potential(pb, potential, tokens if pb.is_eos(t) else tokens + [t]) > float("-inf")
    return accept


def ess(log_w: np.ndarray) -> float:
    """Effective sample size ``(sum w)^2 / sum w^2`` of log weights (0 when all are zero)."""
    finite = np.isfinite(log_w)
    if not finite.any():
        return 0.0
    w = np.exp(log_w[finite] - log_w[finite].max())
    return float(w.sum() ** 2 / (w ** 2).sum())


def run_smc(pb: Problem, n: int, *, potential: Callable[[str], float] | None = None,
            potential_every: int = 1, ess_threshold: float = 0.5, potential_in_check: bool = False,
            successes: int = 2, max_checks: int = MAX_CHECKS) -> tuple[list[list[int]], np.ndarray, float]:
    """Particles, their unnormalised log weights and the log normaliser estimate.

    ``potential_in_check``: also test ``potential(text + token) > 0`` inside each AWRS token
    check, so a particle never takes a token that zeroes the potential (one potential call per
    checked token; for cheap potentials). The target is unchanged.
    """
    if n < 1:
        raise ValueError("SMC needs at least one particle")
    if not 0.0 <= ess_threshold <= 1.0:
        raise ValueError(f"ess_threshold must be in [0, 1], got {ess_threshold}")
    if potential_every < 1:
        raise ValueError(f"potential_every must be >= 1, got {potential_every}")
    if potential_in_check and potential is None:
        raise ValueError("potential_in_check needs a potential")
    parts = [_Particle(pb.grammar.matcher()) for _ in range(n)]
    pb.stats.proposals += n
    log_z = 0.0
    while not all(q.done for q in parts):
        for q in parts:
            if q.done:
                continue
            accept = None
            if potential_in_check:
                accept = _nonzero_after(pb, potential, q.tokens)
            t, lz = awrs_step(pb, q.matcher, pb.logprobs(q.tokens), len(q.tokens), successes=successes,
                              max_checks=max_checks, accept=accept)
            if t is None:
                q.log_w, q.done = float("-inf"), True
                continue
            pb.stats.tokens_sampled += 1
            q.log_w += lz
            if pb.is_eos(t):
                q.done = True
            else:
                if not q.matcher.advance(t):
                    raise ConstraintViolationError(f"the grammar refused token {t} that it had allowed")
                q.tokens.append(t)
            if potential is not None and (q.done or len(q.tokens) % potential_every == 0):
                lp = _log_potential(pb, potential, q.tokens)
                q.log_w += lp - q.log_phi
                q.log_phi = lp
                if lp == float("-inf"):
                    q.done = True
        log_w = np.array([q.log_w for q in parts])
        if not np.isfinite(log_w).any():
            break                 # every particle died: the estimate of Z is 0 (log_z = -inf)
        if not all(q.done for q in parts) and ess(log_w) < ess_threshold * n:
            log_z += log_mean_exp(log_w)
            w = np.exp(log_w - log_w[np.isfinite(log_w)].max())
            w[~np.isfinite(log_w)] = 0.0
            picks = pb.rng.choice(n, size=n, p=w / w.sum())
            parts = [parts[i].copy() for i in picks]
            pb.stats.resamples += 1
    log_w = np.array([q.log_w for q in parts])
    log_z += log_mean_exp(log_w)
    for q in parts:
        if np.isfinite(q.log_w):
            pb.stats.accepted += 1
        else:
            pb.stats.rejected += 1
    return [q.tokens for q in parts], log_w, log_z
