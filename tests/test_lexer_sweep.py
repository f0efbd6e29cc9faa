"""The lexer's plain-Python, numpy and compiled (C) paths build the very same DFA.

Rows with many NFA edges (large Unicode classes, unanchored searches) are swept with
numpy, and large NFA state sets get their accepting and alive terminals with numpy; the
plain loops are the reference. Both must give identical transition tables,
emitted terminal sets and alive sets, state for state (the numbering included), on
random multi-terminal lexers.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guidewire.grammar.lexer as lexer
import guidewire.grammar.refine as refine
from guidewire.grammar import native
from guidewire.grammar.lexer import ByteDFA, Terminal
from guidewire.grammar.tablearrays import concat_ranges
from guidewire.grammar.regex import NFA, compile_into

ATOMS = ["a", "b", "é", "\\d", "\\w", "\\s", ".", "[a-c]", "[^a]", "(ab|c)", "☃", "[α-ω]", "x?", "[^\"\\\\]",
         "\\W", "[\\u4e00-\\u9fff]"]
QUANTS = ["", "", "*", "+", "?", "{1,3}", "{2}", "{0,5}"]


@st.composite
def terminal_sets(draw):
    pats = []
    for _ in range(draw(st.integers(1, 4))):
        parts = draw(st.lists(st.tuples(st.sampled_from(ATOMS), st.sampled_from(QUANTS)), min_size=1, max_size=4))
        pats.append("".join(a + q if not q else f"(?:{a}){q}" for a, q in parts))  # "x?" + "*" is no regex
    return pats


def _build(patterns, sweep_edges, monkeypatch, compiled=False):
    """Build every state; ``compiled`` sweeps rows in C, else in Python (``sweep_edges`` picks numpy)."""
    old = native.set_enabled(compiled)
    try:
        return _build_with(patterns, sweep_edges, monkeypatch)
    finally:
        native.set_enabled(old)


def _build_with(patterns, sweep_edges, monkeypatch):
    monkeypatch.setattr(lexer, "SWEEP_EDGES", sweep_edges)
    monkeypatch.setattr(lexer, "VECTOR_SET", sweep_edges)   # the numpy readings of large NFA sets too
    nfa = NFA()
    terms = []
    for i, p in enumerate(patterns):
        frag = compile_into(nfa, p, 0)
        terms.append(Terminal(f"T{i}", frag.start, frag.end, priority=i % 2))
    dfa = ByteDFA(nfa, terms)
    dfa.build_all(limit=3000)
    n = dfa.n_states
    return dfa.trans[:n].copy(), list(dfa.emit), list(dfa.alive), [dfa.term_sets[e] for e in dfa.emit if e >= 0]


def test_numpy_sweep_builds_the_same_dfa(monkeypatch):
    ran = {"tried": 0, "compared": 0}

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(terminal_sets())
    def run(patterns):
        ran["tried"] += 1
        try:
            plain = _build(patterns, 10**9, monkeypatch)
        except Exception as exc:  # noqa: BLE001 - a pattern both builds must refuse alike
            plain = type(exc)
        others = []
        for edges, compiled in ((0, False), (10**9, True)) if native.available() else ((0, False),):
            try:
                others.append(_build(patterns, edges, monkeypatch, compiled))
            except Exception as exc:  # noqa: BLE001
                others.append(type(exc))
        for fast in others:
            if isinstance(plain, type) or isinstance(fast, type):
                assert plain == fast
                continue
            assert np.array_equal(plain[0], fast[0])
            assert plain[1:] == fast[1:]
        if not isinstance(plain, type):
            ran["compared"] += 1

    run()
    # both builds refusing alike compares no table: most lexers must build, or the test is vacuous
    assert ran["compared"] >= 0.8 * ran["tried"] and ran["compared"] >= 30, ran


def test_numpy_sweep_on_a_search_pattern(monkeypatch):
    # an unanchored \w pattern keeps about a thousand UTF-8 edges live in its states
    pats = [r".*\w\.\d+", r"[^\"]*x\d"]
    plain = _build(pats, 10**9, monkeypatch)
    fast = _build(pats, 0, monkeypatch)
    assert plain[0].shape[0] > 50
    assert np.array_equal(plain[0], fast[0]) and plain[1:] == fast[1:]
    if native.available():
        compiled = _build(pats, 0, monkeypatch, compiled=True)
        assert np.array_equal(plain[0], compiled[0]) and plain[1:] == compiled[1:]


def test_concat_ranges():
    lo = np.array([3, 7, 7, 0, 10])
    hi = np.array([5, 7, 9, 2, 11])
    expected = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])
    assert np.array_equal(concat_ranges(lo, hi), expected)
    assert concat_ranges(np.array([4]), np.array([4])).size == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(-3, 8), st.booleans()), max_size=60))
def test_concat_ranges_matches_python_on_random_ranges(spec):
    """Both the merged-run path (consecutive ranges, as token buckets give) and the
    cumulative-sum path (many runs) concatenate exactly the ranges, in order."""
    lo, hi, cur = [], [], 0
    for start, length, chained in spec:
        a = cur if chained else start      # a range continuing the previous one, or anywhere
        lo.append(a)
        hi.append(a + length)
        cur = max(a + length, a)
    expected = [x for a, b in zip(lo, hi) for x in range(a, b)]
    got = concat_ranges(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64))
    assert got.dtype == np.int64 and got.tolist() == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 40), st.integers(1, 256), st.integers(1, 6), st.integers(0, 2**32 - 1), st.booleans(),
       st.booleans())
def test_byte_classes_group_identical_columns(monkeypatch, n, width, distinct, seed, collide, compiled):
    """Byte classes are exactly the groups of identical transition columns, each named by its first
    byte, ascending: hashes colliding or not (numpy), and in C on (n, 256) tables."""
    if compiled and not native.available():
        return
    if compiled:
        width = 256
    rng = np.random.default_rng(seed)
    columns = rng.integers(0, n, size=(n, distinct), dtype=np.int32)
    trans = columns[:, rng.integers(0, distinct, size=width)]
    if collide:   # every column hashes alike: the exact comparison must take over
        monkeypatch.setattr(refine, "hash_weights", lambda w: np.zeros(w, dtype=np.uint64))
    old = native.set_enabled(compiled)
    try:
        picked = refine.byte_classes(trans)
    finally:
        native.set_enabled(old)
    as_tuples = [tuple(trans[:, j]) for j in range(width)]
    assert sorted(as_tuples[j] for j in picked) == sorted(set(as_tuples))
    assert all(as_tuples.index(as_tuples[j]) == j for j in picked), "each class is named by its first byte"
    assert list(picked) == sorted(picked)


def test_byte_classes_refuses_a_table_of_another_shape():
    if not native.available():
        return
    with pytest.raises(ValueError, match="256"):
        native.module().byte_classes(np.zeros((3, 4), dtype=np.int32))
    with pytest.raises(TypeError):
        native.module().byte_classes(np.zeros((3, 256), dtype=np.int64))


def _lexer(patterns, lazy_mask):
    nfa = NFA()
    terms = []
    for i, p in enumerate(patterns):
        frag = compile_into(nfa, p, 0)
        terms.append(Terminal(f"T{i}", frag.start, frag.end, priority=i % 2, lazy=bool(lazy_mask >> i & 1)))
    return ByteDFA(nfa, terms)


def _snapshot(dfa):
    n = dfa.n_states
    return (n, dfa.trans[:n].copy(), dfa.row_done[:n].copy(), [dfa._states[i] for i in range(n)], dict(dfa._index),
            list(dfa.emit), list(dfa.alive), list(dfa.term_sets), dfa.nbytes)


def _build_on(patterns, lazy_mask, compiled, limit, work=None, max_states=200_000, max_bytes=None):
    """A fresh lexer built with ``build_all(limit, work)`` on one path; then every row (lazily, in
    Python) until done or refused by the state or byte bound."""
    old = native.set_enabled(compiled)
    try:
        dfa = _lexer(patterns, lazy_mask)
        dfa.max_states, dfa.max_bytes = max_states, max_bytes
        try:
            dfa.build_all(limit=limit, work=work)
            refused = None
        except lexer.LimitExceededError as exc:
            refused = str(exc)
        first = _snapshot(dfa)
        later = None
        try:
            while not dfa.row_done[:dfa.n_states].all():
                dfa.ensure_rows(np.arange(dfa.n_states))
        except lexer.LimitExceededError as exc:
            later = str(exc)
        return refused, first, _snapshot(dfa), later
    finally:
        native.set_enabled(old)


def test_compiled_determinize_builds_the_same_dfa_with_lazy_terminals_and_limits():
    """The subset construction in C (``determinize``, a fresh DFA's build_all, with the readings of
    its new states taken per distinct reading) against the Python loop: identical states, numbering,
    index, rows, readings and byte tally, with lazy terminals, and under a state limit, a work
    budget, a bound on states or on bytes (the same error, the same states and rows kept, the rest
    then built lazily alike)."""
    if not native.available():
        return
    ran = {"full": 0, "limited": 0, "lazy": 0, "work": 0, "states": 0, "bytes": 0}

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(terminal_sets(), st.integers(0, 15), st.sampled_from([None, 2, 5, 12]),
           st.sampled_from([None, None, 0, 40, 300]),
           st.sampled_from([(200_000, None)] * 3 + [(4, None), (9, None), (200_000, 12_000), (200_000, 30_000)]))
    def run(patterns, lazy_mask, limit, work, bounds):
        args = (patterns, lazy_mask)
        kw = dict(limit=limit or 3000, work=work, max_states=bounds[0], max_bytes=bounds[1])
        try:
            ref = _build_on(*args, False, **kw)
        except Exception as exc:  # noqa: BLE001 - a pattern both builds must refuse alike
            with np.testing.assert_raises(type(exc)):
                _build_on(*args, True, **kw)
            return
        got = _build_on(*args, True, **kw)
        assert got[0] == ref[0] and got[3] == ref[3]
        for a, b in zip(got[1:3], ref[1:3]):
            assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2]) and a[3:] == b[3:]
        ran["limited" if ref[0] else "full"] += 1
        ran["work"] += bool(ref[0] and "work units" in ref[0])
        ran["states"] += bool(ref[0] and f"exceeds {bounds[0]} states" in ref[0])
        ran["bytes"] += bool(ref[0] and "bytes" in ref[0])
        ran["lazy"] += bool(lazy_mask & ((1 << len(patterns)) - 1))

    run()
    assert ran["full"] >= 20 and ran["limited"] >= 10 and ran["lazy"] >= 20 and ran["work"] >= 5, ran
    assert ran["states"] >= 3 and ran["bytes"] >= 3, ran


def test_determinize_refuses_bad_arrays():
    if not native.available():
        return
    det = native.module().determinize
    off = np.array([0, 1], dtype=np.int64)
    edge = (np.array([97], dtype=np.int64), np.array([98], dtype=np.int64), np.array([0], dtype=np.int64))
    eps = (np.array([0, 0], dtype=np.int64), np.zeros(0, dtype=np.int64))
    live, owner, lazy = np.ones(1, dtype=np.uint8), np.zeros(1, dtype=np.int64), np.full(1, -1, dtype=np.int64)
    start = np.array([0], dtype=np.int64)
    univ = (np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64))   # no universal states
    sets, rows, n_rows, stopped, readings, reading_of = det(off, *edge, *eps, live, owner, lazy, lazy, *univ, start, 100, 100, -1)
    assert sets == [] and n_rows == 2 and stopped is None and readings == [] and reading_of == b""
    assert np.frombuffer(rows, dtype=np.int32).reshape(2, 256)[1, 97] == 1
    import pytest
    with pytest.raises(ValueError, match="bad edge"):
        det(off, np.array([97]), np.array([300]), np.array([0]), *eps, live, owner, lazy, lazy, *univ, start, 100, 100, -1)
    with pytest.raises(ValueError, match="differ in length"):
        det(off, *edge, *eps, np.ones(2, dtype=np.uint8), owner, lazy, lazy, *univ, start, 100, 100, -1)
    with pytest.raises(ValueError, match="differ in length"):
        det(off, *edge, *eps, live, owner, lazy, np.full(3, -1, dtype=np.int64), *univ, start, 100, 100, -1)
    with pytest.raises(ValueError, match="differ in length"):   # universal closures' offsets, one per NFA state
        det(off, *edge, *eps, live, owner, lazy, lazy, np.zeros(3, dtype=np.int64), univ[1], start, 100, 100, -1)
    with pytest.raises(ValueError, match="sorted"):
        det(off, *edge, *eps, live, owner, lazy, lazy, *univ, np.array([0, 0]), 100, 100, -1)
    with pytest.raises(ValueError, match="epsilon"):
        det(off, *edge, np.array([0, 1]), np.array([5]), live, owner, lazy, lazy, *univ, start, 100, 100, -1)


def test_lexer_table_reserved_whole_past_a_size_reads_the_same(smollm2, monkeypatch):
    """A lazily grown lexer whose table is reserved early (``RESERVE_FROM`` small: eightfold, then
    to its limits) has the same states and rows as one that only doubles; the reservation stops
    at what the limits allow (``max_bytes``), and past it the byte limit still raises a typed error."""
    from guidewire.core.errors import LimitExceededError
    from guidewire.grammar import compile_json_schema

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 90},
                                               "b": {"type": "string", "pattern": "^[a-z]{2,70}$"}}}
    tables = []
    for reserve in (1 << 40, 64):
        monkeypatch.setattr(lexer, "RESERVE_FROM", reserve)
        dfa = compile_json_schema(schema, smollm2).dfa
        dfa.build_all(limit=20_000)
        tables.append((dfa.n_states, dfa.trans[:dfa.n_states].copy(), list(dfa.emit), list(dfa.alive),
                       dfa.trans.shape[0]))
    (n1, t1, e1, a1, cap1), (n2, t2, e2, a2, cap2) = tables
    assert n1 == n2 and n1 > 256
    assert np.array_equal(t1, t2) and e1 == e2 and a1 == a2
    assert cap1 < cap2      # doubled to just past n, against reserved to the limit
    monkeypatch.setattr(lexer, "RESERVE_FROM", 64)
    built = compile_json_schema(schema, smollm2).dfa
    dfa = ByteDFA(built.nfa, built.terminals)   # fresh: grown state by state under the bound
    dfa.max_bytes = 300 * lexer.STATE_BYTES
    with pytest.raises(LimitExceededError, match="bytes"):
        dfa.build_all(limit=20_000)
    assert 128 <= dfa.trans.shape[0] <= 301    # reserved up to the bound, not to max_states


def _lazy_on(patterns, lazy_mask, compiled, seed, fuel_units, max_states, max_bytes):
    """A fresh lexer whose rows are all built lazily, in a seeded random order of single rows
    (``compute_row``) and batches (``ensure_rows``), each call a step with a refilled work budget;
    the outcome of every call (None or the error), the fuel after it, and the final lexer."""
    import random

    from guidewire.core.limits import Fuel
    old = native.set_enabled(compiled)
    try:
        dfa = _lexer(patterns, lazy_mask)
        dfa.max_states, dfa.max_bytes = max_states, max_bytes
        dfa.fuel = None if fuel_units is None else Fuel(fuel_units, None)
        rnd = random.Random(seed)
        events = []
        for _ in range(60):
            pending = np.flatnonzero(~dfa.row_done[:dfa.n_states]).tolist()
            if not pending:
                break
            pick = rnd.sample(pending, min(len(pending), rnd.choice([1, 1, 2, 5, 40])))
            if dfa.fuel is not None:
                dfa.fuel.refill()
            try:
                if len(pick) == 1:
                    dfa.compute_row(pick[0])
                else:
                    dfa.ensure_rows(np.array(pick, dtype=np.int64))
                events.append(None)
            except lexer.LimitExceededError as exc:
                events.append((type(exc).__name__, str(exc)))
            events.append(None if dfa.fuel is None else (dfa.fuel.left, dfa.fuel.spent))
        return events, _snapshot(dfa)
    finally:
        native.set_enabled(old)


def test_compiled_lazy_rows_match_the_python_rows_under_every_limit():
    """Rows built lazily in C (``lazy_rows``: a batch of states per call, new states interned into
    the lexer's own dicts, the target cache kept in C) against the Python loop, row by row: the same
    states, numbering, index, rows, readings and byte tally, and under a work budget, a bound on states or on
    bytes the same error at the same point of the same call, with the same fuel left and spent
    (a refused row stays undone, the states made before the refusal stay)."""
    if not native.available():
        return
    ran = {"calls": 0, "fuel": 0, "states": 0, "bytes": 0, "lazy": 0}

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(terminal_sets(), st.integers(0, 15), st.integers(0, 10**6),
           st.sampled_from([None, None, 30, 120, 600]),
           st.sampled_from([(200_000, None)] * 3 + [(6, None), (15, None), (200_000, 20_000), (200_000, 45_000)]))
    def run(patterns, lazy_mask, seed, fuel_units, bounds):
        args = (patterns, lazy_mask, seed, fuel_units, *bounds)
        try:
            ref = _lazy_on(args[0], args[1], False, *args[2:])
        except Exception as exc:  # noqa: BLE001 - a pattern both paths must refuse alike
            with np.testing.assert_raises(type(exc)):
                _lazy_on(args[0], args[1], True, *args[2:])
            return
        got = _lazy_on(args[0], args[1], True, *args[2:])
        assert got[0] == ref[0]
        a, b = got[1], ref[1]
        assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2]) and a[3:] == b[3:]
        errors = [e[1] for e in ref[0] if isinstance(e, tuple) and isinstance(e[0], str)]
        ran["calls"] += len(ref[0]) // 2
        ran["fuel"] += any("work units" in e for e in errors)
        ran["states"] += any(f"exceeds {bounds[0]} states" in e for e in errors)
        ran["bytes"] += any("bytes" in e for e in errors)
        ran["lazy"] += bool(lazy_mask & ((1 << len(patterns)) - 1))

    run()
    assert ran["calls"] >= 600 and ran["lazy"] >= 20, ran
    assert ran["fuel"] >= 10 and ran["states"] >= 5 and ran["bytes"] >= 5, ran


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.integers(49, 140), st.integers(0, 10**6))
def test_numpy_reading_of_many_accepting_terminals_matches_the_loop(n, seed):
    """``_choose_numpy`` (a lexeme accepted by many terminals) picks the same reading as the plain
    loop: ignored terminals only when nothing else accepts, the top priority among free terminals,
    literals over infinite regexes, and the top priority within each family."""
    import dataclasses
    import random

    rnd = random.Random(seed)
    nfa = NFA()
    terms = []
    for i in range(n):
        frag = compile_into(nfa, "a", 0)
        terms.append(Terminal(f"T{i}", frag.start, frag.end, priority=rnd.choice([0, 0, 1, 2, -1]),
                              literal=rnd.random() < 0.3, ignored=rnd.random() < rnd.choice([0.1, 1.0]),
                              family=rnd.choice([-1, -1, -1, 0, 1, 5])))
    dfa = ByteDFA(nfa, terms)
    dfa.terminals = [dataclasses.replace(t, infinite=rnd.random() < 0.5) for t in dfa.terminals]
    accepting = rnd.sample(range(n), rnd.randint(lexer.CHOOSE_VECTOR + 1, n))
    got = dfa._choose_numpy(accepting)
    old = lexer.CHOOSE_VECTOR
    lexer.CHOOSE_VECTOR = 10**9
    try:
        ref = dfa.term_sets[dfa._choose(accepting)]
    finally:
        lexer.CHOOSE_VECTOR = old
    assert got == ref and got


def test_lazy_rows_take_limits_past_what_c_holds():
    """A byte bound or work budget past 2**63 (Limits has no upper bound) is no bound to C either:
    the lexer builds as with none, on both paths."""
    from guidewire.core.limits import Fuel
    out = []
    for compiled in ((False, True) if native.available() else (False,)):
        old = native.set_enabled(compiled)
        try:
            dfa = _lexer(["[a-c]{1,6}x", "b+", "(ab|c)*"], 0)
            dfa.max_bytes = 1 << 80
            dfa.fuel = Fuel(1 << 80, None)
            while not dfa.row_done[:dfa.n_states].all():
                dfa.ensure_rows(np.arange(dfa.n_states))
            out.append((dfa.n_states, dfa.trans[:dfa.n_states].tolist(), dfa.fuel.spent))
        finally:
            native.set_enabled(old)
    assert out[0][0] >= 10 and all(o == out[0] for o in out)


def test_reading_memo_labels_states_as_the_shadowing_choice(monkeypatch):
    """New states' labels on the compiled path come from a memo of readings met in earlier
    batches (``_take_readings``): with it, with a bound that clears it at every entry, and on the
    Python path the lexer is the same, and the memo answers some readings (fewer shadowing
    choices run)."""
    if not native.available():
        pytest.skip("the compiled module is not built")
    from guidewire.grammar import lexerbuild

    patterns = ["[a-z]{0,6}", "[a-z0-9]{1,5}", "ab[a-z]*", "[0-9]+", '"[^"]{0,8}"', "a[a-z0-9]{2,4}b"]
    calls = {"best": 0}
    best = lexer.ByteDFA._best

    def counting(self, accepting):
        calls["best"] += 1
        return best(self, accepting)

    monkeypatch.setattr(lexer.ByteDFA, "_best", counting)
    ref = _lazy_on(patterns, 0b101, False, 11, None, 200_000, None)
    runs, default = {}, lexerbuild.READING_MEMO_BYTES
    for bound in (default, 0):
        monkeypatch.setattr(lexerbuild, "READING_MEMO_BYTES", bound)
        calls["best"] = 0
        got = _lazy_on(patterns, 0b101, True, 11, None, 200_000, None)
        a, b = got[1], ref[1]
        assert a[0] == b[0] > 50 and np.array_equal(a[1], b[1]) and a[3:] == b[3:]
        runs[bound] = calls["best"]
    assert runs[default] < runs[0], runs
