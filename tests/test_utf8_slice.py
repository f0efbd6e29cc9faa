"""UTF-8 slices of the token-table build against independent oracles (hypothesis).

The per-token UTF-8 index is checked against Python's strict UTF-8 decoder; the slice of an
ASCII set against a scan of the tokens; and tables built with the slice against the slow
byte-by-byte walk (``walk_token``) and against tables built with the slice switched off, on
lexers where non-ASCII characters loop on a state and on lexers where some do not.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guidewire.grammar.tabletuning as tuning
from guidewire.core import Vocab, bitmask_to_bool
from guidewire.grammar import compile_lark
from guidewire.grammar.lexer import DEAD, START
from guidewire.grammar.tokentable import TableBuilder, walk_token
from guidewire.grammar.vocabindex import utf8_slice, utf8_tokens, vocab_layout

# every test here runs on both table-builder paths: compiled inner loops and the numpy reference
pytestmark = pytest.mark.usefixtures("grammar_path")

ALPHABET = ["a", "b", "z", "1", " ", '"', "\\", "\n", "é", "٣", "ڠ", "ü", "€", "中", "😀", "\u0800", "\ud7ff", "\U0010ffff"]
RAW = [b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf5", b"\xff", b"\xe0\x80\x80"]


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _vocab(tokens) -> Vocab:
    toks = [b"<eos>"] + list(dict.fromkeys(t for t in tokens if t))
    return Vocab(tuple(toks), frozenset({0}), frozenset({0}), len(toks) + 7, "utf8-slice")


_pieces = st.lists(st.one_of(st.sampled_from(ALPHABET).map(str.encode), st.sampled_from(RAW)), min_size=1, max_size=5)
_tokens = st.lists(_pieces.map(b"".join), min_size=1, max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_tokens)
def test_utf8_index_matches_the_strict_decoder(tokens):
    """Whole-UTF-8 flags and ASCII byte sets equal Python's decoder and a scan, on mixed byte soup."""
    vocab = _vocab(tokens)
    layout = vocab_layout(vocab)
    index = utf8_tokens(vocab)
    ids = layout.ids.tolist()
    assert index.whole.tolist() == [_decodes(vocab.token_bytes[t]) for t in ids]
    for i, t in enumerate(ids):
        want = sum(1 << b for b in set(vocab.token_bytes[t]) if b < 128)
        assert int(index.ascii_bits[0, i]) | (int(index.ascii_bits[1, i]) << 64) == want


def test_utf8_index_on_a_real_vocabulary(smollm2):
    """The same on all of SmolLM2's tokens (byte-level BPE: many split characters)."""
    layout = vocab_layout(smollm2)
    want = [_decodes(smollm2.token_bytes[t]) for t in layout.ids.tolist()]
    got = utf8_tokens(smollm2).whole.tolist()
    assert got == want
    assert 0 < want.count(False) < len(want)        # both kinds occur


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sets(st.integers(0, 127), max_size=128), st.sets(st.integers(0xC2, 0xF4), max_size=51))
def test_utf8_slice_matches_a_scan(smollm2, ascii_set, leads):
    """A slice holds exactly the whole-UTF-8 tokens whose ASCII bytes and lead bytes lie in the set."""
    ascii_set = ascii_set | leads
    sel = np.zeros(256, dtype=bool)
    sel[list(ascii_set)] = True
    sl = utf8_slice(smollm2, sel)
    layout = vocab_layout(smollm2)
    want = [_decodes(d) and all(0x80 <= b < 0xC0 or b in ascii_set for b in d)
            for d in map(smollm2.token_bytes.__getitem__, layout.ids.tolist())]
    assert sl.member.tolist() == want
    row = set(np.flatnonzero(bitmask_to_bool(sl.row, smollm2.vocab_size)).tolist())
    assert row == set(layout.ids[np.array(want, dtype=bool)].tolist())


