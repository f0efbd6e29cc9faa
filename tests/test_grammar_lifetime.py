"""A compiled grammar holds no reference cycle: dropping it frees it at once (reference counting),
so its tables never wait for CPython's full collection, which would then pay for them inside
whichever later mask allocates (one large grammar's cycle cost a 230 ms collection)."""

from __future__ import annotations

import gc
import random
import sys
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.core import allocate_token_bitmask
from guidewire.core.bitmask import bitmask_to_ids
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, compile_regex, compile_python
from guidewire.grammar import fragments, frontend, native
from guidewire.grammar.fragments import FragmentFacts, FragmentStore, StoredFragment, analyse, capture, splice
from guidewire.grammar.regex import NFA, RegexFragment, compile_into

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "tags": {"type": "array", "items": {"enum": ["a", "bc"]}},
                                           "n": {"type": "integer", "minimum": 0}},
          "required": ["name"], "additionalProperties": False}
KINDS = {
    "json_schema": lambda v: compile_json_schema(SCHEMA, v),
    "lark_sql": lambda v: compile_lark(builtin_grammar("sql"), v),
    "regex": lambda v: compile_regex(r"[a-z]{2,8}@[a-z]+\.(com|org)", v),
    "python": lambda v: compile_python(v),
}


def _random_walk(m, vocab, steps: int, seed: int) -> int:
    """Advance matcher ``m`` by up to ``steps`` tokens its masks allow, chosen at random; the
    number taken (a walk builds token tables, Earley sets and memos)."""
    buf = allocate_token_bitmask(1, vocab.vocab_size)
    rng = random.Random(seed)
    taken = 0
    for _ in range(steps):
        m.fill_bitmask(buf, 0)
        ids = [t for t in bitmask_to_ids(buf[0], vocab.vocab_size).tolist() if t not in vocab.eos_ids]
        if not ids or not m.advance(rng.choice(ids)):
            break
        taken += 1
    return taken


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_used_grammar_is_freed_without_the_cyclic_gc(smollm2, kind):
    KINDS[kind](smollm2)  # per-vocabulary memos built once, outside the measured part
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        g = KINDS[kind](smollm2)
        m = g.matcher()
        assert _random_walk(m, smollm2, 40, seed=0) >= 5
        ref = weakref.ref(g)
        del g, m
        assert ref() is None, "the grammar is kept alive by a reference cycle"
    finally:
        if was:
            gc.enable()


def _garbage_after(makers, vocab) -> tuple[int, list[str]]:
    """Compile, walk and drop each grammar with the collector off; then the number of objects a
    collection finds, and the modules of the functions among them."""
    for make in makers:  # per-vocabulary memos built first
        make(vocab)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    made = 0
    try:
        for make in makers:
            g = make(vocab)
            m = g.matcher()
            _random_walk(m, vocab, 25, seed=1)
            made += 1
            del g, m
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        modules = sorted({f"{o.__module__}.{o.__qualname__}" for o in gc.garbage if type(o).__name__ == "function"})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert made == len(makers)
    return found, modules


def test_compiling_and_walking_leave_no_cyclic_garbage(smollm2):
    """Numeric ranges and Unicode classes (the digit / UTF-8 automata) in JSON Schema and regex:
    compiled, walked and dropped with the collector off, nothing is left for it to find."""
    schemas = [{"type": "integer", "minimum": -1234, "maximum": 98765},
               {"type": "object", "properties": {"x": {"type": "number", "minimum": 0.5, "maximum": 1e6},
                                                 "s": {"type": "string", "pattern": "^[\u00e0-\u04ff]{1,5}$"}},
                "required": ["x", "s"]},
               {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 65535}, "maxItems": 3}]
    makers = [lambda v, s=s: compile_json_schema(s, v) for s in schemas] + \
        [lambda v: compile_regex(r"[\u0100-\uffff]{2}\d{3,9}", v)]
    found, modules = _garbage_after(makers, smollm2)
    assert found == 0, modules


def test_lark_grammars_leave_no_cyclic_garbage_of_ours(smollm2):
    """Lark's grammar loader leaves a little of its own (``ast.literal_eval``'s recursive closures);
    none of it is guidewire's."""
    found, modules = _garbage_after([lambda v: compile_lark(builtin_grammar("sql"), v)], smollm2)
    assert not [m for m in modules if m.startswith("guidewire")], modules


