"""The compile's NFA work in C (``_native_nfa.c``) against its Python references, on random inputs.

- ``fragment_facts`` (``fragments.analyse``) against ``analyse_python`` on random graphs: closed
  and not, cyclic and not, with the path count's cap and cut-off made small so they are reached;
  and, independently, the path count against a brute-force enumeration of paths.
- ``splice`` against ``splice_lists`` on fragments captured from random regexes.
- ``nfa_arrays`` against the numpy build of a lexer's edge and epsilon tables.
- ``byte_classes`` (``refine``) in ``test_lexer_sweep`` (both paths, against a scan of the columns).
"""

import gc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guidewire.grammar.fragments as fragments
from guidewire.grammar import native
from guidewire.grammar.fragments import analyse, analyse_python, capture, splice_lists
from guidewire.grammar.lexer import ByteDFA, Terminal
from guidewire.grammar.charset import normalize, utf8_template
from guidewire.grammar.regex import NFA, RegexFragment, compile_into

pytestmark = pytest.mark.skipif(not native.available(), reason="the compiled module is not built")
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


@st.composite
def graphs(draw):
    """(nfa, first, fragment): ``first`` prefix states, then n fragment states with random moves
    (a few may leave the fragment), a random start and end (sometimes out of range)."""
    prefix, n = draw(st.integers(0, 3)), draw(st.integers(1, 14))
    leave = draw(st.booleans()) and draw(st.booleans())
    dag = draw(st.booleans())   # moves only to later states: an acyclic fragment, its paths counted
    nfa = NFA()
    for _ in range(prefix + n):
        nfa.add_state()
    for s in range(prefix, prefix + n):
        lo_t, hi_t = (0, prefix + n) if leave else (s + 1 if dag else prefix, prefix + n - 1)
        if lo_t > hi_t:
            continue
        for t in draw(st.lists(st.integers(lo_t, hi_t), max_size=3 if dag else 2)):
            nfa.eps[s].append(t)
        for lo, w, t in draw(st.lists(st.tuples(st.integers(0, 250), st.integers(0, 5), st.integers(lo_t, hi_t)),
                                      max_size=4 if dag else 3)):
            nfa.edges[s].append((lo, lo + w, t))
    start, end = prefix + draw(st.integers(0, n - 1)), prefix + draw(st.integers(0, n - 1))
    bad = draw(st.sampled_from([None] * 8 + ["start", "end"]))
    if bad == "start":
        start = prefix - 1
    elif bad == "end":
        end = prefix + n
    return nfa, prefix, RegexFragment(start, end, False, False)


def _paths(nfa, first, start, end, live, cap):
    """Brute force: the paths from start to end over live states, a byte range counting per byte
    (the automaton is acyclic where this is asked), enumerated one by one up to ``cap``."""
    total = 0
    stack = [(start, 1)]
    while stack and total < cap:
        s, ways = stack.pop()
        if s == end:
            total += ways
        for t in nfa.eps[s]:
            if live[t - first]:
                stack.append((t, ways))
        for lo, hi, t in nfa.edges[s]:
            if live[t - first]:
                stack.append((t, ways * (hi - lo + 1)))
    return min(total, cap)


def test_fragment_facts_match_the_python_analysis(monkeypatch):
    ran = {"closed": 0, "open": 0, "infinite": 0, "counted": 0, "cut": 0}   # cut: the cap given early

    @settings(max_examples=500, **SETTINGS)
    @given(graphs(), st.sampled_from([(17, 1024), (17, 6), (3, 1024), (17, 2), (10**6, 4), (10**6, 8)]))
    def run(case, bounds):
        nfa, first, frag = case
        monkeypatch.setattr(fragments, "STRINGS_CAP", bounds[0])
        monkeypatch.setattr(fragments, "COUNT_STATES", bounds[1])
        ref = analyse_python(nfa, first, frag)
        assert analyse(nfa, first, frag) == ref
        if ref is None:
            ran["open"] += 1
            return
        ran["closed"] += 1
        ran["infinite"] += ref.infinite
        n = len(nfa) - first
        if not ref.infinite and n <= bounds[1]:
            brute = _paths(nfa, first, frag.start, frag.end, ref.live, bounds[0]) if ref.live[frag.start - first] else 0
            # the count is exact unless count_strings' stack cut-off gave the cap early
            assert ref.strings == brute or ref.strings == bounds[0]
            ran["counted"] += ref.strings == brute
            ran["cut"] += ref.strings != brute

    run()
    assert ran["closed"] >= 100 and ran["open"] >= 30 and ran["infinite"] >= 30 and ran["counted"] >= 50, ran


