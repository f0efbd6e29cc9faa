"""The token trie and the tables its C walk builds, against brute force and the slow per-token walk.

The trie is checked against the prefixes it spells (every node's tokens are exactly its prefix,
every subtree holds exactly the extensions); the trie-walk tables against :func:`walk_token`
token by token and against the vectorised build mask by mask, on JSON-Schema grammars whose
key strings are the states the trie path is for.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokentable import check_state, interesting_tokens

from guidewire.core import Vocab, allocate_token_bitmask
from guidewire.grammar import compile_json_schema, native, tabletrie
from guidewire.grammar.lexer import START
from guidewire.grammar.tabletrie import _build_trie, token_trie
from guidewire.grammar.tableshortcuts import InheritanceShortcuts
from guidewire.grammar.tokentable import TableBuilder

needs_native = pytest.mark.skipif(native.module() is None, reason="the C extension is not built or is off")


def check_trie(vocab) -> int:
    """Brute-force check of ``vocab``'s trie; returns the number of nodes checked."""
    trie = _build_trie(vocab)
    n = trie.node_byte.size
    prefix, path = [], []
    for k in range(n):
        d = int(trie.node_depth[k])
        path = path[:d - 1] + [int(trie.node_byte[k])]
        assert len(path) == d, "a node's depth skips a level"
        prefix.append(bytes(path))
    assert len(set(prefix)) == n, "two nodes spell the same prefix"
    by_prefix = {}
    for t in vocab.normal_ids.tolist():
        by_prefix.setdefault(vocab.token_bytes[t], []).append(t)
    assert set(by_prefix) <= set(prefix), "a token has no node"
    for k in range(n):
        here = sorted(trie.toks[trie.node_tok[k]:trie.node_tok[k + 1]].tolist())
        assert here == sorted(by_prefix.get(prefix[k], [])), prefix[k]
        end = int(trie.node_end[k])
        inside = [p for p in prefix[k:end] if not p.startswith(prefix[k])]
        assert not inside and (end == n or not prefix[end].startswith(prefix[k])), "a subtree's range is wrong"
        below = trie.toks[trie.node_tok[k]:trie.node_tok[end]].tolist()
        assert all(vocab.token_bytes[t].startswith(prefix[k]) for t in below)
    assert sorted(trie.toks.tolist()) == sorted(vocab.normal_ids.tolist())
    assert trie.max_depth == max(len(vocab.token_bytes[t]) for t in vocab.normal_ids.tolist())
    return n


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.binary(min_size=1, max_size=6, ).map(lambda b: bytes(x % 5 for x in b)), min_size=1, max_size=60))
def test_trie_spells_every_token_brute_force(tokens):
    """Small alphabets force shared prefixes, repeated byte strings and zero bytes."""
    eos = len(tokens)
    vocab = Vocab(tuple(tokens) + (b"",), frozenset({eos}), frozenset({eos}), eos + 7)
    assert check_trie(vocab) >= len(set(tokens))


def test_trie_of_a_real_vocabulary(smollm2):
    assert check_trie(smollm2) > len(smollm2.normal_ids)   # more nodes than tokens: every prefix


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "nickname": {"type": "string"},
                                      "nodes": {"type": "array", "items": {"type": "integer"}}}},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "idle": {"type": "boolean"}},
     "additionalProperties": False, "required": ["id"]},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 5}, "tags": {"enum": ["a\\b", "a\"c"]}},
     "patternProperties": {"^x-": {"type": "number"}}},
]


# lexer states reached by these prefixes: inside a key (a property-name trie beside the generic key
# string, or alone), a string with a counter, an escape, a pattern key
PREFIXES = [
    (b'{"', b'{"n', b'{"ni', b'{"nick', b'{"no', b'{"q', b'{"name": "ab'),
    (b'{"', b'{"i', b'{"id', b'{"id": "1', b'{"id": "12345678-ab'),
    (b'{"t', b'{"title": "ab', b'{"tags": "a\\', b'{"x-', b'{"q', b'{"x-1": 1, "t'),
]


def _spy(monkeypatch):
    """Count the trie path's outcomes (built, fell back) and the walks it took."""
    seen = {"built": 0, "fell_back": 0, "walks": 0, "from_shadow": 0, "resumed": 0, "frontier_full": 0}
    original = tabletrie.TrieTables._trie_table
    compiled = native.module()

    def spy(self, q, row, *base):
        out = original(self, q, row, *base)
        seen["built" if out is not None else "fell_back"] += 1
        if out is not None:
            seen["from_shadow"] += sum(h != START and self.hub[h] < 0 for h in out[2])
        return out

    class Counting:
        def __getattr__(self, name):
            return getattr(compiled, name)

        def trie_walk(self, *args):
            seen["walks"] += 1
            seen["resumed"] += args[20] > 0     # n_front_in: walked below a frontier only
            out = compiled.trie_walk(*args)
            seen["frontier_full"] += out[0] == -2
            return out

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", spy)
    monkeypatch.setattr(native, "_compiled", Counting())
    return seen


@needs_native
@pytest.mark.parametrize("schema", SCHEMAS, ids=["keys", "closed", "patterns"])
def test_trie_tables_read_every_token_as_the_slow_walk(smollm2, monkeypatch, schema):
    """Key-string states (a property-name trie beside the generic key string), string bodies with a
    counter, escapes: each token's group or inherited reading is the slow walk's."""
    seen = _spy(monkeypatch)
    g = compile_json_schema(schema, smollm2)
    builder = g._builder
    builder.admit = None    # whole tables (the grammar's prune drops groups no parser state allows)
    rng = np.random.default_rng(0)
    tokens = interesting_tokens(smollm2, b'"{}:,0123456789abcdefgiklmnorstux-\\ \xc3\xa9', rng, limit=2500)
    tokens += rng.choice(smollm2.normal_ids, 3000, replace=False).tolist()
    states = 0
    for prefix in PREFIXES[SCHEMAS.index(schema)]:
        state = g.step_bytes(g.earley.initial, START, prefix)
        assert state is not None, prefix
        check_state(builder, state[1], tokens)
        states += 1
    assert states >= 4
    assert seen["built"] >= 3, seen     # the trie path built tables (not only the vectorised one)
    if schema is SCHEMAS[2]:    # the title's counter is alive in every key string: no hub is met, the
        assert seen["from_shadow"], seen    # key states meet their shadow (the counter without the names)