@pytest.mark.parametrize("where", ["mask", "advance"])
def test_a_matcher_stopped_by_a_limit_is_freed_without_the_cyclic_gc(smollm2, where):
    """The limit error a matcher keeps (``m.exception``) carries no traceback: the traceback's frames
    held the matcher and its grammar in a cycle, freed only by a full collection (Github schemas with
    a lazily built lexer: a 48 ms collection inside a later, unrelated mask)."""
    from guidewire.core import Limits, LimitExceededError

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        tok = smollm2.bytes_to_tokens()
        buf = allocate_token_bitmask(1, smollm2.vocab_size)
        if where == "advance":  # a lazily built lexer (2**21 states): past 14 bytes, rows to build
            g = compile_regex(r"[ab]*a[ab]{20}|x+", smollm2)
            g.set_limits(Limits(step_work=3))
            m = g.matcher()
            assert not all(m.advance(tok[t.encode()]) for t in ["ab", "bb", "ba", "aa"] * 10)
        else:
            g = compile_lark(builtin_grammar("sql"), smollm2)
            m = g.matcher()
            select = tok[b"SELECT"]
            assert m.advance(select)
            g.set_limits(Limits(step_work=1))
            m.fill_bitmask(buf, 0)
        assert isinstance(m.exception, LimitExceededError) and m.error
        assert m.exception.__traceback__ is None and m.exception.__context__ is None
        ref = weakref.ref(g)  # the matcher holds its grammar
        del g, m
        assert ref() is None, "a reference cycle keeps the failed matcher and its grammar"
    finally:
        if was:
            gc.enable()


def test_a_grammars_large_fixed_tables_are_not_walked_by_full_collections(smollm2):
    """What a grammar keeps for good and grows with its size (the predicted part of each Earley set,
    per set of predicted nonterminals, the dotted-rule arrays, the lexer's NFA-state owners, the narrow-terminal flags, the lexeme memo) is
    held in tuples of ints or bytes, which the cyclic GC untracks, not in lists, frozensets or
    dicts keyed by frozensets, which every full collection walks element by element. A full
    collection runs inside whichever mask happens to allocate: on a large schema these structures
    were ~400k references and a 20-40 ms pause in an unrelated mask."""
    props = {f"p{i}": {"anyOf": [{"type": "string", "maxLength": 5 + i % 7}, {"type": "integer"},
                                 {"type": "array", "items": {"enum": [f"e{i}", f"f{i}"]}}]} for i in range(40)}
    g = compile_json_schema({"type": "object", "properties": props, "additionalProperties": False}, smollm2)
    assert _random_walk(g.matcher(), smollm2, 60, seed=3) >= 10
    gc.collect()
    e, dfa = g.earley, g.dfa
    closures = [p.items for p in e._predictions.values()]
    assert len(closures) >= 10 and sum(map(len, closures)) >= 200, (len(closures), sum(map(len, closures)))
    fixed = {"closures": closures, "rule_base": [e.rule_base], "next": [e._next], "lhs": [e._lhs],
             "nullable": [e._nullable], "owner": [dfa.owner_of], "best_memo keys": list(dfa._best_memo)}
    for name, objs in fixed.items():
        assert objs, name
        walked = [o for o in objs if gc.is_tracked(o)]
        assert not walked, f"{name}: {len(walked)} of {len(objs)} still walked by the GC ({type(walked[0]).__name__})"
    narrow = g._builder._narrow_nfa
    assert narrow is None or isinstance(narrow, bytes)
    if native.module() is not None:   # append-only per-set and per-state arrays: lists the GC does not walk
        arrays = {"earley sets": [e.items, e.predictions, e.expected, e.accepting, e.waiting, e.core_by_terminal],
                  "lexer states": [dfa.alive, dfa.emit, dfa.term_sets, dfa.term_set_ignored],
                  "state classes": [g._rep_list]}
        assert len(e.items) >= 10 and len(dfa.alive) >= 10, (len(e.items), len(dfa.alive))
        for name, objs in arrays.items():
            walked = [o for o in objs if gc.is_tracked(o)]
            assert not walked, f"{name}: {len(walked)} of {len(objs)} arrays walked by the GC"