def test_utf8_slice_buckets_match_a_scan(smollm2):
    """The per-first-byte view of a slice (non-members, member counts by characters, most characters)
    equals a scan of the tokens, for a string-body class and a digits class."""
    layout = vocab_layout(smollm2)
    checked = 0
    for chars in (set(range(32, 128)) - {ord('"'), ord("\\")} | set(range(0xC2, 0xF5)), set(b"0123456789")):
        sel = np.zeros(256, dtype=bool)
        sel[list(chars)] = True
        sl = utf8_slice(smollm2, sel)
        toks = [smollm2.token_bytes[t] for t in layout.ids.tolist()]
        member = [_decodes(d) and all(0x80 <= b < 0xC0 or b in chars for b in d) for d in toks]
        n_chars = [len(d.decode("utf-8")) if m else 0 for d, m in zip(toks, member)]
        assert sl.outside.tolist() == [i for i, m in enumerate(member) if not m]
        width = sl.by_first.shape[1]
        for b in range(256):
            mine = [k for d, m, k in zip(toks, member, n_chars) if m and d[0] == b]
            assert sl.most[b] == max(mine, default=0)
            assert sl.by_first[b, -1] == len(mine)
            for k in range(width - 1):
                assert sl.by_first[b, k] == sum(1 for c in mine if c < k), (b, k)
            checked += len(mine)
    assert checked > 10_000


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.booleans(), min_size=1, max_size=300), st.data())
def test_slice_count_and_drop_match_python(member, data):
    """:func:`slice_count` and :func:`slice_drop` (C when built, numpy otherwise) against plain
    Python on random members, character counts, candidates and limits."""
    from guidewire.grammar.tableslices import slice_count, slice_drop

    n = len(member)
    chars = data.draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    cand = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    limit = data.draw(st.sampled_from([1, 2, 5, 41, 1 << 62]))
    m, k, c = np.array(member), np.array(chars, dtype=np.int64), np.array(cand, dtype=np.int64)
    short = [t for t in cand if member[t] and chars[t] < limit]
    assert slice_count(m, k, c, limit) == (len(short), max((chars[t] for t in short), default=0))
    first, ptr = c * 3 + 1, c * 7 + 2
    got = slice_drop(m, k, limit, c, first, ptr)
    keep = [t for t in cand if t not in set(short)]
    assert [a.tolist() for a in got] == [keep, [t * 3 + 1 for t in keep], [t * 7 + 2 for t in keep]]


def test_native_slice_helpers_refuse_bad_arrays():
    """Out-of-range candidates and mismatched arrays raise typed errors in the C helpers."""
    from guidewire.grammar import native

    compiled = native.module()
    if compiled is None:
        pytest.skip("the compiled module is not built here")
    m, k = np.ones(4, dtype=bool), np.ones(4, dtype=np.int64)
    with pytest.raises(IndexError):
        compiled.slice_scan(m, k, np.array([4], dtype=np.int64), 9)
    with pytest.raises(ValueError):
        compiled.slice_scan(m, np.ones(3, dtype=np.int64), np.array([0], dtype=np.int64), 9)
    with pytest.raises(TypeError):
        compiled.slice_scan(m, k.astype(np.int32), np.array([0], dtype=np.int64), 9)
    c = np.array([0, 1], dtype=np.int64)
    with pytest.raises(ValueError):
        compiled.slice_drop(m, k, 9, c, c, c, np.empty(1, dtype=np.int64), c.copy(), c.copy())


ASCII_SOUGHT = r'start: STR+' + '\n' + r'STR: /"[^"]*[!#-~][^"]*"/'

