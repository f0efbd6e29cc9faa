"""A per-request grammar's hub tables built at compile time (grammar/precompute.py, hub_states_ahead):
the same masks as lazily built tables, the gate, and the budget."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_json_schema
from guidewire.grammar import compiled as compiled_mod
from guidewire.grammar import precompute as precompute_mod
from guidewire.grammar.lexer import START
from guidewire.grammar.tokentable import TableBuilder
from guidewire.grammar.tabletuning import MIN_LOOP_BYTES
from test_projection import _favoured, _walk_pair, object_schemas

# keys and values of several patterns: an eagerly built lexer with many string-body hubs (no counter:
# a maxLength string would keep every state of the key product off a loop for its length)
MANY_HUBS = {"type": "object",
             "properties": {"id": {"type": "string", "pattern": "^[a-z][a-zA-Z0-9_-]*$"},
                            "name": {"type": "string"},
                            "mail": {"type": "string", "format": "email"},
                            "tag": {"type": "string", "pattern": "^x"}},
             "patternProperties": {"^\\.|[a-z][\\.a-zA-Z0-9_]*$": {"type": "string"}},
             "additionalProperties": False}


def _open_gate(monkeypatch, hubs: int = 1) -> None:
    """The gate's vocabulary bound off (the tests run on SmolLM2's 49k tokens), ``hubs`` hubs enough."""
    monkeypatch.setattr(precompute_mod, "HUBS_AHEAD_VOCAB", 0)
    monkeypatch.setattr(precompute_mod, "HUBS_AHEAD_MIN", hubs)


def _pair(schema, vocab, monkeypatch):
    """(hubs built ahead, every table lazy) for ``schema``."""
    _open_gate(monkeypatch)
    ahead = compile_json_schema(schema, vocab)
    monkeypatch.setenv("GUIDEWIRE_HUBS_AHEAD_SECONDS", "0")
    lazy = compile_json_schema(schema, vocab)
    monkeypatch.delenv("GUIDEWIRE_HUBS_AHEAD_SECONDS")
    assert lazy.precomputed is None
    return ahead, lazy


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(object_schemas(), st.integers(0, 2**31))
def test_masks_with_hubs_ahead_equal_lazy_masks(smollm2, monkeypatch, schema, seed):
    """Random object schemas (patterns, counters, enums, formats, extra keys): with the hubs' tables
    built at compile time, masks and verdicts equal those of lazily built tables along random walks
    of allowed tokens (a hub built ahead meets other hubs in another order than a mask would)."""
    ahead, lazy = _pair(schema, smollm2, monkeypatch)
    if ahead._rep.size and ahead._builder.hub_states().any():   # built whole, a string of any length
        assert ahead.precomputed["tables"] > 0 and ahead.precomputed["complete"]
    elif ahead._projection is None:      # built whole, fixed keys and short strings only
        assert ahead.precomputed is None
    else:               # projected: its projected strings' states (test_projected_states_ahead)
        assert ahead.precomputed is None or ahead.precomputed["tables"] > 0
    taken, _moved = _walk_pair(ahead, lazy, smollm2, random.Random(seed), 40, _favoured(smollm2))
    assert taken >= 1


def test_the_states_built_ahead_and_their_masks(smollm2, monkeypatch):
    """START's one-byte successors and the hubs one byte further get their tables at compile time
    (and nothing else); masks agree with the lazy grammar along longer walks of a many-hub schema."""
    _open_gate(monkeypatch, hubs=6)
    g = compile_json_schema(MANY_HUBS, smollm2)
    trans = g.dfa.trans
    loops = {q for q in range(START + 1, g.dfa.n_states)
             if int(np.count_nonzero(trans[q] == q)) >= MIN_LOOP_BYTES}     # a hub: bytes keep it there
    assert len(loops) >= 6
    one = {int(t) for t in trans[START] if t > START}
    two = {int(t) for q in one for t in trans[q] if t > START and int(t) in loops}
    states = precompute_mod.hub_states_ahead(g)
    assert set(states) == one | two and two
    assert g.precomputed["complete"] and g.precomputed["stopped"] is None
    assert all(g._has_table(q) for q in states)
    assert g.precomputed["tables"] <= len(states)
    ahead, lazy = _pair(MANY_HUBS, smollm2, monkeypatch)
    rng, favour = random.Random(7), _favoured(smollm2)
    total = sum(_walk_pair(ahead, lazy, smollm2, rng, 80, favour)[0] for _ in range(5))
    assert total >= 100


def test_the_gate_keeps_small_vocabularies_and_few_hubs_lazy(smollm2, monkeypatch):
    """With the defaults, SmolLM2's 49k vocabulary builds nothing ahead; with the vocabulary bound
    off, a schema of plain strings (few hubs) builds nothing either, and a many-hub one does."""
    assert compile_json_schema(MANY_HUBS, smollm2).precomputed is None
    monkeypatch.setattr(precompute_mod, "HUBS_AHEAD_VOCAB", 0)
    plain = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert compile_json_schema(plain, smollm2).precomputed is None
    assert compile_json_schema(MANY_HUBS, smollm2).precomputed["tables"] > 0


def test_a_spent_budget_builds_nothing_and_masks_stay_right(smollm2, monkeypatch):
    """A budget already spent stops before the first table ("seconds"); the grammar's masks are the
    lazy grammar's all the same."""
    _open_gate(monkeypatch)
    monkeypatch.setenv("GUIDEWIRE_HUBS_AHEAD_SECONDS", "1e-12")
    g = compile_json_schema(MANY_HUBS, smollm2)
    assert g.precomputed["tables"] == 0 and g.precomputed["stopped"] == "seconds"
    assert not g.precomputed["complete"]
    monkeypatch.setenv("GUIDEWIRE_HUBS_AHEAD_SECONDS", "0")
    lazy = compile_json_schema(MANY_HUBS, smollm2)
    taken, _ = _walk_pair(g, lazy, smollm2, random.Random(3), 60, _favoured(smollm2))
    assert taken >= 20


