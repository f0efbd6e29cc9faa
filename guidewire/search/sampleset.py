"""What a search call returns: the samples, their weights and the work spent."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class SearchStats:
    """Work spent by one sampling call.

    ``forward_passes``/``tokens_scored``: target model calls and the tokens they consumed (cache
    hits cost none); ``constraint_checks``: token-level grammar checks (a full-vocabulary mask
    counts ``vocab_size``); ``proposals``: complete or abandoned sequence proposals;
    ``accepted``/``rejected``: proposals kept and thrown away; ``wall_seconds``: elapsed time.
    """

    forward_passes: int = 0
    tokens_scored: int = 0
    constraint_checks: int = 0
    masks: int = 0
    tokens_sampled: int = 0
    proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    resamples: int = 0
    potential_calls: int = 0
    wall_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def checks_per_token(self) -> float:
        """Constraint checks per sampled token (``vocab_size`` for full masking)."""
        return self.constraint_checks / max(self.tokens_sampled, 1)

    def as_dict(self) -> dict:
        """A JSON-ready dict (``checks_per_token`` included)."""
        d = asdict(self)
        d["checks_per_token"] = self.checks_per_token
        return d


@dataclass
class SampleSet:
    """Samples from one call of :func:`guidewire.search.sample`.

    ``texts`` and ``token_ids`` are per sample. ``log_weights`` is ``None`` when every sample is
    an exact draw of the target (GCD, ASAp and CARS return unweighted samples: GCD's are from the
    locally normalised distribution, not the target), else the self-normalised log importance
    weights (AWRS, SMC; they sum to one in probability space; a sample of weight zero is a
    particle that died, its text possibly incomplete). ``log_normalizer`` is the unbiased
    estimate of ``Z`` (in probability space) where the method gives one.
    """

    texts: list[str]
    token_ids: list[list[int]]
    log_weights: list[float] | None
    stats: SearchStats
    method: str
    log_normalizer: float | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def distribution(self) -> dict[str, float]:
        """The (weighted) empirical distribution over distinct texts, most probable first."""
        if not self.texts:
            return {}
        if self.log_weights is None:
            w = np.full(len(self.texts), 1.0 / len(self.texts))
        else:
            lw = np.asarray(self.log_weights, dtype=np.float64)
            if not np.isfinite(lw).any():
                return {}
            w = np.exp(lw - lw[np.isfinite(lw)].max())
            w = w / w.sum()
        out: dict[str, float] = {}
        for t, x in zip(self.texts, w):
            if x > 0:       # a zero-weight particle (a dead end, a zero potential) is no sample
                out[t] = out.get(t, 0.0) + float(x)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def normalise_log_weights(log_w: np.ndarray) -> np.ndarray:
    """Log weights shifted so that their exponentials sum to one (all ``-inf`` stays ``-inf``)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    finite = np.isfinite(log_w)
    if not finite.any():
        return log_w
    m = log_w[finite].max()
    return log_w - (m + math.log(np.exp(log_w[finite] - m).sum()))


def log_mean_exp(log_w: np.ndarray) -> float:
    """``log(mean(exp(log_w)))`` computed stably (``-inf`` if every weight is zero)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    finite = np.isfinite(log_w)
    if not finite.any():
        return float("-inf")
    m = log_w[finite].max()
    return float(m + math.log(np.exp(log_w[finite] - m).sum() / log_w.size))
