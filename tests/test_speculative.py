"""Speculative decoding is lossless: greedy outputs are identical to plain constrained decoding, and
sampled outputs have exactly plain decoding's distribution (checked against the enumerated exact
distribution with a chi-square test)."""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest
import torch

from guidewire.grammar import compile_regex
from guidewire.runtime.decode import decode
from guidewire.runtime.drafting import Draft
from guidewire.runtime.sampling import SamplingParams, sampling_probs
from guidewire.runtime.masking import apply_bitmask_
from guidewire.runtime.speculative import speculative_decode
from guidewire.core.bitmask import allocate_token_bitmask

from runtime_fakes import EOS, FakeModel, byte_id, tiny_vocab


@pytest.fixture(scope="module")
def tiny():
    return tiny_vocab()


class NoisyOracleDrafter:
    """Proposes a known continuation (e.g. the plain output) with random corruptions and lengths,
    optionally with a made-up draft distribution (so drafts look like a draft model's)."""

    name = "oracle"

    def __init__(self, target: list[int], vocab_size: int, *, seed: int = 0, noise: float = 0.3,
                 with_probs: bool = False):
        self.target = list(target)
        self.rng = random.Random(seed)
        self.noise = noise
        self.V = vocab_size
        self.with_probs = with_probs
        self.hist: list[int] = []
        self.start = 0

    def begin(self, prompt_ids):
        self.hist = list(prompt_ids)
        self.start = len(self.hist)

    def extend(self, tokens):
        self.hist.extend(tokens)

    def propose(self, constraint, max_tokens):
        pos = len(self.hist) - self.start
        n = self.rng.randint(0, max_tokens)
        toks = []
        for i in range(n):
            if self.rng.random() < self.noise or pos + i >= len(self.target):
                toks.append(self.rng.randrange(1, self.V))
            else:
                toks.append(self.target[pos + i])
        if constraint is not None:
            toks = toks[:constraint.validate(toks)]
        if not self.with_probs or not toks:
            return Draft(toks, None, self.name)
        # a draft model: q puts extra mass on the oracle's token; the draft token is sampled from q
        g = torch.Generator().manual_seed(self.rng.randrange(1 << 30))
        probs = torch.rand(len(toks), self.V, generator=g)
        probs[:, EOS] = 0
        for i, t in enumerate(toks):
            probs[i, t] += probs[i].sum() * 2
        probs = probs / probs.sum(dim=1, keepdim=True)
        sampled = torch.multinomial(probs, 1, generator=g).flatten().tolist()
        if constraint is not None:
            sampled = sampled[:constraint.validate(sampled)]
        return Draft(sampled, probs[:len(sampled)] if sampled else None, self.name)