def _walks_build_fewer_tables(ahead, lazy, vocab, monkeypatch, seed: int) -> None:
    """Six random walks of 80 tokens each, masks and verdicts compared (``_walk_pair``): at least
    100 steps taken, and the grammar with tables built ahead builds fewer tables on the way."""
    built = {id(ahead._builder): 0, id(lazy._builder): 0}
    original = TableBuilder.table

    def counting(self, q):
        built[id(self)] = built.get(id(self), 0) + 1
        return original(self, q)

    monkeypatch.setattr(TableBuilder, "table", counting)
    rng, favour = random.Random(seed), _favoured(vocab)
    total = sum(_walk_pair(ahead, lazy, vocab, rng, 80, favour)[0] for _ in range(6))
    assert total >= 100
    assert built[id(ahead._builder)] < built[id(lazy._builder)]



# strings searched by unanchored patterns, beside extra keys: a lexer too large to build up front
# (forced here), projected at each value onto the strings the parser expects there
SEARCHED = {"type": "object",
            "properties": {"path": {"type": "string", "pattern": "[a-z]+/[a-z]+\\.dl"},
                           "args": {"type": "string", "pattern": "[a-z]+(,[a-z]+)*"},
                           "name": {"type": "string"},
                           "size": {"type": "integer"}}}


def test_projected_states_ahead(smollm2, monkeypatch):
    """A lazily built lexer's strings: each FIRST set holding a free string, projected from the
    quote's state, and the hubs one or two bytes on, get their tables at compile time; a walk of
    the grammar finds some of them built (it builds fewer tables than the lazy grammar), and
    masks and verdicts equal the lazy grammar's along random walks."""
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)     # built lazily, as a large product is
    _open_gate(monkeypatch)
    g = compile_json_schema(SEARCHED, smollm2)
    assert not g._rep.size and g._projection is not None
    states = precompute_mod.projected_states_ahead(g)
    assert states and g.precomputed["tables"] > 0 and g.precomputed["complete"]
    assert all(g._has_table(q) for q in states)
    quote = int(g.dfa.trans[START][ord('"')])
    assert quote not in states and all(q > START for q in states)
    owners = g.dfa._owner_list
    quote_owners = {owners[n] for n in g.dfa.nfa_states(quote)}
    for q in states:        # projected (or a byte or two on): fewer string terminals than the quote's
        assert {owners[n] for n in g.dfa.nfa_states(q)} < quote_owners
    projected = {g._projection.project(quote, f | g.dfa.ignored_bits) for f in g.earley.cfg.first_sets()}
    assert set(states) & projected and set(states) - projected     # the projections and hubs near them
    ahead, lazy = _pair(SEARCHED, smollm2, monkeypatch)
    assert ahead.precomputed["tables"] > 0 and lazy.precomputed is None
    _walks_build_fewer_tables(ahead, lazy, smollm2, monkeypatch, 11)


# keys only (every sealed terminal of the top-level object expected at its first key): the quote's
# state projects onto itself there
KEYS_ONLY = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(8)},
             "additionalProperties": {"type": "integer"}}