def _walk_masks(schema, vocab, rng, walks=4, steps=120, prepare=None):
    """Masks of random walks through ``schema``'s grammar (tokens drawn from each mask);
    ``prepare(grammar)`` runs once it is compiled."""
    g = compile_json_schema(schema, vocab)
    if prepare is not None:
        prepare(g)
    out = []
    bm = allocate_token_bitmask(1, vocab.vocab_size)
    for _ in range(walks):
        m = g.matcher()
        for _ in range(steps):
            m.fill_bitmask(bm, 0)
            out.append(bm[0].copy())
            bits = np.flatnonzero(np.unpackbits(bm[0].view(np.uint8), bitorder="little")[:vocab.vocab_size])
            bits = bits[~np.isin(bits, list(vocab.eos_ids))]
            if not bits.size or not m.advance(int(bits[rng.integers(bits.size)])):
                break
    return out


def _assert_masks_as_vectorised(schema, vocab, monkeypatch, seed: int) -> None:
    """Random walks (6 x 90 steps, the same token choices) give the same masks with the trie path
    and with the vectorised build only (the trie path switched off afterwards)."""
    with_trie = _walk_masks(schema, vocab, np.random.default_rng(seed), walks=6, steps=90)
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", lambda self, q, row, *base: None)
    without = _walk_masks(schema, vocab, np.random.default_rng(seed), walks=6, steps=90)
    assert len(with_trie) == len(without) and len(with_trie) > 150
    for a, b in zip(with_trie, without):
        assert np.array_equal(a, b)


@needs_native
@pytest.mark.parametrize("budget", [4096, 3], ids=["walked", "over-budget"])
def test_masks_with_and_without_the_trie_path_are_identical(smollm2, monkeypatch, budget):
    """Random walks (the same token choices) with the trie path and with the vectorised build only;
    with a budget of 3 nodes most trie walks give up and the vectorised build takes over."""
    import guidewire.grammar.tabletuning as tt

    monkeypatch.setattr(tt, "TRIE_NODES", budget)
    monkeypatch.setattr(tt, "TRIE_SLICED_NODES", max(budget, 3))
    original = tabletrie.TrieTables._trie_table
    outcomes = {"built": 0, "fell_back": 0}

    def counting(self, q, row, *base):
        out = original(self, q, row, *base)
        outcomes["built" if out is not None else "fell_back"] += 1
        return out

    compared = 0
    for i, schema in enumerate(SCHEMAS):
        monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", counting)
        with_trie = _walk_masks(schema, smollm2, np.random.default_rng(i))
        monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", lambda self, q, row, *base: None)
        without = _walk_masks(schema, smollm2, np.random.default_rng(i))
        assert len(with_trie) == len(without)
        for a, b in zip(with_trie, without):
            assert np.array_equal(a, b)
        compared += len(with_trie)
    assert compared > 300
    if budget > 3:
        assert outcomes["built"] >= 10, outcomes
    else:
        assert outcomes["fell_back"] >= 10 and outcomes["fell_back"] > outcomes["built"], outcomes


@needs_native
@pytest.mark.parametrize("ref_rows,start,slots", [(32, 4096, 65536), (0, 4096, 65536), (32, 1, 1), (32, 1, 64)],
                         ids=["references-wait", "references-stop", "frontier-full", "frontier-grows"])
def test_trie_walk_makes_the_rows_of_a_lazy_lexer(smollm2, monkeypatch, ref_rows, start, slots):
    """With a lexer built row by row, the walk leaves the subtrees that reach rows not made yet on a
    frontier, asks for the rows and walks on below the frontier only; a reference walk's rows are
    made only up to ``TRIE_REF_ROWS`` (0: a reference stops at its first row not made); a frontier
    too small for the subtrees waiting makes the rows of those it holds and walks again from the
    state (with one slot at most: every time; else with a frontier eight times larger). The tables
    still read every token as the slow walk does."""
    import guidewire.grammar.tabletuning as tt
    from guidewire.grammar import compiled as compiled_grammar

    monkeypatch.setattr(compiled_grammar, "EAGER_LEXER_STATES", 1)
    monkeypatch.setattr(tt, "TRIE_REF_ROWS", ref_rows)
    monkeypatch.setattr(tabletrie, "_FRONT_START", start)
    monkeypatch.setattr(tabletrie, "_FRONT_SLOTS", slots)
    seen = _spy(monkeypatch)
    g = compile_json_schema(SCHEMAS[0], smollm2)
    builder = g._builder
    builder.admit = None
    assert builder._rows is None
    rng = np.random.default_rng(3)
    tokens = interesting_tokens(smollm2, b'"{}:,abdcefikmnos \\', rng, limit=2000)
    for prefix in (b'{"n', b'{"ni', b'{"no'):
        state = g.step_bytes(g.earley.initial, START, prefix)
        check_state(builder, state[1], tokens)
    assert seen["built"] >= 2 and seen["walks"] > seen["built"], seen   # some walk went round again
    if start > 1:
        assert seen["resumed"] >= 1 and not seen["frontier_full"], seen     # ... below its frontier
    elif slots == 1:
        assert seen["frontier_full"] >= 1, seen
    else:
        assert seen["frontier_full"] >= 1 and seen["resumed"] >= 1, seen