@pytest.mark.parametrize("compiled", [True, False])
def test_token_tables_share_group_keys_and_keep_their_parts_out_of_the_gc(smollm2, compiled):
    """A large schema builds thousands of token tables; each table's group keys ``(lexemes,
    alive)`` are one shared copy per distinct key across the grammar, and its lexeme parts hold
    tuples of ints (flat ``(alive, group, ...)`` members) that the cyclic GC untracks, not lists of
    pairs that every collection walks (a part is one tracked tuple: it holds its picks dict): a
    burst of new tables once left 37k young tuples and lists for a single 30 ms collection inside
    a mask. With the compiled module keys and members are untracked as they are stored; without
    it the collector untracks a key (a tuple holding a tuple) over two collections."""
    if compiled and native.module() is None:
        pytest.skip("the compiled module is not built or is off")
    was = native.set_enabled(compiled)
    try:
        _check_shared_group_keys(smollm2)
    finally:
        native.set_enabled(was)


def _check_shared_group_keys(smollm2):
    props = {f"p{i}": {"anyOf": [{"type": "string", "maxLength": 3 + i % 5}, {"type": "integer"},
                                 {"type": "array", "items": {"enum": [f"e{i}", f"f{i}"]}}]} for i in range(30)}
    compiled = native.module() is not None
    was = gc.isenabled()
    gc.disable()        # no collection may untrack anything before the first look below
    try:
        g = compile_json_schema({"type": "object", "properties": props, "required": ["p0", "p1", "p2", "p3"],
                                 "additionalProperties": False}, smollm2)
        assert sum(_random_walk(g.matcher(), smollm2, 40, seed=seed) for seed in range(6)) >= 60
        entries = [e for e in g._tables.values() if e[1] is not None]     # tables a mask has read
        keys = [k for e in entries for k in e[0].groups]
        parts = [p for e in entries for p in e[1]]
        assert len(entries) >= 10 and len(keys) >= 50 and len(parts) >= 20, (len(entries), len(keys), len(parts))
        if compiled:    # untracked as they are stored, not by some later collection
            assert not [k for k in keys if gc.is_tracked(k)]
            assert not [p[1] for p in parts if gc.is_tracked(p[1])]
    finally:
        if was:
            gc.enable()
    assert len({id(k) for k in keys}) == len(set(keys)) < len(keys)     # one copy per distinct key
    for e in entries:           # the flat members index exactly the table's groups, under their lexemes, in order
        flat = [(lx, m[i], m[i + 1]) for lx, m, _ in e[1] for i in range(0, len(m), 2)]
        assert sorted(flat, key=lambda t: t[2]) == [(lx, alive, gid) for gid, (lx, alive) in enumerate(e[0].groups)]
        assert [lx for lx, _m, _p in e[1]] == list(dict.fromkeys(lx for lx, _a in e[0].groups))
        assert isinstance(e[1], tuple) and all(isinstance(p, tuple) and isinstance(p[1], tuple) for p in e[1])
    gc.collect()
    if not compiled:
        gc.collect()    # the collector untracks a tuple of tuples one level per collection
    assert not [k for k in keys if gc.is_tracked(k)]
    assert not [p[1] for p in parts if gc.is_tracked(p[1])]
    if compiled:        # the compiled pick memoises untracked tuples: the memo is not walked
        assert sum(len(p[2]) for p in parts) >= 20
        assert not [p[2] for p in parts if gc.is_tracked(p[2])]


@pytest.mark.skipif(native.module() is None, reason="the compiled module is not built or is off")
def test_an_nfa_being_built_is_not_walked_by_the_cyclic_gc():
    """An NFA's per-state lists (ints and tuples of ints only) stay out of the cyclic GC while
    the automaton is built, natively added or spliced from the fragment store: tracked, a large
    terminal's hundreds of thousands of lists were walked by every full collection during its
    compile (160-340 ms each in a long-lived MaskBench worker); frozen, its tuples of tuples are
    untracked too. The automaton built is the same with the compiled module off (ordinary lists,
    left to the collector)."""
    pattern = r"[a-zé]{3,40}(-[0-9A-F]{2,6}|\.x+)?"
    built = {}
    for on in (True, False):
        old = native.set_enabled(on)
        try:
            nfa = NFA()
            frag = compile_into(nfa, pattern)
            stored = capture(nfa, 0, frag, analyse(nfa, 0, frag))
            again = splice(nfa, stored)
            assert again.start == frag.start + stored.n_states
            built[on] = (frag, again, [list(e) for e in nfa.eps], [list(e) for e in nfa.edges])
            lists = [nfa.eps, nfa.edges, *nfa.eps, *nfa.edges]
            assert len(lists) > 2 * 200, len(lists)
            tracked = sum(map(gc.is_tracked, lists))
            assert tracked == (0 if on else len(lists)), (on, tracked, len(lists))
            nfa.freeze()   # tuples of tuples: one collection alone does not untrack the outer one
            gc.collect()
            assert gc.is_tracked(nfa.edges) is not on and gc.is_tracked(nfa.eps) is not on
        finally:
            native.set_enabled(old)
    assert built[True] == built[False]


