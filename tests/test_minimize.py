"""guidewire.grammar.jsonschema.minimize: the minimal DFA of a string constraint, against Python's
``re`` (the language), brute-force residual classes (minimality) and the lexer it feeds (every
position after a search pattern matched is one lexer state)."""

from __future__ import annotations

import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import Vocab
from guidewire.grammar import compile_json_schema
from guidewire.grammar.jsonschema.complement import _closure, automaton_matches
from guidewire.grammar.jsonschema.minimize import (MAX_NFA_STATES, MAX_STATES, minimal_automaton, smaller_automaton,
                                                   spelled_size)
from guidewire.grammar.jsonstring import pattern_automaton

ALPHABET = "ab@.é1"
_ATOMS = ["a", "b", "@", r"\.", "é", r"\d", r"\w", "[ab]", "[^a]", ".", "(a|b@)", "(ab)"]
_RAN: dict[str, int] = {"patterns": 0, "strings": 0}


def _run(auto, text: str):
    """The one state a deterministic CharNFA is in after ``text`` (None once it is stuck)."""
    nfa, start, _end = auto
    q = start
    for ch in text:
        c = ord(ch)
        nxt = [t for iv, t in nfa.edges[q] if any(a <= c <= b for a, b in iv)]
        assert len(nxt) <= 1, "not deterministic"
        if not nxt:
            return None
        q = nxt[0]
    return q


@st.composite
def patterns(draw):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        atom = draw(st.sampled_from(_ATOMS))
        parts.append(atom + draw(st.sampled_from(["", "*", "+", "?", "{2}", "{1,3}"])))
    body = "".join(parts)
    if draw(st.booleans()):
        body = body + "|" + draw(st.sampled_from(_ATOMS))
    return draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "$"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), st.lists(st.text(ALPHABET, max_size=7), min_size=30, max_size=30), st.booleans())
def _agrees_with_re(pattern, texts, search):
    nfa_auto = pattern_automaton(pattern, search=search)
    auto = minimal_automaton(nfa_auto)
    texts = texts + ["", "a@b.c", "ab@é.1a", "@@..", "aab"]
    for text in texts:
        want = (re.search if search else re.fullmatch)(pattern, text) is not None
        assert automaton_matches(auto, text) == want, (pattern, search, text)
        assert automaton_matches(nfa_auto, text) == want    # the input it came from agrees too
        if auto is not nfa_auto:
            _run(auto, text)      # asserts one move per character at most
    _RAN["patterns"] += 1
    _RAN["strings"] += len(texts)


def test_minimal_automaton_has_the_pattern_language_and_is_deterministic():
    """Random patterns, searched and anchored, on random strings: the minimal DFA accepts exactly
    what ``re`` matches, and moves on at most one edge per character."""
    _agrees_with_re()
    assert _RAN["patterns"] >= 150 and _RAN["strings"] >= 150 * 35


def _residual_classes(pattern: str, alphabet: str, prefix: int, suffix: int) -> int:
    """Myhill-Nerode classes of the prefixes of at most ``prefix`` characters that can still be
    completed, told apart by suffixes of at most ``suffix`` characters (brute force with ``re``)."""
    def words(length):
        return ["".join(w) for n in range(length + 1) for w in itertools.product(alphabet, repeat=n)]

    ends = words(suffix)
    sigs = set()
    for p in words(prefix):
        sig = tuple(re.search(pattern, p + s) is not None for s in ends)
        if any(sig):
            sigs.add(sig)
    return len(sigs)


def test_state_count_is_the_number_of_residual_classes():
    """Minimality: the DFA's states (its one extra end state aside) are as many as the classes of
    prefixes that some suffix tells apart, counted by brute force over a small alphabet."""
    checked = 0
    for pattern, alphabet, prefix, suffix in [(r"a@b", "ab@.", 4, 4), (r"^a+b$", "ab@.", 4, 4), (r"a.b", "ab@.", 4, 4),
                                              (r"^(ab|a)*$", "ab@.", 4, 4), (r"^@", "ab@.", 4, 4),
                                              (r"b{2,3}$", "ab@.", 4, 4), (r"a+@a+\.a+", "a@.", 6, 5)]:
        auto = minimal_automaton(pattern_automaton(pattern, search=True))
        assert len(auto[0]) - 1 == _residual_classes(pattern, alphabet, prefix, suffix), pattern
        checked += 1
    assert checked == 7


def test_every_position_after_a_search_match_is_one_state():
    """An unanchored e-mail search: the NFA's subsets after ``x@y.c``, ``x@y.com`` and
    ``x@y.com!?`` differ (partial matches still running beside the tail); the minimal DFA is in
    one state, which keeps every character."""
    pattern = r"[\w.-]+@([\w.-]+\.)+\w+"
    nfa_auto = pattern_automaton(pattern, search=True)
    auto = minimal_automaton(nfa_auto)
    ends = ["x@y.c", "x@y.com", "x@y.com!?", "john.doe@example.com and more"]
    nfa, start, _ = nfa_auto
    subsets = set()
    for text in ends:
        cur = _closure(nfa, [start])
        for ch in text:
            c = ord(ch)
            cur = _closure(nfa, [t for q in cur for iv, t in nfa.edges[q] if any(a <= c <= b for a, b in iv)])
        subsets.add(cur)
    assert len(subsets) >= 3
    states = {_run(auto, text) for text in ends}
    assert len(states) == 1
    (tail,) = states
    loops = [iv for iv, t in auto[0].edges[tail] if t == tail]
    assert loops and loops[0][0][0] == 0 and loops[0][-1][1] >= 0x10FFFF - 1   # every character stays