# lexers where every character of a class steps a state along a chain (a string body that loops,
# maxLength counters, products of several terminals), then lexers where some non-ASCII character
# breaks the chain (excluded, or the start of another terminal), so no slice may take it
CHAINED = [
    r'start: STR+' + '\n' + r'STR: /"(?:[^"\\\x00-\x1f]|\\["\\n])*"/',
    r'start: (WORD | SP)+' + '\n' + r'WORD: /[a-z\u0080-\U0010ffff]+/' + '\n' + r'SP: " "',
    r'start: STR' + '\n' + r'STR: /"[^"]*"/ | /"ab[^"]*"/',
    r'start: STR+' + '\n' + r'STR: /"[^"]{0,3}"/',
    r'start: A | B' + '\n' + r'A: /"[^"]{2,5}"/' + '\n' + r'B: /"[^"]{0,9}x/',
    r'start: A | B' + '\n' + r'A: /"[^"]{0,30}"/' + '\n' + r'B: /"[^"]*"/',
    r'start: STR+' + '\n' + r'STR: /"[^"]{3}é[a-zé]*"/',
    r'start: A | B' + '\n' + r'A: /"[^"]*"/' + '\n' + r'B: /"\d+x/',
    # an unanchored ASCII class: non-ASCII text keeps the state, most ASCII bytes leave it (the
    # class is built around the non-ASCII successor, see test_a_class_around_non_ascii_text)
    ASCII_SOUGHT,
    # a sought class whose lead byte is shared with characters outside it (é sought, ü not)
    r'start: STR+' + '\n' + r'STR: /"[^"]*[a-zé][^"]*"/',
    # a letter first leaves for a loop, a letter second for a string of at most three characters:
    # after "1", the letter's state is not the loop's (no product past one character)
    r'start: STR+' + '\n' + r'STR: /"(?:[a-z][^"]*|[^a-z"][a-z][^"]?)"/',
]
BROKEN = [
    r'start: STR+' + '\n' + r'STR: /"[^"é]*"/',
    r'start: STR+' + '\n' + r'STR: /"[^"\u4e00-\u9fff]*"/ | /"中文"/',
    r'start: A | B' + '\n' + r'A: /"[^"]{0,4}"/' + '\n' + r'B: /"éé[a-z]*"/',
]


@pytest.fixture(scope="module")
def soup():
    rng = np.random.default_rng(7)
    toks = []
    for _ in range(3000):
        parts = rng.choice(len(ALPHABET) + len(RAW), rng.integers(1, 6))
        toks.append(b"".join(ALPHABET[k].encode() if k < len(ALPHABET) else RAW[k - len(ALPHABET)]
                             for k in parts.tolist()))
    return _vocab(toks + [a.encode() for a in ALPHABET] + RAW)


def _readings(builder, q):
    """Token id -> (lexemes, alive) of the groups of ``q``'s table (tokens in two groups fail)."""
    table = builder.table(q)
    out = {}
    for gi, (lexemes, alive) in enumerate(table.groups):
        for t in np.flatnonzero(bitmask_to_bool(table.masks[gi], builder.vocab.vocab_size)).tolist():
            assert t not in out, "a token sits in two groups"
            out[t] = (tuple(lexemes), alive)
    return out, table


@pytest.mark.parametrize("grammar,chained", [(g, True) for g in CHAINED] + [(g, False) for g in BROKEN])
def test_tables_with_slices_match_the_slow_walk(soup, monkeypatch, grammar, chained):
    """Every state's groups agree with ``walk_token`` and with the same tables built without the
    slice; the slice takes tokens on the chained lexers. On the broken ones it may still fire on
    states the breaking character cannot reach, so there only the agreement is asserted."""
    monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tuning, "SLICE_MIN_NON_ASCII", 0)
    g = compile_lark(grammar, soup)
    g.dfa.build_all(limit=2000)
    fired = _every_state_reads_as_walked(g, soup, monkeypatch)
    if chained:
        assert fired > 0


