"""Matcher API behaviour (fork, rollback, validate, forced tokens, EOS, specials) and typed errors."""

import numpy as np
import pytest
import torch

from guidewire.core import (GrammarSyntaxError, InexpressibleLiteralError, LimitExceededError,
                            RegexSyntaxError, UnsatisfiableGrammarError, UnsupportedFeatureError, Vocab,
                            allocate_token_bitmask, bitmask_to_bool)
from guidewire.grammar import builtin_grammar, compile_lark, compile_regex
from guidewire.grammar.earley import EarleyAutomaton


@pytest.fixture(scope="module")
def json_g(smollm2):
    return compile_lark(builtin_grammar("json"), smollm2)


def _ids(vocab, *pieces):
    b2t = vocab.bytes_to_tokens()
    return [b2t[p.encode()] for p in pieces]


def test_fork_rollback_validate(json_g, smollm2):
    toks = _ids(smollm2, "{", '"', "a", '"', ":", " [", "1", "]", "}")
    m = json_g.matcher()
    masks = []
    for t in toks:
        masks.append(m.current_mask().copy())
        assert m.advance(t)
    assert m.is_accepting()
    f = m.fork()
    m.rollback(4)
    assert not m.is_accepting() and f.is_accepting()
    assert np.array_equal(m.current_mask(), masks[-4])
    m.rollback(m.num_tokens)
    assert np.array_equal(m.current_mask(), masks[0])
    assert m.validate(toks) == len(toks) and m.num_tokens == 0
    bad = toks[:5] + _ids(smollm2, "}")
    assert m.validate(bad) == 5
    assert not m.advance(_ids(smollm2, "}")[0]) and m.num_tokens == 0
    with pytest.raises(ValueError):
        m.rollback(1)


def test_eos_and_special_tokens(json_g, smollm2):
    m = json_g.matcher()
    row = bitmask_to_bool(m.current_mask(), smollm2.vocab_size)
    assert not row[list(smollm2.special_ids)].any()  # EOS not allowed on empty output, specials never
    assert not m.advance(2)
    for t in _ids(smollm2, "1", "2"):
        m.advance(t)
    row = bitmask_to_bool(m.current_mask(), smollm2.vocab_size)
    assert row[0] and row[2] and not row[1]
    assert m.advance(2) and m.is_terminated()
    row = bitmask_to_bool(m.current_mask(), smollm2.vocab_size)
    assert set(np.flatnonzero(row).tolist()) == set(smollm2.eos_ids)
    assert not m.advance(_ids(smollm2, "3")[0])


def test_fill_bitmask_numpy_and_torch_rows(json_g, smollm2):
    m = json_g.matcher()
    bm = allocate_token_bitmask(3, smollm2.vocab_size)
    m.fill_bitmask(bm, 1)
    assert not bm[0].any() and not bm[2].any() and np.array_equal(bm[1], m.current_mask())
    tbm = torch.zeros((2, bm.shape[1]), dtype=torch.int32)
    m.fill_bitmask(tbm, 0)
    assert np.array_equal(tbm[0].numpy(), m.current_mask())


def test_forced_tokens(smollm2):
    g = compile_lark('start: "{\\"name\\": " NAME\nNAME: /[a-z]+/', smollm2)
    m = g.matcher()
    assert m.forced_bytes() == b'{"name": '
    forced = m.forced_tokens()
    assert smollm2.decode(forced) == b'{"name": '
    for t in forced:
        assert m.advance(t)
    assert m.forced_tokens() == []  # a NAME is free text
    g2 = compile_regex(r"(abc|abd)\.json", smollm2)
    m2 = g2.matcher()
    assert m2.forced_bytes() == b"ab"
    m2.advance(smollm2.bytes_to_tokens()[b"abc"])
    assert m2.forced_bytes() == b".json"


