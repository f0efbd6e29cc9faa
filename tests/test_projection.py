"""Lexer states projected onto the expected terminals (grammar/projection.py): the declared sealed
class against an independent prefix-free oracle, and masks against the unprojected lexer."""

from __future__ import annotations

import glob
import json
import os
import random

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_json_schema
from guidewire.grammar import compiled as compiled_mod
from guidewire.grammar.frontend import TerminalSpec, assemble
from guidewire.grammar.lexer import START
from guidewire.grammar.projection import Projection
from runtime_fakes import byte_id, tiny_vocab

MASKBENCH = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "maskbench")

# P: '"' ( [^"\\] | '\\' any )* '"' over bytes, a prefix-free superset of JSON strings
_P_START, _P_BODY, _P_ESC, _P_CLOSED = 0, 1, 2, 3


def _p_step(p: int, b: int) -> int | None:
    if p == _P_START:
        return _P_BODY if b == 0x22 else None
    if p == _P_BODY:
        return _P_CLOSED if b == 0x22 else _P_ESC if b == 0x5C else _P_BODY
    if p == _P_ESC:
        return _P_BODY
    return None


def _coreachable(nfa, accept: int) -> set[int]:
    back: dict[int, list[int]] = {}
    for s, eps in enumerate(nfa.eps):
        for t in eps:
            back.setdefault(t, []).append(s)
    for s, edges in enumerate(nfa.edges):
        for _lo, _hi, t in edges:
            back.setdefault(t, []).append(s)
    seen, todo = {accept}, [accept]
    while todo:
        for s in back.get(todo.pop(), ()):
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return seen


def _closure(nfa, seeds, live) -> frozenset:
    out, todo = set(), [s for s in seeds if s in live]
    while todo:
        s = todo.pop()
        if s not in out:
            out.add(s)
            todo.extend(t for t in nfa.eps[s] if t in live)
    return frozenset(out)


def words_in_p(nfa, start: int, accept: int) -> bool:
    """Whether every word of the NFA fragment ``start -> accept`` is in P (and so the union of such
    fragments is prefix-free): a product search of the fragment's subsets with P's four states."""
    live = _coreachable(nfa, accept)
    first = (_closure(nfa, [start], live), _P_START)
    seen, todo = {first}, [first]
    while todo:
        sub, p = todo.pop()
        if accept in sub and p != _P_CLOSED:
            return False
        for b in range(256):
            nxt = _closure(nfa, [t for s in sub for lo, hi, t in nfa.edges[s] if lo <= b <= hi], live)
            if not nxt:
                continue
            q = _p_step(p, b)
            if q is None:
                return False
            if (nxt, q) not in seen:
                seen.add((nxt, q))
                todo.append((nxt, q))
    return True


SCHEMAS = [
    {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"},
        "title": {"type": "string", "maxLength": 6},
        "kind": {"enum": ["a\"b", "é", "x\\y"]},
        "when": {"type": "string", "format": "date"},
        "n": {"type": "integer"}},
     "patternProperties": {"^x-": {"type": "string", "minLength": 2}},
     "additionalProperties": True},
    {"type": "object", "properties": {"k": {"const": "v\u00e9"}, "s": {"type": "string"}},
     "propertyNames": {"maxLength": 5}, "additionalProperties": {"type": "string", "maxLength": 3}},
    {"type": "array", "items": {"anyOf": [{"type": "string", "pattern": "\\d"}, {"type": "null"}]}},
]


