"""One AWRS step against an enumerated oracle: on small random distributions and allowed sets,
the pair (token, Zhat) must be properly weighted, E[Zhat 1[t = x]] = p(x) 1[x allowed] for every
token x (Monte Carlo, 4 standard errors), whatever the stopping rule; no token is checked twice
in a step; and the estimate is exact once every allowed token is found."""

from __future__ import annotations

import math

import numpy as np
import pytest

from guidewire.search.awrs import awrs_step


class _Pb:
    """The slice of Problem that awrs_step uses: an allowed set, a generator, check counting."""

    def __init__(self, allowed: np.ndarray, seed: int):
        self.allowed = allowed
        self.rng = np.random.default_rng(seed)
        self.checked: list[int] = []

    def length_pool(self, depth):
        return None

    def check(self, matcher, token, depth):
        self.checked.append(int(token))
        return bool(self.allowed[int(token)])


CASES = [  # (vocab size, allowed count, seed)
    (6, 2, 0), (8, 3, 1), (12, 1, 2), (12, 5, 3), (20, 2, 4),
]


@pytest.mark.parametrize("successes,max_checks", [(1, 0), (2, 0), (2, 3), (3, 50)])
def test_step_is_properly_weighted(successes, max_checks):
    runs = 6000
    cases = 0
    for vocab, n_allowed, seed in CASES:
        g = np.random.default_rng(100 + seed)
        lp = np.log(g.dirichlet(np.full(vocab, 0.4)))
        allowed = np.zeros(vocab, dtype=bool)
        allowed[g.choice(vocab, n_allowed, replace=False)] = True
        p = np.exp(lp)
        pb = _Pb(allowed, seed)
        acc = np.zeros((runs, vocab))
        for r in range(runs):
            pb.checked.clear()
            t, lz = awrs_step(pb, None, lp.astype(np.float32), 0, successes=successes, max_checks=max_checks)
            assert t is not None and allowed[t]
            assert len(pb.checked) == len(set(pb.checked))        # each token checked at most once
            acc[r, t] = math.exp(lz)
        mean, se = acc.mean(0), acc.std(0) / math.sqrt(runs)
        want = np.where(allowed, p.astype(np.float32).astype(np.float64), 0.0)
        assert np.all(np.abs(mean - want) <= 4 * se + 1e-6), (vocab, n_allowed, mean, want, se)
        cases += 1
    assert cases == len(CASES)


def test_single_allowed_token_gives_the_exact_mass_and_dead_end_gives_none():
    lp = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    pb = _Pb(np.array([False, False, True, False]), 0)
    for _ in range(50):
        t, lz = awrs_step(pb, None, lp, 0, successes=2, max_checks=10)
        assert t == 2 and math.isclose(math.exp(lz), 0.15, rel_tol=1e-6)
    pb = _Pb(np.zeros(4, dtype=bool), 0)
    pb.checked.clear()
    assert awrs_step(pb, None, lp, 0) == (None, float("-inf"))
    assert sorted(pb.checked) == [0, 1, 2, 3]


def test_bad_stopping_options_raise():
    pb = _Pb(np.ones(3, dtype=bool), 0)
    with pytest.raises(ValueError, match="successes"):
        awrs_step(pb, None, np.log(np.full(3, 1 / 3)), 0, successes=0)