def test_an_automaton_too_large_to_determinise_is_kept_as_it_is():
    auto = pattern_automaton(r"(a|b)*a(a|b){12}", search=False)
    assert minimal_automaton(auto, max_states=MAX_STATES) is auto
    assert minimal_automaton(auto, max_states=1 << 15) is not auto     # it is only the bound
    words = "|".join(f"w{i:04d}x" for i in range(200))     # an NFA over the size bound: not even tried
    big = pattern_automaton(f"^({words})$", search=False)
    assert len(big[0]) > MAX_NFA_STATES and minimal_automaton(big) is big
    empty = pattern_automaton(r"[^\s\S]", search=False)               # no string at all
    assert minimal_automaton(empty) is empty


def test_lexer_states_after_a_match_collapse_in_a_compiled_schema():
    """Through the whole compile: the lexer state of a JSON string with an unanchored pattern is
    the same after ``"a@b.c``, ``"a@b.cd`` and ``"a@b.cd@@`` (one state, so one token table)."""
    tokens = [bytes([b]) for b in range(32, 127)]
    eos = len(tokens)
    vocab = Vocab(tuple(tokens) + (b"",), frozenset({eos}), frozenset({eos}), eos + 1, "ascii-bytes")
    g = compile_json_schema({"type": "string", "pattern": "[a-z]+@[a-z]+\\.[a-z]+"}, vocab)
    states = set()
    for text in ['"a@b.c', '"a@b.cd', '"a@b.cd@@', '"zz@b.c.d.e']:
        m = g.matcher()
        for ch in text.encode():
            assert m.advance(ch - 32), text
        states.add(m.state[1])
    assert len(states) == 1


def test_the_compiler_keeps_the_automaton_whose_spelling_is_smaller():
    """Determinising a Unicode-class search splits its classes between states (``\\d`` against
    hex digits: 236 spelled intervals become 992, with shared spellings); the compiler then keeps the NFA, and a counted
    string over it (``minLength`` 35) still compiles and checks like ``jsonschema`` would."""
    import jsonschema

    grown = pattern_automaton(r"\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}", search=True)
    assert spelled_size(minimal_automaton(grown)) > 3 * spelled_size(grown)
    assert smaller_automaton(grown) is grown
    shrunk = pattern_automaton(r"^@[^\s]+", search=True)
    assert smaller_automaton(shrunk) is not shrunk and spelled_size(smaller_automaton(shrunk)) <= spelled_size(shrunk)
    tokens = [bytes([b]) for b in range(32, 127)]
    eos = len(tokens)
    vocab = Vocab(tuple(tokens) + (b"",), frozenset({eos}), frozenset({eos}), eos + 1, "ascii-bytes")
    schema = {"type": "string", "minLength": 35, "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}"}
    g = compile_json_schema(schema, vocab)
    checked = 0
    for value in ["12-ab-" + "f" * 24 + "zzzz", "12-ab-" + "f" * 23, "x" * 40, "1-" + "a" * 10 + "-" + "b" * 24]:
        m = g.matcher()
        text = '"' + value + '"'
        ok = all(m.advance(ch - 32) for ch in text.encode()) and m.is_accepting()
        assert ok == jsonschema.Draft202012Validator(schema).is_valid(value), value
        checked += 1
    assert checked == 4


def _byte_nfa_accepts(nfa, start: int, end: int, data: bytes) -> bool:
    """Plain NFA simulation (epsilon closures of sets) of ``data`` from ``start`` to ``end``."""
    def close(states):
        out, todo = set(states), list(states)
        while todo:
            for t in nfa.eps[todo.pop()]:
                if t not in out:
                    out.add(t)
                    todo.append(t)
        return out

    now = close({start})
    for b in data:
        now = close({t for s in now for lo, hi, t in nfa.edges[s] if lo <= b <= hi})
        if not now:
            return False
    return end in now


_SHARED_RAN = {"strings": 0, "smaller": 0}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(patterns(), st.lists(st.text(ALPHABET + '"\\', max_size=6), min_size=12, max_size=12))
def _shared_spellings_agree(pattern, texts):
    import json

    from guidewire.grammar import jsonstring
    from guidewire.grammar.regex import NFA

    auto = minimal_automaton(pattern_automaton(pattern, search=True))
    sizes = []
    for share in (True, False):
        nfa = NFA()
        if share:
            frag = jsonstring.json_string_into(nfa, auto)
        else:       # a copy of every spelling per edge, as before stop 65
            into = jsonstring.json_chars_into
            jsonstring.json_chars_into = lambda n, s, d, c, shared=None: into(n, s, d, c)
            try:
                frag = jsonstring.json_string_into(nfa, auto)
            finally:
                jsonstring.json_chars_into = into
        sizes.append(len(nfa))
        for text in texts + ["a@b.c", "é\\\"x"]:
            want = re.search(pattern, text) is not None
            for spelled in {json.dumps(text, ensure_ascii=True), json.dumps(text, ensure_ascii=False)}:
                assert _byte_nfa_accepts(nfa, frag.start, frag.end, spelled.encode()) == want, (pattern, spelled)
                _SHARED_RAN["strings"] += 1
    assert sizes[0] <= sizes[1]
    _SHARED_RAN["smaller"] += sizes[0] < sizes[1]


def test_shared_spellings_spell_the_same_strings():
    """A minimal DFA spelled as JSON with one spelling per (class, target), its states' edges
    sharing it (``json_chars_into``): the byte NFA accepts exactly the JSON spellings (raw and
    ``\\u``-escaped) of the strings in which Python's ``re.search`` finds the pattern, as a copy per
    edge does, with no more NFA states (fewer for some patterns)."""
    _SHARED_RAN.update(strings=0, smaller=0)
    _shared_spellings_agree()
    assert _SHARED_RAN["strings"] >= 60 * 2 * 14 and _SHARED_RAN["smaller"] >= 5, _SHARED_RAN