# JSON Schema strings before an unanchored pattern of one class has matched (their character
# automata are minimal DFAs, so a lexer state is a count and "matched yet"): with a counter that
# runs out, with none, with a minimum, one whose unmet pattern dies at the counter's end
PRODUCTS = [
    {"type": "string", "maxLength": 3, "pattern": "[a-z]"},
    {"type": "string", "pattern": "[a-z]"},
    {"type": "string", "minLength": 2, "maxLength": 6, "pattern": "[a-zé]+"},
    {"type": "string", "minLength": 4, "maxLength": 4, "pattern": "[0-9a-f]+"},
    {"type": "object", "properties": {"k": {"type": "string", "maxLength": 3, "pattern": "[b1]"}},
     "required": ["k"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", PRODUCTS)
def test_tables_with_two_chain_slices_match_the_slow_walk(soup, monkeypatch, schema):
    """Where a state's slice is a product of two chains (:meth:`_product_plan`), every state's
    groups agree with ``walk_token`` and with tables built without slices, on the vectorised build
    and on the trie walk, and some state did take a product."""
    from guidewire.grammar import compile_json_schema

    made = []
    original = TableBuilder._product_plan

    def counting(self, *args):
        got = original(self, *args)
        made.append(got is not None)
        return got

    monkeypatch.setattr(TableBuilder, "_product_plan", counting)
    monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tuning, "SLICE_MIN_NON_ASCII", 0)
    g = compile_json_schema(schema, soup)
    g.dfa.build_all(limit=4000)
    fired = 0
    for trie_nodes in (tuning.TRIE_SLICED_NODES, 0):
        monkeypatch.setattr(tuning, "TRIE_SLICED_NODES", trie_nodes)
        fired += _every_state_reads_as_walked(g, soup, monkeypatch)
    assert fired > 0 and sum(made) >= 2


def _every_state_reads_as_walked(g, soup, monkeypatch) -> int:
    """Check every state's table against ``walk_token`` and the table built without slices;
    returns how many tokens the slices took."""
    fired = 0
    for q in range(1, g.dfa.n_states):
        with_slice = TableBuilder(g.dfa, soup)
        got, table = _readings(with_slice, q)
        fired += with_slice._slice_hits.get(q, 0)
        monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 10**9)
        want_tables, _ = _readings(TableBuilder(g.dfa, soup), q)
        monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 1)
        monkeypatch.setattr(tuning, "SLICE_MIN_NON_ASCII", 0)
        assert got == want_tables, q
        restarted = set()
        if table.restart_mask is not None:
            restarted = set(np.flatnonzero(bitmask_to_bool(table.restart_mask, soup.vocab_size)).tolist())
        inherited = set()
        for _h, row in table.inherit:
            inherited |= set(np.flatnonzero(bitmask_to_bool(row, soup.vocab_size)).tolist())
        for t in soup.normal_ids.tolist():
            if t in restarted or t in inherited:
                continue
            lexemes, fin = walk_token(g.dfa, q, soup.token_bytes[t])
            if fin == DEAD or not g.dfa.alive[fin]:
                assert t not in got, (q, soup.token_bytes[t])
            else:
                assert got.get(t) == (tuple(lexemes), g.dfa.alive[fin]), (q, soup.token_bytes[t])
    return fired


def _count_bucket_slices(monkeypatch):
    """Count the tables whose slice was taken from first-byte buckets (a one-item list)."""
    count = [0]
    original = TableBuilder._utf8_slice_buckets

    def counting(self, *args):
        got = original(self, *args)
        count[0] += got is not None
        return got

    monkeypatch.setattr(TableBuilder, "_utf8_slice_buckets", counting)
    return count


@pytest.mark.parametrize("grammar,buckets", [(CHAINED[3], True), (CHAINED[4], True), (CHAINED[0], False)])
def test_which_slice_path_runs(soup, monkeypatch, grammar, buckets):
    """A counter chain with no hub among its successors is sliced from first-byte buckets (a member
    too long for ``{0,3}`` is dead, left out without a walk); a string body entered through a hub
    from made candidates. Either way the tables equal those built without slices (above)."""
    monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tuning, "SLICE_MIN_NON_ASCII", 0)
    g = compile_lark(grammar, soup)
    g.dfa.build_all(limit=2000)
    count = _count_bucket_slices(monkeypatch)
    builder = TableBuilder(g.dfa, soup)
    for q in range(1, g.dfa.n_states):
        builder.table(q)
    assert sum(builder._slice_hits.values()) > 0
    assert (count[0] > 0) == buckets