def test_fragment_facts_cut_off_as_count_strings(monkeypatch):
    """Five parallel moves 0 -> 1 put five stack entries over a bound of 4: both paths give the cap
    (the brute-force count is 5), with a larger bound both count 5."""
    nfa = NFA()
    for _ in range(3):
        nfa.add_state()
    nfa.eps[0].extend([1] * 5)
    nfa.eps[1].append(2)
    frag = RegexFragment(0, 2, False, False)
    for bound, want in ((4, 10**6), (1024, 5)):
        monkeypatch.setattr(fragments, "STRINGS_CAP", 10**6)
        monkeypatch.setattr(fragments, "COUNT_STATES", bound)
        ref = analyse_python(nfa, 0, frag)
        assert ref.strings == want and analyse(nfa, 0, frag) == ref


def test_fragment_facts_refuses_bad_lists():
    det = native.module().fragment_facts
    with pytest.raises(TypeError, match="list or tuple"):
        det([[]], [5], 0, 0, 0, 17, 1024)
    with pytest.raises(TypeError, match="edge"):
        det([[]], [[(1, 2)]], 0, 0, 0, 17, 1024)
    with pytest.raises(ValueError, match="first"):
        det([[]], [[]], 3, 0, 0, 17, 1024)


PATTERNS = st.lists(st.sampled_from(["a", "é", "\\d+", "[a-c]{1,3}", "(ab|c)*", "☃?", "[^\"]", "x{2,4}", ".",
                                     "[\\u4e00-\\u9fff]"]), min_size=1, max_size=4).map("".join)


def test_splice_matches_the_python_copy():
    ran = {"n": 0}

    @settings(max_examples=120, **SETTINGS)
    @given(PATTERNS, st.integers(0, 5))
    def run(pattern, prefix):
        src = NFA()
        frag = compile_into(src, pattern, 0)
        stored = capture(src, 0, frag, analyse_python(src, 0, frag))
        got, ref = NFA(), NFA()
        for nfa in (got, ref):
            for _ in range(prefix):
                nfa.add_state()
        for _ in range(2):   # twice: the second copy lands after the first
            native.module().splice(got.eps, got.edges, stored.eps, stored.edges, len(got.eps))
            splice_lists(ref.eps, ref.edges, stored.eps, stored.edges, len(ref.eps))
        assert got.eps == ref.eps and got.edges == ref.edges
        assert all(type(e) is list for e in got.eps + got.edges), "each state's moves are lists"
        assert not any(gc.is_tracked(e) for moves in got.edges for e in moves), "edges are untracked tuples"
        k = prefix + stored.n_states
        got.eps[prefix].append(-1)   # the copies share no list
        assert got.eps[k] == ref.eps[k]
        ran["n"] += 1

    run()
    assert ran["n"] >= 100


CLASSES = st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 300)), min_size=1, max_size=6).map(
    lambda spans: normalize([(a, min(a + w, 0x10FFFF)) for a, w in spans]))