def _maskbench_schemas(n: int) -> list:
    files = sorted(glob.glob(os.path.join(MASKBENCH, "*.json")))
    return [json.load(open(f))["schema"] for f in files[:: max(1, len(files) // n)][:n]]


def test_sealed_terminals_are_prefix_free_json_strings(smollm2, monkeypatch):
    """Every terminal the JSON front end declares sealed has all its words in a prefix-free
    superset of JSON strings (an independent product search), so the union of the class is
    prefix-free, which is what dropping them relies on; the class is accepted by the lexer."""
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    checked = grammars = 0
    for schema in SCHEMAS + _maskbench_schemas(12):
        try:
            g = compile_json_schema(schema, smollm2)
        except Exception:   # noqa: BLE001 (a schema the engine refuses has no terminals to check)
            continue
        grammars += 1
        dfa = g.dfa
        sealed = [i for i, t in enumerate(dfa.terminals) if t.sealed >= 0]
        for i in sealed:
            t = dfa.terminals[i]
            if len(dfa.nfa.edges[t.start]) + len(dfa.nfa.eps[t.start]) == 0:
                continue    # a terminal no rule uses: no words
            assert words_in_p(dfa.nfa, t.start, t.accept), (schema, t.name)
            checked += 1
        if sealed:
            assert g._projection is not None and all(g._projection.sealed[i] for i in sealed)
    assert grammars >= len(SCHEMAS) and checked >= 20


def _pair(schema, vocab, monkeypatch):
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)    # lazy lexers: the projection's case
    monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", True)
    on = compile_json_schema(schema, vocab)
    monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", False)
    off = compile_json_schema(schema, vocab)
    assert on._projection is not None and off._projection is None
    return on, off


def _walk_pair(on, off, vocab, rng: random.Random, steps: int, favour: np.ndarray) -> tuple[int, int]:
    """Walk both grammars with the same random allowed tokens; masks and verdicts must agree.
    Returns (steps taken, steps where the projected matcher sat in another lexer state)."""
    return _walk_from(on.matcher(), off.matcher(), vocab, rng, steps, favour)


def _walk_from(a, b, vocab, rng: random.Random, steps: int, favour: np.ndarray) -> tuple[int, int]:
    """:func:`_walk_pair` from the matchers ``a`` (projected) and ``b`` (not), advanced in place."""
    taken = moved = 0
    for _ in range(steps):
        ma, mb = a.current_mask(), b.current_mask()
        assert np.array_equal(ma, mb)
        assert a.is_accepting() == b.is_accepting()
        bits = np.unpackbits(mb.view(np.uint8), bitorder="little")[:vocab.vocab_size].astype(bool)
        bits[list(vocab.eos_ids)] = False
        allowed = np.flatnonzero(bits)
        if not allowed.size:
            break
        nice = np.intersect1d(allowed, favour)
        pool = nice if nice.size and rng.random() < 0.7 else allowed
        tok = int(pool[rng.randrange(pool.size)])
        assert a.advance(tok) and b.advance(tok)
        taken += 1
        moved += a.state[1] != b.state[1]
    return taken, moved


def _walks(on, off, vocab, seed: int, rounds: int = 6, steps: int = 60) -> tuple[int, int]:
    """``rounds`` random walks of :func:`_walk_pair`: (steps taken, steps in another lexer state)."""
    rng, favour = random.Random(seed), _favoured(vocab)
    total = moved = 0
    for _ in range(rounds):
        t, m = _walk_pair(on, off, vocab, rng, steps, favour)
        total, moved = total + t, moved + m
    return total, moved


def _favoured(vocab) -> np.ndarray:
    keep = set(b'{[:,"\\ -_.0123456789abcdefxyz')   # no closing brackets: walks go on
    return np.array([i for i, t in enumerate(vocab.token_bytes) if t and len(t) <= 3 and set(t) <= keep])


PATTERNS = ["^[a-z]+$", "^[\\w.:-]+$", "\\d{2}", "^(https?://)?[a-z.]+$", "^x"]


@st.composite
def object_schemas(draw):
    props = {}
    for k in range(draw(st.integers(2, 4))):
        kind = draw(st.sampled_from(["pattern", "max", "enum", "plain", "int", "format"]))
        if kind == "pattern":
            sub = {"type": "string", "pattern": draw(st.sampled_from(PATTERNS))}
        elif kind == "max":
            sub = {"type": "string", "maxLength": draw(st.integers(1, 12))}
        elif kind == "enum":
            sub = {"enum": draw(st.lists(st.sampled_from(["a", "ab", "b-1", "x.y", "é"]), min_size=1, max_size=3,
                                         unique=True))}
        elif kind == "format":
            sub = {"type": "string", "format": draw(st.sampled_from(["date", "email", "uri"]))}
        elif kind == "int":
            sub = {"type": "integer"}
        else:
            sub = {"type": "string"}
        props[f"p{k}" if draw(st.booleans()) else f"key{k}x"] = sub
    return {"type": "object", "properties": props,
            "additionalProperties": draw(st.sampled_from([True, False, {"type": "string", "maxLength": 4}]))}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(object_schemas(), st.integers(0, 2**31))
def test_projected_masks_equal_unprojected_on_random_schemas(smollm2, monkeypatch, schema, seed):
    """Random object schemas (patterns, maxLength counters, enums, formats, extra keys), lazily
    built lexers: the projected grammar's masks and verdicts equal the unprojected one's along
    random walks of allowed tokens."""
    on, off = _pair(schema, smollm2, monkeypatch)
    taken, _moved = _walk_pair(on, off, smollm2, random.Random(seed), 40, _favoured(smollm2))
    assert taken >= 1


def test_projection_takes_effect_and_keeps_masks(smollm2, monkeypatch):
    """On a schema whose lexer is a product of string terminals, the matcher sits in projected
    states (fewer NFA states, no unexpected sealed terminal) and every mask equals the unprojected
    one's, along documents of the schema and random walks."""
    schema = {"type": "object", "properties": {
        "etag": {"type": "string", "pattern": "^[\\w.:-]+$"},
        "css": {"type": "string", "pattern": "^[\\w\\s-]+$"},
        "title": {"type": "string", "maxLength": 20},
        "when": {"type": "string", "format": "date-time"}}, "additionalProperties": True}
    on, off = _pair(schema, smollm2, monkeypatch)
    total, moved = _walks(on, off, smollm2, seed=3)
    assert total >= 200 and moved >= 10
    assert on.stats()["projected_states"] > 0
    # a document: inside the etag value, the projected state holds no other sealed terminal
    a, b = on.matcher(), off.matcher()
    text = b'{"etag": "ab.c'
    for byte in text:
        tok = smollm2.token_bytes.index(bytes([byte]))
        assert a.advance(tok) and b.advance(tok)
        assert np.array_equal(a.current_mask(), b.current_mask())
    s, q = a.state
    owners = {on.dfa._owner_list[n] for n in on.dfa.nfa_states(q)}
    expected = on._x(s)
    assert all((expected >> t) & 1 or not on._projection.sealed[t] for t in owners)
    assert len(on.dfa.nfa_states(q)) < len(off.dfa.nfa_states(b.state[1]))


def _family_grammar(vocab):
    """S -> EXTRA | OTHER | ':' NAMED: NAMED and EXTRA one family, NAMED outranking it; at the
    start NAMED is not expected, yet it shadows EXTRA on the lexeme ``"a"``."""
    specs = [TerminalSpec("NAMED", '"a"', family=0, priority=2, sealed=0),
             TerminalSpec("EXTRA", '"[a-z]*"', family=0, priority=0, sealed=0),
             TerminalSpec("OTHER", '"b+"', sealed=0),
             TerminalSpec("COLON", ":")]
    n = len(specs)
    rules = [(n, (1,)), (n, (2,)), (n, (3, 0))]
    return assemble(specs, rules, n, ["s"], vocab)


def _family_after_quote(monkeypatch):
    """The family grammar, its lexer lazy, and the lexer state after its opening quote."""
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    g = _family_grammar(tiny_vocab())
    m = g.matcher()
    assert m.advance(byte_id(b'"'))
    return g, m.state[1]


def test_a_terminal_that_outranks_an_expected_one_is_kept(monkeypatch):
    """Where the parser expects EXTRA but not NAMED, NAMED still shadows EXTRA on the lexeme
    ``"a"`` (it outranks it in their family): it must not be dropped. OTHER (a free terminal)
    is dropped where it is not expected; where OTHER alone is, both family members are."""
    vocab = tiny_vocab()
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    g = _family_grammar(vocab)
    assert g._projection is not None
    m = g.matcher()
    assert m.advance(byte_id(b'"'))
    s, q = m.state
    # expected at the start: EXTRA, OTHER and ':'; NAMED outranks EXTRA: nothing to drop
    assert g._project(s, q) == q
    h = g._projection
    x_extra = 1 << 1                      # a parser state expecting EXTRA alone
    p = h.project(q, x_extra)
    owners = {g.dfa._owner_list[n] for n in g.dfa.nfa_states(p)}
    assert owners == {0, 1}               # OTHER dropped, NAMED kept (it outranks EXTRA)
    p2 = h.project(q, 1 << 2)             # expecting OTHER alone: NAMED and EXTRA both dropped
    assert {g.dfa._owner_list[n] for n in g.dfa.nfa_states(p2)} == {2}


def test_family_grammar_masks_agree(monkeypatch):
    """The family grammar walked byte by byte: projected and unprojected masks agree, and
    ``"a"`` is refused where only EXTRA is expected (NAMED shadows it)."""
    vocab = tiny_vocab()
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    grammars = []
    for flag in (True, False):
        monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", flag)
        grammars.append(_family_grammar(vocab))
    on, off = grammars
    assert on._projection is not None and off._projection is None
    for text, ok in ((b'"a"', False), (b'"ab"', True), (b'"bb"', True), (b'"b"', True), (b':"a"', True),
                     (b':"ab"', False)):
        a, b = on.matcher(), off.matcher()
        fine = True
        for byte in text:
            assert np.array_equal(a.current_mask(), b.current_mask())
            ra, rb = a.advance(byte_id(bytes([byte]))), b.advance(byte_id(bytes([byte])))
            assert ra == rb
            fine = fine and ra
            if not ra:
                break
        assert (fine and a.is_accepting()) == ok == (fine and b.is_accepting())


def test_class_refused_when_an_outsider_shares_a_first_byte_or_a_member_is_ignored():
    """The lexer accepts a sealed class only if no other terminal starts with one of its first
    bytes and no member is ignored (or a literal); else nothing is dropped."""
    vocab = tiny_vocab()
    base = [TerminalSpec("A", '"a+"', sealed=0), TerminalSpec("B", '"b"', sealed=0)]
    n = 3
    g = assemble(base + [TerminalSpec("C", 'c')], [(n, (0,)), (n, (1,)), (n, (2,))], n, ["s"], vocab)
    assert Projection(g.dfa).active
    g = assemble(base + [TerminalSpec("Q", '"q')], [(n, (0,)), (n, (1,)), (n, (2,))], n, ["s"], vocab)
    assert not Projection(g.dfa).active        # Q starts with '"' and is not sealed
    g = assemble([base[0], TerminalSpec("W", '" ', sealed=0, ignored=True), TerminalSpec("C", 'c')],
                 [(n, (0,)), (n, (2,))], n, ["s"], vocab)
    assert not Projection(g.dfa).active


def test_projection_falls_back_to_the_state_at_a_lexer_limit(monkeypatch):
    """A full lexer (no room for one more state) keeps the state as it is: exact, no error."""
    g, q = _family_after_quote(monkeypatch)
    g.dfa.max_states = g.dfa.n_states
    assert g._projection.project(q, 1 << 2) == q
    assert g._projection.project(START, 1 << 2) == START


def test_near_a_lexer_bound_the_state_itself_is_used(monkeypatch):
    """A projected state needs rows and a table of its own; near the lexer's bounds the state
    itself (whose table another request may have built) is kept, so projecting never turns a
    mask into a limit error the unprojected lexer would not raise."""
    vocab = tiny_vocab()
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    got = []
    for project in (False, True):
        monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", project)
        specs = [TerminalSpec("A", '"a+"', sealed=0), TerminalSpec("B", '"[ab]+"', sealed=0),
                 TerminalSpec("C", "c"), TerminalSpec("D", "d")]
        n = len(specs)
        g = assemble(specs, [(n, (0,)), (n, (2, 1)), (n, (3, 0)), (n, (3, 1))], n, ["s"], vocab)
        other = g.matcher()       # after 'd' both A and B are expected: its '"' state's table is built
        assert other.advance(byte_id(b"d")) and other.advance(byte_id(b'"'))
        other.current_mask()
        g.dfa.max_states = g.dfa.n_states + 1
        m = g.matcher()
        assert m.advance(byte_id(b'"'))       # here only A is expected: B would be dropped
        got.append((m.current_mask().tobytes(), m.error))
    assert got[0] == got[1] and got[1][1] is None


def _eager_pair(schema, vocab, monkeypatch, states: int = 1, heavy: int = 1):
    """The schema compiled with an eagerly built lexer, projected (thresholds lowered to ``states``
    lexer states and ``heavy`` NFA states) and not."""
    monkeypatch.setattr(compiled_mod, "PROJECT_EAGER_VOCAB", 0)
    monkeypatch.setattr(compiled_mod, "PROJECT_EAGER_STATES", states)
    monkeypatch.setattr(compiled_mod, "PROJECT_HEAVY_NFA", heavy)
    monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", True)
    on = compile_json_schema(schema, vocab)
    monkeypatch.setattr(compiled_mod, "PROJECT_LEXEMES", False)
    off = compile_json_schema(schema, vocab)
    return on, off


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(object_schemas(), st.integers(0, 2**31))
def test_eager_lexer_projected_masks_equal_unprojected(smollm2, monkeypatch, schema, seed):
    """Random object schemas with eagerly built lexers, projected (new states beside the built
    ones, their rows made on demand, the mirror kept row by row) and not: the same masks and
    verdicts along random walks of allowed tokens."""
    on, off = _eager_pair(schema, smollm2, monkeypatch)
    # both lexers built up front (with state classes) and some string not narrow (else nothing to project)
    assume(on._rep.size and off._rep.size and on._projection is not None)
    assert on._projection.max_kept == compiled_mod.PROJECT_EAGER_KEPT
    assert on._builder.may_grow
    taken, _moved = _walk_pair(on, off, smollm2, random.Random(seed), 40, _favoured(smollm2))
    assert taken >= 1
    assert on._builder._rows is None     # never copied whole: a projected state may come next


def test_eager_projection_takes_effect_only_where_it_pays(smollm2, monkeypatch):
    """A product lexer built up front with a counted string (a terminal of many NFA states) is
    projected: matchers sit in new, smaller states with the same masks as the unprojected
    grammar's. With the default thresholds (SmolLM2's vocabulary is below the size where it pays),
    and for a lexer whose strings are all plain, nothing is projected and the mirror is copied
    whole (its classes final)."""
    schema = {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 12},
        "kind": {"enum": ["a", "b"]}}, "additionalProperties": True}
    on, off = _eager_pair(schema, smollm2, monkeypatch, states=1, heavy=compiled_mod.PROJECT_HEAVY_NFA)
    assert on._rep.size and off._rep.size and on._projection is not None
    total, moved = _walks(on, off, smollm2, seed=5)
    assert total >= 200 and moved >= 10
    made = on.stats()["projected_states"]
    assert made > 0
    # every new state a projection made keeps at most max_kept NFA states
    new = {p for p in on._projection._memo.values() if p >= len(on._rep)}
    assert new and all(len(on.dfa.nfa_states(p)) <= compiled_mod.PROJECT_EAGER_KEPT for p in new)
    monkeypatch.undo()
    plain = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "minLength": 1}},
             "additionalProperties": True}
    with monkeypatch.context() as mp:     # plain strings only: no heavy terminal, even with the other gates open
        mp.setattr(compiled_mod, "PROJECT_EAGER_VOCAB", 0)
        mp.setattr(compiled_mod, "PROJECT_EAGER_STATES", 1)
        no_heavy = compile_json_schema(plain, smollm2)
    by_default = compile_json_schema(schema, smollm2)   # SmolLM2's vocabulary is below PROJECT_EAGER_VOCAB
    for g in (no_heavy, by_default):
        assert g._rep.size and g._projection is None and not g._builder.may_grow
        g.matcher().current_mask()
        assert g._builder._rows is not None      # a final lexer: copied whole at its first table