def test_grammar_features(smollm2):
    """Ambiguous, left-recursive and empty rules, repetition ranges, templates-free EBNF."""
    g = compile_lark("""
        start: e
        e: e "+" e | e e | "x" | empty "y"
        empty:
        """, smollm2)
    m = g.matcher()
    for t in _ids(smollm2, "x", "+", "y", "x"):
        assert m.advance(t)
    assert m.is_accepting()
    g = compile_lark('start: "a"~2..3 "b"? ("c" | "d")+', smollm2)
    for text, ok in [("aac", True), ("aaabdd", True), ("ac", False), ("aaaac", False), ("aab", False)]:
        m = g.matcher()
        assert (all(m.advance(t) for t in _ids(smollm2, *text)) and m.is_accepting()) == ok, text


def test_ignore_and_common_imports(smollm2):
    g = compile_lark("""
        start: "[" [ESCAPED_STRING ("," ESCAPED_STRING)*] "]"
        %import common.ESCAPED_STRING
        %import common.WS
        %ignore WS
        """, smollm2)
    m = g.matcher()
    text = '[ "a\\"b" , "c" ]'
    singles = smollm2.bytes_to_tokens()
    assert all(m.advance(singles[c.encode()]) for c in text) and m.is_accepting()


def test_lazy_terminal_is_prefix_free(smollm2):
    g = compile_lark('start: COMMENT "x"\nCOMMENT: /#.*?#/', smollm2)
    singles = smollm2.bytes_to_tokens()
    m = g.matcher()
    assert all(m.advance(singles[c.encode()]) for c in "#ab#x") and m.is_accepting()
    m = g.matcher()
    assert not all(m.advance(singles[c.encode()]) for c in "#a#b#x")


@pytest.mark.parametrize("text,line,col", [
    ('start: "a"\nfoo: ("b"\n', None, None),
    ("start: a b\na: \"x\"\n", None, None),
    ('start: "a" |\n  | ]', 2, None),
])
def test_grammar_syntax_errors_have_positions(smollm2, text, line, col):
    with pytest.raises(GrammarSyntaxError) as info:
        compile_lark(text, smollm2)
    assert info.value.line is not None
    if line is not None:
        assert info.value.line == line
    assert "line" in str(info.value)


def test_regex_errors(smollm2):
    with pytest.raises(RegexSyntaxError) as info:
        compile_regex("ab(c", smollm2)
    assert info.value.column is not None
    for pat in [r"(?<=a)b", r"a(?!b)", r"(a)\1", r"a\bb", r"a^b", r"(?>ab)", r"a*+"]:
        with pytest.raises(UnsupportedFeatureError):
            compile_regex(pat, smollm2)
    with pytest.raises(UnsatisfiableGrammarError):
        compile_regex(r"[^\s\S]", smollm2)
    with pytest.raises(LimitExceededError):
        compile_regex(r"(a|b){200000}", smollm2)


def test_unsatisfiable_and_inexpressible(smollm2):
    with pytest.raises(UnsatisfiableGrammarError):
        compile_lark("start: a\na: a \"x\"", smollm2)
    with pytest.raises(UnsupportedFeatureError):
        compile_lark('start: A "x"\nA: /b*/', smollm2)
    tiny = Vocab((b"a", b"b", b""), frozenset({2}), frozenset({2}), 3)
    with pytest.raises(InexpressibleLiteralError):
        compile_lark('start: "ac"', tiny)
    with pytest.raises(UnsatisfiableGrammarError):
        compile_regex("c+", tiny)


def test_limit_is_an_error_state_not_fail_open(json_g, smollm2):
    small = compile_lark(builtin_grammar("json"), smollm2)
    small.earley = EarleyAutomaton(small.earley.cfg, max_sets=3)
    small._masks.clear()
    m = small.matcher()
    ok = True
    for t in _ids(smollm2, "[", "[", "[", "[", "["):
        ok = m.advance(t)
        if not ok:
            break
    assert not ok and m.error is not None and "Earley" in m.error
    assert not m.current_mask().any() and m.is_terminated()
