"""Interval-set intersection: the one-pass merge against every-pair-then-normalize, on random sets."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.grammar.charset import MAX_CP, SURROGATES, intersect, intersect_reference, is_normal, normalize

# code points near the interesting edges: ASCII, the surrogates, the top
POINTS = st.one_of(st.integers(0, 300), st.integers(SURROGATES[0] - 3, SURROGATES[1] + 3),
                   st.integers(MAX_CP - 5, MAX_CP), st.integers(0, MAX_CP))
RAW = st.lists(st.tuples(POINTS, POINTS), max_size=8)     # unsorted, overlapping, reversed pairs too


def test_intersect_agrees_with_reference():
    seen: Counter = Counter()

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(RAW, RAW, st.booleans(), st.booleans())
    def run(x, y, nx, ny):
        a = normalize(x) if nx else tuple(x)
        b = normalize(y) if ny else tuple(y)
        got, want = intersect(a, b), intersect_reference(a, b)
        assert got == want, (a, b)
        assert is_normal(got)
        seen["merge" if is_normal(a) and is_normal(b) else "fallback"] += 1
        seen["nonempty"] += bool(got)

    run()
    assert seen["merge"] >= 100 and seen["fallback"] >= 50 and seen["nonempty"] >= 100, seen


def test_is_normal_is_normalize_fixed_point():
    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(RAW)
    def run(x):
        assert is_normal(normalize(x))
        assert is_normal(tuple(x)) == (normalize(x) == tuple(x)), x

    run()