@pytest.mark.parametrize("grammar", CHAINED)
def test_slices_on_a_lazy_lexer_give_the_eager_masks(soup, monkeypatch, grammar):
    """The slice's checks determinise lexer rows on a lazily built lexer; the masks after a few
    prefixes equal those of the fully built lexer, and the slice took tokens on the way."""
    import guidewire.grammar.compiled as compiled

    monkeypatch.setattr(tuning, "SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tuning, "SLICE_MIN_NON_ASCII", 0)
    monkeypatch.setattr(tuning, "TRIE_NODES", 0)    # the vectorised build, slices and all (not the trie walk,
    monkeypatch.setattr(tuning, "TRIE_SLICED_NODES", 0)     # plain or sliced)
    eager = compile_lark(grammar, soup)
    monkeypatch.setattr(compiled, "EAGER_LEXER_WORK", 0)
    lazy = compile_lark(grammar, soup)
    assert eager._rep.size and not lazy._rep.size
    checked = 0
    for prefix in ('"', '"a', '"é', '"ab', '"abé', "ab", "é"):
        r1 = eager.step_bytes(eager.earley.initial, 1, prefix.encode())
        r2 = lazy.step_bytes(lazy.earley.initial, 1, prefix.encode())
        assert (r1 is None) == (r2 is None), prefix
        if r1 is None:
            continue
        (s1, q1), (s2, q2) = r1, r2
        assert np.array_equal(eager.mask(s1, q1), lazy.mask(s2, q2)), prefix
        checked += 1
    assert checked >= 2
    assert sum(lazy._builder._slice_hits.values()) > 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_tokens, st.sets(st.integers(0, 127), max_size=128), st.sets(st.integers(0xC2, 0xF4), max_size=51))
def test_every_part_of_a_slice_matches_a_scan(tokens, ascii_set, leads):
    """On byte soup, a fresh vocabulary per example (so each path builds its own slice, none
    memoised): members, their row, the rows by characters, the non-members, the per-first-byte
    counts and the most characters all equal a scan with Python's decoder."""
    vocab = _vocab(tokens)
    chars = ascii_set | leads
    sel = np.zeros(256, dtype=bool)
    sel[list(chars)] = True
    sl = utf8_slice(vocab, sel)
    layout = vocab_layout(vocab)
    toks = [vocab.token_bytes[t] for t in layout.ids.tolist()]
    member = [_decodes(d) and all(0x80 <= b < 0xC0 or b in chars for b in d) for d in toks]
    n_chars = [len(d.decode("utf-8")) if m else 0 for d, m in zip(toks, member)]
    assert sl.member.tolist() == member
    assert sl.outside.tolist() == [i for i, m in enumerate(member) if not m]
    ids = layout.ids.tolist()
    assert set(np.flatnonzero(bitmask_to_bool(sl.row, vocab.vocab_size)).tolist()) == {
        t for t, m in zip(ids, member) if m}
    longest = max((k for k, m in zip(n_chars, member) if m and k <= tuning.SLICE_MAX_CHARS), default=0)
    assert sl.by_chars.shape[0] == longest
    for k in range(1, longest + 1):
        assert set(np.flatnonzero(bitmask_to_bool(sl.by_chars[k - 1], vocab.vocab_size)).tolist()) == {
            t for t, m, c in zip(ids, member, n_chars) if m and c == k}
    width = sl.by_first.shape[1]
    for b in {d[0] for d in toks}:
        mine = [k for d, m, k in zip(toks, member, n_chars) if m and d[0] == b]
        assert sl.most[b] == max(mine, default=0)
        assert sl.by_first[b].tolist() == [sum(min(k, width - 2) < j for k in mine) for j in range(width)]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(_tokens, st.sets(st.integers(0, 127), max_size=128), st.sets(st.integers(0xC2, 0xF4), max_size=51))