def test_template_into_matches_the_python_copy():
    ran = {"n": 0}

    @settings(max_examples=150, **SETTINGS)
    @given(st.lists(CLASSES, min_size=1, max_size=4), st.integers(0, 4))
    def run(classes, prefix):
        got, ref = NFA(), NFA()
        for nfa in (got, ref):
            for _ in range(prefix + 2):
                nfa.add_state()
        for chars in classes:   # several copies, each after the last
            template = utf8_template(chars)
            if not template or not any(template):
                continue
            for nfa in (got, ref):
                base = len(nfa.eps)
                nfa.reserve(len(template) - 1)
                nfa._grow(len(template) - 1)
                if nfa is got:
                    native.module().template_into(got.edges, prefix, prefix + 1, base, template)
                else:
                    ref._add_template_python(prefix, prefix + 1, base, template)
            ran["n"] += 1
        assert got.eps == ref.eps and got.edges == ref.edges
        assert not any(gc.is_tracked(e) for moves in got.edges for e in moves), "edges are untracked tuples"

    run()
    assert ran["n"] >= 200


def test_freeze_lists_matches_the_python_freeze():
    ran = {"n": 0}

    @settings(max_examples=60, **SETTINGS)
    @given(PATTERNS)
    def run(pattern):
        nfa = NFA()
        compile_into(nfa, pattern, 0)
        nfa.add_bytes(0, len(nfa.eps) - 1, 0x41, 0x5A)    # a tuple made in Python: tracked until frozen
        want_eps, want_edges = tuple(tuple(e) for e in nfa.eps), tuple(tuple(e) for e in nfa.edges)
        got_eps, got_edges = native.module().freeze_lists(nfa.eps), native.module().freeze_lists(nfa.edges)
        assert (got_eps, got_edges) == (want_eps, want_edges)
        assert not gc.is_tracked(got_eps) and not gc.is_tracked(got_edges)
        assert not any(gc.is_tracked(m) for m in got_edges) and not any(gc.is_tracked(m) for m in got_eps)
        ran["n"] += 1

    run()
    assert ran["n"] >= 50
    holder = [1]
    frozen = native.module().freeze_lists([[holder]])      # a list inside: the tuples stay tracked
    assert frozen == (([1],),) and gc.is_tracked(frozen) and frozen[0][0] is holder
    with pytest.raises(TypeError):
        native.module().freeze_lists([1])


def test_template_into_refuses_states_out_of_range():
    into = native.module().template_into
    edges = [[], []]
    with pytest.raises(IndexError, match="out of range"):
        into(edges, 0, 5, 2, (((0x41, 0x41, -1),),))
    with pytest.raises(IndexError, match="out of range"):
        into(edges, 0, 1, 2, (((0x41, 0x41, 1),), ((0x80, 0xBF, -1),)))     # node 1's state not grown
    with pytest.raises(TypeError, match="edge"):
        into(edges, 0, 1, 2, (((0x41, 0x41),),))
    assert edges == [[], []]


def test_splice_leaves_the_nfa_unchanged_on_a_bad_fragment():
    sp = native.module().splice
    eps, edges = [[1]], [[]]
    with pytest.raises(TypeError, match="edge"):
        sp(eps, edges, ((), ()), ((), ((1, 2),)), 1)
    with pytest.raises(ValueError, match="differ"):
        sp(eps, edges, ((),), (), 1)
    assert eps == [[1]] and edges == [[]]


def test_nfa_arrays_match_the_numpy_tables():
    ran = {"n": 0}

    @settings(max_examples=80, **SETTINGS)
    @given(st.lists(PATTERNS, min_size=1, max_size=3))
    def run(patterns):
        tables = []
        for on in (True, False):
            old = native.set_enabled(on)
            try:
                nfa = NFA()
                terms = []
                for i, p in enumerate(patterns):
                    frag = compile_into(nfa, p, 0)
                    terms.append(Terminal(f"T{i}", frag.start, frag.end))
                dfa = ByteDFA(nfa, terms)
                tables.append((dfa._edges_np(), dfa._eps_np()))
            finally:
                native.set_enabled(old)
        (e1, x1), (e2, x2) = tables
        assert len(e1) == 4 and len(x1) == 2
        for a, b in zip(e1 + x1, e2 + x2):
            assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)
        ran["n"] += 1

    run()
    assert ran["n"] >= 60
