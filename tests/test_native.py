"""The compiled inner loops (``guidewire.grammar._native``) against their numpy/Python references.

Each C function is compared with the path it replaces on random inputs (hypothesis): the
lexer's rows (whole DFAs, state numbering included), the token walk (final states,
lexeme counts and lexemes, token for token), the grouping (group keys and their token sets),
and whole masks along random walks of real grammars and JSON Schemas with both paths on
separately compiled grammars. Bad arrays get typed errors, never a crash.
"""

import contextlib
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import bitmask_to_bool
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, native
from guidewire.grammar import tabletuning as tuning
from guidewire.grammar.lexer import DEAD, START
from guidewire.grammar.tablegroups import _group_rows
from guidewire.grammar.tokentable import TableBuilder, walk_token

pytestmark = pytest.mark.skipif(not native.available(), reason="the C extension is not built")

ATOMS = ["a", "b", "ab", "[a-c]", "[^a]", "\\d", "\\w", " ", "\\.", "\"", "é", "x"]
QUANTS = ["", "*", "+", "?", "{1,3}", "{0,6}"]


def test_the_extension_is_built_and_on():
    """CI installs with a compiler: the compiled path must really be there (else half the tests
    here would skip and the reference path alone would run)."""
    assert native.available()
    assert native.module() is not None


@st.composite
def lexer_grammars(draw):
    pats = []
    for _ in range(draw(st.integers(1, 4))):
        parts = draw(st.lists(st.tuples(st.sampled_from(ATOMS), st.sampled_from(QUANTS)), min_size=1, max_size=4))
        pats.append("".join(f"(?:{a}){q}" for a, q in parts))
    terms = "\n".join(f"T{i}: /{p}/" for i, p in enumerate(pats))
    names = " | ".join(f"T{i}" for i in range(len(pats)))
    return f"start: item+\n?item: {names}\n{terms}\n"


@contextlib.contextmanager
def _path(compiled: bool):
    """Run the body on the compiled path (True) or the numpy reference (False)."""
    old = native.set_enabled(compiled)
    try:
        yield
    finally:
        native.set_enabled(old)


def _compile(text, vocab, compiled: bool):
    with _path(compiled):
        return compile_lark(text, vocab, precompute=0)   # lazy: the tests drive the walks themselves


def _candidates(builder, q):
    """Tokens to walk from ``q`` as the table build takes them: (cand, state, ptr, ends)."""
    row = builder.dfa.trans[q].astype(np.int64)
    cand, first, ptr, _stays = builder._candidates(row)
    return cand, row.take(first), ptr, builder.layout.ends.take(cand)


def _same_readings(ref, got, unlexable=None):
    """Walk outputs agree where they mean something: every final state, which tokens completed more
    lexemes than are tracked (regrouped later), and the lexemes of every token that ends alive.
    An unlexable token's count is never read (the numpy walk's two loops even differ there):
    where the "too many lexemes" flags differ, ``unlexable(i)`` must hold."""
    assert np.array_equal(ref[0], got[0])
    over = tuning.MAX_TRACKED_BOUNDARIES
    for i in np.flatnonzero((ref[1] > over) != (got[1] > over)).tolist():
        assert unlexable is not None and unlexable(i)
    live = ref[0] != DEAD
    assert np.array_equal(ref[1][live], got[1][live])
    assert np.array_equal(ref[2][:, live], got[2][:, live])


def test_walk_matches_the_numpy_walk(smollm2):
    """Token for token the same final state, lexeme count and first lexemes (no hub meets)."""
    ran = {"states": 0, "tokens": 0}

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(lexer_grammars(), st.integers(0, 2**16))
    def run(text, seed):
        try:
            g = _compile(text, smollm2, True)
        except Exception:  # noqa: BLE001 - a grammar the front end refuses is not this test's business
            return
        b = TableBuilder(g.dfa, smollm2)
        b._sync()
        rng = random.Random(seed)
        states = [START] + rng.sample(range(2, g.dfa.n_states), min(3, max(0, g.dfa.n_states - 2)))
        for q in states:
            if not g.dfa.row_done[q]:
                continue
            cand, state, ptr, ends = _candidates(b, q)
            if not cand.size:
                continue
            with _path(False):
                ref = b._walk(state.copy(), ptr.copy(), ends)
            got = b._walk_compiled(native.module(), state.copy(), ptr.copy(), ends, None)
            def unlexable(i):
                lexemes, f = walk_token(g.dfa, q, smollm2.token_bytes[int(b.layout.ids[cand[i]])])
                return f == DEAD

            _same_readings(ref, got, unlexable)
            ran["states"] += 1
            ran["tokens"] += int(cand.size)

    run()
    assert ran["states"] >= 30 and ran["tokens"] >= 10_000, ran