def test_trie_slice_matches_a_scan(tokens, ascii_set, leads):
    """A slice in the trie's token order (the one pass in C, or take and cumsum in numpy), on byte
    soup with a fresh vocabulary per example: each position's membership is a scan with Python's
    decoder of the token there, and ``prefix`` counts the non-members before each position."""
    from guidewire.grammar.tabletrie import token_trie, trie_slice

    vocab = _vocab(tokens)
    chars = ascii_set | leads
    sel = np.zeros(256, dtype=bool)
    sel[list(chars)] = True
    sl, trie = trie_slice(vocab, sel), token_trie(vocab)
    want = [_decodes(d) and all(0x80 <= b < 0xC0 or b in chars for b in d)
            for d in (vocab.token_bytes[t] for t in trie.toks.tolist())]
    assert sl.member.dtype == np.uint8 and sl.member.tolist() == [int(m) for m in want]
    assert sl.prefix.dtype == np.int32 and sl.prefix.tolist() == np.concatenate([[0], np.cumsum(
        [not m for m in want])]).tolist()
    assert len(want) == len(set(tokens) - {b""})


def test_lazy_parts_of_a_slice_are_counted_from_the_start(smollm2):
    """``by_chars`` and ``outside`` are made on first use, and the bytes the memo's bound counts
    already include them: the count does not change once they exist, and equals the arrays' sizes."""
    sel = np.zeros(256, dtype=bool)
    sel[32:127] = True
    sel[0xC2:0xF5] = True
    sl = utf8_slice(smollm2, sel)
    before = sl.nbytes
    made = sl.member.nbytes + sl.row.nbytes + sl.by_chars.nbytes + sl.outside.nbytes + sl.by_first.nbytes \
        + sl.most.nbytes
    assert sl.by_chars.shape[0] == sl.n_rows > 1 and sl.outside.size == sl.member.size - sl.count > 0
    assert sl.nbytes == before == made
    assert sl.by_chars is sl.by_chars and sl.outside is sl.outside     # made once