PATTERNS = [r"(hello| world|ab|abc|x)+!", r"[a-c]{3,9}", r"\{\"k\":(1|22|333)\}", r"(é|日|a)+z"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_greedy_speculation_is_identical_to_plain(tiny, pattern):
    for prompt_seed in range(6):
        prompt = [1 + (prompt_seed * 7 + i) % 200 for i in range(3)]
        plain_model = FakeModel(tiny.vocab_size)
        plain = decode(plain_model, prompt, compile_regex(pattern, tiny).matcher(), vocab=tiny,
                       max_tokens=30, use_forced=False)
        for noise in (0.0, 0.3, 1.0):
            model = FakeModel(tiny.vocab_size)
            drafter = NoisyOracleDrafter(plain.token_ids, tiny.vocab_size, seed=prompt_seed, noise=noise)
            spec = speculative_decode(model, prompt, compile_regex(pattern, tiny).matcher(), vocab=tiny,
                                      drafter=drafter, max_tokens=30, max_draft=6)
            assert spec.token_ids == plain.token_ids
            assert spec.finish_reason == plain.finish_reason and spec.complete == plain.complete
            assert model.tokens[:len(prompt)] == prompt
            if noise == 0.0 and len(plain.token_ids) > 4:
                assert spec.speculation.forwards < plain_model.calls


def test_unconstrained_greedy_speculation_is_identical(tiny):
    prompt = [5, 6, 7]
    plain = decode(FakeModel(tiny.vocab_size), prompt, None, vocab=tiny, max_tokens=25)
    spec = speculative_decode(FakeModel(tiny.vocab_size), prompt, None, vocab=tiny,
                              drafter=NoisyOracleDrafter(plain.token_ids, tiny.vocab_size, noise=0.2),
                              max_tokens=25)
    assert spec.token_ids == plain.token_ids and spec.finish_reason == plain.finish_reason


def test_kv_cache_holds_exactly_the_emitted_tokens(tiny):
    prompt = [3, 4]
    model = FakeModel(tiny.vocab_size)
    drafter = NoisyOracleDrafter([], tiny.vocab_size, noise=1.0, seed=5)
    r = speculative_decode(model, prompt, compile_regex(r"[a-z]{20}", tiny).matcher(), vocab=tiny,
                           drafter=drafter, max_tokens=20)
    # after the last verification the cache holds the prompt and the accepted tokens (the final
    # sampled token is pending, not yet fed)
    assert model.tokens == (prompt + r.token_ids)[:len(model.tokens)]
    assert len(model.tokens) >= len(prompt) + len(r.token_ids) - 1
    assert re.fullmatch(r"[a-z]{20}", r.text)


def test_max_tokens_is_respected_with_long_drafts(tiny):
    plain = decode(FakeModel(tiny.vocab_size), [9], compile_regex(r"[ab]+", tiny).matcher(), vocab=tiny,
                   max_tokens=7, use_forced=False)
    spec = speculative_decode(FakeModel(tiny.vocab_size), [9], compile_regex(r"[ab]+", tiny).matcher(),
                              vocab=tiny, drafter=NoisyOracleDrafter(plain.token_ids, tiny.vocab_size, noise=0),
                              max_tokens=7, max_draft=16)
    assert spec.token_ids == plain.token_ids and len(spec.token_ids) <= 7
    assert spec.finish_reason == plain.finish_reason


# -- exact distribution under sampling ------------------------------------------------------------------
def _exact_distribution(model: FakeModel, prompt, pattern, vocab, params) -> dict[tuple, float]:
    """Enumerate plain constrained decoding's distribution over complete outputs (small languages)."""
    bm = torch.from_numpy(allocate_token_bitmask(1, vocab.vocab_size))
    out: dict[tuple, float] = {}

    def walk(matcher, seq, p):
        if p < 1e-12:
            return
        matcher.fill_bitmask(bm.numpy(), 0)
        logits = model.logits_for(list(prompt) + list(seq)).unsqueeze(0)
        apply_bitmask_(logits, bm)
        probs = sampling_probs(logits, params)[0]
        for t in torch.nonzero(probs).flatten().tolist():
            pt = float(probs[t])
            if t in vocab.eos_ids:
                out[tuple(seq)] = out.get(tuple(seq), 0.0) + p * pt
                continue
            m = matcher.fork()
            assert m.advance(t)
            walk(m, seq + [t], p * pt)

    walk(compile_regex(pattern, vocab).matcher(), [], 1.0)
    return out


def _chi_square(counts: dict, exact: dict, n: int) -> tuple[float, int]:
    stat, dof = 0.0, -1
    other_e = other_o = 0.0
    for key, p in exact.items():
        e = n * p
        if e < 5:
            other_e += e
            other_o += counts.get(key, 0)
            continue
        stat += (counts.get(key, 0) - e) ** 2 / e
        dof += 1
    if other_e > 0:
        stat += (other_o - other_e) ** 2 / max(other_e, 1e-9)
        dof += 1
    assert sum(v for k, v in counts.items() if k not in exact) == 0, "an impossible output was produced"
    return stat, dof


def _critical(dof: int) -> float:
    """A conservative upper quantile (p ~ 0.999) of chi-square with ``dof`` degrees of freedom
    (Wilson-Hilferty)."""
    z = 3.09
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize("with_probs", [False, True])
def test_sampled_speculation_has_the_exact_distribution(tiny, with_probs):
    pattern = r"(ab|a|b|abc|c){1,3}"
    prompt = [11, 12]
    params = SamplingParams(temperature=1.0, top_p=0.95, seed=0)
    bias = torch.zeros(tiny.vocab_size)
    base = FakeModel(tiny.vocab_size, bias=bias, scale=1.0)
    exact = _exact_distribution(base, prompt, pattern, tiny, params)
    assert abs(sum(exact.values()) - 1) < 1e-4 and len(exact) > 10
    plain_seq = max(exact, key=exact.get)
    n = 1500
    counts: dict[tuple, int] = {}
    for i in range(n):
        drafter = NoisyOracleDrafter(list(plain_seq), tiny.vocab_size, seed=i, noise=0.4, with_probs=with_probs)
        r = speculative_decode(FakeModel(tiny.vocab_size, bias=bias, scale=1.0), prompt,
                               compile_regex(pattern, tiny).matcher(), vocab=tiny, drafter=drafter,
                               max_tokens=10, sampling=SamplingParams(temperature=1.0, top_p=0.95, seed=i))
        assert r.finish_reason == "stop"
        key = tuple(r.token_ids)
        counts[key] = counts.get(key, 0) + 1
    stat, dof = _chi_square(counts, exact, n)
    assert stat < _critical(dof), (stat, dof)


def test_chi_square_detects_a_wrong_distribution(tiny):
    """The check above has power: plain decoding at a slightly different temperature fails it."""
    pattern = r"(ab|a|b|abc|c){1,3}"
    prompt = [11, 12]
    params = SamplingParams(temperature=1.0)
    base = FakeModel(tiny.vocab_size, scale=1.0)
    exact = _exact_distribution(base, prompt, pattern, tiny, params)
    n = 1500
    counts: dict[tuple, int] = {}
    for i in range(n):
        r = decode(FakeModel(tiny.vocab_size, scale=1.0), prompt, compile_regex(pattern, tiny).matcher(),
                   vocab=tiny, max_tokens=10, sampling=SamplingParams(temperature=1.3, seed=i))
        key = tuple(r.token_ids)
        counts[key] = counts.get(key, 0) + 1
    stat, dof = _chi_square(counts, exact, n)
    assert stat > _critical(dof)
