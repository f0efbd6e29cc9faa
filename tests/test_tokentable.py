"""The vectorised token tables against a slow per-token reference walk (hypothesis).

A table lists, for lexer state ``q``, each walked token's group ``(lexemes, alive bits)``;
tokens whose first byte ends the lexeme of ``q`` sit in its restart row and read as
``[emit[q]] + walk(START, token)``, so their reading comes from the START table.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import allocate_token_bitmask, bitmask_to_bool
from guidewire.core.errors import GuidewireError
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, compile_regex, native, tabletrie
from guidewire.grammar.lexer import DEAD, START
from guidewire.grammar.tokentable import TableBuilder, build_table, walk_token

# every test here runs on both table-builder paths: compiled inner loops and the numpy reference
pytestmark = pytest.mark.usefixtures("grammar_path")


@pytest.fixture(scope="module")
def grammars(smollm2, grammar_path):
    return {name: compile_lark(builtin_grammar(name), smollm2) for name in ("json", "sql")}


def readings(builder, q):
    """Token id -> (lexemes, alive bits) for every token the tables of ``builder`` allow from ``q``."""
    vocab = builder.vocab
    table = builder.table(q)
    out = {}
    for gi, (lexemes, alive) in enumerate(table.groups):
        for t in np.flatnonzero(bitmask_to_bool(table.masks[gi], vocab.vocab_size)).tolist():
            assert t not in out, "a token sits in two groups"
            out[t] = (tuple(lexemes), alive)
    base = q == START or builder.hub[q] >= 0
    for h, row in table.inherit:
        if base:    # a hub inherits from other hubs only (acyclically: else this recursion never ends)
            assert q != START and h != START and builder.hub[h] >= 0, "START or a hub inherits from a non-hub"
        elif h != START and builder.hub[h] < 0:   # a shadow (fewer NFA states: acyclic), else a hub or START
            assert len(builder.dfa.nfa_states(h)) < len(builder.dfa.nfa_states(q)), "inherited from a non-base table"
        hub = readings(builder, h)
        for t in np.flatnonzero(bitmask_to_bool(row, vocab.vocab_size)).tolist():
            assert t not in out, "a token is both grouped and inherited"
            if t in hub:
                out[t] = hub[t]
    if table.restart_lexeme >= 0:
        assert q != START
        start = readings(builder, START)
        for t in np.flatnonzero(bitmask_to_bool(table.restart_mask, vocab.vocab_size)).tolist():
            assert t not in out, "a token is both walked and restarted"
            if t in start:
                lexemes, alive = start[t]
                out[t] = ((table.restart_lexeme,) + lexemes, alive)
    return out


def check_state(builder, q, tokens):
    """The table of ``q`` agrees with :func:`walk_token` on ``tokens``."""
    dfa, vocab = builder.dfa, builder.vocab
    got = readings(builder, q)
    for t in tokens:
        lexemes, fin = walk_token(dfa, q, vocab.token_bytes[t])
        if fin == DEAD or not dfa.alive[fin]:
            assert t not in got, (q, vocab.token_bytes[t])
        else:
            assert got.get(t) == (tuple(lexemes), dfa.alive[fin]), (q, vocab.token_bytes[t])


def interesting_tokens(vocab, alphabet: bytes, rng, limit=1500):
    """Tokens spelled only with ``alphabet`` (the ones a small grammar can lex), plus a random sample."""
    allowed = set(alphabet)
    inside = [i for i in vocab.normal_ids.tolist() if set(vocab.token_bytes[i]) <= allowed]
    inside = rng.permutation(inside)[:limit].tolist() if inside else []
    return inside + rng.choice(vocab.normal_ids, 300, replace=False).tolist()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["json", "sql"]), st.data())
def test_table_groups_match_slow_walk(grammars, name, data):
    g = grammars[name]
    dfa, vocab = g.dfa, g.vocab
    dfa.build_all(limit=5000)
    q = data.draw(st.integers(1, dfa.n_states - 1))
    builder = TableBuilder(dfa, vocab)
    sample = data.draw(st.lists(st.sampled_from(vocab.normal_ids.tolist()), min_size=50, max_size=200))
    check_state(builder, q, sample)


def test_table_covers_every_token(grammars):
    """Whole-vocabulary check of a few states of each grammar (string bodies, keywords, START)."""
    rng = np.random.default_rng(0)
    for g in grammars.values():
        builder = TableBuilder(g.dfa, g.vocab)
        states = [START] + rng.choice(np.arange(2, g.dfa.n_states), 3, replace=False).tolist()
        for q in states:
            check_state(builder, q, g.vocab.normal_ids.tolist()[::7])


@pytest.mark.parametrize("path", ["numpy", "numpy-keep-dead", "python", "fused", "few"])
def test_walk_and_grouping_paths_agree_with_slow_walk(grammars, monkeypatch, path):
    """The walk's and the grouping's paths all match the slow walk: numpy (dead tokens cut by
    their second byte and dropped before grouping, or walked and grouped with the rest), plain Python (walk, then grouping), the
    one-pass Python walk-and-group of small tables after the shortcuts, and the same pass over
    every live token with no shortcut at all ("few").

    The thresholds are forced so that one path handles every table; the states are the
    first 40 of each grammar (string bodies, numbers, keywords, whitespace).
    """
    import guidewire.grammar.tabletuning as tt

    big = 10**9
    vectorised = path.startswith("numpy")
    for name, value in {"SMALL_WALK": 0 if vectorised else big, "SMALL_WALK_TOKENS": 0,
                        "SMALL_GROUP": 0 if vectorised else big,
                        "DEAD_DROP_RATIO": big if path == "numpy-keep-dead" else 1,
                        "DEAD_CUT_RATIO": 0 if path == "numpy-keep-dead" else big,
                        "SMALL_TABLE": big if path == "fused" else 0,
                        "FEW_TOKENS": big if path == "few" else 0}.items():
        monkeypatch.setattr(tt, name, value)
    rng = np.random.default_rng(1)
    for g in grammars.values():
        g.dfa.build_all(limit=5000)
        builder = TableBuilder(g.dfa, g.vocab)
        tokens = interesting_tokens(g.vocab, b'abcdefnrstul"{}[],: 0123456789.-+eE\n', rng, limit=800)
        for q in range(1, min(40, g.dfa.n_states)):
            check_state(builder, q, tokens)


def test_hub_meet_needs_an_unbroken_lexeme(smollm2, monkeypatch):
    """From the state after ``z``, ``ba`` reads as ``T2("zb")`` then ``IDENT("a")``: it enters the
    identifier hub with loop bytes only, but across a lexeme end, so it must not be read as
    from that hub (where ``ba`` is one identifier). The numpy walk is forced (it meets hubs)."""
    import guidewire.grammar.tabletuning as tt

    monkeypatch.setattr(tt, "SMALL_WALK", 0)
    monkeypatch.setattr(tt, "SMALL_WALK_TOKENS", 0)
    g = compile_lark('start: item+\nitem: T | T2 | IDENT\nT: "z"\nT2: "zb"\nIDENT: /[a-m]+/\n', smollm2)
    dfa, vocab = g.dfa, g.vocab
    dfa.build_all()
    q = dfa.step(START, ord("z"))
    builder = TableBuilder(dfa, vocab, lookup=lambda h: builder.table(h))
    ids = [t for t in vocab.normal_ids.tolist() if set(vocab.token_bytes[t]) <= set(b"abcdefghijklmz")]
    assert vocab.bytes_to_tokens()[b"ba"] in ids
    check_state(builder, q, ids)


def test_build_table_is_the_builder_table(grammars):
    g = grammars["json"]
    a, b = build_table(g.dfa, 2, g.vocab), TableBuilder(g.dfa, g.vocab).table(2)
    assert a.groups == b.groups and np.array_equal(a.masks, b.masks)


# -- random regexes and grammars ---------------------------------------------------------------
ATOMS = ["a", "b", "ab", "ba", " ", "-", r"\d", "[a-c]", "[^a]", '"', r"\s", ".", "x", "é"]


@st.composite
def regexes(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["cat", "alt", "star", "plus", "opt", "rep"]))
    a = draw(regexes(depth=depth - 1))
    if kind == "cat":
        return a + draw(regexes(depth=depth - 1))
    if kind == "alt":
        return f"(?:{a}|{draw(regexes(depth=depth - 1))})"
    return f"(?:{a})" + {"star": "*", "plus": "+", "opt": "?", "rep": "{1,3}"}[kind]


def random_lark(terms):
    # a terminal must not match the empty string (the engine refuses it): such a term gets an
    # "x" appended (nullability decided by Python's re, not the engine)
    terms = [t if re.fullmatch(t, "") is None else f"(?:{t})x" for t in terms]
    names = [f"T{i}" for i in range(len(terms))]
    defs = "\n".join(f"{n}: /{t}/" for n, t in zip(names, terms))
    return f"start: item+\nitem: {' | '.join(names)}\n{defs}\n%ignore \" \"\n"


def check_grammar(g, data, n_states=3) -> bool:
    """Compare tables with the slow walk in a few states; False when the lexer is too big to build."""
    dfa, vocab = g.dfa, g.vocab
    try:
        dfa.build_all(limit=3000)
    except GuidewireError:
        return False
    builder = TableBuilder(dfa, vocab)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    tokens = interesting_tokens(vocab, b"abcx-\" 0123456789\n\t\xc3\xa9", rng)
    states = [START] + [data.draw(st.integers(1, dfa.n_states - 1)) for _ in range(n_states)]
    for q in states:
        check_state(builder, q, tokens)
    return True


def test_random_regex_tables(smollm2):
    ran = {"tried": 0, "checked": 0}

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(regexes(), st.data())
    def run(pattern, data):
        ran["tried"] += 1
        try:
            g = compile_regex(pattern, smollm2)
        except GuidewireError:
            return
        ran["checked"] += check_grammar(g, data)

    run()
    # a refused pattern compares nothing: most must compile, or the test is vacuous
    assert ran["checked"] >= 0.8 * ran["tried"] and ran["checked"] >= 20, ran


def test_random_grammar_tables(smollm2):
    ran = {"tried": 0, "checked": 0}

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(st.lists(regexes(depth=2), min_size=1, max_size=4), st.data())
    def run(terms, data):
        ran["tried"] += 1
        try:
            g = compile_lark(random_lark(terms), smollm2)
        except GuidewireError:
            return
        ran["checked"] += check_grammar(g, data)

    run()
    assert ran["checked"] >= 0.8 * ran["tried"] and ran["checked"] >= 12, ran


@pytest.mark.gemma
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["json", "sql"]), st.data())
def test_gemma_tables(gemma3, name, data):
    g = compile_lark(builtin_grammar(name), gemma3)
    assert check_grammar(g, data, n_states=2)


def test_lazy_lexer_tables(smollm2, monkeypatch):
    """Tables built while the lexer DFA is still lazily determinised agree with the slow walk."""
    from guidewire.grammar import compiled

    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    g = compile_lark(builtin_grammar("json"), smollm2, precompute=0)   # tables would build the rows
    assert not g.dfa.row_done[:g.dfa.n_states].all()
    builder = TableBuilder(g.dfa, smollm2)
    rng = np.random.default_rng(1)
    tokens = interesting_tokens(smollm2, b'{}[]:,"\\ \n0123456789.eE+-truefalsn', rng)
    q = START
    for b in b'{"ab\\n':
        check_state(builder, q, tokens)
        q = g.dfa.step(q, b)
    check_state(builder, q, tokens)


@pytest.mark.parametrize("whole", [False, True])
def test_mirror_row_by_row_or_whole_agrees_with_slow_walk(smollm2, monkeypatch, whole):
    """The mirror copies lexer rows as walks reach them (a product lexer of a schema with several
    ``maxLength`` strings and an email format, built lazily) or all at once: tables agree with
    the slow walk at every lexer state an instance passes through, and row by row leaves rows
    uncopied (the laziness is real)."""
    import guidewire.grammar.tabletuning as tt
    from guidewire.grammar import compile_json_schema, compiled

    monkeypatch.setattr(tt, "MIRROR_ALL_ROWS", 10**9 if whole else 0)
    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 10**6 if whole else 1)
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "phone": {"type": "string", "minLength": 7, "maxLength": 20},
        "host": {"type": "string", "maxLength": 30}}, "required": ["name", "email"],
        "additionalProperties": False}
    g = compile_json_schema(schema, smollm2)
    dfa = g.dfa
    builder = TableBuilder(dfa, smollm2)
    rng = np.random.default_rng(5)
    tokens = interesting_tokens(smollm2, b'{}:,"@. -abcdefghijklmnopqrstuvwxyz0123456789', rng)
    text = b'{"name": "Ada Lovelace", "email": "ada.l@example.com", "phone": "555 0100", "host": "ex.org"}'
    q, seen = START, set()
    for b in text:
        if q not in seen:
            seen.add(q)
            check_state(builder, q, tokens)
        q = dfa.step(q, b)
        if q == DEAD:   # a lexeme ended: restart, as the lexer does
            q = dfa.step(START, b)
        assert q != DEAD
    assert len(seen) >= 20
    copied = int(builder._copied[:dfa.n_states].sum())
    if whole:
        assert builder._rows is not None and copied == dfa.n_states
    else:
        assert builder._rows is None and 0 < copied < dfa.n_states


def test_hub_reuse_matches_slow_walk(smollm2):
    """Tables that reuse a string hub's table for shared first bytes read every token as the walk does."""
    from guidewire.grammar import compile_json_schema

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "nickname": {"type": "string"},
                                               "id": {"type": "string", "format": "uuid"}}}
    g = compile_json_schema(schema, smollm2)  # additionalProperties: any key string is alive too
    builder = g._builder
    builder.admit = None    # whole tables here (the grammar's own prune groups no parser state allows)
    reused = []
    original = builder._reusable_hubs

    def spy(q, row):
        out = original(q, row)
        reused.extend(h for h, _ in out)
        return out

    builder._reusable_hubs = spy
    rng = np.random.default_rng(0)
    tokens = interesting_tokens(smollm2, b'"{}:,0123456789abcdefnikmeid-\\ \xc3\xa9', rng, limit=3000)
    tokens += rng.choice(smollm2.normal_ids, 4000, replace=False).tolist()
    for prefix in (b'{"', b'{"n', b'{"ni', b'{"nick', b'{"i', b'{"id": "1', b'{"id": "12345678-ab'):
        state = g.step_bytes(g.earley.initial, START, prefix)
        assert state is not None
        check_state(builder, state[1], tokens)
    assert reused, "no table reused a hub: the fast path went untested"


