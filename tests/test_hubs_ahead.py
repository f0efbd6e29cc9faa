"""A per-request grammar's hub tables built at compile time (grammar/precompute.py, hub_states_ahead):
the same masks as lazily built tables, the gate, and the budget."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_json_schema
from guidewire.grammar import precompute as precompute_mod
from guidewire.grammar.lexer import START
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
    else:               # fixed keys and short strings only, or a lexer built lazily (no hubs known yet)
        assert ahead.precomputed is None
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