@needs_native
def test_large_walks_start_with_the_largest_frontier(smollm2, monkeypatch):
    """In a lexer built row by row, a walk with the large budget (a hub's, a sliced one) starts with
    ``_FRONT_SLOTS`` frontier entries (a wide frontier filled the first size and walked again); a
    first walk with the small budget starts with ``_FRONT_START``."""
    import guidewire.grammar.tabletuning as tt
    from guidewire.grammar import compiled as compiled_grammar

    monkeypatch.setattr(compiled_grammar, "EAGER_LEXER_STATES", 1)
    starts = {"large": [], "small": []}
    walk, buffers = tabletrie.TrieTables._trie_walk, tabletrie._frontier_buffers
    current = []

    def spy_walk(self, compiled, trie, q, refs, first, sliced, budget):
        current.append("large" if budget > tt.TRIE_NODES else "small")
        try:
            return walk(self, compiled, trie, q, refs, first, sliced, budget)
        finally:
            current.pop()

    def spy_buffers(slots, width, max_depth):
        starts[current[-1]].append(slots)
        return buffers(slots, width, max_depth)

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_walk", spy_walk)
    monkeypatch.setattr(tabletrie, "_frontier_buffers", spy_buffers)
    g = compile_json_schema(SLICED, smollm2)
    assert g._builder._rows is None
    for prefix in SLICED_PREFIXES:
        state = g.step_bytes(g.earley.initial, START, prefix)
        g.mask(*state)
    assert starts["large"] and starts["small"], starts
    assert starts["small"][0] == tabletrie._FRONT_START
    assert set(starts["large"]) == {tabletrie._FRONT_SLOTS}, starts


@needs_native
def test_trie_walk_refuses_bad_arrays(smollm2):
    """Typed errors for arrays that do not fit (never a read out of bounds)."""
    trie = token_trie(smollm2)
    words = (smollm2.vocab_size + 31) // 32
    n_states = 4
    ext = np.zeros(n_states * 257, dtype=np.int64)
    copied = np.ones(n_states, dtype=np.uint8)
    emit = np.full(n_states, -1, dtype=np.int64)
    alive = np.full(n_states, -1, dtype=np.int64)
    first = np.ones(256, dtype=np.uint8)
    buf = np.empty(16, dtype=np.int64)
    width = 5                       # a frontier entry without references
    front = np.empty(8 * width, dtype=np.int64)
    pool = np.empty(2 * trie.max_depth, dtype=np.int64)
    walk = native.module().trie_walk

    def call(**kw):
        args = dict(byte=trie.node_byte, depth=trie.node_depth, end=trie.node_end, ntok=trie.node_tok,
                    toks=trie.toks, maxd=trie.max_depth, ext=ext, copied=copied, emit=emit, alive=alive, q=2,
                    refs=np.zeros(0, dtype=np.int64), first=first, inh=np.zeros((0, words), dtype=np.int32),
                    words=words, gid=buf, tok=buf.copy(), n0=0, fin=np.empty(0, dtype=np.int64),
                    lin=np.empty(0, dtype=np.int64), n_fin=0, fout=front, lout=pool, budget=10**6, wait=True)
        args.update(kw)
        return walk(*args.values())

    assert call()[0] == 0          # every state dead: nothing walked, a well-formed answer
    with pytest.raises(IndexError):
        call(q=n_states)
    with pytest.raises(ValueError):
        call(refs=np.array([3], dtype=np.int64))    # a reference needs its inherited row
    with pytest.raises(ValueError):
        call(ntok=trie.node_tok[:-1].copy())
    deeper = ext.copy()
    deeper[2 * 257 + ord("a")] = 3  # "a" lives on: its subtree is walked
    assert call(ext=deeper)[3] > 1
    unmade = copied.copy()
    unmade[3] = 0                   # the row of "a"'s state is not made: its subtree waits on the frontier
    lives = alive.copy()
    lives[3] = 0                    # tokens that end in it are grouped, and "b" keeps it: "ab", "abb", ...
    deeper = deeper.copy()
    deeper[3 * 257 + ord("b")] = 3
    gid_a, tok_a = np.empty(4096, dtype=np.int64), np.empty(4096, dtype=np.int64)
    status, n_a, n_front, _nodes, _groups = call(ext=deeper, copied=unmade, alive=lives, gid=gid_a, tok=tok_a)
    assert status == 0 and n_front == 1 and n_a == 1    # the token "a" itself, before its subtree waits
    entry = front[:width].copy()
    assert entry[2] == 3 and entry[1] == 1
    status, n_b, n_front, nodes, _groups = call(ext=deeper, alive=lives, gid=gid_a, tok=tok_a, n0=n_a,
                                                      fin=entry, n_fin=1)
    assert status == 0 and n_front == 0 and nodes > 0   # resumed below it, once the row is there
    gid_w, tok_w = np.empty(4096, dtype=np.int64), np.empty(4096, dtype=np.int64)
    status, n_w, n_front, _nodes, _groups = call(ext=deeper, alive=lives, gid=gid_w, tok=tok_w)
    assert status == 0 and n_front == 0 and n_w > 1
    assert sorted(tok_a[:n_b].tolist()) == sorted(tok_w[:n_w].tolist())     # the two rounds: one whole walk
    for field, value in ((0, trie.node_byte.size), (3, 2), (2, 0), (2, n_states)):
        broken = entry.copy()       # a node past the trie, more lexemes than bytes, a DEAD or unknown state
        broken[field] = value
        with pytest.raises(ValueError):
            call(ext=deeper, fin=broken, n_fin=1)
    ends = trie.node_end.copy()
    ends[entry[0]] = trie.node_byte.size + 5    # a subtree past the trie's end
    with pytest.raises(ValueError):
        call(ext=deeper, end=ends, fin=entry, n_fin=1)
    with pytest.raises(ValueError):
        call(ext=deeper, fin=entry, n_fin=2)        # more entries than the array holds
    broken = entry.copy()
    broken[1] = 2                   # a depth that is not the node's
    with pytest.raises(ValueError):
        call(ext=deeper, fin=broken, n_fin=1)
    with pytest.raises(ValueError):
        call(fout=np.empty(width - 1, dtype=np.int64))      # no room for one entry
    with pytest.raises(ValueError):
        call(lout=np.empty(2, dtype=np.int64))      # nor for one entry's lexemes
    far = entry.copy()
    far[3], far[4] = 1, 0           # a lexeme past the pool given
    with pytest.raises(ValueError):
        call(ext=deeper, fin=far, n_fin=1)
    with pytest.raises(ValueError):
        call(n0=buf.size + 1)
    with pytest.raises(ValueError):
        call(ext=deeper, maxd=1)    # nodes deeper than max_depth
    bad = ext.copy()
    bad[2 * 257 + ord("a")] = 99   # a transition to a state past the table
    with pytest.raises(IndexError):
        call(ext=bad)
    with pytest.raises(TypeError):
        call(emit=emit.astype(np.int32))
    n_toks = trie.toks.size     # a slice: every array sized to the trie, else a typed error
    member = np.zeros(n_toks, dtype=np.uint8)
    prefix = np.arange(n_toks + 1, dtype=np.int32)
    chars = np.ones(n_toks, dtype=np.int32)
    subc = np.ones(trie.node_byte.size, dtype=np.int32)
    assert call(ext=deeper, member=member, prefix=prefix, chars=chars, subc=subc, limit=5)[0] == 0
    with pytest.raises(ValueError):
        call(member=member[:-1], prefix=prefix, chars=chars, subc=subc, limit=5)
    with pytest.raises(ValueError):
        call(member=member, prefix=prefix, chars=chars, subc=subc[:-1], limit=5)
    with pytest.raises(TypeError):
        call(member=member, prefix=prefix.astype(np.int64), chars=chars, subc=subc, limit=5)