def slow_mask_ids(g, s, q):
    """Allowed ordinary tokens at ``(s, q)`` by stepping each token's bytes (the slow reference)."""
    return {t for t in g.vocab.normal_ids.tolist() if g.step_bytes(s, q, g.vocab.token_bytes[t]) is not None}


def test_inherited_masks_match_step_bytes(smollm2):
    """Masks of tables that inherit tokens (from a hub: first- and second-byte meets; from START:
    whitespace counters) equal the per-token walk."""
    from guidewire.core import bitmask_to_ids
    from guidewire.grammar import compile_json_schema

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "nickname": {"type": "string"},
                                               "age": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"enum": ["alpha", "beta"]}}}}
    patterned = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z0-9 ]*$"},
                                                  "comment": {"type": "string"},
                                                  "title": {"type": "string", "pattern": "^[A-Z][a-z]*$"}},
                 "patternProperties": {"^x-[a-z]+$": {"type": "string", "pattern": "^[a-z]*$"}},
                 "additionalProperties": {"type": "integer"}}
    cases = [(schema, (b'{"', b'{"n', b'{"na', b'{"nick', b'{"a', b'{"x', b'{"name": "J', b'{"tags": ["al',
                       b'{"age": 1, "n', b'{"age": ', b'{"age":   ', b'{"age": 1 ',
                       b'{"age":' + b' ' * 22, b'{"age":' + b' ' * 23)),
             (patterned, (b'{"c', b'{"co', b'{"com', b'{"x', b'{"x-', b'{"x-ab', b'{"code": "AB',
                          b'{"x-a": "b', b'{"comment": "x',
                          b'{"title": "'))]
    ordinary = set(smollm2.normal_ids.tolist())
    inherited = 0
    from_start = 0
    for spec, prefixes in cases:
        g = compile_json_schema(spec, smollm2)
        for prefix in prefixes:
            s, q = g.step_bytes(g.earley.initial, START, prefix)
            table = g.table(q)
            inherited += sum(int(bitmask_to_bool(r, smollm2.vocab_size).sum()) for _h, r in table.inherit)
            from_start += sum(int(bitmask_to_bool(r, smollm2.vocab_size).sum()) for h, r in table.inherit
                              if h == START)
            got = set(bitmask_to_ids(g.mask(s, q), smollm2.vocab_size).tolist()) & ordinary
            assert got == slow_mask_ids(g, s, q), prefix
    assert inherited > 1000, "no table inherited a hub's tokens: the fast path went untested"
    assert from_start > 1000, "no whitespace state inherited START's tokens: the fast path went untested"