def test_the_documents_first_key_comes_first(smollm2, monkeypatch):
    """The state of a document's first key (after ``{"``), reached from the grammar's start, is
    listed first and built at compile time even where the projection drops nothing (no FIRST set
    then lists it); the first masks of a walk find it built and agree with the lazy grammar."""
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    _open_gate(monkeypatch)
    g = compile_json_schema(KEYS_ONLY, smollm2)
    assert not g._rep.size and g._projection is not None
    quote = int(g.dfa.trans[START][ord('"')])
    first_key = g.step_bytes(g.earley.initial, START, b'{"')[1]
    assert first_key == quote        # nothing to drop: the quote's own state
    states = precompute_mod.projected_states_ahead(g)
    assert states[0] == first_key and g._has_table(first_key)
    assert g.precomputed["tables"] > 0 and g.precomputed["complete"]
    ahead, lazy = _pair(KEYS_ONLY, smollm2, monkeypatch)
    assert ahead._has_table(quote) and not lazy._has_table(quote)
    _walks_build_fewer_tables(ahead, lazy, smollm2, monkeypatch, 3)


def test_projected_states_ahead_gate(smollm2, monkeypatch):
    """Nothing is projected ahead on SmolLM2's vocabulary with the defaults, nor with a zero
    budget, nor for a lexer built up front that is not projected (a small product)."""
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    assert compile_json_schema(SEARCHED, smollm2).precomputed is None
    monkeypatch.setattr(precompute_mod, "HUBS_AHEAD_VOCAB", 0)
    monkeypatch.setenv("GUIDEWIRE_HUBS_AHEAD_SECONDS", "0")
    assert compile_json_schema(SEARCHED, smollm2).precomputed is None
    monkeypatch.delenv("GUIDEWIRE_HUBS_AHEAD_SECONDS")
    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 16384)
    eager = compile_json_schema(SEARCHED, smollm2)
    assert eager._rep.size and eager._projection is None
    assert precompute_mod.projected_states_ahead(eager) is None


# the same searched strings beside a format and a counter: a product lexer large enough to be
# projected though it is built up front (on a large vocabulary; forced here for SmolLM2's)
SEARCHED_EAGER = {"type": "object",
                  "properties": {"path": {"type": "string", "pattern": "[a-z]+/[a-z]+\\.dl"},
                                 "args": {"type": "string", "pattern": "[a-z]+(,[a-z]+)*"},
                                 "mail": {"type": "string", "format": "email"},
                                 "code": {"type": "string", "maxLength": 24},
                                 "size": {"type": "integer"}}}


def test_projected_states_ahead_of_a_lexer_built_up_front(smollm2, monkeypatch):
    """A lexer built up front and projected (its projected states are new states, beyond its
    classes, whose search hubs are not among its own hubs): the projected states and the hubs near
    them get their tables at compile time too, after the lexer's own hubs; a walk builds fewer
    tables than with nothing built ahead, and masks and verdicts equal that grammar's."""
    monkeypatch.setattr(compiled_mod, "PROJECT_EAGER_VOCAB", 0)
    _open_gate(monkeypatch)
    g = compile_json_schema(SEARCHED_EAGER, smollm2)
    assert g._rep.size and g._projection is not None
    states = precompute_mod.projected_states_ahead(g)
    assert states and all(q >= g._rep.size for q in states)      # new states, not the lexer's classes
    assert all(g._has_table(q) for q in states)
    own = precompute_mod.hub_states_ahead(g)
    assert own and not set(own) & set(states)
    assert all(g._has_table(g._canon(q)) for q in own)
    assert g.precomputed["complete"] and g.precomputed["tables"] >= len(set(states))
    ahead, lazy = _pair(SEARCHED_EAGER, smollm2, monkeypatch)
    _walks_build_fewer_tables(ahead, lazy, smollm2, monkeypatch, 13)


def test_a_lexer_bound_met_while_listing_ends_the_list(smollm2, monkeypatch):
    """A lexer bound met while the projected states are listed ends the list there: the compile
    succeeds, and the masks equal the lazy grammar's."""
    from guidewire.core.errors import LimitExceededError

    monkeypatch.setattr(compiled_mod, "EAGER_LEXER_STATES", 1)
    _open_gate(monkeypatch)
    calls = []

    def bounded(dfa, p):
        calls.append(p)
        raise LimitExceededError("the lexer is full")

    monkeypatch.setattr(precompute_mod, "_hubs_near", bounded)
    g = compile_json_schema(SEARCHED, smollm2)
    assert calls and g.precomputed is None     # nothing listed before the bound: nothing built
    monkeypatch.setenv("GUIDEWIRE_HUBS_AHEAD_SECONDS", "0")
    lazy = compile_json_schema(SEARCHED, smollm2)
    rng, favour = random.Random(5), _favoured(smollm2)
    assert sum(_walk_pair(g, lazy, smollm2, rng, 60, favour)[0] for _ in range(3)) >= 30