@needs_native
@pytest.mark.parametrize("schema", SCHEMAS, ids=["keys", "closed", "patterns"])
def test_reference_hubs_match_the_numpy_reference(smollm2, schema):
    """The hubs the C walk is given (one or two bytes away, never ``q`` or a busy hub) are the
    numpy reference's, for every lexer state of the grammar and some first-byte subsets."""
    from guidewire.grammar.lexer import DEAD

    g = compile_json_schema(schema, smollm2)
    builder = g._builder
    g.dfa.build_all(limit=20000)
    builder._need(np.arange(1, g.dfa.n_states))
    rng = np.random.default_rng(5)
    compared = with_hubs = 0
    for q in range(1, g.dfa.n_states):
        live = builder._ext[q, :256] != DEAD
        for first in (live, live & (rng.random(256) < 0.5)):
            first = np.ascontiguousarray(first).view(np.uint8)
            builder._busy = set(rng.choice(g.dfa.n_states, 2).tolist())
            got, want = builder._trie_refs(native.module(), q, first), builder._trie_refs_numpy(q, first)
            assert got[-1] == want[-1] == START and sorted(got) == sorted(want), q
            compared += 1
            with_hubs += len(want) > 1
    builder._busy = set()
    assert compared >= 20, compared
    assert with_hubs >= 5 or schema is SCHEMAS[1], with_hubs     # the closed one has no string body hub


PATTERNS = ['"abc" | "abd"', '/[ab]{1,3}/', '/[a-c]{2}x/', '/[a-z]{2}/', '/[ab]+/', '/(ab|ba)c?/', '/[ab]{1,4}/',
            '"k"', '/x[abc]?y?/']


def test_narrow_terminals_match_a_brute_force_count(smollm2):
    """A terminal is narrow iff its language has at most 16 strings: counted here by ``re`` over
    every string of the alphabet up to length 6 (none of these languages holds a longer string,
    except the infinite one, which has more than 16 strings up to that length). Both ways the
    lexer learns it agree: from the stored fragments' facts and by counting in the whole NFA."""
    import itertools
    import re
    from dataclasses import replace

    from guidewire.grammar import compile_lark
    from guidewire.grammar.lexer import ByteDFA
    from guidewire.grammar.nfagraph import NARROW_STRINGS

    rules = "\n".join(f"T{i}: {p}" for i, p in enumerate(PATTERNS))
    g = compile_lark("start: " + " | ".join(f"T{i}" for i in range(len(PATTERNS))) + "\n" + rules, smollm2)
    whole = ByteDFA(g.dfa.nfa, [replace(t, infinite=False, narrow=False) for t in g.dfa.terminals])
    checked = 0
    for i, pattern in enumerate(PATTERNS):
        tid = next(k for k, t in enumerate(g.dfa.terminals) if t.name == f"T{i}")
        if pattern.startswith('"'):
            rx = "|".join(re.escape(a.strip().strip('"')) for a in pattern.split("|"))
        else:
            rx = pattern.strip("/")
        count = sum(1 for n in range(7) for w in itertools.product("abcdkxyz", repeat=n)
                    if re.fullmatch(rx, "".join(w)))
        assert g.dfa.terminals[tid].narrow == (count <= NARROW_STRINGS), (pattern, count)
        assert whole.terminals[tid].narrow == g.dfa.terminals[tid].narrow, pattern
        assert whole.terminals[tid].infinite == g.dfa.terminals[tid].infinite, pattern
        checked += 1
    assert checked == len(PATTERNS)