def test_walk_builds_rows_of_a_lazy_lexer(smollm2, monkeypatch):
    """On a lexer built lazily the C walk stops where a row is missing; the rows get built and
    the walk resumes: the same readings as the numpy walk on a fully built copy."""
    import guidewire.grammar.compiled as compiled_mod
    text = 'start: A B\nA: /[a-z]{1,40}/\nB: /[0-9a-f]{2,30}x/\n'
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 2)
    lazy = _compile(text, smollm2, True)
    assert not lazy.dfa.row_done[:lazy.dfa.n_states].all()
    monkeypatch.undo()
    full = _compile(text, smollm2, False)
    bl, bf = TableBuilder(lazy.dfa, smollm2), TableBuilder(full.dfa, smollm2)
    bl._sync()
    bf._sync()
    cand, state, ptr, ends = _candidates(bl, START)
    got = bl._walk_compiled(native.module(), state.copy(), ptr.copy(), ends, None)
    with _path(False):
        ref = bf._walk(state.copy(), ptr.copy(), ends)
    # state numbers differ between a lazy and an eager build: compare what they mean
    live = ref[0] != DEAD
    assert np.array_equal(got[0] != DEAD, live)
    assert np.array_equal(got[1][live], ref[1][live]) and np.array_equal(got[2][:, live], ref[2][:, live])
    alive_l = np.array([lazy.dfa.alive[s] for s in got[0].tolist()])
    alive_f = np.array([full.dfa.alive[s] for s in ref[0].tolist()])
    assert np.array_equal(alive_l, alive_f)
    assert cand.size > 1000


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 600), st.integers(1, 40), st.booleans())
def test_group_matches_the_numpy_grouping(seed, n, n_states, admitting):
    """Group keys and each group's tokens equal the numpy grouping's (order aside); with an
    ``admit`` callback (the grammar's FOLLOW pruning), exactly the admitted groups of it, and
    the spare rows asked for are zero rows after them."""
    rng = np.random.default_rng(seed)

    class Fake(TableBuilder):
        def __init__(self):  # only what the grouping reads
            pass

    b = Fake()
    words = 64
    b.layout = type("L", (), {"ids": rng.permutation(words * 32)[:n + 5].astype(np.int64), "words": words})()
    b.alive_id = np.where(rng.random(n_states) < 0.2, -1, rng.integers(0, 5, n_states)).astype(np.int64)
    b.alive_id[DEAD] = -1
    b._alive_values = [1, 2, 3, 6, 12]
    b.dfa = type("D", (), {"term_sets": [(0,), (1,), (2,)]})()
    b.admit = (lambda gs: [alive != 3 and len(lexemes) != 1 for lexemes, alive in gs]) if admitting else None
    cand = rng.permutation(n + 5)[:n].astype(np.int64)
    fin = rng.integers(0, n_states, n).astype(np.int64)
    nb = rng.integers(0, tuning.MAX_TRACKED_BOUNDARIES + 1, n).astype(np.int64)
    lex = np.full((tuning.MAX_TRACKED_BOUNDARIES, n), -1, dtype=np.int64)
    for k in range(tuning.MAX_TRACKED_BOUNDARIES):
        on = nb > k
        lex[k, on] = rng.integers(0, 3, int(on.sum()))
    keep = nb <= tuning.MAX_TRACKED_BOUNDARIES
    groups, gid, toks = b._group_keys(cand[keep], fin[keep], nb[keep], lex[:, keep])
    ref_rows = _group_rows(gid, toks, len(groups), words)
    got_groups, got_rows = b._group_compiled(native.module(), cand, fin, nb, lex, spare=2)
    assert got_rows.shape[0] == len(got_groups) + 2 and not got_rows[len(got_groups):].any()

    def as_sets(gs, rows):
        return {g: frozenset(np.flatnonzero(bitmask_to_bool(r, words * 32)).tolist()) for g, r in zip(gs, rows)}

    want = as_sets(groups, ref_rows)
    if admitting:
        want = {g: t for g, t in want.items() if b.admit([g])[0]}
    assert as_sets(got_groups, got_rows) == want
    assert len(got_groups) == len(set(got_groups))


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}},
                                      "n": {"type": "integer", "minimum": -5, "maximum": 1234}},
     "required": ["name"]},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"anyOf": [{"type": "string", "pattern": "^[a-f0-9]{4,8}$"}, {"type": "string", "format": "date"},
               {"type": "boolean"}]},
    {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                                                  "v": {"type": ["null", "string"]}}}},
]


def _walk_masks(g, vocab, rng, steps):
    """Masks along one random walk (tokens drawn from each allowed set, EOS ends it)."""
    m = g.matcher()
    out = []
    buf = np.zeros((1, g.words), dtype=np.int32)
    for _ in range(steps):
        m.fill_bitmask(buf, 0)
        out.append(buf[0].copy())
        allowed = [t for t in np.flatnonzero(bitmask_to_bool(buf[0], vocab.vocab_size)).tolist()
                   if t not in vocab.eos_ids]
        if not allowed:
            break
        assert m.advance(rng.choice(allowed))
    return out


@pytest.mark.parametrize("which", ["json", "sql", "python", "schema0", "schema1", "schema2", "schema3"])
def test_masks_are_identical_on_both_paths(smollm2, which):
    """Random walks on grammars compiled with each path: every mask byte-identical."""
    def build():
        if which.startswith("schema"):
            return compile_json_schema(SCHEMAS[int(which[-1])], smollm2)
        return compile_lark(builtin_grammar(which), smollm2)

    steps = 0
    for walk in range(3):
        runs = []
        for compiled in (True, False):
            with _path(compiled):
                runs.append(_walk_masks(build(), smollm2, random.Random(walk), 40))
        got, ref = runs
        assert len(got) == len(ref)
        for x, y in zip(got, ref):
            assert np.array_equal(x, y)
        steps += len(got)
    assert steps >= 15, steps   # three walks of at least five masks (a short anyOf ends sooner)