def test_compiled_slice_refuses_bad_input():
    """Mismatched arrays, a token id past the row and too few rows by characters are typed
    errors of the compiled slice, never a write out of bounds."""
    from guidewire.grammar import native
    old = native.set_enabled(True) if native.available() else None
    mod = native.module()
    if old is not None:
        native.set_enabled(old)
    if mod is None:
        pytest.skip("the compiled module is not built")
    n, width = 3, 5
    whole = np.ones(n, dtype=bool)
    ascii_bits = np.zeros((2, n), dtype=np.uint64)
    lead = np.zeros(n, dtype=np.uint64)
    chars = np.array([1, 2, 2], dtype=np.int64)
    first = np.array([97, 98, 98], dtype=np.int64)
    member, hist, most = np.zeros(n, dtype=bool), np.zeros(256 * width, dtype=np.int64), np.zeros(256, dtype=np.int64)
    assert mod.slice_members(whole, ascii_bits, lead, chars, first, 0, 0, 0, 2, width, member, hist, most) == (3, 2)
    with pytest.raises(ValueError):
        mod.slice_members(whole[:2], ascii_bits, lead, chars, first, 0, 0, 0, 2, width, member, hist, most)
    with pytest.raises(ValueError):
        mod.slice_members(whole, ascii_bits, lead, chars, np.array([97, 300, 1]), 0, 0, 0, 2, width, member, hist, most)
    row, by = np.zeros(1, dtype=np.int32), np.zeros((2, 1), dtype=np.int32)
    assert mod.slice_rows(member, chars, np.array([0, 1, 2]), 2, row, by, 1) is None
    assert row[0] == 0b111 and by[0, 0] == 0b1 and by[1, 0] == 0b110
    with pytest.raises(IndexError):
        mod.slice_rows(member, chars, np.array([0, 1, 40]), 2, row, by, 1)
    with pytest.raises(ValueError):
        mod.slice_rows(member, chars, np.array([0, 1, 2]), 2, row, by[:1], 1)
    # the row set in the members' pass: the same bits as slice_rows's, ids checked
    row2 = np.zeros(1, dtype=np.int32)
    hist[:] = 0
    most[:] = 0
    assert mod.slice_members(whole, ascii_bits, lead, chars, first, 0, 0, 0, 2, width, member, hist, most,
                             np.array([0, 1, 2]), row2, 1) == (3, 2)
    assert row2[0] == 0b111
    with pytest.raises(IndexError):
        mod.slice_members(whole, ascii_bits, lead, chars, first, 0, 0, 0, 2, width, member, hist, most,
                          np.array([0, 1, 40]), row2, 1)
    with pytest.raises(TypeError):
        mod.slice_members(whole, ascii_bits, lead, chars, first, 0, 0, 0, 2, width, member, hist, most,
                          np.array([0, 1, 2]))
    # the trie-order pass and the first-byte row
    out, prefix = np.zeros(3, dtype=np.uint8), np.zeros(4, dtype=np.int32)
    assert mod.slice_trie(np.array([1, 0, 1], dtype=np.uint8), np.array([2, 1, 0]), out, prefix) is None
    assert out.tolist() == [1, 0, 1] and prefix.tolist() == [0, 0, 1, 1]
    with pytest.raises(IndexError):
        mod.slice_trie(np.array([1, 0, 1], dtype=np.uint8), np.array([2, 3, 0]), out, prefix)
    with pytest.raises(ValueError):
        mod.slice_trie(np.array([1, 0, 1], dtype=np.uint8), np.array([2, 1, 0]), out, prefix[:3])
    in_set = np.zeros(257, dtype=np.uint8)
    in_set[[97, 256]] = 1
    first_of_id = np.full(32, 98, dtype=np.uint16)
    first_of_id[[3, 31]] = 97
    first_of_id[5] = 256
    row3 = np.zeros(1, dtype=np.int32)
    assert mod.byte_row(in_set, first_of_id, row3) is None
    assert row3.view(np.uint32)[0] == (1 << 3) | (1 << 5) | (1 << 31)
    first_of_id[7] = 257
    with pytest.raises(IndexError):
        mod.byte_row(in_set, first_of_id, row3)
    with pytest.raises(ValueError):
        mod.byte_row(in_set[:256], first_of_id, row3)


def test_a_class_around_non_ascii_text(soup):
    """Where most ASCII bytes take a state elsewhere than non-ASCII characters do (before an
    unanchored ``[!#-~]`` has matched), the slice is built around the non-ASCII successor: its
    class holds the lead bytes and loops on the state, and it takes more of the soup's tokens
    than the class of the most common ASCII successor (which holds no lead byte). (This lexer's
    DFA is not minimal: after the match, a sought character and another one lead to two states,
    so no product of two chains holds, see test_a_sought_class_in_product.)"""
    g = compile_lark(ASCII_SOUGHT, soup)
    g.dfa.build_all(limit=2000)
    builder = TableBuilder(g.dfa, soup)
    q0 = int(g.dfa.trans[int(g.dfa.trans[START][ord('"')])][ord(" ")])     # after '" '
    row = g.dfa.trans[q0]
    assert row[ord("a")] != q0 and row[ord(" ")] == q0      # the two successors differ
    plan = builder._slice_plan(q0, lambda sl: int(sl.most.max()))
    assert plan.inner is None and plan.loops and plan.chain == [q0]
    cls = plan.class_set
    assert cls[0xC3] and cls[0xE4] and cls[ord(" ")] and not cls[ord("a")]
    ascii_set = np.zeros(256, dtype=bool)
    ascii_set[:128] = row[:128] == row[ord("a")]
    other = utf8_slice(soup, ascii_set)
    assert int(plan.sl.by_first[:, -1].sum()) > int(other.by_first[:, -1].sum()) > 0