def test_depth_bounded_lexer_classes_keep_masks_exact(smollm2):
    """Counter states that no token can tell apart share a table; masks stay exact near the bound."""
    from guidewire.core import bitmask_to_ids
    from guidewire.grammar import compile_json_schema

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 150},
                                               "b": {"type": "string", "maxLength": 3}}}
    g = compile_json_schema(schema, smollm2)
    assert g._rep.size, "the lexer should be built eagerly"
    ordinary = set(smollm2.normal_ids.tolist())
    reps = {}
    for n in (0, 1, 5, 30, 60, 66, 68, 69, 70, 71, 72, 75, 100, 140, 149, 150):
        s, q = g.step_bytes(g.earley.initial, START, b'{"a": "' + b" " * n)
        reps[n] = g._canon(q)
        got = set(bitmask_to_ids(g.mask(s, q), smollm2.vocab_size).tolist()) & ordinary
        assert got == slow_mask_ids(g, s, q), n
    # the longest SmolLM2 token has 81 bytes: positions more than that far from the bound merge
    assert reps[5] == reps[30] == reps[60] and len({reps[n] for n in (60, 71, 72, 75, 100)}) == 5


@pytest.mark.parametrize("pattern", ["[a-z]{3}[a-c]{3}x", "[ab]{2}[a-z]{4}-", "[a-z]{2,9}", "(?:[a-z][0-9])+",
                                     "[a-z]{5}[a-z0-9]{3}"])