# strings whose counters have no hub to meet: a maxLength counter alone, one in product with a pattern
# string and another counter (every string terminal is alive after a quote), and non-ASCII text
SLICED = {"type": "object", "properties": {
    "text": {"type": "string", "maxLength": 60},
    "code": {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 40},
    "note": {"type": "string", "minLength": 2, "maxLength": 30}}}
SLICED_PREFIXES = (b'{"text": "a', b'{"text": "ab cd', b'{"text": "\xc3\xa9t\xc3\xa9 ', b'{"note": "x',
                   b'{"text": "' + b'y' * 55, b'{"text": "a\\n')


def _slice_spy(monkeypatch):
    """Count trie walks with a UTF-8 slice taken out (built, or over budget so the vectorised build
    ran) and hub tables built by them."""
    seen = {"sliced": 0, "sliced_fell_back": 0, "hubs": 0, "sliced_hubs": 0, "hub_inherits": 0}
    walk = tabletrie.TrieTables._trie_walk
    table = tabletrie.TrieTables._trie_table

    def spy_walk(self, compiled, trie, q, refs, first, sliced, budget):
        out = walk(self, compiled, trie, q, refs, first, sliced, budget)
        if sliced is not None:
            seen["sliced" if out is not None else "sliced_fell_back"] += 1
            seen["sliced_hubs"] += out is not None and self.hub[q] >= 0
        return out

    def spy_table(self, q, row, *base):
        out = table(self, q, row, *base)
        if out is not None and base and base[0]:
            seen["hubs"] += 1       # a hub's table by the sliced walk (inherits from other hubs only)
            assert all(h != START and self.hub[h] >= 0 for h in out[2]), out[2]
            seen["hub_inherits"] += bool(out[2])
        return out

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_walk", spy_walk)
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", spy_table)
    return seen


def _check_states_and_hubs(vocab, g, prefixes, alphabet: bytes, seed: int, hubs_limit=None):
    """Every sampled token's reading (``check_state``) at the lexer state after each prefix, then at
    the hubs the lexer copied (the first ``hubs_limit``); returns ``(states checked, hubs)``."""
    builder = g._builder
    rng = np.random.default_rng(seed)
    tokens = interesting_tokens(vocab, alphabet, rng, limit=3000)
    tokens += rng.choice(vocab.normal_ids, 4000, replace=False).tolist()
    states = 0
    for prefix in prefixes:
        state = g.step_bytes(g.earley.initial, START, prefix)
        assert state is not None, prefix
        check_state(builder, state[1], tokens)
        states += 1
    hubs = [int(h) for h in np.flatnonzero(builder.hub >= 0) if h != START and builder._copied[h]][:hubs_limit]
    for h in hubs:
        check_state(builder, h, tokens)
    return states, hubs


@needs_native
def test_sliced_trie_tables_read_every_token_as_the_slow_walk(smollm2, monkeypatch):
    """Counter states (alone, in product with a pattern string, near their end, after an escape),
    and hubs: the walk with the slice taken out (after a plain walk over budget; a hub at once,
    beside other hubs); every token's reading (grouped, from the slice's rows, or inherited) is
    the slow walk's, in one place only."""
    seen = _slice_spy(monkeypatch)
    g = compile_json_schema(SLICED, smollm2)
    g._builder.admit = None
    # the states of the prefixes, and the hubs the key and string states walk through (the key string's body)
    states, hubs = _check_states_and_hubs(smollm2, g, SLICED_PREFIXES, b'"{}:,0123456789abcdefgiklmnorstuxy-\\ \n\xc3\xa9',
                                          1, hubs_limit=3)
    assert states == len(SLICED_PREFIXES) and hubs
    assert seen["sliced"] >= 4 and seen["sliced"] > seen["sliced_fell_back"], seen
    assert seen["sliced_hubs"] >= 1, seen     # a hub's table by the sliced walk


@needs_native
def test_masks_with_and_without_the_sliced_walk_are_identical(smollm2, monkeypatch):
    """Random walks through the counter schema: masks with the trie path (slices included) are the
    vectorised build's, mask by mask."""
    seen = _slice_spy(monkeypatch)
    with_trie = _walk_masks(SLICED, smollm2, np.random.default_rng(5), walks=6, steps=90)
    assert seen["sliced"] >= 10, seen
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", lambda self, q, row, *base: None)
    without = _walk_masks(SLICED, smollm2, np.random.default_rng(5), walks=6, steps=90)
    assert len(with_trie) == len(without) and len(with_trie) > 150
    for a, b in zip(with_trie, without):
        assert np.array_equal(a, b)


# strings before an unanchored pattern of one class has matched: a count and "matched yet", where a
# token's end state depends on whether any of its characters is in the class (a product of two
# chains, tableslices._product_plan). Beside a free string (the lexer's product of the three
# terminals ends in a loop), and counted alone (six characters: B's chain runs out at five, the
# product at six, and longer tokens are dead: skipped by the walk, given no row)
PRODUCT_SLICED = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 3, "maxLength": 20, "pattern": "[A-Za-z]+"},
    "hex": {"type": "string", "minLength": 6, "maxLength": 6, "pattern": "[0-9a-f]+"},
    "free": {"type": "string", "pattern": "[a-z]"}}}
PRODUCT_PREFIXES = (b'{"name": "', b'{"name": "12 ', b'{"name": "ab', b'{"hex": "', b'{"hex": "12',
                    b'{"free": "', b'{"free": "1 2', b'{"free": "\xc3\xa9')
PRODUCT_COUNTED = {"type": "array", "items": {"type": "string", "minLength": 6, "maxLength": 6, "pattern": "[0-9a-f]+"}}
PRODUCT_COUNTED_PREFIXES = (b'["', b'["12', b'["ab', b'["1 ', b'["GHIJ', b'["123456", "')


@needs_native
@pytest.mark.parametrize("schema,prefixes,loops", [(PRODUCT_SLICED, PRODUCT_PREFIXES, True),
                                                   (PRODUCT_COUNTED, PRODUCT_COUNTED_PREFIXES, False)])
