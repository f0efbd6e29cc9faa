"""Terminal fragments shared across compiles (``guidewire.grammar.fragments``).

The oracle for the per-fragment facts is the lexer's whole-NFA analysis (reachability
from each terminal's start, reverse search from every accepting end, a cycle search);
the oracle for a spliced fragment is the same terminal built afresh: lexers and masks
must be identical whether the store is cold or warm.
"""

from dataclasses import replace

import numpy as np
import pytest

import guidewire.grammar.fragments as fragments
from guidewire.core.errors import LimitExceededError
from guidewire.grammar import compile_json_schema, compile_lark
from guidewire.grammar.fragments import FragmentStore, analyse, capture, splice
from guidewire.grammar.lexer import ByteDFA
from guidewire.grammar.nfagraph import reachable as nfa_reachable
from guidewire.grammar.regex import NFA, compile_into

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "id": {"type": "string", "format": "uuid"},
        "count": {"type": "integer", "minimum": 0, "multipleOf": 3},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
        "ratio": {"type": "number"},
        "kind": {"enum": ["a", "b", None, True]},
    },
    "required": ["name"],
}
LARK = 'start: WORD ("," WORD)* END\nWORD: /[a-zé]+\\d*/\nEND: "stop"i\n%ignore " "'


def _lexer_tables(d):
    d.build_all()
    return d.trans[:d.n_states].copy(), list(d.emit), list(d.alive), [t.infinite for t in d.terminals]


def _masks(g, texts, tokenizer):
    out = []
    for text in texts:
        m = g.matcher()
        for tid in tokenizer.encode(text, add_special_tokens=False):
            out.append(m.current_mask().copy())
            if not m.advance(tid):
                break
        out.append(m.current_mask().copy())
    return np.array(out)


@pytest.fixture
def cold_store(monkeypatch):
    store = FragmentStore()
    monkeypatch.setattr(fragments, "STORE", store)
    import guidewire.grammar.frontend as frontend
    monkeypatch.setattr(frontend, "STORE", store)
    return store


@pytest.mark.parametrize("kind", ["schema", "lark"])
def test_warm_store_builds_the_same_lexer_and_masks(smollm2, smol_tokenizer, cold_store, kind):
    """A grammar compiled from stored fragments equals the one built from scratch, and
    another grammar sharing some of its terminals is unaffected by the sharing."""
    def build():
        if kind == "schema":
            return compile_json_schema(SCHEMA, smollm2)
        return compile_lark(LARK, smollm2)
    texts = (['{"name": "ab", "count": 9, "tags": ["x"], "kind": null}', '{"name":"\\u00e9","ratio":-1.5e3}']
             if kind == "schema" else ["abc,dé1 stop", "x STOP", "a,,b"])
    cold = build()
    assert len(cold_store) > 0, "the first compile stores its terminals"
    held = cold_store.n_states
    warm = build()
    assert cold_store.n_states == held, "the second compile finds every terminal stored"
    for a, b in zip(_lexer_tables(cold.dfa), _lexer_tables(warm.dfa)):
        assert np.array_equal(a, b)
    assert np.array_equal(_masks(cold, texts, smol_tokenizer), _masks(warm, texts, smol_tokenizer))


def test_fragment_facts_match_the_whole_nfa_analysis(smollm2, cold_store):
    """Owner, liveness and infiniteness from per-fragment facts equal the lexer's own
    whole-NFA searches, on a grammar mixing literals, regexes and JSON builders."""
    compile_json_schema(SCHEMA, smollm2)   # warm: the next compile splices
    g = compile_json_schema(SCHEMA, smollm2)
    nfa, terms = g.dfa.nfa, g.dfa.terminals
    ref = ByteDFA(nfa, [replace(t, infinite=False) for t in terms])
    assert bytes(ref.live) == bytes(g.dfa.live)
    assert [t.infinite for t in ref.terminals] == [t.infinite for t in terms]
    assert any(t.infinite for t in terms) and not all(t.infinite for t in terms)
    reachable = sorted(set().union(*(nfa_reachable(nfa, t.start) for t in terms)))
    assert np.array_equal(ref.owner[reachable], g.dfa.owner[reachable])
    for a, b in zip(_lexer_tables(g.dfa), _lexer_tables(ref)):
        assert np.array_equal(a, b)


