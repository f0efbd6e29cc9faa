"""Compile-time token tables (grammar/precompute.py): the same masks as lazily built tables, on
random walks of real grammars; budgets in seconds and bytes are kept; work limits end it cleanly;
the first masks after a complete precomputation build no table."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import Limits, bitmask_to_bool
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark
from guidewire.grammar.precompute import default_seconds

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "tags": {"type": "array", "items": {"enum": ["a", "bc", "déf"]}},
                                           "n": {"type": "integer", "minimum": -5}},
          "required": ["name"]}


def _walk(g, vocab, rng, steps):
    """Masks along a random walk over allowed tokens (EOS ends it)."""
    m = g.matcher()
    out = []
    for _ in range(steps):
        row = m.current_mask().copy()
        out.append(row)
        allowed = [t for t in np.flatnonzero(bitmask_to_bool(row, vocab.vocab_size)).tolist()
                   if t not in vocab.eos_ids]
        if not allowed:
            break
        assert m.advance(rng.choice(allowed))
    return out


def _build(which, vocab, precompute):
    if which == "schema":
        g = compile_json_schema(SCHEMA, vocab)
        if precompute:
            g.precomputed = g.precompute(precompute)
        return g
    return compile_lark(builtin_grammar(which), vocab, precompute=precompute)


@pytest.mark.parametrize("which,budget", [("json", 30.0), ("sql", 30.0), ("arithmetic", 30.0),
                                          ("schema", 30.0), ("python", 0.3)])
def test_precomputed_masks_equal_lazy_masks(smollm2, which, budget):
    """Fresh grammars per example, one precomputed (complete, or cut by the budget for python),
    one lazy: every mask along the same random walk is byte-identical."""
    ran = {"walks": 0, "masks": 0}
    pre_seen = []

    @settings(max_examples=4, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**32 - 1))
    def run(seed):
        pre = _build(which, smollm2, budget)
        lazy = _build(which, smollm2, 0)
        pre_seen.append(pre.precomputed)
        assert lazy.precomputed is None
        got = _walk(pre, smollm2, random.Random(seed), 40)
        ref = _walk(lazy, smollm2, random.Random(seed), 40)
        assert len(got) == len(ref)
        for k, (a, b) in enumerate(zip(got, ref)):
            assert np.array_equal(a, b), f"{which}: mask {k} differs (seed {seed})"
        ran["walks"] += 1
        ran["masks"] += len(got)

    run()
    assert ran["walks"] == 4 and ran["masks"] >= 40, ran
    assert all(p is not None and p["tables"] > 0 for p in pre_seen)
    if which == "python":   # its ~1,900 tables do not fit 0.3 s: a partial precomputation
        assert not pre_seen[0]["complete"] and pre_seen[0]["stopped"] in ("seconds", "bytes")
    else:
        assert all(p["complete"] and p["stopped"] is None for p in pre_seen)


def test_complete_precomputation_leaves_no_table_to_build(smollm2):
    """After a complete precomputation, walking JSON builds no new token table."""
    g = compile_lark(builtin_grammar("json"), smollm2, precompute=30)
    assert g.precomputed["complete"]
    n_tables = g.stats()["token_tables"]
    assert n_tables == g.precomputed["classes"] >= 20
    masks = _walk(g, smollm2, random.Random(3), 60)
    assert len(masks) >= 10
    assert g.stats()["token_tables"] == n_tables


def test_lazy_compile_builds_tables_on_demand(smollm2):
    """precompute=0: compile builds only the start state's table (the satisfiability check)."""
    g = compile_lark(builtin_grammar("json"), smollm2, precompute=0)
    assert g.precomputed is None
    assert g.stats()["token_tables"] == 1
    _walk(g, smollm2, random.Random(3), 30)
    assert g.stats()["token_tables"] > 1


def test_byte_budget_is_kept(smollm2):
    """A byte cap stops the precomputation once the tables hold that much (one table may cross it)."""
    g = compile_lark(builtin_grammar("sql"), smollm2, precompute=0)
    one = g.cache_bytes()["tables"]    # the start state's table, built by the satisfiability check
    summary = g.precompute(30, max_bytes=one + 1)
    assert summary["stopped"] == "bytes" and not summary["complete"]
    assert summary["tables"] == 1 and summary["bytes"] == g.cache_bytes()["tables"] > one


def test_default_byte_cap_is_a_share_of_the_table_cache(smollm2):
    """Without max_bytes the cap is a share of Limits.table_cache_bytes, so the precomputed tables
    stay cached (the start state's included) instead of evicting one another."""
    from guidewire.grammar.lexer import START

    full = compile_lark(builtin_grammar("sql"), smollm2, precompute=30).cache_bytes()["tables"]
    g = compile_lark(builtin_grammar("sql"), smollm2, precompute=0)
    g.set_limits(Limits(table_cache_bytes=full))   # room for all of them, but the cap is 3/4 of it
    summary = g.precompute(30)
    assert summary["stopped"] == "bytes" and summary["tables"] >= 2
    assert full // 2 <= g.cache_bytes()["tables"] <= full
    assert g._canon(START) in g._tables


def test_seconds_budget_is_kept(smollm2):
    """A zero budget builds nothing and says why."""
    g = compile_lark(builtin_grammar("sql"), smollm2, precompute=0)
    summary = g.precompute(0.0)
    assert summary["tables"] == 0 and summary["stopped"] == "seconds" and not summary["complete"]


def test_work_limit_ends_precomputation_with_the_reason(smollm2):
    """A table too big for the step budget ends the precomputation (no exception); the mask that
    needs it later reports the limit as a terminal error, as without precomputation."""
    g = compile_lark(builtin_grammar("json"), smollm2, precompute=0)
    g.set_limits(Limits(step_work=50))
    summary = g.precompute(30)
    assert summary["stopped"] and "work" in summary["stopped"].lower()
    assert not summary["complete"]


def test_bad_budgets_are_refused(smollm2, monkeypatch):
    g = compile_lark(builtin_grammar("arithmetic"), smollm2, precompute=0)
    with pytest.raises(ValueError, match="seconds"):
        g.precompute(-1)
    with pytest.raises(ValueError, match="seconds"):
        compile_lark(builtin_grammar("arithmetic"), smollm2, precompute=-0.5)
    monkeypatch.setenv("GUIDEWIRE_PRECOMPUTE_SECONDS", "soon")
    with pytest.raises(ValueError, match="GUIDEWIRE_PRECOMPUTE_SECONDS"):
        default_seconds()
    monkeypatch.setenv("GUIDEWIRE_PRECOMPUTE_SECONDS", "-1")
    with pytest.raises(ValueError, match=">= 0"):
        default_seconds()
    monkeypatch.setenv("GUIDEWIRE_PRECOMPUTE_SECONDS", "0")
    assert compile_lark(builtin_grammar("arithmetic"), smollm2).precomputed is None