def test_counter_chain_tokens_match_slow_walk(smollm2, pattern, monkeypatch):
    """Tokens resolved along a chain of counter states (never walked) read as the per-token walk,
    also where the byte set the chain runs on narrows or widens part way."""
    g = compile_regex(pattern, smollm2)
    g.dfa.build_all()
    builder = TableBuilder(g.dfa, smollm2)
    resolved = []
    chain = TableBuilder._counter_chain

    def spy(self, *args):
        out = chain(self, *args)
        if out[3] is not None:
            resolved.append(out[3][0].size)
        return out

    monkeypatch.setattr(TableBuilder, "_counter_chain", spy)
    # candidates dead at their second byte are gone before the chain: try it on however few remain
    import guidewire.grammar.tabletuning as tt
    monkeypatch.setattr(tt, "CHAIN_MIN_TOKENS", 1)
    rng = np.random.default_rng(7)
    tokens = interesting_tokens(smollm2, b"abcdefghijklmnopqrstuvwxyz0123456789-", rng, limit=6000)
    for q in range(1, g.dfa.n_states):
        check_state(builder, q, tokens)
    assert sum(resolved) > 0, "no token was resolved along a chain: the fast path went untested"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 256).flatmap(lambda n: st.sets(st.integers(0, 255), min_size=n, max_size=n)))