def test_store_keys_separate_flags_and_literal_spellings(smollm2, smol_tokenizer, cold_store):
    """A case-insensitive literal and a case-sensitive one of the same text are different
    automata: a stored ``"stop"i`` must not serve ``"stop"``."""
    loose = compile_lark('start: "stop"i', smollm2)
    strict = compile_lark('start: "stop"', smollm2)
    upper = smol_tokenizer.encode("STOP", add_special_tokens=False)
    m_loose, m_strict = loose.matcher(), strict.matcher()
    assert all(m_loose.advance(t) for t in upper)
    assert not all(m_strict.advance(t) for t in upper)


def test_analyse_refuses_an_open_fragment_and_finds_dead_states():
    """A fragment with an edge out of its own states is not closed (None); inside a closed
    one, states that cannot reach the end are not live and a cycle among them is no cycle."""
    nfa = NFA()
    outside = nfa.add_state()
    first = len(nfa)
    frag = compile_into(nfa, "ab", 0)
    assert analyse(nfa, first, frag) is not None
    nfa.add_bytes(frag.start, outside, 0x61, 0x61)
    assert analyse(nfa, first, frag) is None

    nfa = NFA()
    frag = compile_into(nfa, "ab", 0)
    trap = nfa.add_state()
    nfa.add_bytes(frag.start, trap, 0x78, 0x78)
    nfa.add_bytes(trap, trap, 0x78, 0x78)   # a cycle that never reaches the end
    facts = analyse(nfa, 0, frag)
    assert facts.live[trap] == 0 and facts.live[frag.start] == 1 and not facts.infinite
    nfa.add_bytes(frag.end, frag.start, 0x2C, 0x2C)   # now a live cycle
    assert analyse(nfa, 0, frag).infinite


def test_splice_copies_with_an_offset_and_respects_the_state_limit():
    """A spliced fragment reads the same bytes as the original; the NFA's limit still holds."""
    src = NFA()
    frag = compile_into(src, "[a-c]x+", 0)
    stored = capture(src, 0, frag, analyse(src, 0, frag))
    dst = NFA()
    pad = dst.add_state()
    copy = splice(dst, stored)
    assert copy.start == frag.start + 1 and copy.end == frag.end + 1 and pad == 0
    assert [[(lo, hi, t - 1) for lo, hi, t in e] for e in dst.edges[1:]] == src.edges
    tight = NFA(max_states=stored.n_states)
    tight.add_state()
    with pytest.raises(LimitExceededError):
        splice(tight, stored)


def test_store_evicts_least_recently_used_fragments_at_its_bound():
    """The store holds at most ``max_states`` NFA states; reading a fragment keeps it."""
    def stored(pattern):
        nfa = NFA()
        frag = compile_into(nfa, pattern, 0)
        return capture(nfa, 0, frag, analyse(nfa, 0, frag))
    a, b, c = stored("abc"), stored("defg"), stored("hijkl")
    store = FragmentStore(max_states=a.n_states + c.n_states + 1, max_fragment_states=100)
    store.put("a", a)
    store.put("b", b)
    assert store.get("a") == a     # a is now the most recently used
    store.put("c", c)
    assert store.get("b") is None and store.get("a") == a and store.get("c") == c
    assert store.n_states == a.n_states + c.n_states <= store.max_states
    small = FragmentStore(max_states=1000, max_fragment_states=2)
    small.put("a", a)
    assert len(small) == 0 and not small.accepts(a.n_states)