def test_two_chain_slices_read_every_token_as_the_slow_walk(smollm2, monkeypatch, schema, prefixes, loops):
    """At states before an unanchored pattern has matched, the sliced walk takes a product of two
    chains out (tokens mixing the class and other characters, `` Ab``, ``1a``, answered by rows;
    past a counter's end, dead and skipped), and every sampled token reads as the slow walk reads it."""
    seen = _slice_spy(monkeypatch)
    made, limits = [], []
    original, walk = TableBuilder._product_plan, tabletrie.TrieTables._trie_walk

    def counting(self, *args):
        got = original(self, *args)
        made.append(got)
        return got

    def walk_limits(self, compiled, trie, q, refs, first, sliced, budget):
        if sliced is not None:
            limits.append(sliced[1])
        return walk(self, compiled, trie, q, refs, first, sliced, budget)

    monkeypatch.setattr(TableBuilder, "_product_plan", counting)
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_walk", walk_limits)
    g = compile_json_schema(schema, smollm2)
    g._builder.admit = None
    states, _hubs = _check_states_and_hubs(smollm2, g, prefixes, b'"{}[]:,0123456789abcdefxyzABGZ-_ \n\xc3\xa9',
                                           3, hubs_limit=0)
    assert states == len(prefixes) and seen["sliced"] >= 3, seen
    products = [p for p in made if p is not None]
    assert len(products) >= 2 and all(p.loops == loops for p in products)
    if not loops:       # the product's chains end dead: the walk skipped every member
        assert all(p.limit <= 7 for p in products) and limits and all(lim > 7 for lim in limits)


# value strings whose patterns refuse characters a free string takes (a space, a non-word character):
# after a quote every string terminal is alive, and the first such character drops the patterns, so
# a hub of many NFA states reads most tokens (the space-led ones) as a hub of fewer does
HUB_REFS = {"type": "object", "properties": {
    "tag": {"type": "string", "pattern": "^[\\w.:-]+$"},
    "css": {"type": "string", "pattern": "^[\\w\\s-]+$"},
    "when": {"type": "string", "format": "date"}},
    "additionalProperties": True}
HUB_REFS_PREFIXES = (b'{"', b'{"t', b'{"tag": "a', b'{"css": "x y', b'{"x": "a b', b'{"css": "x', b'{"x": "ab:c', b'{"x": "2020-')


@needs_native
def test_hub_tables_inherit_from_other_hubs_acyclically(smollm2, monkeypatch):
    """Hub tables walked beside other hubs inherit from them, acyclically (a chain of inherited
    tables always ends), every token's reading (grouped, from the slice's rows, inherited through a
    chain of hubs, or merged from a reused hub with its inherited rows) is the slow walk's, and
    random walks give the vectorised build's masks, mask by mask."""
    seen = _slice_spy(monkeypatch)
    plans = {"merged": 0, "kept": 0}
    planned = InheritanceShortcuts._merge_plan

    def spy_plan(self, q, reused):
        out = planned(self, q, reused)
        plans["merged"] += sum(len(pieces) > 1 for _h, _f, pieces, _k in out)   # an inherited table's groups
        plans["kept"] += sum(bool(kept) for _h, _f, _p, kept in out)
        return out

    monkeypatch.setattr(InheritanceShortcuts, "_merge_plan", spy_plan)
    g = compile_json_schema(HUB_REFS, smollm2)
    builder = g._builder
    builder.admit = None
    monkeypatch.setattr(g, "_prune", lambda table: table)    # a reused hub's table whole too (not pruned)
    states, hubs = _check_states_and_hubs(smollm2, g, HUB_REFS_PREFIXES,
                                          b'"{}:,0123456789abcdefgiklmnorstuxy-.\\ \n\xc3\xa9', 3)
    assert states == len(HUB_REFS_PREFIXES) and len(hubs) >= 3
    assert seen["hub_inherits"] >= 2, seen     # fails where hubs are walked with no reference
    assert plans["merged"] >= 1 or plans["kept"] >= 1, plans    # a reused hub's inherited rows went along
    rep = builder.canon
    for h in hubs:      # every inheritance between hubs is an edge the builder checked (by class)
        for r, _row in builder.table(h).inherit:
            assert rep(r) in builder._hub_edges.get(rep(h), ()), (h, r)

    def acyclic_from(h, path=()):   # depth first over the classes' edges
        assert h not in path, path + (h,)
        for r in builder._hub_edges.get(h, ()):
            acyclic_from(r, path + (h,))

    assert sum(map(len, builder._hub_edges.values())) >= 2
    for h in list(builder._hub_edges):
        acyclic_from(h)

    _assert_masks_as_vectorised(HUB_REFS, smollm2, monkeypatch, seed=7)


@needs_native
def test_hub_inheritance_survives_evicted_tables(smollm2, monkeypatch):
    """A table cache that holds a table or two: hub tables are evicted and rebuilt while others
    inherit from them (the builder keeps every edge, so a rebuilt table closes no cycle). No table
    is built inside its own build, and random walks give the vectorised build's masks."""
    from guidewire.core import Limits
    from guidewire.grammar.tokentable import TableBuilder

    active, nested, evicted = [], [], {"n": 0}
    original = TableBuilder._table

    def watched(self, q):
        nested.extend([q] if q in active else [])
        active.append(q)
        try:
            return original(self, q)
        finally:
            active.pop()

    grammars = []

    def tiny_caches(g):
        g.set_limits(Limits(table_cache_bytes=1, mask_cache_bytes=1))    # every new table (and mask) evicts the last
        trim = g._trim_tables

        def counting():
            before = len(g._tables)
            trim()
            evicted["n"] += before - len(g._tables)

        g._trim_tables = counting
        grammars.append(g)

    monkeypatch.setattr(TableBuilder, "_table", watched)
    with_trie = _walk_masks(HUB_REFS, smollm2, np.random.default_rng(9), walks=5, steps=80, prepare=tiny_caches)
    assert evicted["n"] >= 20, evicted
    assert sum(map(len, grammars[0]._builder._hub_edges.values())) >= 1
    assert not nested, nested
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_table", lambda self, q, row, *base: None)
    without = _walk_masks(HUB_REFS, smollm2, np.random.default_rng(9), walks=5, steps=80, prepare=tiny_caches)
    assert len(with_trie) == len(without) and len(with_trie) > 150
    for a, b in zip(with_trie, without):
        assert np.array_equal(a, b)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=300), st.data())
