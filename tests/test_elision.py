"""Elided length counters: a ``maxLength`` far above its floor is built short, the characters left
out carried as credit beside the lexer state (``guidewire.grammar.elision``).

Oracles: ``jsonschema`` on whole documents typed token by token (strings of every length around
the bounds, with escapes and multi-byte characters), and the same schema built whole (no
elision; the reference) for masks and verdicts along random walks that type long strings to
their bounds."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core.errors import LimitExceededError
from guidewire.core.vocab import Vocab
from guidewire.grammar import compile_json_schema, compiled, elision, jsonstring
from guidewire.grammar.fragments import STORE
from guidewire.grammar.jsonschema import JsonSchemaOptions, _build, emit
from test_layerfold import _favoured, counted_object
from test_projection import _walk_from

jsonschema = pytest.importorskip("jsonschema")

# single bytes and a few longer tokens (at most 6 bytes: counters of ~100+ characters are elided),
# some crossing the closing quote, escapes and multi-byte characters
_LONG = [b"ab", b"abc", b"xyz1", b"--", b"a-b", b"\xc3\xa9", b"a\xc3\xa9", b'"}', b'",', b'a"', b'ab"}',
         b"\\n", b"\\u00e9", b"\\u", b"12", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"  ", b"\xc3", b"abcde"]
PATTERNS = [None, "^[a-z]+$", "^[\\w-]+$", "a", "^(ab)*$", "\\d", "^[a-z\\u00e9 ]*$", "x|1", "^[^<>]*$"]
# pieces of a string body, as JSON text: each decodes to one or two characters
_PIECES = ["a", "b", "x", "1", "-", " ", "\\n", '\\"', "\\u00e9", "\u00e9", "\u20ac", "\U0001F600", "ab",
           "\\ud83d\\ude00"]


def _vocab() -> Vocab:
    toks = [b""] + [bytes([b]) for b in range(256)] + _LONG
    return Vocab(tuple(toks), frozenset({0}), frozenset({0}), len(toks), "elide-test")


def _compile(schema, vocab, monkeypatch, elide: bool, lazy: bool = False):
    """``schema`` compiled with long counters elided (as by default) or built whole."""
    STORE.clear()
    with monkeypatch.context() as m:
        if lazy:
            m.setattr(compiled, "EAGER_LEXER_STATES", 1)
        if not elide:
            whole = emit.json_counted_into
            m.setattr(emit, "json_counted_into", lambda *a, **k: whole(*a, **{**k, "depth": None}))
        g = compile_json_schema(schema, vocab)
    STORE.clear()
    return g


def _tokenize(vocab, data: bytes) -> list[int]:
    """Greedy longest-match tokens of ``data``."""
    index = {t: i for i, t in enumerate(vocab.token_bytes) if t and i not in vocab.eos_ids}
    longest = max(map(len, index))
    out, i = [], 0
    while i < len(data):
        j = next(j for j in range(min(len(data), i + longest), i, -1) if data[i:j] in index)
        out.append(index[data[i:j]])
        i = j
    return out


def _body(rng: random.Random, length: int, alphabet=_PIECES) -> str:
    """JSON string body text decoding to exactly ``length`` characters."""
    parts, n = [], 0
    while n < length:
        piece = rng.choice(alphabet)
        c = len(json.loads('"' + piece + '"'))
        if n + c > length:
            piece, c = "a", 1
        parts.append(piece)
        n += c
    return "".join(parts)


def _accepts(g, tokens) -> bool:
    m = g.matcher()
    return all(m.advance(t) for t in tokens) and m.is_accepting()


def test_documents_around_the_bounds_match_jsonschema(monkeypatch):
    """Strings of every length around ``minLength``/``maxLength`` (and deep inside), typed token by
    token: the elided grammar accepts exactly the documents ``jsonschema`` finds valid, the whole
    one agrees, and the lexer states carried credit (virtual ids) on the way."""
    vocab = _vocab()
    rng = random.Random(7)
    ran = valid = virtual = 0
    for lo, hi, pattern, alphabet in ((0, 300, None, _PIECES), (5, 460, None, _PIECES),
                                      (40, 1000, "^[a-z\u00e9 -]*$", ["a", "b", " ", "-", "\u00e9", "\\u00e9"]),
                                      (0, 2**31 - 1, None, _PIECES)):
        sub = {"type": "string", "minLength": lo, "maxLength": hi}
        if pattern:
            sub["pattern"] = pattern
        schema = {"type": "object", "properties": {"s": sub}, "required": ["s"], "additionalProperties": False}
        g = _compile(schema, vocab, monkeypatch, True)
        assert g._elision is not None
        whole = _compile(schema, vocab, monkeypatch, False) if hi < 2000 else None
        assert whole is None or whole._elision is None
        lengths = {0, 1, lo - 1, lo, lo + 1, 150, hi - 1, hi, hi + 1, hi + 2} if hi < 2000 else {0, 1, 600, 5000}
        for length in sorted(n for n in lengths if n >= 0):
            text = '{"s": "' + _body(rng, length, alphabet) + '"}'
            tokens = _tokenize(vocab, text.encode())
            expect = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
            got = _accepts(g, tokens)
            assert got == expect, (lo, hi, pattern, length)
            if whole is not None:
                assert _accepts(whole, tokens) == expect
            m = g.matcher()
            for t in tokens:
                m.advance(t)
                virtual += m.state[1] >= elision.VIRTUAL_BASE
            ran += 1
            valid += expect
    assert ran == 31 and 16 <= valid < ran and virtual > 1000, (ran, valid, virtual)


def _long_bounds(draw) -> dict:
    lo = draw(st.sampled_from([0, 0, 1, 7]))
    return {"minLength": lo, "maxLength": lo + draw(st.integers(100, 260))}


@st.composite
def counted_schemas(draw):
    return counted_object(draw, draw(st.integers(1, 2)), _long_bounds, PATTERNS)


def test_elided_masks_equal_whole_along_random_walks(monkeypatch):
    """Objects of long counted strings (100-260 characters over floors of 0-7, patterns whose
    layers stay, alternate or never settle), eager and lazy lexers: masks and verdicts with
    elision equal those of the whole counters along random walks typing the strings to their
    bounds, and forks and rollbacks across credit give the same masks again."""
    vocab = _vocab()
    favour = _favoured(vocab)
    ran = {"schemas": 0, "elided": 0, "steps": 0, "virtual": 0, "rollbacks": 0}

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(counted_schemas(), st.integers(0, 2**31), st.booleans())
    def run(schema, seed, lazy):
        on = _compile(schema, vocab, monkeypatch, True, lazy)
        off = _compile(schema, vocab, monkeypatch, False, lazy)
        assert off._elision is None
        ran["elided"] += on._elision is not None
        rng = random.Random(seed)
        for _ in range(3):
            a, b = on.matcher(), off.matcher()
            key = rng.choice(sorted(schema["properties"]))
            for byte in ('{"%s": "' % key).encode():
                assert a.advance(byte + 1) and b.advance(byte + 1)
            taken, _moved = _walk_from(a, b, vocab, rng, 150, favour)
            ran["steps"] += taken
            ran["virtual"] += a.state[1] >= elision.VIRTUAL_BASE
            n = rng.randrange(0, taken + 1)
            fork = a.fork()
            a.rollback(n)
            b.rollback(n)
            assert np.array_equal(a.current_mask(), b.current_mask())
            taken, _moved = _walk_from(a, b, vocab, rng, 40, favour)
            assert np.array_equal(fork.current_mask(), fork.fork().current_mask())
            ran["rollbacks"] += 1
        ran["schemas"] += 1

    run()
    assert ran["schemas"] == 30 and ran["elided"] >= 20 and ran["steps"] >= 6000, ran
    assert ran["virtual"] >= 10 and ran["rollbacks"] == 90, ran


def test_step_bytes_over_a_long_input_spends_credit(monkeypatch):
    """A whole document in one ``step_bytes`` call (thousands of bytes inside an elided counter)
    reaches a state with the same verdicts as typing it token by token; one byte over the bound
    is refused there too."""
    vocab = _vocab()
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3000}}, "required": ["s"]}
    g = _compile(schema, vocab, monkeypatch, True)
    rng = random.Random(3)
    checked = 0
    for length in (2999, 3000, 3001):
        text = ('{"s": "' + _body(rng, length) + '"}').encode()
        m = g.matcher()
        got = g.step_bytes(*m.state, text)
        ok = got is not None and g.can_end(*got)
        assert ok == (length <= 3000) == _accepts(g, _tokenize(vocab, text))
        checked += 1
    assert checked == 3


def test_a_refused_run_falls_back_to_the_whole_counter(monkeypatch):
    """When a counter's run is too short for the vocabulary's tokens (forced here by asking for
    less room than the check wants), the compile builds the counter whole: same masks, no
    credit."""
    vocab = _vocab()
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 400}}}
    monkeypatch.setattr(jsonstring, "ELIDE_SLACK", -8)
    STORE.clear()
    with pytest.raises(elision.ElisionRefusedError):
        _build(schema, vocab, JsonSchemaOptions(), 6)
    g = _compile(schema, vocab, monkeypatch, True)
    assert g._elision is None
    whole = _compile(schema, vocab, monkeypatch, False)
    rng = random.Random(1)
    a, b = g.matcher(), whole.matcher()
    assert a.advance(ord("{") + 1) and b.advance(ord("{") + 1)
    taken, _moved = _walk_from(a, b, vocab, rng, 200, _favoured(vocab))
    assert taken >= 50



def test_the_real_vocabularies_compile_huge_bounds(smollm2, gemma3):
    """``maxLength`` 32,767 and 2**31 - 1 (refused before: each counted character was a layer of
    NFA states) compile on both shipped vocabularies with a few hundred layers, and a 3,000
    character text types through with the bound far away."""
    rng = random.Random(5)
    for vocab in (smollm2, gemma3):
        for hi in (32767, 2**31 - 1):
            schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": hi}}, "required": ["s"]}
            g = compile_json_schema(schema, vocab)
            assert g._elision is not None and len(g.dfa.nfa.eps) < 10_000
            text = '{"s": "' + _body(rng, 3000) + '"}'
            assert _accepts(g, _tokenize(vocab, text.encode()))


def test_a_limit_on_virtual_states_is_a_typed_error(monkeypatch):
    """The virtual-state table is bounded: past it the matcher fails with a typed limit error."""
    vocab = _vocab()
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 5000}}}
    g = _compile(schema, vocab, monkeypatch, True)
    g._elision.max_states = 3
    m = g.matcher()
    for t in _tokenize(vocab, ('{"s": "' + "a" * 400).encode()):
        if not m.advance(t):
            break
    assert isinstance(m.exception, LimitExceededError) and "elided" in m.error
