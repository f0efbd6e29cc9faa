"""Universal NFA states: once an unanchored pattern has matched inside a JSON string, the lexer
keeps one state for the rest of the string (``ByteDFA._drop_dominated``), with the same masks.

Oracles: Python ``re.search`` on the decoded string (acceptance), the lexer built without the
universal marks (masks along random walks), and the Python reference against the C subset
construction (the NFA sets of the states reached)."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_json_schema, jsonstring, native
from guidewire.grammar.fragments import STORE
from guidewire.grammar.lexer import DEAD, START
from runtime_fakes import byte_id, tiny_vocab
from test_projection import _favoured, _walk_from

ARXIV = r"\d{4}.\d{4,5}|\w+-\+/\d+"     # a real MaskBench pattern (unanchored; Unicode \d and \w)
SEARCHES = [ARXIV, r"\d{2}", r"a.b", r"[A-Z]{2,3}", r"x|y\d", r"é", r"^ab", r"\w+-\d", r"10\.\d+(\.\d+)?/.+"]
CHARS = list("azAZ09_-+/. ,;é€\U0001F600\n\"\\")


def _compile(schema, vocab, monkeypatch, marked: bool):
    """``schema`` compiled with the universal marks, or without (the reference lexer)."""
    STORE.clear()   # stored fragments carry their marks
    with monkeypatch.context() as m:
        if not marked:
            m.setattr(jsonstring, "_universal_states", lambda cnfa, end: set())
        g = compile_json_schema(schema, vocab)
    STORE.clear()
    return g


def _states_along(g, data: bytes) -> list[int]:
    """The lexer states after each byte of ``data`` read from START."""
    q, out = START, []
    for b in data:
        q = g.dfa.step(q, b)
        out.append(q)
        if q == DEAD:
            break
    return out


def test_a_matched_search_pattern_is_one_lexer_state(monkeypatch):
    """After ``"2201.12345`` the arXiv pattern has matched: every further character (ASCII,
    non-ASCII, escapes) leaves the lexer in the same state; without the marks each new digit or
    letter made another state."""
    vocab = tiny_vocab()
    schema = {"type": "string", "pattern": ARXIV}
    rng = random.Random(5)
    tail = "".join(rng.choice(CHARS) for _ in range(200))
    data = json.dumps("2201.12345" + tail, ensure_ascii=False).encode()[:-1]   # no closing quote
    ends = [len(json.dumps("2201.12345" + tail[:k], ensure_ascii=False).encode()) - 2
            for k in range(len(tail) + 1)]     # byte offsets where a character ends
    for marked in (True, False):
        g = _compile(schema, vocab, monkeypatch, marked)
        states = _states_along(g, data)
        assert DEAD not in states
        after = {states[e] for e in ends}
        if marked:
            assert len(after) == 1, len(after)
            assert len(g.dfa._universal) > 0
        else:
            assert len(after) > 5, len(after)    # the reference made many


def _accepts(g, text: str) -> bool:
    m = g.matcher()
    for b in json.dumps(text, ensure_ascii=bool(random.getrandbits(1))).encode():
        if not m.advance(byte_id(bytes([b]))):
            return False
    return m.is_accepting()


def test_search_patterns_accept_what_re_search_finds(monkeypatch):
    """Acceptance equals ``re.search`` on random strings for unanchored patterns (the marked
    lexer); every pattern is tried on strings that match and strings that do not."""
    vocab = tiny_vocab()
    rng = random.Random(11)
    random.seed(11)
    seen = {True: 0, False: 0}
    for pattern in SEARCHES:
        g = _compile({"type": "string", "pattern": pattern}, vocab, monkeypatch, True)
        rx = re.compile(pattern)
        for _ in range(60):
            n = rng.randrange(0, 14)
            text = "".join(rng.choice(CHARS + list("2201.1234xyAB")) for _ in range(n))
            if rng.random() < 0.6:      # plant a match (for this pattern or another)
                text += rng.choice(["2201.12345", "ab-+/7", "12", "a-b", "AB", "y7", "é", "ab", "x-3", "10.5/z"])
                text += "".join(rng.choice(CHARS) for _ in range(rng.randrange(0, 6)))
            want = rx.search(text) is not None
            assert _accepts(g, text) == want, (pattern, text)
            seen[want] += 1
    assert seen[True] >= 80 and seen[False] >= 80, seen


@st.composite
def search_schemas(draw):
    props = {}
    for k in range(draw(st.integers(1, 3))):
        sub = {"type": "string", "pattern": draw(st.sampled_from(SEARCHES))}
        if draw(st.booleans()):
            sub["minLength"] = draw(st.integers(1, 4))
        props[f"p{k}"] = sub
    props["free"] = {"type": "string"}
    return {"type": "object", "properties": props}


def test_marked_masks_equal_unmarked_along_random_walks(smollm2, monkeypatch):
    """Objects of unanchored patterns (with minLength floors) beside a free string: the masks and
    verdicts of the marked lexer equal the unmarked one's along random walks, and the marked one
    makes fewer lexer states on some of them."""
    ran = {"steps": 0, "fewer": 0, "schemas": 0}

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(search_schemas(), st.integers(0, 2**31))
    def run(schema, seed):
        on = _compile(schema, smollm2, monkeypatch, True)
        off = _compile(schema, smollm2, monkeypatch, False)
        rng, favour = random.Random(seed), _favoured(smollm2)
        for _ in range(4):
            taken, _moved = _walk_from(on.matcher(), off.matcher(), smollm2, rng, 50, favour)
            ran["steps"] += taken
        ran["fewer"] += on.dfa.n_states < off.dfa.n_states
        ran["schemas"] += 1

    run()
    assert ran["schemas"] == 20 and ran["steps"] >= 400 and ran["fewer"] >= 3, ran


def test_the_c_subset_construction_drops_what_python_drops(monkeypatch):
    """The same random byte strings read by the C rows and by the Python reference reach states
    of equal NFA sets, with the marks in force on both paths."""
    if not native.available():
        pytest.skip("no compiled module")
    vocab = tiny_vocab()
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": p}
                                               for i, p in enumerate(SEARCHES)}}
    grammars = {}
    for compiled in (True, False):
        old = native.set_enabled(compiled)
        try:
            grammars[compiled] = _compile(schema, vocab, monkeypatch, True)
        finally:
            native.set_enabled(old)
    rng = random.Random(3)
    compared = dropped = 0
    for _ in range(150):
        text = '"' + "".join(rng.choice(CHARS[:-2] + list("2201.12345yAB")) for _ in range(rng.randrange(1, 30)))
        sets = {}
        for compiled, g in grammars.items():
            old = native.set_enabled(compiled)
            try:
                sets[compiled] = [g.dfa.nfa_states(q) for q in _states_along(g, text.encode())]
            finally:
                native.set_enabled(old)
        assert sets[True] == sets[False], text
        compared += len(sets[True])
        univ = grammars[True].dfa._universal
        dropped += any(any(s in univ for s in nfa) for nfa in sets[True])
    assert compared >= 1000 and dropped >= 20, (compared, dropped)
    assert np.array_equal(grammars[True].dfa._univ_np()[0], grammars[False].dfa._univ_np()[0])
