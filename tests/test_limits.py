"""Step budgets and byte-bounded caches of compiled grammars.

A step that needs more work than its budget stops with a typed error and an all-zero mask
(never a hang, never a fail-open mask); the default budget leaves ordinary grammars alone;
caches bounded tightly give exactly the masks of unbounded ones, and stay within their bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from guidewire.core import Limits, LimitExceededError, WorkLimitExceededError, allocate_token_bitmask
from guidewire.core.bitmask import bitmask_to_ids
from guidewire.core.limits import Fuel
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, compile_regex

LAZY_REGEX = r"[ab]*a[ab]{20}|x+"   # 2**21 DFA states: the lexer is built as walks go
UNBOUNDED = Limits(step_work=10**15, step_seconds=None, mask_cache_bytes=1 << 40, table_cache_bytes=1 << 40)
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "v": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/p"}]}},
    "additionalProperties": {"type": "number"},
    "$defs": {"p": {"type": "array", "items": {"enum": ["a", "bc", 3]}, "maxItems": 5}},
}


def _tok(vocab, text: str) -> int:
    return vocab.bytes_to_tokens()[text.encode()]


def _assert_terminal_error(m, vocab) -> None:
    assert isinstance(m.exception, WorkLimitExceededError) and "step_work" in m.error
    buf = allocate_token_bitmask(1, vocab.vocab_size)
    buf[:] = -1
    m.fill_bitmask(buf, 0)
    assert not buf.any()                       # zero mask: not even EOS
    assert m.is_terminated() and not m.is_accepting()
    assert not m.advance(_tok(vocab, "a")) and m.validate([_tok(vocab, "a")]) == 0


def test_tiny_budget_on_advance_is_a_typed_terminal_error(smollm2):
    g = compile_regex(LAZY_REGEX, smollm2)
    g.set_limits(Limits(step_work=3))
    m = g.matcher()
    ok = True
    for text in ["ab", "bb", "ba", "aa"] * 10:   # past 14 bytes, lexer states the eager build left
        ok = m.advance(_tok(smollm2, text))
        if not ok:
            break
    assert not ok
    _assert_terminal_error(m, smollm2)
    m.rollback(m.num_tokens)                   # rollback leaves the error state
    assert m.exception is None and m.error is None


def test_tiny_budget_on_mask_is_a_typed_terminal_error(smollm2):
    g = compile_lark(builtin_grammar("sql"), smollm2)
    m = g.matcher()
    assert m.advance(_tok(smollm2, "SELECT"))  # built under the default budget
    g.set_limits(Limits(step_work=5))          # this state's token table is not built yet
    buf = allocate_token_bitmask(1, smollm2.vocab_size)
    m.fill_bitmask(buf, 0)
    assert not buf.any()
    _assert_terminal_error(m, smollm2)
    # a new step (another matcher) gets a fresh budget; with the default one it goes through
    g.set_limits(Limits())
    m2 = g.matcher()
    assert m2.advance(_tok(smollm2, "SELECT"))
    m2.fill_bitmask(buf, 0)
    assert m2.exception is None and buf.any()


def test_wall_clock_cap_uses_the_step_clock(monkeypatch):
    clock = iter([0.0, 0.5, 2.5])
    monkeypatch.setattr("guidewire.core.limits.time.perf_counter", lambda: next(clock))
    fuel = Fuel(10**9, 2.0)
    fuel.refill()
    fuel.spend(1)     # starts the clock at 0.0
    fuel.spend(1)     # 0.5 s in
    with pytest.raises(WorkLimitExceededError, match="step_seconds"):
        fuel.spend(1)   # 2.5 s in: past the 2 s cap
    assert issubclass(WorkLimitExceededError, LimitExceededError)


def test_limits_are_validated(monkeypatch):
    with pytest.raises(ValueError, match="step_work"):
        Limits(step_work=0)
    with pytest.raises(ValueError, match="step_seconds"):
        Limits(step_seconds=-1.0)
    monkeypatch.setenv("GUIDEWIRE_STEP_WORK", "12345")
    monkeypatch.setenv("GUIDEWIRE_MASK_CACHE_BYTES", "4096")
    assert Limits().step_work == 12345 and Limits().mask_cache_bytes == 4096
    monkeypatch.setenv("GUIDEWIRE_STEP_WORK", "lots")
    with pytest.raises(ValueError, match="GUIDEWIRE_STEP_WORK"):
        Limits()


def _walks(g, vocab, n_walks: int, steps: int, seed: int, check=None):
    """Random walks (uniform over allowed non-EOS tokens): every mask row, as bytes."""
    rng = np.random.default_rng(seed)
    eos = sorted(vocab.eos_ids)
    buf = allocate_token_bitmask(1, vocab.vocab_size)
    out = []
    for _ in range(n_walks):
        m = g.matcher()
        for _step in range(steps):
            m.fill_bitmask(buf, 0)
            assert m.exception is None, m.error
            out.append(buf[0].tobytes())
            if check is not None:
                check(g)
            ids = np.setdiff1d(bitmask_to_ids(buf[0], vocab.vocab_size), eos)
            if ids.size == 0:
                break
            assert m.advance(int(rng.choice(ids)))
    return out


KINDS = {
    "json_schema": lambda v: compile_json_schema(SCHEMA, v),
    "lark_sql": lambda v: compile_lark(builtin_grammar("sql"), v),
    "regex": lambda v: compile_regex(LAZY_REGEX, v),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_default_budget_and_tiny_caches_do_not_change_masks(smollm2, kind):
    reference = KINDS[kind](smollm2)
    reference.set_limits(UNBOUNDED)
    want = _walks(reference, smollm2, 6, 20, seed=3)

    default = KINDS[kind](smollm2)             # default limits: never trips on these walks
    assert _walks(default, smollm2, 6, 20, seed=3) == want

    mask_bound, table_bound = 64 << 10, 128 << 10
    tight = KINDS[kind](smollm2)
    tight.set_limits(Limits(mask_cache_bytes=mask_bound, table_cache_bytes=table_bound))
    built = []
    original = tight._builder.table
    tight._builder.table = lambda q: built.append(q) or original(q)

    def within_bounds(g):
        sizes = g.cache_bytes()
        assert sizes["masks"] <= mask_bound
        assert sizes["tables"] <= table_bound or len(g._tables) == 1   # the newest table always stays

    got = _walks(tight, smollm2, 6, 20, seed=3, check=within_bounds)
    assert got == want
    assert len(want) >= 60
    assert len(tight._masks) < len(reference._masks)   # masks were evicted ...
    assert len(built) > len(tight._tables)             # ... and tables rebuilt after eviction


def test_api_grammar_cache_is_bounded_in_bytes(smollm2, monkeypatch):
    import guidewire.api as api
    from guidewire.runtime import registry

    api.clear_caches()
    try:
        patterns = ("a+b", "c+d", "[0-9]{3}-x")
        gs = [api.get_grammar("regex", p, smollm2) for p in patterns]
        assert len(registry._grammars) == 3 and api.get_grammar("regex", "a+b", smollm2) is gs[0]   # a hit
        assert all(g.memory_bytes() > 0 for g in gs)
        monkeypatch.setattr(registry._grammars, "max_bytes", sum(g.memory_bytes() for g in gs[1:]) + 1)
        newest = api.get_grammar("regex", "q+", smollm2)   # over the bound: the oldest go first
        assert registry._grammars.values()[-1] is newest
        assert sum(g.memory_bytes() for g in registry._grammars.values()) <= registry._grammars.max_bytes
        assert len(registry._grammars) < 4
        monkeypatch.setattr(registry._grammars, "max_bytes", 1)   # only the newest grammar stays
        last = api.get_grammar("regex", "z+", smollm2)
        assert registry._grammars.values() == [last]
    finally:
        api.clear_caches()


def test_fragment_store_is_bounded_in_bytes():
    import sys

    from guidewire.grammar.fragments import FragmentStore, analyse, capture
    from guidewire.grammar.regex import NFA, compile_into

    def stored(pattern):
        nfa = NFA()
        frag = compile_into(nfa, pattern, 0)
        return capture(nfa, 0, frag, analyse(nfa, 0, frag))

    a, b, c = stored("[a-z]{3,8}"), stored(r"\d+\.\d+"), stored("abc|def")
    for s in (a, b, c):   # the estimate covers what the tuples really hold (sys.getsizeof)
        held = (sum(sys.getsizeof(t) for t in s.eps)
                + sum(sys.getsizeof(e) + sum(sys.getsizeof(x) for x in e) for e in s.edges))
        assert s.nbytes >= held > 0
    store = FragmentStore(max_states=10**9, max_fragment_states=10**9, max_bytes=a.nbytes + c.nbytes + 1)
    store.put("a", a)
    store.put("b", b)
    assert store.get("a") == a
    store.put("c", c)
    assert store.get("b") is None and store.get("a") == a and store.get("c") == c
    assert store.n_bytes == a.nbytes + c.nbytes <= store.max_bytes
    store.put("huge", stored(r"\w{2,40}"))   # alone over the bound: never stored
    assert store.get("huge") is None and store.n_bytes <= store.max_bytes


@pytest.mark.parametrize("kind, bound", [("regex", "lexer_bytes"), ("lark_sql", "parser_bytes")])
def test_state_space_bounds_are_terminal_errors(smollm2, kind, bound):
    g = KINDS[kind](smollm2)
    built = g.dfa.nbytes if bound == "lexer_bytes" else g.earley.nbytes
    assert built > 0
    g.set_limits(Limits(**{bound: built + 1}))   # no room for one more lexer state / Earley set
    m = g.matcher()
    buf = allocate_token_bitmask(1, smollm2.vocab_size)
    text = ["ab", "bb", "ba", "aa"] * 10 if kind == "regex" else ["SELECT", " a", " FROM", " t", " WHERE", " a", "="]
    for t in text:
        m.fill_bitmask(buf, 0)
        if m.exception is not None or not m.advance(_tok(smollm2, t)):
            break
    assert isinstance(m.exception, LimitExceededError) and bound in m.error
    m.fill_bitmask(buf, 0)
    assert not buf.any() and m.is_terminated()
    assert (g.dfa.nbytes if bound == "lexer_bytes" else g.earley.nbytes) <= built + 1


def test_grammar_cache_bounds_count_and_bytes_and_builds_once_per_key():
    import threading

    from guidewire.grammar.cache import GrammarCache

    class Fake:
        def __init__(self, size):
            self.size = size

        def memory_bytes(self):
            return self.size

    cache = GrammarCache(max_entries=3, max_bytes=100)
    built = []

    def build(k, size):
        built.append(k)
        return Fake(size)

    a = cache.get_or_build("a", lambda: build("a", 40))
    assert cache.get_or_build("a", lambda: build("a", 40)) is a and built == ["a"]
    cache.get_or_build("b", lambda: build("b", 40))
    cache.get("a")                                        # "a" is now the most recently used
    cache.get_or_build("c", lambda: build("c", 40))      # 120 bytes: the oldest ("b") goes
    assert cache.get("b") is None and cache.get("a") is a and len(cache) == 2
    for k in "defg":                                      # count bound
        cache.get_or_build(k, lambda k=k: build(k, 1))
    assert len(cache) == 3 and sum(g.memory_bytes() for g in cache.values()) <= 100
    big = cache.get_or_build("huge", lambda: build("huge", 10_000))   # over the bound alone: it stays
    assert cache.values() == [big]
    with pytest.raises(ValueError):
        GrammarCache(0, 1)

    # racing threads on one key all get the same stored grammar
    shared = GrammarCache(8, 1 << 20)
    got = []
    barrier = threading.Barrier(6)

    def worker():
        barrier.wait()
        got.append(shared.get_or_build("k", lambda: Fake(1)))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and all(g is got[0] for g in got) and len(shared) == 1