def test_first_byte_row_matches_a_scan_of_the_vocabulary(smollm2, first_bytes):
    """The memoised first-byte rows (union, complement or lookup, by the set's size) equal a plain
    scan; so do the rows built without the memo, on the compiled path and on the numpy one."""
    from guidewire.grammar import native, vocabindex
    from guidewire.grammar.tokentable import first_byte_row

    sel = np.zeros(256, dtype=bool)
    sel[list(first_bytes)] = True
    want = {t for t in smollm2.normal_ids.tolist() if smollm2.token_bytes[t][0] in first_bytes}
    rows = [first_byte_row(smollm2, sel)]
    for on in ([False, True] if native.available() else [False]):
        old = native.set_enabled(on)
        try:
            rows.append(vocabindex._first_byte_row(smollm2, sel))
        finally:
            native.set_enabled(old)
    for row in rows:
        assert set(np.flatnonzero(bitmask_to_bool(row, smollm2.vocab_size)).tolist()) == want


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sets(st.integers(0, 255), max_size=256), st.booleans())
def test_tails_within_matches_a_scan_of_the_vocabulary(smollm2, byte_set, ascii_letters):
    """The memoised "every byte after the first is in B" flags equal a plain scan of the tokens."""
    from guidewire.grammar.tokentable import tails_within, vocab_layout

    if ascii_letters:     # a set that many tokens fall inside
        byte_set = byte_set | set(b"abcdefghijklmnopqrstuvwxyz")
    sel = np.zeros(256, dtype=bool)
    sel[list(byte_set)] = True
    layout = vocab_layout(smollm2)
    got = tails_within(smollm2, sel)
    want = [all(b in byte_set for b in smollm2.token_bytes[t][1:]) for t in layout.ids.tolist()]
    assert got.tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=400), st.integers(0, 10**6), st.booleans())