def test_projection_max_kept_refuses_large_new_states(monkeypatch):
    """With ``max_kept`` set (an eager lexer), a projection that would intern a new state of more
    NFA states than that, or of more than half the state's, keeps the state itself."""
    g, q = _family_after_quote(monkeypatch)
    before = g.dfa.n_states
    strict = Projection(g.dfa)
    strict.max_kept = 0
    assert strict.project(q, 1 << 2) == q and g.dfa.n_states == before    # no new state
    proj = Projection(g.dfa)
    p = proj.project(q, 1 << 2)                  # OTHER expected alone: NAMED and EXTRA dropped
    assert p != q and g.dfa.n_states == before + 1
    again = Projection(g.dfa)
    again.max_kept = 0
    assert again.project(q, 1 << 2) == p         # a state the lexer has is used whatever its size
    # on a fresh copy, with no bound on size, the half rule alone decides
    g2, q2 = _family_after_quote(monkeypatch)
    half = Projection(g2.dfa)
    half.max_kept = 1 << 30
    kept, whole = len(g.dfa.nfa_states(p)), len(g2.dfa.nfa_states(q2))
    assert (half.project(q2, 1 << 2) == q2) == (2 * kept > whole)


def test_eager_projection_makes_key_states_of_many_expected_objects(smollm2, monkeypatch):
    """Where the parser expects the keys of many objects at once (an ``anyOf`` of objects, each
    with its extra keys) beside many other objects' extra keys, a key state of an eagerly built
    lexer projects onto a new state of more than 64 NFA states (CircleCI's job keys: 114 of 298),
    at most :data:`PROJECT_EAGER_KEPT` and half the state's; masks and verdicts stay those of the
    unprojected grammar from there on."""
    alts = [{"type": "object", "properties": {f"d{i}x": {"type": "integer"}},
             "additionalProperties": {"type": "integer"}} for i in range(36)]
    others = {f"o{i}": {"type": "object", "properties": {f"e{i}y": {"type": "integer"}},
                        "additionalProperties": {"type": "integer"}} for i in range(80)}
    schema = {"type": "object", "properties": {"jobs": {"anyOf": alts}, **others}, "additionalProperties": False}
    on, off = _eager_pair(schema, smollm2, monkeypatch)
    assert on._rep.size and on._projection is not None and off._projection is None
    ids = {t: i for i, t in reversed(list(enumerate(smollm2.token_bytes)))}
    prefix = [ids[bytes([c])] for c in b'{"jobs": {"d']
    a, b = on.matcher(), off.matcher()
    for tok in prefix:
        assert np.array_equal(a.current_mask(), b.current_mask())
        assert a.advance(tok) and b.advance(tok)
    assert np.array_equal(a.current_mask(), b.current_mask())
    q, q_off = a.state[1], b.state[1]
    kept, whole = len(on.dfa.nfa_states(q)), len(off.dfa.nfa_states(q_off))
    assert q >= len(on._rep), "the key state was not projected onto a new state"
    assert 64 < kept <= compiled_mod.PROJECT_EAGER_KEPT and 2 * kept <= whole
    rng, favour = random.Random(7), _favoured(smollm2)
    # random walks on from the projected key state
    steps = sum(_walk_from(a.fork(), b.fork(), smollm2, rng, 25, favour)[0] for _ in range(4))
    assert steps >= 60
