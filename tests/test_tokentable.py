"""The vectorised token tables against a slow per-token reference walk (hypothesis)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import bitmask_to_bool
from guidewire.grammar import builtin_grammar, compile_lark
from guidewire.grammar.lexer import DEAD
from guidewire.grammar.tokentable import build_table, walk_token


@pytest.fixture(scope="module")
def grammars(smollm2):
    return {name: compile_lark(builtin_grammar(name), smollm2) for name in ("json", "sql")}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["json", "sql"]), st.data())
def test_table_groups_match_slow_walk(grammars, name, data):
    g = grammars[name]
    dfa, vocab = g.dfa, g.vocab
    dfa.build_all(limit=5000)
    q = data.draw(st.integers(1, dfa.n_states - 1))
    table = build_table(dfa, q, vocab)
    where = {}
    for gi, (lexemes, alive) in enumerate(table.groups):
        for t in np.flatnonzero(bitmask_to_bool(table.masks[gi], vocab.vocab_size)).tolist():
            assert t not in where, "a token sits in two groups"
            where[t] = (lexemes, alive)
    sample = data.draw(st.lists(st.sampled_from(vocab.normal_ids.tolist()), min_size=50, max_size=200))
    for t in sample:
        lexemes, fin = walk_token(dfa, q, vocab.token_bytes[t])
        if fin == DEAD or not dfa.alive[fin]:
            assert t not in where
        else:
            assert where[t] == (tuple(lexemes), dfa.alive[fin]), (q, vocab.token_bytes[t])