def test_range_max_matches_brute_force(values, data):
    from guidewire.grammar.tabletrie import range_max

    vals = np.array(values, dtype=np.int32)
    pairs = data.draw(st.lists(st.tuples(st.integers(0, len(values) - 1), st.integers(1, len(values))),
                               min_size=1, max_size=50))
    lo = np.array([min(a, b - 1) for a, b in pairs], dtype=np.int64)
    hi = np.array([max(a + 1, b) for a, b in pairs], dtype=np.int64)
    got = range_max(vals, lo, hi)
    assert got.tolist() == [max(values[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]


def test_trie_slice_members_and_subtree_characters(smollm2):
    """A trie slice against the token bytes: members are whole UTF-8 with every character in the
    class (checked by decoding), and each node's subtree count of characters is the brute-force
    most over the tokens below it (a sample of nodes)."""
    from guidewire.grammar.tabletrie import trie_slice

    trie = token_trie(smollm2)
    cls = np.zeros(256, dtype=bool)
    cls[[ord(c) for c in "abcdefghijklmnopqrstuvwxyz "]] = True
    cls[0xC2:0xF5] = True
    sl = trie_slice(smollm2, cls)
    checked = 0
    for i in range(0, trie.toks.size, 37):
        data = smollm2.token_bytes[int(trie.toks[i])]
        try:
            text = data.decode("utf-8")
            ok = all(c in "abcdefghijklmnopqrstuvwxyz " or ord(c) >= 0x80 for c in text)
        except UnicodeDecodeError:
            ok, text = False, None
        assert bool(sl.member[i]) == ok, data
        if text is not None:
            assert sl.chars[i] == len(text)
        assert sl.prefix[i + 1] - sl.prefix[i] == (0 if ok else 1)
        checked += 1
    for k in range(0, trie.node_byte.size, 101):
        lo, hi = trie.node_tok[k], trie.node_tok[trie.node_end[k]]
        assert sl.subtree_chars[k] == sl.chars[lo:hi].max()
    assert checked > 1000


# free keys beside values whose patterns make the key string a product of pattern strings: at `{"`
# the lexer state has several pattern hubs near it, one per set of patterns still alive
PATTERN_KEYS = {"type": "object", "properties": {
    "users": {"type": "array", "items": {"type": "object", "properties": {
        "lid": {"type": "string", "pattern": "^[a-z\\d\\.\\+-]+$"},
        "mail": {"type": "string", "pattern": "^[a-z\\d_\\.\\+-]+@([a-z\\d\\.-]+\\.)*[a-z]+$"},
        "domain": {"type": "string", "pattern": "^[a-z\\d\\.-]*$"}}}},
    "name": {"type": "string"}}}
PATTERN_KEYS_PREFIXES = (b'{"', b'{"u', b'{"us', b'{"na', b'{"x', b'{"1', b'{"users": [{"l', b'{"users": [{"mail": "a.b')


def _hub_tables_of_first_key(vocab, monkeypatch) -> list[int]:
    """The hub tables built by the mask at the first key (``{"``) of PATTERN_KEYS."""
    from guidewire.grammar import tokentable

    g = compile_json_schema(PATTERN_KEYS, vocab)
    state = g.step_bytes(g.earley.initial, START, b'{"')
    built: list[int] = []
    original = tokentable.TableBuilder.table

    def spy(self, q):
        if self.hub[q] >= 0:
            built.append(q)
        return original(self, q)

    monkeypatch.setattr(tokentable.TableBuilder, "table", spy)
    g.mask(*state)
    monkeypatch.setattr(tokentable.TableBuilder, "table", original)
    return built


@needs_native
def test_a_key_beside_several_pattern_hubs_builds_no_table_for_them(smollm2, monkeypatch, nfa_string_automata):
    """A key state with several pattern-string hubs near it, none built: its walk meets none of them
    (it walks their tokens itself), so its first mask builds one hub table (the key string's body,
    whose first bytes it reuses) where meeting them built four; every token's reading at the key
    states and the hubs is the slow walk's, and random walks give the vectorised build's masks."""
    import guidewire.grammar.tabletuning as tt

    monkeypatch.setattr(tt, "TRIE_UNBUILT_REFS", 99)      # meet every hub near it, built or not
    assert len(_hub_tables_of_first_key(smollm2, monkeypatch)) >= 3
    monkeypatch.undo()
    plain = []      # non-hub states walked plainly (no slice) with the large budget
    walk = tabletrie.TrieTables._trie_walk

    def spy_walk(self, compiled, trie, q, refs, first, sliced, budget):
        if sliced is None and budget == tt.TRIE_SLICED_NODES and self.hub[q] < 0:
            plain.append(q)
        return walk(self, compiled, trie, q, refs, first, sliced, budget)

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_walk", spy_walk)
    assert len(_hub_tables_of_first_key(smollm2, monkeypatch)) <= 1
    assert plain, "the key state's table by a plain walk with the large budget"
    monkeypatch.undo()

    g = compile_json_schema(PATTERN_KEYS, smollm2)
    g._builder.admit = None
    monkeypatch.setattr(g, "_prune", lambda table: table)    # a reused hub's table whole too (not pruned)
    states, hubs = _check_states_and_hubs(smollm2, g, PATTERN_KEYS_PREFIXES,
                                          b'"{}:,0123456789abcdefgiklmnorsux-.+@_\\ \n\xc3\xa9', 5)
    assert states == len(PATTERN_KEYS_PREFIXES) and len(hubs) >= 3

    _assert_masks_as_vectorised(PATTERN_KEYS, smollm2, monkeypatch, seed=11)


# a free string beside an unanchored word search: after a value's first bytes the lexer has two
# hubs with only the string terminal alive (the search met or not yet), which read nearly every
# token alike (``\w{2}``: a search met at once, ``\w+``, leaves one state once met, see
# test_universal_states.py, and its hubs no sibling)
SIBLINGS = {"type": "object", "properties": {"s": {"type": "string", "pattern": "\\w{2}"}, "t": {"type": "string"}}}
SIBLINGS_PREFIXES = (b'{"', b'{"t": "', b'{"t": " ', b'{"s": "', b'{"s": " ', b'{"s": "a', b'{"s": "0 ', b'{"s": "a b')


@needs_native
def test_a_hub_walks_beside_built_hubs_with_its_terminals(smollm2, monkeypatch, nfa_string_automata):
    """A hub's walk meets a built hub with the same alive terminals (``_sibling_hubs``) and
    inherits from it; random-walk masks with it are the vectorised build's, and every token's
    reading at the schema's string states and hubs is the slow walk's."""
    original, result = tabletrie.TrieTables._sibling_hubs, tabletrie.TrieTables._trie_result
    near_refs = tabletrie.TrieTables._trie_refs
    seen = {"offered": {}, "near": {}, "met": 0}

    def spy_siblings(self, q):
        out = original(self, q)
        seen["offered"][q] = set(out)
        return out

    def spy_near(self, compiled, q, first):
        out = near_refs(self, compiled, q, first)
        seen["near"][q] = set(out)
        return out

    def spy_result(self, q, got, refs, base, stays):
        out = result(self, q, got, refs, base, stays)
        only_siblings = seen["offered"].get(q, set()) - seen["near"].get(q, set())
        seen["met"] += bool(base and set(out[2]) & only_siblings)   # inherited from a sibling alone
        return out

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_refs", spy_near)
    monkeypatch.setattr(tabletrie.TrieTables, "_sibling_hubs", spy_siblings)
    monkeypatch.setattr(tabletrie.TrieTables, "_trie_result", spy_result)
    _assert_masks_as_vectorised(SIBLINGS, smollm2, monkeypatch, seed=7)   # the trie path first, spied
    assert seen["met"] >= 1, seen
    monkeypatch.undo()
    g = compile_json_schema(SIBLINGS, smollm2)
    g._builder.admit = None
    states, hubs = _check_states_and_hubs(smollm2, g, SIBLINGS_PREFIXES, b'"{}:, abs0t\\\n\xc3\xa9', 3)
    assert states == len(SIBLINGS_PREFIXES) and len(hubs) >= 2


def _round_counter(monkeypatch) -> list:
    """Count the C walk's rounds (one call of ``trie_walk`` each) of every trie table built."""
    rounds = [0]
    walk = tabletrie.TrieTables._trie_walk

    class Counted:
        def __init__(self, module):
            self._module = module

        def __getattr__(self, name):
            return getattr(self._module, name)

        def trie_walk(self, *args):
            rounds[0] += 1
            return self._module.trie_walk(*args)

    def counted(self, compiled, *args):
        return walk(self, Counted(compiled), *args)

    monkeypatch.setattr(tabletrie.TrieTables, "_trie_walk", counted)
    return rounds


# a counter no hub can answer, long enough for SmolLM2's longest runs (48 spaces, dashes, '=')
LONG_RUNS = {"type": "object", "properties": {"t": {"type": "string", "maxLength": 90},
                                              "c": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 70}}}


@needs_native
@pytest.mark.parametrize("prefix", [b'{"t": "', b'{"t": "ab', b'{"c": "x'])
def test_rows_ahead_walk_long_tokens_in_a_few_rounds(smollm2, monkeypatch, prefix):
    """A lazily built counter, its states a byte layer apart: with the rows made ahead below a thin
    frontier and the slice's chain stopped short of the few longest members, the table is built in
    a few rounds of the walk (a round per byte layer of the longest tokens without), and every
    token's reading is the slow walk's (long runs of spaces and dashes included)."""
    import guidewire.grammar.compiled as compiled
    import guidewire.grammar.tabletuning as tt

    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    rng = np.random.default_rng(5)
    runs = [i for i in smollm2.normal_ids.tolist() if len(smollm2.token_bytes[i]) >= 16
            and len(set(smollm2.token_bytes[i])) <= 2]
    assert len(runs) >= 20      # the vocabulary's long runs: what the rounds were spent on
    counts = {}
    for ahead in (True, False):
        with monkeypatch.context() as mp:
            if not ahead:
                mp.setattr(tt, "TRIE_THIN_FRONT", -1)
                mp.setattr(tt, "SLICE_LONG_LEFT", -1)      # the chain followed to the longest member
            rounds = _round_counter(mp)
            g = compile_json_schema(LONG_RUNS, smollm2)
            g._builder.admit = None
            q = g.step_bytes(g.earley.initial, START, prefix)[1]
            tokens = runs + interesting_tokens(smollm2, b'"abcxyz -=\\', rng, limit=1500)
            rounds[0] = 0
            check_state(g._builder, q, tokens)
            counts[ahead] = rounds[0]
    assert counts[True] <= 8 and counts[False] >= 4 * counts[True], counts