def _plan_ends(builder, q0, plan, soup, dfa) -> int:
    """Every member the plan gives a row reads so by the slow walk; returns how many."""
    parts = []
    builder._slice_stays(q0, dfa.trans[q0], plan, parts)
    seen, checked = set(), 0
    for target, r in parts:
        for t in np.flatnonzero(bitmask_to_bool(r, soup.vocab_size)).tolist():
            assert t not in seen
            seen.add(t)
            assert walk_token(dfa, q0, soup.token_bytes[t]) == ([], target), soup.token_bytes[t]
            checked += 1
    return checked


def test_a_sought_class_in_product(soup):
    """Before an unanchored ``[a-z]`` (a JSON Schema pattern: a minimal DFA), class B (non-ASCII
    text, spaces, digits) loops on the state and class A (letters) leaves it for the matched
    state, where both loop: one product plan takes every member of either class, a token mixing
    them (`` a``, ``1z``) included, and each reads as the slow walk reads it."""
    from guidewire.grammar import compile_json_schema

    g = compile_json_schema({"type": "string", "pattern": "[a-z]"}, soup)
    g.dfa.build_all(limit=2000)
    builder = TableBuilder(g.dfa, soup)
    q0 = int(g.dfa.trans[START][ord('"')])
    t1 = int(g.dfa.trans[q0][ord("a")])
    plan = builder._slice_plan(q0, lambda sl: int(sl.most.max()))
    assert plan.loops and plan.whole and plan.chain == [q0, t1]
    isl, ichain, iloops, b_set = plan.inner
    assert iloops and ichain == [q0] and b_set[0xC3] and b_set[ord(" ")] and not b_set[ord("a")]
    members = int(plan.sl.by_first[:, -1].sum())
    assert members > int(isl.by_first[:, -1].sum()) > 0
    mixed = [t for t in np.flatnonzero(plan.sl.member).tolist() if not isl.member[t]
             and any(chr(c).islower() for c in soup.token_bytes[int(plan.sl.ids[t])])
             and any(not chr(c).islower() for c in soup.token_bytes[int(plan.sl.ids[t])])]
    assert len(mixed) > 50
    assert _plan_ends(builder, q0, plan, soup, g.dfa) == members


def test_a_counter_beside_a_sought_class(soup):
    """Before a sought ``[a-z]`` in a string of at most three characters: the plan's two chains are
    checked to the counter's end (B's runs out a character earlier: three characters of B cannot
    hold a letter), every member of fewer than four characters reads as the slow walk reads it, and
    the longer ones are dead."""
    from guidewire.grammar import compile_json_schema

    g = compile_json_schema(PRODUCTS[0], soup)
    g.dfa.build_all(limit=2000)
    builder = TableBuilder(g.dfa, soup)
    q0 = int(g.dfa.trans[START][ord('"')])
    plan = builder._slice_plan(q0, lambda sl: int(sl.most.max()))
    isl, ichain, iloops, _b = plan.inner
    assert not plan.loops and not iloops and plan.limit == 4 and len(plan.chain) == 4 and len(ichain) == 3
    assert builder._plan_ends_dead(plan)
    assert _plan_ends(builder, q0, plan, soup, g.dfa) > 200
    long_members = [int(plan.sl.ids[t]) for t in np.flatnonzero(plan.sl.member & (plan.sl.chars >= 4)).tolist()]
    assert long_members
    for t in long_members:
        lexemes, fin = walk_token(g.dfa, q0, soup.token_bytes[t])
        assert fin == DEAD or not g.dfa.alive[fin]