def test_bad_arrays_get_typed_errors():
    c = native.module()
    off = np.array([0, 1], dtype=np.int64)
    lo, end, dst = (np.array([v], dtype=np.int64) for v in (97, 98, 0))
    eps = (np.array([0, 0], dtype=np.int64), np.zeros(0, dtype=np.int64))
    live, owner, none = np.ones(1, dtype=np.uint8), np.zeros(1, dtype=np.int64), np.full(1, -1, dtype=np.int64)
    univ = (np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64))   # no universal states

    trans, done = np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool)

    def lazy(off=off, lo=lo, end=end, dst=dst, eps=eps, states=None, sids=(1,), n_states=2, trans=trans):
        states = {0: (), 1: (0,)} if states is None else states
        return c.lazy_rows(off, lo, end, dst, *eps, live, owner, none, none, *univ, states, {(): 0, (0,): 1},
                           c.subset_memo(len(off) - 1), trans, done, list(sids), n_states, 100, -1, -1, 3400)
    n_done, n_new, spent, nbytes, stopped, readings, reading_of = lazy()
    assert (n_done, n_new, spent, stopped) == (1, 0, 2, None)
    assert trans[1, 97] == 1 and trans[1].sum() == 1 and done.tolist() == [False, True]
    with pytest.raises(IndexError):   # a state past the table's rows
        lazy(states={0: (), 1: (0,), 2: (0,)}, sids=(2,), n_states=3)
    with pytest.raises((ValueError, BufferError)):   # a read-only table
        frozen = np.zeros((2, 256), dtype=np.int32)
        frozen.setflags(write=False)
        lazy(trans=frozen)
    with pytest.raises(TypeError):
        lazy(lo=lo.astype(np.float64))
    with pytest.raises(KeyError):     # a state the lexer does not have
        lazy(sids=(5,))
    with pytest.raises(ValueError, match="bad edge"):
        lazy(end=np.array([300], dtype=np.int64))
    with pytest.raises(ValueError, match="offsets"):   # offsets past the edge arrays
        lazy(off=np.array([0, 5], dtype=np.int64))
    with pytest.raises(ValueError, match="epsilon"):
        lazy(eps=(np.array([0, 1], dtype=np.int64), np.array([7], dtype=np.int64)))
    with pytest.raises(ValueError, match="sorted NFA states"):
        lazy(states={0: (), 1: (3,)})
    with pytest.raises(ValueError, match="differ in length"):
        lazy(off=np.array([0, 1, 1], dtype=np.int64))
    # an error mid-batch undoes the batch: NFA 0 -a-> 1, so state 1's row makes state 2; then a
    # state the lexer does not have
    off2 = np.array([0, 1, 1], dtype=np.int64)
    dst2 = np.array([1], dtype=np.int64)
    eps2 = (np.array([0, 0, 0], dtype=np.int64), np.zeros(0, dtype=np.int64))
    live2, owner2, none2 = np.ones(2, dtype=np.uint8), np.zeros(2, dtype=np.int64), np.full(2, -1, dtype=np.int64)
    univ2 = (np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int64))
    states2, index2, memo2 = {0: (), 1: (0,)}, {(): 0, (0,): 1}, c.subset_memo(2)
    trans2, done2 = np.zeros((4, 256), dtype=np.int32), np.zeros(4, dtype=bool)

    def lazy2(sids):
        return c.lazy_rows(off2, lo, end, dst2, *eps2, live2, owner2, none2, none2, *univ2, states2, index2, memo2,
                           trans2, done2, sids, len(states2), 100, -1, -1, 3400)
    with pytest.raises(KeyError):
        lazy2([1, 9])
    assert states2 == {0: (), 1: (0,)} and index2 == {(): 0, (0,): 1} and not done2.any()
    assert lazy2([np.int64(1)])[:2] == (1, 1)     # numpy ints name states too; the state is made again
    assert states2[2] == (1,) and index2[(1,)] == 2 and trans2[1, 97] == 2 and done2[1]
    with pytest.raises(ValueError, match="another NFA"):
        c.lazy_rows(off, lo, end, dst, *eps, live, owner, none, none, *univ, {0: (), 1: (0,)}, {}, c.subset_memo(3),
                    trans, done, [1], 2, 100, -1, -1, 3400)
    with pytest.raises(ValueError):   # not a memo
        c.lazy_rows(off, lo, end, dst, *eps, live, owner, none, none, *univ, {0: (), 1: (0,)}, {}, object(),
                    trans, done, [1], 2, 100, -1, -1, 3400)
    z = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError):
        c.group(z, z, np.zeros(5, dtype=np.int64), z, z, np.zeros(12, dtype=np.int64), 2)
    with pytest.raises(IndexError):
        c.group(np.array([7, 0, 0], dtype=np.int64), z, np.full(6, -1, dtype=np.int64), z, z.copy(),
                np.zeros(12, dtype=np.int64), 2)
    rows = np.zeros((1, 2), dtype=np.int32)
    with pytest.raises(IndexError):
        c.scatter(rows, np.array([3], dtype=np.int64), np.array([1], dtype=np.int64), 2)
    with pytest.raises(IndexError):
        c.scatter(rows, np.array([0], dtype=np.int64), np.array([64], dtype=np.int64), 2)
    c.scatter(rows, np.array([0, -1], dtype=np.int64), np.array([33, 1], dtype=np.int64), 2)
    assert rows.tolist() == [[0, 2]]
    with pytest.raises((ValueError, BufferError)):   # read-only output
        frozen = np.zeros((1, 2), dtype=np.int32)
        frozen.setflags(write=False)
        c.scatter(frozen, np.array([0], dtype=np.int64), np.array([1], dtype=np.int64), 2)