@pytest.mark.skipif(native.module() is None, reason="the compiled module is not built or is off")
def test_the_fragment_store_is_not_walked_by_the_cyclic_gc(smollm2, monkeypatch):
    """The process-wide store of terminal fragments lives as long as the process, so every full
    collection would walk what it holds: its entries are plain tuples of atoms (untracked once the
    compiled module), not dataclass instances (three tracked objects per fragment, thousands
    of fragments: half of a long-lived MaskBench worker's heap and most of a 10-25 ms full
    collection there). What it hands back is unchanged."""
    store = FragmentStore()
    monkeypatch.setattr(fragments, "STORE", store)
    monkeypatch.setattr(frontend, "STORE", store)
    compile_json_schema(SCHEMA, smollm2)
    keys = list(store._items)
    assert len(keys) >= 5, len(keys)
    gc.collect()
    walked = [k for k in keys if gc.is_tracked(store._items[k])]
    assert not walked, f"{len(walked)} of {len(keys)} stored fragments are walked by the GC"
    for k in keys:
        got = store.get(k)
        assert isinstance(got, StoredFragment) and got.n_states == len(got.edges) > 0
        assert isinstance(got.fragment, RegexFragment) and isinstance(got.facts, FragmentFacts)
        assert len(got.facts.live) == got.n_states


def _nested(draw_depth: int):
    """A hypothesis strategy of nested tuples of atoms, with now and then a list (tracked for good)."""
    atoms = st.one_of(st.integers(), st.booleans(), st.none(), st.binary(max_size=3), st.text(max_size=3))
    return st.recursive(atoms, lambda inner: st.one_of(st.tuples(inner, inner), st.lists(inner, max_size=3).map(tuple),
                                                       st.lists(inner, max_size=2)), max_leaves=draw_depth)


def _walkable(x) -> bool:
    """The oracle: a tuple must stay tracked iff a list is somewhere inside it."""
    if isinstance(x, list):
        return True
    return isinstance(x, tuple) and any(_walkable(v) for v in x)


@pytest.mark.skipif(native.module() is None, reason="the compiled module is not built or is off")
@settings(max_examples=300, deadline=None)
@given(_nested(24))
def test_untrack_nested_untracks_exactly_the_tuples_of_atoms(value):
    """``untrack_nested`` leaves the value as it was and untracks a tuple iff nothing inside it can
    be in a reference cycle (no list at any depth); CPython alone untracks a tuple of tuples one
    level per collection."""
    compiled = native.module()
    copy = eval(repr(value))  # noqa: S307 - a fresh, equal object built from literals only
    got = compiled.untrack_nested(value)
    assert got is value and value == copy

    def check(x):   # every tuple reached from the value through tuples only (lists are not entered)
        if isinstance(x, tuple):
            assert gc.is_tracked(x) == _walkable(x), x
            for v in x:
                check(v)
    check(value)


@pytest.mark.skipif(native.module() is None, reason="the compiled module is not built or is off")
def test_untrack_nested_on_two_fixed_values():
    """The property test's two cases spelled out: a tuple of tuples of atoms leaves the collector
    whole, one holding a list stays (its tuple items leave). Built at run time, not constants."""
    n = len(sys.argv) + 1
    whole = ((n, (n + 1, bytes(n))), (str(n), None))
    mixed = ((n,), [n + 1])
    gc.collect()
    assert gc.is_tracked(whole) and gc.is_tracked(whole[0]), "CPython alone keeps a tuple of tuples tracked"
    native.module().untrack_nested(whole)
    native.module().untrack_nested(mixed)
    assert not gc.is_tracked(whole) and not gc.is_tracked(whole[0]) and not gc.is_tracked(whole[0][1])
    assert gc.is_tracked(mixed) and not gc.is_tracked(mixed[0]) and gc.is_tracked(mixed[1])
