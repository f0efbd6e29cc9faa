"""The IDE constraints against independent oracles: the suffix gate against the ``regex`` package's
partial matching and ``re.fullmatch``, token healing and the AND of constraints against brute force
over the vocabulary, the stop rules' streaming hold-back against the rules on the longer text."""

from __future__ import annotations

import re

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.core.bitmask import allocate_token_bitmask, bitmask_to_ids
from guidewire.grammar import compile_regex
from guidewire.monitors import intersect
from guidewire.ide.endtokens import EndTokens
from guidewire.ide.fim import InfillError
from guidewire.ide.gate import SuffixGate
from guidewire.ide.healing import TokenHealing, healable_tail
from guidewire.ide.stops import CodeStops
from runtime_fakes import EOS, byte_id, tiny_vocab

VOCAB = tiny_vocab()
LIST = r"\[(a|b)*(,(a|b)+)*\];"            # the whole document's language
ALPHABET = "ab,[];"


@pytest.fixture(scope="module")
def grammar():
    return compile_regex(LIST, VOCAB)


def _ids(row):
    return set(bitmask_to_ids(row, VOCAB.vocab_size).tolist())


def _viable(text: str) -> bool:
    return regex.fullmatch(LIST, text, partial=True) is not None


RUNS = {"gate": 0}


@settings(max_examples=150, deadline=None)
@given(prefix=st.one_of(st.text(ALPHABET, max_size=6), st.text("ab,", max_size=5).map(lambda t: "[" + t)),
       middle=st.text(ALPHABET, max_size=6), suffix=st.text(ALPHABET, max_size=5))
def test_gate_masks_match_the_oracles(grammar, prefix, middle, suffix):
    if not _viable(prefix):
        with pytest.raises(InfillError, match="line 1, column"):
            SuffixGate(grammar, prefix, suffix)
        return
    RUNS["gate"] += 1
    gate = SuffixGate(grammar, prefix, suffix)
    done = ""
    for ch in middle:
        row = gate.current_mask()
        allowed = _ids(row)
        for c in ALPHABET:   # single-byte tokens: allowed iff prefix + middle so far + c stays viable
            assert (byte_id(c.encode()) in allowed) == _viable(prefix + done + c), (prefix, done, c)
        # EOS iff the suffix completes the document
        fits = re.fullmatch(LIST, prefix + done + suffix) is not None
        assert (EOS in allowed) == fits == gate.is_accepting() == gate.accepts(done)
        if not gate.advance(byte_id(ch.encode())):
            assert not _viable(prefix + done + ch)
            break
        done += ch
    if gate.is_accepting():
        assert gate.advance(EOS) and gate.is_terminated() and _ids(gate.current_mask()) == {EOS}
        gate.rollback(1)
    n = len(done)
    f = gate.fork()
    if n:
        gate.rollback(n)
        assert gate.accepts("") == (re.fullmatch(LIST, prefix + suffix) is not None)
        want = next((i for i in range(len(ALPHABET) + 1) if i == len(ALPHABET)
                     or not _viable(prefix + done + ALPHABET[:i + 1])), 0)
        assert f.validate([byte_id(c.encode()) for c in ALPHABET]) == want


def test_gate_ran_cases():
    assert RUNS["gate"] >= 20, RUNS


def test_gate_error_names_line_and_column(grammar):
    with pytest.raises(InfillError, match=r"line 1, column 4 \('\]'\)"):
        SuffixGate(grammar, "[a]]", "")


def test_token_healing_against_brute_force():
    for tail in (b"a", b"ab", b"abc", b"hel", b" w", b"\xc3\xa9"):
        h = TokenHealing(VOCAB, tail)
        k = 0
        while k < len(tail):
            rest = tail[k:]
            want = {i for i, b in enumerate(VOCAB.token_bytes) if b and i not in VOCAB.special_ids
                    and (b.startswith(rest) or rest.startswith(b))}
            assert _ids(h.current_mask()) == want, (tail, k)
            assert not h.is_accepting() and not h.advance(EOS)
            step = min(want, key=lambda i: len(VOCAB.token_bytes[i]))   # the shortest: heal byte by byte
            assert h.advance(step)
            k += len(VOCAB.token_bytes[step])
        assert h.is_accepting() and len(_ids(h.current_mask())) == VOCAB.vocab_size
        h.rollback(1)
        assert not h.is_accepting()


