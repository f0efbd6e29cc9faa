"""The compiled halves of a lazily built lexer's first token tables against their Python
references, on random lexer states of counted and patterned strings (hypothesis):

- ``_native.utf8_lands`` (``SliceShortcuts._lands_of``): whether every UTF-8 character finishes
  from a lexer state inside it into a target, against the recursive ``_rest_lands``;
- ``_native.ahead_rows`` (``TrieTables._rows_ahead_compiled``): the lexer rows a trie walk will
  need below a thin frontier, byte layer by byte layer, built in one call, against
  ``_rows_ahead_python`` (a layer per ``ensure_rows``) on a twin lexer: the same states listed, the
  same states made with the same numbers, rows and labels.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guidewire.grammar.compiled as compiled_mod
from guidewire.core import Vocab
from guidewire.grammar import compile_json_schema, native
from guidewire.grammar.lexer import DEAD, START, ByteDFA
from guidewire.grammar.tableslices import _ALL_LEADS, _NO_LIMIT
from guidewire.grammar.tabletrie import token_trie, trie_slice
from guidewire.grammar.vocabindex import UTF8_LEAD_NEXT

needs_native = pytest.mark.skipif(native.module() is None, reason="the C extension is not built or is off")

STRINGS = [
    {"type": "string", "maxLength": 40},
    {"type": "string", "minLength": 3, "maxLength": 25},
    {"type": "string", "pattern": "^[\\w-]+$", "maxLength": 30},
    {"type": "string", "pattern": "\\d{3}-[a-f0-9]+", "minLength": 12},
    {"type": "string", "pattern": "^[a-z\u00e9\u20ac]+$", "maxLength": 20},
    {"type": "string", "pattern": "^[^\u4e00-\u9fff]{2,9}$"},
    {"type": "string", "format": "email", "maxLength": 64},
    {"type": "string", "pattern": "[\u0400-\u04ff]", "maxLength": 50},
]
PREFIXES = [b'"', b'"ab', b'"12', b'"\xc3\xa9', b'"x\xe2\x82\xac', b'"123-', b'"\xd0\x96a', b'"a.b@']
CHARS = ["a", "1", "-", "\u00e9", "\u20ac", "\u4e2d", "\U0001f600", "\u0416", "@"]


def _grammars(vocab, monkeypatch):
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)     # every lexer built lazily
    return [compile_json_schema({"type": "object", "properties": {"s": s}}, vocab) for s in STRINGS]


def _at(g, prefix: bytes):
    """``(table builder, its lexer, the lexer state after '{"s": ' + prefix)``, the rows of that
    state and START built, or None where the prefix is dead."""
    got = g.step_bytes(g.earley.initial, START, b'{"s": ' + prefix)
    if got is None or got[1] == DEAD:
        return None
    g._builder.dfa.ensure_rows(np.array([START, got[1]], dtype=np.int64))
    return g._builder, g._builder.dfa, got[1]


@needs_native
def test_utf8_lands_gives_the_recursive_verdicts(smollm2, monkeypatch):
    """For every lead byte out of random lexer states and every target a character reaches, the
    C verdicts (one call for all pairs, rows built in batches) equal ``_rest_lands``' (a call per
    pair, memo cleared), both ways; with ``every``, all False as soon as one pair is False."""
    grammars = _grammars(smollm2, monkeypatch)
    ran = {"cases": 0, "true": 0, "false": 0}

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(STRINGS) - 1), st.sampled_from(PREFIXES))
    def run(which, prefix):
        got = _at(grammars[which], prefix)
        if got is None:
            return
        b, dfa, q = got
        firsts = dfa.trans[q].take(_ALL_LEADS).astype(np.int64)
        good = firsts != DEAD
        if not good.any():
            return
        keys = np.unique((firsts[good] << 3) | UTF8_LEAD_NEXT.take(_ALL_LEADS[good]))
        targets = {DEAD + 2}
        for c in CHARS:
            s = q
            for byte in c.encode():
                s = dfa.step(s, byte) if s != DEAD else DEAD
            if s != DEAD:
                targets.add(s)
        for t in sorted(targets):
            b._lands.clear()
            fast = b._lands_of(keys, t)
            b._lands.clear()
            every = b._lands_of(keys, t, every=True)
            b._lands.clear()
            ref = np.array([b._rest_lands(k >> 3, k & 7, t) for k in keys.tolist()])
            assert np.array_equal(fast, ref), (which, prefix, t, fast, ref)
            assert np.array_equal(every, np.full(keys.size, ref.all())), (which, prefix, t)
            ran["cases"] += keys.size
            ran["true"] += int(ref.sum())
            ran["false"] += int((~ref).sum())

    run()
    assert ran["cases"] >= 300 and ran["true"] >= 30 and ran["false"] >= 30, ran


def _same_lexers(a, b) -> int:
    """Assert two lexers hold the same states, rows and labels; their number of states."""
    n = a.n_states
    assert b.n_states == n and a._states == b._states and a._index == b._index
    assert (a.row_done[:n] == b.row_done[:n]).all() and (a.trans[:n] == b.trans[:n]).all()
    assert list(a.emit) == list(b.emit) and list(a.alive) == list(b.alive)
    return n


#: tokens that end a string and lex on (a state made inside a call accepts, and its dead bytes
#: restart at START): SmolLM2 has few of these, so they are added to it
TAILS = [b'",', b'"}', b'", "', b'"}\n', b'",\n "', b'"]']
HEADS = [b"ab", b"12", b"a-", b"xy9", b"\xc3\xa9a", b"q", b"123-4"]


def _with_tails(vocab) -> Vocab:
    extra = tuple(h + t for h in HEADS for t in TAILS)
    return Vocab(vocab.token_bytes + extra, vocab.special_ids, vocab.eos_ids, vocab.vocab_size + len(extra),
                 vocab.name + "+tails")


@needs_native
def test_ahead_rows_makes_the_rows_of_the_python_layers(smollm2, monkeypatch):
    """Below a few frontier nodes of the token trie (first bytes out of random lexer states), the
    compiled call lists the same states, in the same order, as the Python loop on a twin lexer (a
    ``lazy_rows`` batch per layer), and leaves both lexers the same (states, numbers, rows, labels),
    with and without a UTF-8 slice answering its short members (limits from 1 character to none).
    Lexers start small, so some calls stop for the table to grow and are called again; tokens
    that close a string and go on (``ab", "``) make accepting states inside a call."""
    vocab = _with_tails(smollm2)
    twins = list(zip(_grammars(vocab, monkeypatch), _grammars(vocab, monkeypatch)))
    trie = token_trie(vocab)
    firsts = np.flatnonzero(trie.node_depth == 1)
    closing = {int(k) for k in firsts if trie.node_byte[k] in b'"\\' + bytes(h[0] for h in HEADS)}
    word = np.zeros(256, dtype=bool)
    word[[ord(c) for c in "abcdefghijklmnopqrstuvwxyz0123456789"]] = True
    word[_ALL_LEADS] = True
    compiled = native.module()
    ran = {"cases": 0, "states": 0, "sliced": 0, "new": 0, "again": 0}
    rows_below = ByteDFA.rows_below

    def counted(self, *args):
        got = rows_below(self, *args)
        ran["again"] += got[2]
        return got
    monkeypatch.setattr(ByteDFA, "rows_below", counted)

    @settings(max_examples=90, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(STRINGS) - 1), st.sampled_from(PREFIXES), st.data())
    def run(which, prefix, data):
        ga, gb = twins[which]
        got, twin = _at(ga, prefix), _at(gb, prefix)
        if got is None:
            assert twin is None
            return
        b, dfa, q = got
        entries = []
        drawn = data.draw(st.lists(st.sampled_from(firsts.tolist()), min_size=1, max_size=6, unique=True))
        for k in sorted(set(drawn) | closing):     # a closing quote's children restart at START
            t = int(dfa.trans[q][trie.node_byte[k]])
            if t == DEAD and dfa.emit[q] >= 0:
                t = int(dfa.trans[START][trie.node_byte[k]])
            if t != DEAD and trie.node_end[k] > k + 1:
                entries.append((k, 1, t, 0, 0))
        if not entries:
            return
        waiting = np.array(entries, dtype=np.int64)
        dfa.ensure_rows(np.unique(waiting[:, 2]))
        twin[1].ensure_rows(np.unique(waiting[:, 2]))
        before = _same_lexers(dfa, twin[1])
        limit = data.draw(st.sampled_from([None, 1, 3, 12, _NO_LIMIT]))
        sliced = None if limit is None else (trie_slice(vocab, word), limit)
        room = int((trie.node_end.take(waiting[:, 0]) - waiting[:, 0] - 1).sum())
        made = b._rows_ahead_compiled(compiled, trie, waiting, sliced, room)
        assert made == twin[0]._rows_ahead_python(trie, waiting, sliced), (which, prefix, limit)
        ran["new"] += _same_lexers(dfa, twin[1]) - before
        ran["cases"] += 1
        ran["states"] += len(made)
        ran["sliced"] += sliced is not None

    run()
    assert ran["cases"] >= 30 and ran["sliced"] >= 15 and ran["states"] >= 250 and ran["new"] >= 100, ran
    assert ran["again"] >= 1, ran


@needs_native
def test_the_compiled_helpers_refuse_bad_input(smollm2):
    """Wrong dtypes, sizes, states and keys raise typed errors, not a crash."""
    compiled = native.module()
    trie = token_trie(smollm2)
    trans = np.zeros((4, 256), dtype=np.int32)
    done = np.ones(4, dtype=np.uint8)
    out = np.empty(2, dtype=np.int8)
    with pytest.raises(TypeError):
        compiled.utf8_lands(trans.astype(np.int64), done, np.array([9, 10]), 2, 64, DEAD, out)
    with pytest.raises(ValueError, match="sizes"):
        compiled.utf8_lands(trans, done, np.array([9, 10, 11]), 2, 64, DEAD, out)
    with pytest.raises(ValueError, match="sizes"):
        compiled.utf8_lands(trans, done, np.array([9, 10]), 2, 65, DEAD, out)
    with pytest.raises(ValueError, match="inside a character"):
        compiled.utf8_lands(trans, done, np.array([16, 10]), 2, 64, DEAD, out)
    with pytest.raises(IndexError, match="out of range"):
        compiled.utf8_lands(trans, done, np.array([(9 << 3) | 1, 10]), 2, 64, DEAD, out)
    g = compile_json_schema({"type": "string", "maxLength": 9}, smollm2)
    dfa = g._builder.dfa
    dfa.ensure_rows(np.array([START], dtype=np.int64))
    emit = np.asarray(dfa.emit, dtype=np.int64)
    row = dfa.trans[START]

    def live_children(k):       # children of node k that a walk from START goes on below
        out, j = [], k + 1
        while j < trie.node_end[k]:
            if row[trie.node_byte[j]] != DEAD and trie.node_end[j] > j + 1:
                out.append(j)
            j = trie.node_end[j]
        return out
    firsts = np.flatnonzero(trie.node_depth == 1)
    bushy = next(int(k) for k in firsts if len(live_children(int(k))) >= 2)
    nodes, states = np.array([bushy], dtype=np.int64), np.array([START], dtype=np.int64)
    out, made = np.empty((2, 1), dtype=np.int64), np.empty(4, dtype=np.int64)

    def call(nodes=nodes, states=states, emit=emit, out=out, made=made):
        return compiled.ahead_rows(*dfa._lazy_args(compiled), dfa.trans, dfa.row_done, dfa.n_states,
                                   *dfa._lazy_limits(), trie.node_byte, trie.node_end, trie.node_tok, emit, nodes,
                                   states, out[0], out[1], made, True, DEAD, START)
    n_states, done_before = dfa.n_states, dfa.row_done.copy()
    free = int(np.flatnonzero(~dfa.row_done[:n_states])[0]) if not dfa.row_done[:n_states].all() else None
    if free is not None:
        with pytest.raises(ValueError, match="not walkable"):
            call(states=np.array([free], dtype=np.int64))
    with pytest.raises(ValueError, match="sizes"):
        call(states=np.array([START, START], dtype=np.int64))
    with pytest.raises(TypeError):
        call(emit=emit.astype(np.int32))
    with pytest.raises(ValueError, match="full"):       # more children live than the out arrays hold
        call()
    assert dfa.n_states == n_states and (dfa.row_done == done_before).all()    # each failed call undone
