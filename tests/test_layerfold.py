"""Length-counter folding: a lazily built lexer's positions of a ``maxLength``/``minLength`` string
far from the bounds share one token table and its masks (``guidewire.grammar.layerfold``).

Oracles: the same grammar with folding off (masks and verdicts along random walks that type long
strings up to the bounds), and the NFA itself (the front end's layer shapes against a check of
every layer's states, edges and targets)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core.vocab import Vocab
from guidewire.grammar import compile_json_schema, compiled, layerfold
from guidewire.grammar.fragments import STORE
from test_projection import _walk_from

# single bytes and a few longer tokens (at most 6 bytes: counters of 14+ characters fold), some
# crossing the closing quote, escapes and multi-byte characters
_LONG = [b"ab", b"abc", b"xyz1", b"--", b"a-b", b"\xc3\xa9", b"a\xc3\xa9", b'"}', b'",', b'a"', b'ab"}',
         b"\\n", b"\\u00e9", b"\\u", b"12", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"  ", b"\xc3"]
PATTERNS = [None, "^[a-z]+$", "^[\\w-]+$", "a", "^(ab)*$", "\\d", "^[a-z\\u00e9]*$", "x|1"]


def _vocab() -> Vocab:
    toks = [b""] + [bytes([b]) for b in range(256)] + _LONG
    return Vocab(tuple(toks), frozenset({0}), frozenset({0}), len(toks), "fold-test")


def _compile(schema, vocab, monkeypatch, fold: bool):
    """``schema`` compiled lazily (no up-front lexer), with or without folding."""
    STORE.clear()
    with monkeypatch.context() as m:
        m.setattr(compiled, "EAGER_LEXER_STATES", 1)
        m.setattr(compiled, "FOLD_COUNTERS", fold)
        g = compile_json_schema(schema, vocab)
    STORE.clear()
    return g


def counted_object(draw, count: int, bounds, patterns) -> dict:
    """An object schema of ``count`` counted string properties (``bounds(draw)`` gives each one's
    ``minLength``/``maxLength``, a pattern is drawn from ``patterns``) and maybe a free string."""
    props = {}
    for k in range(count):
        sub = {"type": "string", **bounds(draw)}
        pattern = draw(st.sampled_from(patterns))
        if pattern is not None:
            sub["pattern"] = pattern
        props[f"p{k}"] = sub
    if draw(st.booleans()):
        props["free"] = {"type": "string"}
    return {"type": "object", "properties": props}


def _short_bounds(draw) -> dict:
    out = {"maxLength": draw(st.integers(14, 40))}
    if draw(st.booleans()):
        out["minLength"] = draw(st.integers(1, 9))
    return out


@st.composite
def counted_schemas(draw):
    return counted_object(draw, draw(st.integers(1, 3)), _short_bounds, PATTERNS)


def _favoured(vocab) -> np.ndarray:
    """String-body tokens (no quote, no brackets): walks type long strings up to their bounds."""
    keep = set(b"abcxyz1-_ \\u00e9") | set(range(0x80, 0x100))
    return np.array([i for i, t in enumerate(vocab.token_bytes) if t and set(t) <= keep])


def test_folded_masks_equal_unfolded_along_random_walks(monkeypatch):
    """Objects of counted strings (maxLength 14-40, minLength floors, patterns whose layers
    alternate or stay): masks and verdicts with folding equal those without along random walks
    that type the strings to their bounds, and folding builds fewer tables on some."""
    vocab = _vocab()
    favour = _favoured(vocab)
    ran = {"schemas": 0, "steps": 0, "folded": 0, "fewer_tables": 0}

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(counted_schemas(), st.integers(0, 2**31), st.booleans())
    def run(schema, seed, small_blocks):
        # small blocks: runs found across several blocks, or a nearer layer where too few are known
        monkeypatch.setattr(layerfold, "FOLD_BLOCK", 4 if small_blocks else 256)
        monkeypatch.setattr(layerfold, "FOLD_NEW_BLOCKS", 1 if small_blocks else 2)
        on = _compile(schema, vocab, monkeypatch, True)
        off = _compile(schema, vocab, monkeypatch, False)
        assert off.stats()["folded_states"] == 0
        rng = random.Random(seed)
        for _ in range(4):
            a, b = on.matcher(), off.matcher()
            key = rng.choice(sorted(schema["properties"]))
            for byte in ('{"%s": "' % key).encode():     # into the string, then type it to its end
                assert np.array_equal(a.current_mask(), b.current_mask())
                assert a.advance(byte + 1) and b.advance(byte + 1)
            for _ in range(rng.randrange(0, 12)):       # some characters unmasked: a first fold deep in
                tok = int(favour[rng.randrange(favour.size)])
                if not a.advance(tok):
                    break
                assert b.advance(tok)
            taken, _moved = _walk_from(a, b, vocab, rng, 70, favour)
            ran["steps"] += taken
        ran["folded"] += on.stats()["folded_states"] > 0
        ran["fewer_tables"] += on.stats()["token_tables"] < off.stats()["token_tables"]
        ran["schemas"] += 1

    run()
    assert ran["schemas"] == 25 and ran["steps"] >= 2000, ran
    assert ran["folded"] >= 10 and ran["fewer_tables"] >= 10, ran


def test_layer_shapes_imply_the_nfa_is_uniform(monkeypatch):
    """For counted strings of every pattern, two layers the front end gives one shape (and the
    lexer the same readings) are uniform on the NFA itself: the same edges, place for place, one
    layer on. Most consecutive layers far from the bounds are."""
    vocab = _vocab()
    fast_pairs = checked_pairs = counters = windows = 0
    for pattern in PATTERNS:
        for min_len, max_len in ((0, 30), (3, 30), (1, 17)):
            sub = {"type": "string", "minLength": min_len, "maxLength": max_len}
            if pattern is not None:
                sub["pattern"] = pattern
            g = _compile({"type": "object", "properties": {"s": sub}}, vocab, monkeypatch, True)
            fold = layerfold.LayerFold(g.dfa, 2)
            fold.shifted(g.dfa.nfa_states(2))       # builds the per-state arrays
            for f, family in enumerate(fold._families):
                runs = layerfold._Runs(g.dfa, f, *family, fold._fam, fold._readings)
                fast = runs._uniform(0, runs.top)
                checked = runs.checked_uniform(0, runs.top)
                assert fast.shape == checked.shape == (runs.top,)
                for first in range(1, runs.top - 1, 5):     # a block's window reads as the whole does
                    last = min(first + 7, runs.top)
                    assert np.array_equal(runs._uniform(first, last), fast[first:last]), (pattern, first)
                    windows += 1
                assert not (fast & ~checked).any(), (pattern, min_len, max_len, fast, checked)
                fast_pairs += int(fast.sum())
                checked_pairs += int(checked.sum())
                counters += 1
    assert counters == 3 * len(PATTERNS) and windows >= 5 * counters, (counters, windows)
    assert fast_pairs >= 0.8 * checked_pairs and fast_pairs >= 300, (fast_pairs, checked_pairs)


def test_a_long_text_builds_one_table_per_block(smollm2, monkeypatch):
    """A 600-character string under ``minLength: 4800, maxLength: 5000`` on SmolLM2 (tokens of up
    to 81 bytes; bounds this close are unrolled whole, not elided), typed token by token: the
    positions fold onto one lexer state and the masks equal those of the grammar without folding
    at every step."""
    schema = {"type": "object", "properties": {"t": {"type": "string", "minLength": 4800, "maxLength": 5000}}}
    on = _compile(schema, smollm2, monkeypatch, True)
    off = _compile(schema, smollm2, monkeypatch, False)
    text = ('{"t": "' + "This is a Vimeo video block, \u00e9t\u00e9 \u20ac5. " * 14)[:600]
    lookup = smollm2.bytes_to_tokens()
    a, b = on.matcher(), off.matcher()
    steps = 0
    data = text.encode()
    while data:
        ma, mb = a.current_mask(), b.current_mask()
        assert np.array_equal(ma, mb)
        # the longest token that spells a prefix of the rest: a greedy tokenisation
        best = None
        for n in range(min(len(data), 81), 0, -1):
            tok = lookup.get(data[:n])
            if tok is not None:
                best = tok, n
                break
        assert best is not None
        assert a.advance(best[0]) and b.advance(best[0])
        data = data[best[1]:]
        steps += 1
    assert steps >= 150, steps
    assert on.stats()["folded_states"] >= 100, on.stats()
    assert on.stats()["token_tables"] * 4 < off.stats()["token_tables"], (on.stats(), off.stats())