def test_switch_refuses_a_missing_module(monkeypatch):
    monkeypatch.setattr(native, "_compiled", None)
    with pytest.raises(RuntimeError):
        native.set_enabled(True)
    assert native.module() is None or not native.available()


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 24), st.integers(1, 64))
def test_or_of_rows_and_sparse_groups_matches_numpy(seed, n_groups, words, n_sel):
    """``or_rows`` and ``or_groups`` (dense rows, or a sparse group's token ids from ``row_counts`` /
    ``row_ids``) give numpy's ``bitwise_or.reduce`` of the chosen rows."""
    rng = np.random.default_rng(seed)
    density = rng.choice([0.001, 0.01, 0.2, 0.9], size=(n_groups, 1))
    bits = rng.random((n_groups, words * 32)) < density
    rows = np.packbits(bits, axis=1, bitorder="little").view(np.int32).reshape(n_groups, words)
    sel = rng.integers(0, n_groups, n_sel).astype(np.int64)
    want = np.bitwise_or.reduce(rows[sel], axis=0)
    c = native.module()
    out = np.full(words, -1, dtype=np.int32)
    c.or_rows(out, rows, sel)
    assert np.array_equal(out, want)
    counts = np.zeros(n_groups, dtype=np.int64)
    c.row_counts(rows, counts)
    assert counts.tolist() == bits.sum(axis=1).tolist()
    picked = np.zeros(sel.size, dtype=np.int64)  # the rows sel[k], read in place
    c.row_counts(rows, picked, sel, words)
    assert picked.tolist() == bits[sel].sum(axis=1).tolist()
    with pytest.raises(IndexError):
        c.row_counts(rows, picked[:1], np.array([n_groups], dtype=np.int64), words)
    sparse = np.flatnonzero(rng.random(n_groups) < 0.5).astype(np.int64)
    slot = np.full(n_groups, -1, dtype=np.int64)
    slot[sparse] = np.arange(sparse.size)
    offsets = np.zeros(sparse.size + 1, dtype=np.int64)
    np.cumsum(counts[sparse], out=offsets[1:])
    ids = np.empty(int(offsets[-1]), dtype=np.int32)
    c.row_ids(rows, sparse, offsets, ids, words)
    for k, g in enumerate(sparse.tolist()):
        assert ids[offsets[k]:offsets[k + 1]].tolist() == np.flatnonzero(bits[g]).tolist()
    out[:] = -1
    c.or_groups(out, rows, sel, slot, offsets, ids)
    assert np.array_equal(out, want)


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 24), st.integers(0, 64), st.integers(1, 300))
def test_row_form_grows_as_the_numpy_reference(seed, n_groups, words, n_sel, small_below):
    """``row_form_grow`` (a table's row form grown by newly chosen groups) against
    ``grow_row_form_numpy``, twice in a row on the same form (repeats, groups already looked at,
    dense and sparse ones), and the sparse ids against a scan of each row's bits."""
    from guidewire.grammar.tablearrays import grow_row_form_numpy

    rng = np.random.default_rng(seed)
    density = rng.choice([0.001, 0.01, 0.2, 0.9], size=(n_groups, 1))
    bits = rng.random((n_groups, words * 32)) < density
    rows = np.packbits(bits, axis=1, bitorder="little").view(np.int32).reshape(n_groups, words)
    slot_c = np.full(n_groups, -2, dtype=np.int64)
    slot_ref = slot_c.copy()
    n_slots = 0
    for _ in range(2):
        sel = rng.integers(0, n_groups, n_sel).astype(np.int64)
        counts, got = native.module().row_form_grow(rows, slot_c, sel, words, small_below, n_slots)
        counts, got = np.frombuffer(counts, dtype=np.int64), np.frombuffer(got, dtype=np.int32)
        want_counts, want_ids = grow_row_form_numpy(rows, slot_ref, sel, small_below, n_slots)
        assert np.array_equal(slot_c, slot_ref) and counts.tolist() == want_counts.tolist()
        assert got.tolist() == want_ids.tolist()
        sparse = np.argsort(np.where(slot_c >= n_slots, slot_c, 1 << 40))[:counts.size]
        assert got.tolist() == [t for g in sparse.tolist() for t in np.flatnonzero(bits[g]).tolist()]
        assert all((slot_c[g] == -1) == (bits[g].sum() >= small_below) for g in set(sel.tolist()))
        n_slots += counts.size
    with pytest.raises(IndexError):
        native.module().row_form_grow(rows, slot_c, np.array([n_groups], dtype=np.int64), words, 1, 0)
    with pytest.raises(ValueError):
        native.module().row_form_grow(rows, slot_c[:-1], sel, words, 1, 0)


