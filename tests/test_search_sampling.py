"""Distribution tests of guidewire.search against a brute-force enumeration (tests/search_fakes.py):
the target is computed by walking every tokenization of every sentence of a finite language
with plain string checks, independently of guidewire's grammar code."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from guidewire.grammar import compile_regex
from guidewire.search import Sampler, SearchBudgetExceeded, SearchError, Target, sample
from runtime_fakes import FakeModel, tiny_vocab
from search_fakes import PROMPT, SENTENCES, biased_model, chi_square, chi_square_critical, enumerate_language

VOCAB = tiny_vocab()
GRAMMAR = compile_regex("|".join(re.escape(s) for s in SENTENCES), VOCAB)
EXACT, GCD_LAW, TOKENIZATIONS = enumerate_language()
Z = sum(EXACT.values())
TARGET = {k: v / Z for k, v in EXACT.items()}


def sampler(**kw) -> Sampler:
    kw.setdefault("max_tokens", 8)
    return Sampler(PROMPT, grammar=GRAMMAR, model=biased_model(VOCAB.vocab_size), vocab=VOCAB, **kw)


def test_oracle_enumerates_every_tokenization():
    # ab: a|b, ab; abc: a|b|c, ab|c, abc; b; ba: b|a; cab: c|a|b, c|ab; cc: c|c
    assert TOKENIZATIONS == 10
    assert abs(sum(GCD_LAW.values()) - 1) < 1e-9
    # the setting is one where local masking distorts: GCD's law is far from the target
    assert max(abs(TARGET[k] - GCD_LAW[k]) for k in TARGET) > 0.05


@pytest.mark.parametrize("method,warmup", [("asap", 400), ("cars", 0)])
def test_exact_methods_pass_chi_square(method, warmup):
    s = sampler()
    if warmup:
        s.sample(warmup, method, seed=1)
    ss = s.sample(3000, method, seed=2)
    assert ss.log_weights is None and len(ss) == 3000
    counts = Counter(ss.texts)
    stat = chi_square(counts, TARGET)
    assert stat < chi_square_critical(len(TARGET) - 1), (stat, counts)
    assert set(counts) == set(TARGET)      # every sentence seen, no sentence outside the language


def test_chi_square_tells_gcd_from_the_target():
    ss = sampler().sample(3000, "gcd", seed=3)
    counts = Counter(ss.texts)
    assert chi_square(counts, TARGET) > 10 * chi_square_critical(len(TARGET) - 1)
    # ... while GCD does sample its own (enumerated) law: the test has power, not a bug
    gcd = {k: v for k, v in GCD_LAW.items() if v > 1e-3}
    seen = Counter({k: c for k, c in counts.items() if k in gcd})
    assert chi_square(seen, {k: v / sum(gcd.values()) for k, v in gcd.items()}) < chi_square_critical(len(gcd) - 1)


def test_cars_rejects_then_learns():
    s = sampler()
    ss = s.sample(400, "cars", seed=4)
    st = ss.stats
    assert st.accepted == 400 and st.rejected > 0 and st.proposals == 400 + st.rejected
    again = s.sample(400, "cars", seed=5)
    # the trie now holds the invalid mass of the prefixes it met: fewer rejections
    assert again.stats.rejected < st.rejected
    assert s.trie.root.efg >= Z * (1 - 1e-6)                 # an upper bound of the valid mass ...
    assert s.trie.root.efg < 1.0                             # ... that has been lowered


def test_asap_trie_converges_to_z():
    s = sampler()
    s.sample(1500, "asap", seed=6)
    assert abs(s.trie.root.efg - Z) / Z < 1e-4


def _weighted_tv(ss) -> float:
    d = ss.distribution()
    return 0.5 * sum(abs(d.get(k, 0.0) - TARGET[k]) for k in TARGET)


def test_awrs_weights_are_unbiased():
    n = 4000
    ss = sampler().sample(n, "awrs", seed=7)
    raw = np.exp(np.array(ss.log_weights) + ss.log_normalizer + math.log(n))  # unnormalised weights
    assert abs(raw.mean() - math.exp(ss.log_normalizer)) < 1e-9 * raw.mean()
    se = raw.std() / math.sqrt(n)
    assert abs(raw.mean() - Z) < 4 * se, (raw.mean(), Z, se)
    assert _weighted_tv(ss) < 0.03
    # lazy checks: far fewer than the whole vocabulary per token
    assert ss.stats.checks_per_token < VOCAB.vocab_size / 20


def test_smc_normaliser_is_unbiased():
    runs = 150
    s = sampler()
    est = np.array([math.exp(s.sample(8, "smc", seed=100 + r).log_normalizer) for r in range(runs)])
    se = est.std() / math.sqrt(runs)
    assert abs(est.mean() - Z) < 4 * se, (est.mean(), Z, se)


def no_c(text: str) -> float:
    return 0.0 if "c" in text else 1.0


@pytest.mark.parametrize("in_check", [False, True])
def test_smc_potential_changes_the_target(in_check):
    exact = {k: v for k, v in EXACT.items() if "c" not in k}
    zc = sum(exact.values())
    s = sampler()
    runs = 400
    ests, mass = [], Counter()
    for r in range(runs):
        ss = s.sample(8, "smc", seed=300 + r, potential=no_c, potential_every=1, potential_in_check=in_check)
        if in_check:       # no particle ever takes a token that zeroes the potential
            assert all(math.isfinite(w) for w in ss.log_weights)
        z = math.exp(ss.log_normalizer)
        ests.append(z)
        for k, w in ss.distribution().items():    # runs combined by their normaliser estimates
            mass[k] += z * w
        assert ss.stats.potential_calls > 0
    ests = np.array(ests)
    assert abs(ests.mean() - zc) < 4 * ests.std() / math.sqrt(runs)
    assert set(mass) == set(exact)                     # no text with a "c" keeps weight
    total = sum(mass.values())
    assert max(abs(mass[k] / total - exact[k] / zc) for k in exact) < 0.05


def test_temperature_is_applied_to_logits_first():
    exact, _, _ = enumerate_language(temperature=0.6)
    zt = sum(exact.values())
    s = sampler(temperature=0.6)
    ss = s.sample(3000, "cars", seed=8)
    assert chi_square(Counter(ss.texts), {k: v / zt for k, v in exact.items()}) < chi_square_critical(len(exact) - 1)


def test_trie_save_load_round_trip(tmp_path):
    s = sampler()
    s.sample(200, "asap", seed=9)
    path = tmp_path / "trie.json"
    s.save_trie(path)
    t = sampler()
    t.load_trie(path)
    assert t.trie.num_nodes == s.trie.num_nodes > 5
    assert t.trie.root.efg == s.trie.root.efg
    a, b = s.sample(50, "asap", seed=10), t.sample(50, "asap", seed=10)
    assert a.texts == b.texts
    other = sampler(max_tokens=7)
    with pytest.raises(SearchError, match="another problem"):
        other.load_trie(path)


def test_prefix_cache_reuses_kv_and_is_bounded():
    m = FakeModel(VOCAB.vocab_size)
    t = Target(m, PROMPT, cache_bytes=3 * 4 * VOCAB.vocab_size)
    t.logprobs([5, 6, 7])
    assert (t.stats.forward_passes, t.stats.tokens_scored) == (1, 4)
    t.logprobs([5, 6, 8])          # shares [5, 6]: one token scored
    t.logprobs([5, 6])             # a prefix of the cursor: re-runs only its last token
    assert (t.stats.forward_passes, t.stats.tokens_scored) == (3, 6)
    t.logprobs([5, 6, 8])
    assert t.stats.cache_hits == 1
    row = t.logprobs([9])
    expected = np.log(np.exp(m.logits_for(PROMPT + [9]).double().numpy()) /
                      np.exp(m.logits_for(PROMPT + [9]).double().numpy()).sum())
    assert np.allclose(row, expected, atol=1e-5)
    assert t.cached_bytes() <= 3 * 4 * VOCAB.vocab_size


def test_stats_and_distribution_shape():
    ss = sampler().sample(50, "gcd", seed=11)
    d = ss.distribution()
    assert abs(sum(d.values()) - 1) < 1e-9 and set(d) <= set(TARGET)
    st = ss.stats.as_dict()
    assert st["checks_per_token"] == VOCAB.vocab_size and st["accepted"] == 50 and st["wall_seconds"] > 0


def test_bad_arguments_raise_typed_errors():
    with pytest.raises(ValueError, match="unknown method"):
        sampler().sample(3, "beam")
    with pytest.raises(ValueError, match="n must be"):
        sampler().sample(0, "gcd")
    with pytest.raises(TypeError, match="unexpected options"):
        sampler().sample(3, "gcd", potential=len)
    with pytest.raises(ValueError, match="exactly one of"):
        Sampler(PROMPT, grammar=GRAMMAR, regex="a", model=FakeModel(VOCAB.vocab_size), vocab=VOCAB)
    with pytest.raises(ValueError, match="temperature"):
        sampler(temperature=0.0)
    with pytest.raises(ValueError, match="only used by method='smc'"):
        sample(PROMPT, grammar=GRAMMAR, model=FakeModel(VOCAB.vocab_size), vocab=VOCAB, potential=len)
    with pytest.raises(SearchBudgetExceeded, match="forward-pass budget"):
        sampler().sample(100, "cars", seed=1, budget=2)
    two_tokens = compile_regex("cab|cc", VOCAB)          # every spelling needs two tokens or more
    for method in ("asap", "cars"):
        s = Sampler(PROMPT, grammar=two_tokens, model=biased_model(VOCAB.vocab_size), vocab=VOCAB, max_tokens=1)
        with pytest.raises(SearchError, match="no sequence of at most 1 tokens"):
            s.sample(5, method, seed=1)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["asap", "cars"]), st.integers(1, 30), st.integers(0, 10**6)),
                min_size=1, max_size=4))
def test_shared_trie_stays_an_upper_bound(calls):
    """ASAp and CARS interleaved on one trie: the root bound never drops below Z and both keep
    their samples inside the language."""
    s = sampler()
    for method, n, seed in calls:
        ss = s.sample(n, method, seed=seed)
        assert set(ss.texts) <= set(TARGET)
        assert s.trie.root.efg >= Z * (1 - 1e-6)


def test_best_first_enumeration_matches_the_oracle():
    from guidewire.search.exact import enumerate_exact
    from guidewire.search.problem import Problem

    s = sampler()
    pb = Problem(s.target, s.grammar, VOCAB, max_tokens=8, rng=np.random.default_rng(0))
    res = enumerate_exact(pb, tol=0.0, max_expansions=10_000)
    assert res.frontier == 0.0 and res.sequences == TOKENIZATIONS
    assert abs(res.found - Z) < 1e-6 * Z
    assert max(abs(res.masses[k] - EXACT[k]) for k in EXACT) < 1e-6 * Z


def test_real_model_prefix_cache_matches_a_full_forward(smol_model):
    """On SmolLM2, rows computed by truncating and stepping the shared KV cache equal a fresh
    teacher-forced forward of prompt + prefix; samples stay in the language."""
    import torch

    s = Sampler("Is the sky blue? Answer yes or no.", choices=["yes", "no"], model=smol_model, max_tokens=4)
    tok = smol_model.tokenizer
    ids = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    prefixes = [ids("yes"), ids("no"), [], ids("y") + ids("es")[:1], ids("yes")]
    for prefix in prefixes:
        row = s.target.logprobs(prefix)
        with torch.no_grad():
            out = smol_model.module(input_ids=torch.tensor([s.target.prompt_ids + prefix])).logits[0, -1]
        ref = torch.log_softmax(out.double(), -1).numpy()[: row.size]
        assert np.allclose(row, ref, atol=2e-4), prefix
    assert s.target.stats.forward_passes == len(prefixes) - 1     # the last prefix is a cache hit
    ss = s.sample(6, "cars", seed=0)
    assert set(ss.texts) <= {"yes", "no"} and len(ss) == 6


@pytest.mark.parametrize("method", ["gcd", "asap", "cars", "awrs", "smc"])
def test_a_matcher_past_its_limit_raises_instead_of_reading_as_a_dead_end(method):
    from guidewire.core import Limits, WorkLimitExceededError

    g = compile_regex("|".join(re.escape(s) for s in SENTENCES), VOCAB)
    g.set_limits(Limits(step_work=1, step_seconds=None))
    s = Sampler(PROMPT, grammar=g, model=biased_model(VOCAB.vocab_size), vocab=VOCAB, max_tokens=8)
    with pytest.raises(WorkLimitExceededError):
        s.sample(5, method, seed=1)