def test_distinct_values_match_a_set(values, offset, spread):
    """The distinct-value helper (set, single-value and counting paths) is ``sorted(set(...))``."""
    from guidewire.grammar.tokentable import _distinct

    arr = np.array(values, dtype=np.int64) * (1000 if spread else 1) + offset
    assert _distinct(arr) == sorted(set(arr.tolist()))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.booleans(), max_size=300))
def test_admitted_numbers_counts_the_admitted_groups(admitted):
    """Per group its index among the admitted ones (-1 if refused), and a last -1 for dead tokens."""
    from guidewire.grammar.tablearrays import admitted_numbers

    want, k = [], 0
    for ok in admitted:
        want.append(k if ok else -1)
        k += ok
    assert admitted_numbers(admitted).tolist() == want + [-1]


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built")
def test_building_rows_ahead_keeps_tables_and_saves_walk_rounds(smollm2, monkeypatch):
    """The compiled walk builds the lexer rows its stopped tokens will reach, ahead of them
    (``_build_ahead``): on a lazily built product lexer the tables read the same with it and
    without it (``BUILD_AHEAD_LAYERS`` 0) at every lexer state an instance passes through, the
    lexer ends with the same states and rows, and the walk goes back to Python for rows fewer
    times."""
    import guidewire.grammar.tabletuning as tt
    from guidewire.grammar import compile_json_schema, compiled

    mod = native.module()
    if mod is None:
        pytest.skip("the compiled walk is switched off on this path")
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "host": {"type": "string", "format": "hostname", "maxLength": 30}},
        "required": ["name", "email"], "additionalProperties": False}
    text = b'{"name": "Ada Lovelace", "email": "ada.l@example.com", "host": "ex.example.org"}'
    monkeypatch.setattr(tt, "MIRROR_ALL_ROWS", 0)
    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    # what is checked is tables and rounds, not time: a loaded CI machine once ran one step past
    # the default 5 s wall-clock limit here
    monkeypatch.setenv("GUIDEWIRE_STEP_SECONDS", "120")

    class Counting:
        rounds = 0

        def __getattr__(self, name):
            return getattr(mod, name)

        def walk(self, *args):
            Counting.rounds += 1
            return mod.walk(*args)

    seen = {}
    for layers in (0, tt.BUILD_AHEAD_LAYERS):
        monkeypatch.setattr(tt, "BUILD_AHEAD_LAYERS", layers)
        Counting.rounds = 0
        monkeypatch.setattr(native, "_compiled", Counting())
        dfa = compile_json_schema(schema, smollm2).dfa
        builder = TableBuilder(dfa, smollm2)
        got, q = [], START
        for b in text:
            got.append({t: (tuple(dfa.term_sets[x] for x in lexemes), alive)
                        for t, (lexemes, alive) in readings(builder, q).items()})
            q = dfa.step(q, b)
            if q == DEAD:
                q = dfa.step(START, b)
        monkeypatch.setattr(native, "_compiled", mod)
        assert builder._rows is None     # the mirror stayed row by row (the laziness is real)
        seen[layers] = (got, Counting.rounds, (dfa.n_states, dfa.rows_built))
    (plain, plain_rounds, plain_lexer), (ahead, ahead_rounds, ahead_lexer) = seen[0], seen[tt.BUILD_AHEAD_LAYERS]
    assert len(plain) == len(text) and sum(len(r) for r in plain) > 10_000
    assert ahead == plain
    assert ahead_rounds < plain_rounds, (ahead_rounds, plain_rounds)
    # here no row the walk would not build: the same lexer states and rows in the end (so the same
    # work), only built in fewer, larger batches
    assert ahead_lexer == plain_lexer and plain_lexer[1] > 100, (ahead_lexer, plain_lexer)