def test_a_tables_later_masks_use_the_sparse_form(smollm2):
    """The second mask of a table builds its row form; masks stay equal to the reference's."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 3 + i % 4} for i in range(12)}}
    g = compile_json_schema(schema, smollm2)
    seen = 0
    for walk in range(4):
        got = _walk_masks(g, smollm2, random.Random(walk), 30)
        with _path(False):
            ref = _walk_masks(compile_json_schema(schema, smollm2), smollm2, random.Random(walk), 30)
        assert len(got) == len(ref) and all(np.array_equal(x, y) for x, y in zip(got, ref))
        seen += len(got)
    forms = [e[3] for e in g._tables.values() if e[3]]
    assert forms and any(f[1].max() >= 0 for f in forms), "no table got a sparse row form"
    assert seen >= 40


def test_walk_refuses_bad_positions_and_layouts():
    c = native.module()
    trans = np.zeros(2 * 257, dtype=np.int64)
    trans[257 + 256] = -2                     # state 1 ends a token on the sentinel
    emit, hub = np.full(2, -1, dtype=np.int64), np.full(2, -1, dtype=np.int64)
    done, busy = np.ones(2, dtype=bool), np.zeros(2, dtype=bool)
    flat = np.array([97, 256], dtype=np.uint16)

    def walk(ptr, ends, flat=flat):
        one = np.ones(1, dtype=np.int64)
        return c.walk(trans, emit, done, hub, busy, np.zeros((0, 256), dtype=np.uint8), flat, one.copy(), np.array([ptr], dtype=np.int64),
                      np.zeros(1, dtype=np.int64), np.array([ends], dtype=np.int64), np.zeros(1, dtype=np.int64),
                      np.zeros(1, dtype=np.int64), np.full(2, -1, dtype=np.int64), np.zeros(1, dtype=np.uint8),
                      False, 2, 0, 1)

    assert walk(1, 1) == (1, 0)              # one step: the sentinel
    with pytest.raises(IndexError):
        walk(5, 1)
    with pytest.raises(IndexError):
        walk(1, 2)                           # an end past the layout
    with pytest.raises(TypeError):           # the layout must be uint16
        walk(1, 1, flat.astype(np.int64))


def _reps(label):
    """The smallest state id of each state's class: equal arrays = equal partitions."""
    label = np.asarray(label)
    first = np.full(int(label.max()) + 1, label.size, dtype=np.int64)
    np.minimum.at(first, label, np.arange(label.size))
    return first[label]


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 70), st.integers(1, 6), st.integers(1, 4),
       st.one_of(st.none(), st.integers(0, 10)))
def test_refine_matches_the_numpy_refinement(seed, n, k, n_labels, depth):
    """Moore refinement in C: the same partition as the numpy refinement (hashed and checked),
    with and without a round bound, on random DFAs."""
    from guidewire.grammar.refine import refine_exact, refine_numpy

    rng = np.random.default_rng(seed)
    trans = rng.integers(0, n, size=(n, k)).astype(np.int32)
    if rng.random() < 0.5:   # chains and loops, like counters, so refinement takes many rounds
        trans[:, 0] = np.minimum(np.arange(n) + 1, n - 1)
    label0 = rng.integers(0, n_labels, size=n).astype(np.int64) * 7 + 3
    got = np.empty(n, dtype=np.int64)
    classes, stable = native.module().refine(label0, trans, -1 if depth is None else depth, got)
    ref, ref_classes = refine_numpy(label0, trans, depth)
    assert classes == ref_classes == np.unique(got).size
    assert np.array_equal(_reps(got), _reps(ref))
    if depth is None:
        assert stable and np.array_equal(_reps(got), _reps(refine_exact(label0, trans)[0]))


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 90), st.integers(1, 6), st.integers(1, 4),
       st.one_of(st.none(), st.integers(0, 12)), st.sampled_from(["random", "chain", "counter"]))
def test_refine_split_matches_moore_rounds(seed, n, k, n_labels, depth, shape):
    """Refinement by splitters (the largest part skipped) in C: Moore's partition after every
    number of rounds, the same class count and the same verdict on stability, on random DFAs,
    chains and counter-like ladders (where one layer splits off per round)."""
    from guidewire.grammar.refine import refine_numpy

    rng = np.random.default_rng(seed)
    trans = rng.integers(0, n, size=(n, k)).astype(np.int32)
    if shape == "chain":
        trans[:, 0] = np.minimum(np.arange(n) + 1, n - 1)
    elif shape == "counter":     # each column moves on by 0-2 states; only the top state is apart
        trans = np.minimum(np.arange(n)[:, None] + rng.integers(0, 3, size=(n, k)), n - 1).astype(np.int32)
    label0 = rng.integers(0, n_labels, size=n).astype(np.int64) * 5 + 2
    if shape == "counter":
        label0 = (np.arange(n) == n - 1).astype(np.int64)
    rounds = -1 if depth is None else depth
    got, moore = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    classes, stable = native.module().refine_split(label0, trans, rounds, got)
    assert (classes, stable) == native.module().refine(label0, trans, rounds, moore)
    assert classes == np.unique(got).size and got.min() >= 0 and got.max() < classes
    assert np.array_equal(_reps(got), _reps(moore))
    assert np.array_equal(_reps(got), _reps(refine_numpy(label0, trans, depth)[0]))


@pytest.mark.parametrize("name", ["refine", "refine_split"])
def test_refine_refuses_bad_arrays(name):
    refine = getattr(native.module(), name)
    out = np.empty(3, dtype=np.int64)
    label = np.zeros(3, dtype=np.int64)
    with pytest.raises(IndexError, match="out of range"):
        refine(label, np.array([[0], [1], [3]], dtype=np.int32), -1, out)
    with pytest.raises(ValueError, match="differ in length"):
        refine(label, np.zeros((3, 2), dtype=np.int32), -1, np.empty(2, dtype=np.int64))
    with pytest.raises(TypeError, match="4-byte"):
        refine(label, np.zeros((3, 2), dtype=np.int64), -1, out)
    with pytest.raises((TypeError, ValueError, BufferError)):   # a read-only output
        refine(label, np.zeros((3, 2), dtype=np.int32), -1, _read_only(out))