def test_healable_tail():
    ids = [byte_id(b"x"), VOCAB.token_bytes.index(b"ab")]
    assert healable_tail(VOCAB, ids, "xab") == b"ab"
    assert healable_tail(VOCAB, ids, "xa") == b""                 # the prefix does not end with the token
    assert healable_tail(VOCAB, [byte_id(b"x"), byte_id(b"\n")], "x\n") == b"\n"
    assert healable_tail(VOCAB, [byte_id(b"x"), byte_id(b"\xc3")], "x\xc3") == b""   # not whole UTF-8
    assert healable_tail(VOCAB, ids[1:], "ab") == b""             # never the whole prompt


def test_intersect_of_gate_and_healing(grammar):
    a = SuffixGate(grammar, "[", "];")
    b = TokenHealing(VOCAB, b"ab")
    both = intersect(a, b)
    bm = allocate_token_bitmask(2, VOCAB.vocab_size)
    both.fill_bitmask(bm, 1)
    assert _ids(bm[1]) == _ids(a.current_mask()) & _ids(b.current_mask()) == {byte_id(b"a"),
                                                                              VOCAB.token_bytes.index(b"ab")}
    assert not both.advance(byte_id(b"b"))            # the gate allows it, healing does not: nothing moves
    assert _ids(a.current_mask()) == _ids(SuffixGate(grammar, "[", "];").current_mask())
    assert both.advance(VOCAB.token_bytes.index(b"ab")) and both.is_accepting()
    assert both.fork().forced_tokens() == []
    both.rollback(1)
    assert not both.is_accepting()


def test_end_tokens():
    e = EndTokens(VOCAB.vocab_size, [5])
    assert e.advance(7) and not e.is_terminated() and e.validate([1, 5, 2]) == 2
    assert e.advance(5) and e.is_terminated() and e.is_accepting() and not e.advance(1)
    e.rollback(1)
    assert not e.is_terminated()


def test_stop_rules():
    s = CodeStops("def f():\n    ")
    assert s.cut("return 1\n\ndef g") == len("return 1")                  # blank line
    assert s.cut("x = 1\n    y = 2\nz = 3") == len("x = 1\n    y = 2")     # dedent below the cursor's line
    assert s.cut("x = 1\n    y = 2") is None
    assert CodeStops("x = f(", ")\n").cut("a, b\nc") == 4                  # inside a line: its end
    assert CodeStops("", stop=["ab"]).cuts("xabab") == [1, 3]
    assert CodeStops("", stop=[]).cut("a\n\n\nb") is None


@settings(max_examples=300, deadline=None)
@given(prefix=st.sampled_from(["", "def f():\n    ", "x = (", "  y"]), suffix=st.sampled_from(["", ")\n", "\nz"]),
       stop=st.sampled_from([None, ["\n\n"], ["ab", "b\n"]]), text=st.text(" \tab\n", max_size=12),
       more=st.text(" \tab\n", max_size=8))
def test_settled_text_is_never_cut_later(prefix, suffix, stop, text, more):
    s = CodeStops(prefix, suffix, stop)
    if s.cut(text) is not None:
        return
    cut = s.cut(text + more)
    if cut is not None:
        assert cut >= s.settled(text), (text, more)
    assert s.settled(text) <= len(text)


def test_gate_with_a_torch_bitmask(grammar):
    torch = pytest.importorskip("torch")
    gate = SuffixGate(grammar, "[a", "];")
    bm = torch.zeros((1, allocate_token_bitmask(1, VOCAB.vocab_size).shape[1]), dtype=torch.int32)
    gate.fill_bitmask(bm, 0)
    assert np.array_equal(bm[0].numpy(), gate.current_mask())