def test_rows_are_built_ahead_only_far_from_the_limits(smollm2, monkeypatch):
    """``_room_ahead``: rows past the first layer are built ahead only while the lexer is within
    half its state and byte bounds and the step has half its work budget left."""
    from guidewire.core.limits import Fuel
    from guidewire.grammar import compiled

    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    dfa = compile_regex(r"[a-z]{1,12}@[a-z]{2,9}\.(com|org)", smollm2).dfa
    builder = TableBuilder(dfa, smollm2)
    dfa.fuel, dfa.max_bytes = None, None
    dfa.max_states = 2 * dfa.n_states
    assert builder._room_ahead()
    dfa.max_states = 2 * dfa.n_states - 1
    assert not builder._room_ahead()
    dfa.max_states = 10**6
    dfa.max_bytes = 2 * dfa.nbytes - 1
    assert not builder._room_ahead()
    dfa.max_bytes = 2 * dfa.nbytes
    dfa.fuel = Fuel(1000, None)
    assert builder._room_ahead()
    dfa.fuel.spend(500)
    assert builder._room_ahead()
    dfa.fuel.spend(1)
    assert not builder._room_ahead()


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built")
@pytest.mark.parametrize("seed", [0, 1, 2, 15, 22])
def test_compiled_build_ahead_builds_the_rows_of_the_numpy_layers(smollm2, monkeypatch, seed):
    """``_build_ahead`` in C (``ahead``: rounds up to the next rows not built) and in numpy (a
    pass per byte) from the same stopped tokens on two copies of a lazily built product lexer.
    Building ahead is a prefetch, and the two orders see rows that other tokens built at different
    times, so a token may stop at ``BUILD_AHEAD_IDLE`` in one and not the other (the built sets
    differ by a few states for seeds 15 and 22). What must hold: the rows the tokens stopped at
    are built, every state handed to the mirror has its row, most rows are built by both, and a
    state built by both has the same row (targets compared by their NFA sets)."""
    from guidewire.grammar import compile_json_schema, compiled
    from guidewire.grammar.vocabindex import vocab_layout

    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 40},
        "host": {"type": "string", "format": "hostname", "maxLength": 30},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,5}$"}}, "additionalProperties": False}
    rng = np.random.default_rng(seed)
    lay = vocab_layout(smollm2)
    toks = rng.choice(lay.ids.size, size=3000, replace=False)
    runs = []
    for use_c in (False, True):
        dfa = compile_json_schema(schema, smollm2).dfa
        builder = TableBuilder(dfa, smollm2)
        q0 = dfa.step(START, ord('"'))     # a string's first byte: every string terminal alive
        state = np.full(toks.size, q0, dtype=np.int64)
        ptr = lay.starts.take(toks).astype(np.int64)
        got = builder._build_ahead(state, ptr, np.zeros(toks.size, dtype=np.int64),
                                   native.module() if use_c else None)
        assert dfa.row_done[q0] and all(dfa.row_done[s] for s in set(got.tolist())), use_c
        key = dfa.nfa_states      # states are numbered in the order rows are built: compare their NFA sets
        rows = {key(s): tuple(key(int(t)) if t > DEAD else int(t) for t in dfa.trans[s])
                for s in range(1, dfa.n_states) if dfa.row_done[s]}
        runs.append(rows)
    common = runs[0].keys() & runs[1].keys()
    assert len(common) > 50, len(common)        # rows were really built ahead, by both
    assert len(common) >= 0.9 * max(len(runs[0]), len(runs[1])), (len(common), len(runs[0]), len(runs[1]))
    differ = [k for k in common if runs[0][k] != runs[1][k]]
    assert not differ, f"{len(differ)} states built by both have different rows"


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built")
def test_ahead_refuses_bad_arrays():
    """``ahead`` gets typed errors for mismatched arrays, an unbuilt start row and bad states."""
    c = native._compiled
    trans = np.zeros((3, 256), dtype=np.int32)
    trans[1, ord("a")] = 2
    done, emit = np.array([1, 1, 0], dtype=bool), np.array([-1, -1, 0], dtype=np.int64)
    flat = np.array([ord("a"), 256], dtype=np.uint16)

    def call(q=1, start=1, n=1, done=done):     # n: the length of the layer array (the others have 1)
        arrs = [np.full(1, q, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                np.full(1, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)]
        return c.ahead(trans, done, emit, flat, np.arange(1, dtype=np.int64), *arrs, 2, 4, 64, 0, start)

    passed, stopped = call()
    assert np.frombuffer(stopped, dtype=np.int64).tolist() == [0]      # stopped at state 2 (row not built)
    assert np.frombuffer(passed, dtype=np.int64).size == 0
    with pytest.raises(ValueError, match="sizes"):
        call(n=2)
    with pytest.raises(ValueError, match="start"):
        call(start=2)
    with pytest.raises(IndexError, match="state"):
        call(q=7)


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built")
def test_compiled_build_ahead_counts_built_rows_as_idle(monkeypatch):
    """Tokens stopped at a row built already (built by a byte walk, not copied into the mirror)
    count it as an idle byte in C as in numpy: the same rows are built ahead."""
    from guidewire.core.vocab import Vocab
    from guidewire.grammar import compile_json_schema, compiled
    from guidewire.grammar.vocabindex import vocab_layout

    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    toks = [b""] + [bytes([b]) for b in range(256)] + [b"a" * 12]
    vocab = Vocab(tuple(toks), frozenset({0}), frozenset({0}), len(toks), "idle-test")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}},
              "additionalProperties": False}
    lay = vocab_layout(vocab)
    sel = np.array([i for i, t in enumerate(lay.ids.tolist()) if len(toks[t]) > 10])
    runs = []
    for use_c in (False, True):
        dfa = compile_json_schema(schema, vocab).dfa
        builder = TableBuilder(dfa, vocab)
        q0 = q = dfa.step(START, ord('"'))
        for _ in range(5):          # rows built by a byte walk, not copied into the mirror
            q = dfa.step(q, ord("a"))
        state = np.full(sel.size, q0, dtype=np.int64)
        got = builder._build_ahead(state, lay.starts.take(sel).astype(np.int64), np.zeros(sel.size, dtype=np.int64),
                                   native.module() if use_c else None)
        built = {dfa.nfa_states(s) for s in range(1, dfa.n_states) if dfa.row_done[s]}
        runs.append((dfa.n_states, built, {dfa.nfa_states(s) for s in got.tolist()}))
    assert runs[0] == runs[1] and sel.size == 1