def _read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(0, 12), st.integers(1, 40), st.integers(0, 300))
def test_rows_from_ids_match_numpy(seed, n_groups, words, n_ids):
    """Bitmask rows scattered in C (``rows_by_group``, ``_row_of``, ``ids_row``) equal the numpy
    references (``bitwise_or.at`` and the dense pack), repeats and unused groups included."""
    from guidewire.grammar.tablearrays import _row_of, _rows_by_group_numpy, ids_row, rows_by_group

    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 32 * words, n_ids if n_groups else 0).astype(np.int64)
    group = rng.integers(0, max(n_groups, 1), ids.size).astype(np.int64)
    want = _rows_by_group_numpy(group, ids, n_groups, words)
    assert np.array_equal(rows_by_group(group, ids, n_groups, words), want)
    one = np.zeros(words, dtype=np.int32)
    if ids.size:
        one = np.bitwise_or.reduce(_rows_by_group_numpy(np.zeros(ids.size, dtype=np.int64), ids, 1, words), axis=0)
    assert np.array_equal(_row_of(ids, words), one)
    assert np.array_equal(ids_row(ids, words), one)
    with _path(False):
        assert np.array_equal(rows_by_group(group, ids, n_groups, words), want)
        assert np.array_equal(_row_of(ids, words), one)
        assert np.array_equal(ids_row(ids, words), one)


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(1, 12))
def test_chain_scan_and_split_match_python(seed, n, reach):
    """``chain_scan`` / ``chain_split`` (the counter chain's split, one pass each) against plain
    Python over random candidates: counts, longest pure entrant, the split and the kept, in order."""
    rng = np.random.default_rng(seed)
    size = 64
    tails = rng.random(size) < 0.6
    lens = rng.integers(1, 16, size).astype(np.int64)
    cand = rng.integers(0, size, n).astype(np.int64)
    state = rng.integers(0, 4, n).astype(np.int64)
    ptr = rng.integers(0, 1000, n).astype(np.int64)
    chain = rng.integers(5, 50, reach).astype(np.int64)
    q1 = 2
    c = native.module()
    pure = [i for i in range(n) if state[i] == q1 and tails[cand[i]]]
    assert c.chain_scan(tails, lens, cand, state, q1) == (
        int((state == q1).sum()), len(pure), max((int(lens[cand[i]]) for i in pure), default=0))
    out = np.full((5, n), -7, dtype=np.int64)
    kept, n_split = c.chain_split(tails, lens, cand, state, ptr, q1, chain, *out)
    split = [i for i in pure if lens[cand[i]] <= reach]
    rest = [i for i in range(n) if i not in set(split)]
    assert (kept, n_split) == (len(rest), len(split))
    assert out[3, :n_split].tolist() == [int(cand[i]) for i in split]
    assert out[4, :n_split].tolist() == [int(chain[lens[cand[i]] - 1]) for i in split]
    assert out[0, :kept].tolist() == cand[rest].tolist()
    assert out[1, :kept].tolist() == state[rest].tolist() and out[2, :kept].tolist() == ptr[rest].tolist()
    if n:
        with pytest.raises(IndexError):
            c.chain_scan(tails, lens, np.array([size], dtype=np.int64), np.array([q1], dtype=np.int64), q1)


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.one_of(st.lists(st.integers(-2**40, 2**40), max_size=60),
                 st.lists(st.integers(0, 40), min_size=17, max_size=400),      # many repeats
                 st.lists(st.integers(-2**62, 2**62), min_size=17, max_size=400)),
       st.sampled_from([list, tuple, frozenset]), st.sampled_from(["as is", "sorted", "reversed", "organ pipe"]))
def test_int_key_matches_the_reference(values, kind, order):
    """``int_key``: the distinct ints, sorted, as a tuple -- the reference's -- that the cyclic
    collector does not track (the empty tuple is CPython's own singleton, never tracked). Its sort
    (``sort_i64``, the C sources' int64 sort) on presorted, reversed and organ-pipe inputs too, and
    with a depth limit of 0 and 1 (heapsort alone, heapsort after one partition)."""
    import gc

    from guidewire.grammar.lexer import int_key
    if kind is frozenset:   # no order to keep
        order = "as is"
    if order == "sorted":
        values = sorted(values)
    elif order == "reversed":
        values = sorted(values, reverse=True)
    elif order == "organ pipe":
        values = sorted(values)[::2] + sorted(values)[1::2][::-1]
    got = native.module().int_key(kind(values))
    assert got == tuple(sorted(set(values))) and type(got) is tuple
    for depth in (0, 1, 3):
        assert native.module().int_key(kind(values), depth) == got
    assert not gc.is_tracked(got)
    with _path(False):
        assert int_key(kind(values)) == got
    with pytest.raises(TypeError):
        native.module().int_key([1, "2"])
    with pytest.raises(TypeError):
        native.module().int_key(3)


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.floats(0.0, 3.0), st.floats(0.5, 1.0))
def test_eps_closure_matches_a_graph_search(n, seed, fanout, live_share):
    """``eps_closure`` against a breadth-first search written here, on random epsilon graphs
    (cycles, self-loops, dead states cut out of the closure), from random seed lists."""
    import gc

    rng = np.random.default_rng(seed)
    eps = [sorted(set(rng.integers(0, n, size=rng.poisson(fanout)).tolist())) for _ in range(n)]
    live = bytearray(int(rng.random() < live_share) for _ in range(n))
    off = np.zeros(n + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(e) for e in eps])
    dst = np.array([t for e in eps for t in e], dtype=np.int64)
    c = native.module()
    ran = 0
    for _ in range(5):
        seeds = rng.integers(0, n, size=rng.integers(0, 4)).tolist()
        want, todo = set(), [x for x in seeds if live[x]]
        while todo:
            x = todo.pop(0)
            if x not in want:
                want.add(x)
                todo.extend(t for t in eps[x] if live[t])
        got = c.eps_closure(off, dst, live, seeds)
        assert got == tuple(sorted(want)) and not gc.is_tracked(got)
        ran += 1
    assert ran == 5
    with pytest.raises(ValueError):
        c.eps_closure(off, dst, live, [n])                  # a seed out of range
    with pytest.raises(ValueError):
        c.eps_closure(off, dst, live[:-1] if n > 1 else bytearray(2), [0])   # live of another length
    if dst.size:
        bad = dst.copy()
        bad[0] = n
        with pytest.raises(ValueError):
            c.eps_closure(off, bad, bytearray([1]) * n, list(range(n)))    # a target out of range
    with pytest.raises(TypeError):
        c.eps_closure(off.astype(np.int32), dst, live, [0])


def test_lazy_lexer_states_stay_out_of_the_cyclic_collector(smollm2, monkeypatch):
    """A lazily built lexer's per-state containers (NFA sets by state, their index) hold only untracked tuples and ints on the compiled path,
    so a full collection never walks them; the alive bitsets are one int object per value."""
    import gc

    import guidewire.grammar.compiled as compiled_mod
    text = 'start: (A | B | C)+\nA: /[a-z]{1,40}/\nB: /[0-9a-f]{2,30}x/\nC: /"[^"]{0,20}"/\n'
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 2)
    g = _compile(text, smollm2, True)
    with _path(True):
        assert g.step_bytes(*g.matcher().state, b'abcdef0123x"quoted"qq') is not None
        for q in range(2, g.dfa.n_states):
            g.dfa.compute_row(q)
    dfa = g.dfa
    assert dfa.n_states >= 100
    for name in ("_states", "_index"):   # the rows' target cache is kept in C on this path (lazy_rows)
        d = getattr(dfa, name)
        assert len(d) >= 10 and not gc.is_tracked(d), name
    assert not dfa._eps_closure, "closures come from the compiled eps_closure, not the Python memo"
    assert not any(gc.is_tracked(t) for t in dfa._states.values())
    assert len({id(a) for a in dfa.alive}) == len(set(dfa.alive))


@pytest.mark.parametrize("which", ["schema1", "schema3", "python"])
def test_pick_groups_matches_the_python_loop(smollm2, which):
    """The compiled choice of groups against ``CompiledGrammar._pick_groups`` at every state of
    random walks, each on its own copy of the grammar: the same groups in the same order, the
    same memo bytes and the same scan memo (on the first walk both scan memos are emptied at
    every state: scans it answers itself, a lexeme whose terminals the set does not expect, are
    noted -1 as ``scan`` notes them, and it calls ``scan`` less), from empty picks memos and
    again from the filled ones (no bytes added); the python grammar's post-lexer has no readable
    scan memo (None: every scan is a call)."""
    from guidewire.grammar.compiled import PICK_BYTES
    c = native.module()

    def build():
        return (compile_lark(builtin_grammar("python"), smollm2) if which == "python"
                else compile_json_schema(SCHEMAS[int(which[-1])], smollm2))

    with _path(True):
        g, ref_g = build(), build()
    assert (g.earley.scan_memo is None) == (which == "python")
    calls = {"c": 0, "ref": 0}
    called: set = set()     # the (set, lexeme) scans the compiled loop called
    answered = 0            # dead scans it noted itself

    def counted(grammar, name):
        inner = grammar._scan

        def scan(s, e):
            calls[name] += 1
            if name == "c":
                called.add((s, e))
            return inner(s, e)
        return scan

    def pick(grammar, parts, s, name):
        return c.pick_groups(parts, s, grammar._x(s), grammar.earley.expected, grammar.dfa.ignored_bits,
                             grammar.dfa.term_set_ignored, grammar.earley.scan_memo, grammar.earley.term_bits,
                             counted(grammar, name), PICK_BYTES)

    checked = chosen = 0
    for walk in range(3):
        rng = random.Random(walk)
        m, ref_m = g.matcher(), ref_g.matcher()
        for _ in range(30):
            s, q = m.state
            assert ref_m.state == (s, q)
            with _path(True):
                entry, ref_entry = g._table_entry(q), ref_g._table_entry(q)
            mine = tuple((lx, mem, {}) for lx, mem, _ in g._lexeme_parts(entry))
            fresh = tuple((lx, mem, {}) for lx, mem, _ in ref_g._lexeme_parts(ref_entry))
            if g.earley.scan_memo is not None and walk == 0:   # a memo only: forgetting it changes no answer
                g.earley.scan_memo.clear()
                ref_g.earley.scan_memo.clear()
            called.clear()
            got = pick(g, mine, s, "c")
            if g.earley.scan_memo is not None and walk == 0:
                answered += sum(1 for key, v in g.earley.scan_memo.items()
                                if v == -1 and ((key - 2**32) >> 33, (key - 2**32) & (2**33 - 1)) not in called)
            ref_scan = ref_g._scan
            ref_g._scan = counted(ref_g, "ref")
            try:
                ref = ref_g._pick_groups(fresh, s)
            finally:
                ref_g._scan = ref_scan
            assert got == ref
            assert [p[2] for p in mine] == [p[2] for p in fresh]
            assert g.earley.scan_memo == ref_g.earley.scan_memo
            again = pick(g, mine, s, "c")
            assert again == (ref[0], 0)
            checked += 1
            chosen += len(ref[0])
            row = m.current_mask()
            assert np.array_equal(row, ref_m.current_mask())    # the memos stay alike
            allowed = [t for t in np.flatnonzero(bitmask_to_bool(row, smollm2.vocab_size)).tolist()
                       if t not in smollm2.eos_ids]
            if not allowed:
                break
            tok = rng.choice(allowed)
            assert m.advance(tok) and ref_m.advance(tok)
    assert checked >= 30 and chosen >= 30
    if which == "python":
        assert calls["c"] >= calls["ref"] > 0      # no memo to read: every scan is a call
    else:   # the reference calls scan for every lexeme; the compiled loop not for those it answers
        assert 0 < calls["c"] < calls["ref"] and answered > 0, (calls, answered)
    with pytest.raises(TypeError):
        c.pick_groups((("x", (), {}),), 0, 0, [0], 0, [False], None, None, g._scan, PICK_BYTES)
    with pytest.raises(TypeError, match="flat"):    # members must be flat (alive, group) pairs
        c.pick_groups((((), (1, 0, 1), {}),), 0, 1, [0], 0, [False], None, None, g._scan, PICK_BYTES)
    with pytest.raises(TypeError):                  # parts as lists of lists: the old layout
        c.pick_groups([[(), [(1, 0)], {}]], 0, 1, [0], 0, [False], None, None, g._scan, PICK_BYTES)
    with pytest.raises(TypeError):
        c.pick_groups((), 0, 0, [0], 0, [False], [], None, g._scan, PICK_BYTES)
    with pytest.raises(TypeError):
        c.pick_groups((), 0, 0, [0], 0, [False], {}, [], g._scan, PICK_BYTES)