def test_a_hub_equivalent_to_a_table_being_built_is_not_reused(smollm2, monkeypatch, nfa_string_automata):
    """Key strings of a schema with two unanchored key patterns beside free keys: the lexer's hubs
    fall into classes of equivalent states, and a hub's table reuses other hubs' tables. One
    equivalent to a table being built is not reused (its lookup built that very table again, inside
    itself: up to three levels deep before); the masks are the vectorised build's."""
    schema = {"type": "object", "additionalProperties": True,
              "properties": {"all": {"type": "object"}, "hosts": {"type": ["object", "string"]}},
              "patternProperties": {"[a-zA-Z-_0-9]": {"type": "object"},
                                    "[a-zA-Z.-_0-9]": {"type": ["object", "null"]}}}
    spelled = {b: i for i, b in enumerate(smollm2.token_bytes) if b in (b'{', b'"', b'a', b'l', b'x', b'.', b' ')}
    path = [spelled[b] for b in (b'{', b'"', b'a', b'l', b'l', b' ', b'.', b'x')]

    def masks():
        g = compile_json_schema(schema, smollm2)
        bm = allocate_token_bitmask(1, smollm2.vocab_size)
        m, out = g.matcher(), []
        for tok in path:
            m.fill_bitmask(bm, 0)
            out.append(bm[0].copy())
            assert m.advance(tok)
        return g, out

    active, nested, built, refused = [], [], [], []
    original = TableBuilder._table
    planned = TableBuilder._merge_plan

    def spy_plan(self, q, reused):
        busy = {self.canon(b) for b in self._busy}
        refused.extend(h for h, _first in reused if self.canon(h) in busy)
        return planned(self, q, reused)

    monkeypatch.setattr(TableBuilder, "_merge_plan", spy_plan)

    def watched(self, q):
        nested.extend([q] if q in active else [])
        built.append(q)
        active.append(q)
        try:
            return original(self, q)
        finally:
            active.pop()

    monkeypatch.setattr(TableBuilder, "_table", watched)
    g, with_reuse = masks()
    assert len(set(g._rep_list)) < len(g._rep_list)     # some states share a class
    assert sum(g._builder.hub[q] >= 0 for q in set(built)) >= 3, built
    assert not nested, nested
    assert refused, "no reuse of a hub equivalent to a table being built was refused"
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", lambda self, q, row, *base: None)
    _g, vectorised = masks()
    assert len(with_reuse) == len(vectorised) == len(path)
    for a, b in zip(with_reuse, vectorised):
        assert np.array_equal(a, b)