@st.composite
def _hub_cases(draw):
    """A random lexer table with hubs, accepting states, a state's row with some first bytes
    already answered (DEAD), busy states and a byte threshold."""
    n = draw(st.integers(3, 24))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    trans = np.zeros((n + 3, 256), dtype=np.int32)            # spare rows: a lexer's table has room
    for s in range(1, n):
        density = rng.choice([0.05, 0.3, 0.9])
        targets = [rng.randrange(1, n) for _ in range(rng.randint(1, 4))]
        for b in range(256):
            if rng.random() < density:
                trans[s, b] = rng.choice(targets)
    hub = np.array([rng.choice([-1, -1, 0, 1, 2]) if s > 1 else -1 for s in range(n + 3)], dtype=np.int64)
    emit = np.array([rng.choice([-1, -1, 0, 3]) for _ in range(n + 3)], dtype=np.int64)
    q = rng.randrange(1, n)
    if rng.random() < 0.5:      # q sends some bytes where a hub goes: the case the reuse is for
        h = rng.randrange(2, n)
        hub[h] = 0
        for b in rng.sample(range(256), rng.randint(0, 40)):
            trans[q, b] = h
            if rng.random() < 0.7:
                trans[h, b] = h
    row = trans[q].astype(np.int64)
    for b in rng.sample(range(256), rng.randint(0, 30)):
        row[b] = DEAD
    busy = sorted(rng.sample(range(1, n), rng.randint(0, 2)))
    return trans, hub, emit, q, row, busy, draw(st.integers(1, 3))


def test_reusable_hubs_matches_the_numpy_reference():
    """``compiled.reusable_hubs`` (a table's reused hubs and their first-byte selectors) equals
    ``reusable_hubs_numpy`` on random lexer tables: the same hubs in the same order, the same
    selectors, quiet bytes included."""
    from guidewire.grammar.tableshortcuts import reusable_hubs_numpy

    ran = {"cases": 0, "reused": 0, "two": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(_hub_cases())
    def run(case):
        trans, hub, emit, q, row, busy, min_bytes = case
        ref = reusable_hubs_numpy(trans, hub, emit, q, row, set(busy), min_bytes)
        got = native.module().reusable_hubs(trans, hub, emit, q, row, np.array(busy, dtype=np.int64),
                                             min_bytes, START)
        assert [h for h, _ in got] == [h for h, _ in ref]
        for (_, sel), (_, first) in zip(got, ref):
            assert np.array_equal(np.frombuffer(sel, dtype=bool), first)
        ran["cases"] += 1
        ran["reused"] += bool(ref)
        ran["two"] += len(ref) >= 2

    run()
    assert ran["cases"] == 300 and ran["reused"] >= 60 and ran["two"] >= 5, ran


def test_reusable_hubs_refuses_bad_arrays():
    rh = native.module().reusable_hubs
    trans = np.zeros((4, 256), dtype=np.int32)
    hub = np.full(4, -1, dtype=np.int64)
    emit = np.full(4, -1, dtype=np.int64)
    row = np.zeros(256, dtype=np.int64)
    busy = np.zeros(0, dtype=np.int64)
    assert rh(trans, hub, emit, 1, row, busy, 2, START) == []
    bad = row.copy()
    bad[7] = 9
    with pytest.raises(ValueError, match="not a known state"):
        rh(trans, hub, emit, 1, bad, busy, 2, START)
    with pytest.raises(ValueError, match="256"):
        rh(trans, hub, emit, 1, row[:100], busy, 2, START)
    with pytest.raises(TypeError):
        rh(trans.astype(np.int64), hub, emit, 1, row, busy, 2, START)
