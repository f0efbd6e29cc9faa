"""Segment search (the most probable whole legal name after ``expr.``) against a brute-force
enumeration of every allowed token path, and monitor analyses started ahead at their trigger."""

from __future__ import annotations

import math
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.monitors import DereferenceMonitor
from guidewire.monitors.analysis import DeadlineRunner
from guidewire.runtime.decode import iter_decode
from guidewire.runtime.sampling import SamplingParams
from guidewire.search.segment import SegmentSearch, best_segment
from runtime_fakes import FakeModel, tiny_vocab

VOCAB = tiny_vocab()


class NamesBackend:
    """Answers every attribute query with ``names`` after ``delay`` seconds (on a deadline runner,
    as the real back ends do); records when each query ran and what the model had done by then."""

    name = "names"

    def __init__(self, names, delay: float = 0.0, model=None):
        self.names, self.delay, self.model = list(names), delay, model
        self.runner = DeadlineRunner()
        self.calls, self.ended, self.model_calls_at_end = 0, [], []

    def attributes(self, code, line, column, *, path, deadline_s):
        self.calls += 1

        def work():
            time.sleep(self.delay)
            self.ended.append(time.perf_counter())
            self.model_calls_at_end.append(None if self.model is None else self.model.calls)
            return self.names

        return self.runner.run(work, deadline_s)

    def signature(self, code, line, column, *, path, deadline_s):
        return None

    def close(self):
        pass


def closes(tok: int) -> bool:
    """Whether the token's first byte cannot be in an identifier (read from its bytes)."""
    if tok >= len(VOCAB.token_bytes):
        return False  # padding ids have no bytes
    b = VOCAB.token_bytes[tok][:1]
    return bool(b) and not (b.isalnum() or b == b"_" or b[0] >= 0x80)


def brute_best(model: FakeModel, monitor, base_len: int, merge_closing: bool, outcomes=None):
    """Max score over every allowed way to the end of the segment, by enumerating them all
    (log probabilities recomputed from the model's pure logits). With ``merge_closing`` the
    tokens that start by closing the segment after a path are one outcome (their probabilities
    summed, spelled by the likeliest); otherwise each token path is its own outcome. Every
    outcome ``(score, path)`` is appended to ``outcomes`` when given."""
    best = (-math.inf, ())
    explored = 0
    prefix = list(model.tokens[:base_len])
    outcomes = [] if outcomes is None else outcomes

    def walk(path, lp, m):
        nonlocal best, explored
        logp = torch.log_softmax(model.logits_for(prefix + list(path)), dim=-1)
        closing = []
        for tok in range(1, VOCAB.vocab_size):
            if not m.allows(tok):
                continue
            f = m.fork()
            assert f.advance(tok)
            explored += 1
            if merge_closing and closes(tok):
                assert not f.segment_open
                closing.append(tok)
                continue
            score = lp + float(logp[tok])
            if f.segment_open:
                walk(path + (tok,), score, f)
                continue
            outcomes.append((score, path + (tok,)))
            if score > best[0]:
                best = (score, path + (tok,))
        if closing:
            mass = lp + math.log(sum(math.exp(float(logp[t])) for t in closing))
            outcomes.append((mass, path + (max(closing, key=lambda t: float(logp[t])),)))
            if mass > best[0]:
                best = (mass, path + (max(closing, key=lambda t: float(logp[t])),))

    walk((), 0.0, monitor)
    return best[0], best[1], explored


names_st = st.lists(st.text(alphabet="abcx_", min_size=1, max_size=4).filter(lambda s: not s[0].isdigit()),
                    min_size=1, max_size=5, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=names_st, seed=st.integers(0, 10_000), scale=st.sampled_from([1.0, 3.0, 6.0]),
       merge=st.booleans())
def test_exhaustive_search_finds_the_brute_force_argmax(names, seed, scale, merge):
    model = FakeModel(VOCAB.vocab_size, scale=scale)
    prompt = [seed % 200 + 1] + [ord(c) + 1 for c in "x."]
    logits = model.prefill(prompt, last_only=True)[-1]
    mon = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(names))
    assert mon.active and mon.segment_open
    want, want_path, explored = brute_best(model, mon, len(prompt), merge)
    assert explored > 0
    closing = SegmentSearch(VOCAB).closing if merge else None
    if merge:  # the identifier break row, against the bytes themselves
        assert [t for t in range(1, VOCAB.vocab_size) if closes(t)] == \
            [t for t in range(1, VOCAB.vocab_size) if bool(closing[t])]
    res = best_segment(model, mon, logits, vocab=VOCAB, top_k=VOCAB.vocab_size, max_expansions=10_000,
                       max_tokens=64, closing=closing)
    assert model.tokens == prompt  # the model is left as it was found
    assert res.finished
    assert res.log_prob == pytest.approx(want, abs=1e-4)
    assert tuple(res.tokens) == want_path
    # the path is allowed, and leaves the segment with its last token only
    f = mon.fork()
    for i, t in enumerate(res.tokens):
        assert f.advance(t)
        assert f.segment_open == (i < len(res.tokens) - 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=names_st, seed=st.integers(0, 10_000), merge=st.booleans(), n=st.integers(2, 5))
def test_alternatives_are_the_brute_force_top_outcomes_in_order(names, seed, merge, n):
    model = FakeModel(VOCAB.vocab_size, scale=3.0)
    prompt = [seed % 200 + 1] + [ord(c) + 1 for c in "x."]
    logits = model.prefill(prompt, last_only=True)[-1]
    mon = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(names))
    assert mon.active
    outcomes: list = []
    brute_best(model, mon, len(prompt), merge, outcomes=outcomes)
    want = sorted(outcomes, key=lambda o: -o[0])[:n]
    closing = SegmentSearch(VOCAB).closing if merge else None
    res = best_segment(model, mon, logits, vocab=VOCAB, top_k=VOCAB.vocab_size, max_expansions=10_000,
                       max_tokens=64, closing=closing, candidates=n)
    assert model.tokens == prompt
    assert len(res.alternatives) == min(n, len(outcomes))
    assert [lp for _, lp in res.alternatives] == pytest.approx([w[0] for w in want], abs=1e-4)
    assert res.tokens == res.alternatives[0][0] and res.log_prob == res.alternatives[0][1]
    for toks, _ in res.alternatives:  # each an allowed path that ends the segment with its last token
        f = mon.fork()
        assert all(f.advance(t) for t in toks) and not f.segment_open


def test_a_rerank_hook_picks_among_the_alternatives():
    model = FakeModel(VOCAB.vocab_size, scale=3.0)
    prompt = [7] + [ord(c) + 1 for c in "x."]
    seen = []

    def last(constraint, alts):
        seen.append(list(alts))
        return len(alts) - 1

    search = SegmentSearch(VOCAB, top_k=VOCAB.vocab_size, max_expansions=1000, candidates=3, rerank=last)
    m = model.fork()
    mon = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(["ab", "ba", "cab", "x"]))
    toks = [t for chunk in iter_decode(m, prompt, mon, vocab=VOCAB, max_tokens=4,
                                       sampling=SamplingParams(temperature=0.0), segment_search=search)
            for t in chunk]
    assert len(seen) == 1 and len(seen[0]) == 3
    assert toks[:len(seen[0][-1][0])] == seen[0][-1][0]  # the hook's pick was emitted, not the best
    with pytest.raises(ValueError):
        best_segment(model, mon, torch.zeros(VOCAB.vocab_size), vocab=VOCAB, candidates=0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=names_st, seed=st.integers(0, 10_000), k=st.integers(1, 6), budget=st.integers(0, 6))
def test_pruned_search_is_allowed_and_never_worse_than_greedy(names, seed, k, budget):
    model = FakeModel(VOCAB.vocab_size)
    prompt = [seed % 200 + 1] + [ord(c) + 1 for c in "x."]
    logits = model.prefill(prompt, last_only=True)[-1]
    mon = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(names))
    res = best_segment(model, mon, logits, vocab=VOCAB, top_k=k, max_expansions=budget)
    assert model.tokens == prompt
    assert res.expansions <= budget
    assert res.tokens, "the root always has an allowed token"
    f = mon.fork()
    for t in res.tokens:
        assert f.advance(t)
    assert res.finished == (not f.segment_open)
    # greedy under the mask: the segment's path taking the most probable allowed token each step
    g, lp, gpath = mon.fork(), 0.0, []
    while g.segment_open and len(gpath) < 64:
        logp = torch.log_softmax(model.logits_for(prompt + gpath), dim=-1)
        tok = max((t for t in range(1, VOCAB.vocab_size) if g.allows(t)), key=lambda t: float(logp[t]))
        lp += float(logp[tok])
        assert g.advance(tok)
        gpath.append(tok)
    if res.finished:
        assert res.log_prob >= lp - 1e-4
    else:
        assert res.expansions == budget or len(res.tokens) >= 16


def test_segment_search_in_the_decoding_loop_picks_the_likelier_whole_name():
    # the model's first choice after "x." is 'g' (it wants "gz", which does not exist); greedy
    # under the mask then has to finish "ga" (unlikely); "cab" is likelier as a whole name
    bias = torch.zeros(VOCAB.vocab_size)
    model = FakeModel(VOCAB.vocab_size, scale=0.0)
    prompt = [ord(c) + 1 for c in "x."]
    table = {(): {"g": 3.0, "c": 2.5}, ("g",): {"z": 5.0, "a": -2.0},
             ("c",): {"a": 5.0}, ("c", "a"): {"b": 5.0}, ("c", "a", "b"): {"(": 5.0},
             ("g", "a"): {"(": 5.0}}

    def logits_for(prefix):
        out = bias.clone()
        gen = tuple(chr(t - 1) for t in prefix[len(prompt):])
        for ch, v in table.get(gen, {}).items():
            out[ord(ch) + 1] = v
        return out

    model.logits_for = logits_for
    outs = {}
    for search in (None, SegmentSearch(VOCAB, top_k=4, max_expansions=8)):
        m = model.fork()
        m.logits_for = logits_for
        mon = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(["ga", "cab"]))
        gen = iter_decode(m, prompt, mon, vocab=VOCAB, max_tokens=4,
                          sampling=SamplingParams(temperature=0.0), segment_search=search)
        toks = [t for chunk in gen for t in chunk]
        outs[search is None] = bytes(t - 1 for t in toks)
        if search is not None:
            assert search.searches == 1 and search.changed == 1 and 1 <= search.expansions <= 8
    assert outs[True].startswith(b"ga")
    assert outs[False].startswith(b"cab(")


# -- analyses started ahead ------------------------------------------------------------------------
def test_prefetch_runs_the_analysis_while_the_caller_works():
    be = NamesBackend(["append"], delay=0.3)
    m = DereferenceMonitor(VOCAB, "x.", backend=be, deadline_s=1.0)
    time.sleep(0.45)  # the model's prefill, say
    t0 = time.perf_counter()
    assert m.active
    assert time.perf_counter() - t0 < 0.1
    assert m.stats.analysis_s[0] >= 0.29 and m.stats.wait_s[0] < 0.1

    be2 = NamesBackend(["append"], delay=0.3)
    m2 = DereferenceMonitor(VOCAB, "x.", backend=be2, deadline_s=1.0, prefetch=False)
    time.sleep(0.45)
    assert be2.calls == 0
    assert m2.active and m2.stats.wait_s[0] >= 0.29


def test_the_deadline_bounds_the_wait_not_the_time_ahead():
    # the analysis takes 0.6 s but started 0.3 s before the mask was asked for: 0.3 s of waiting
    be = NamesBackend(["append"], delay=0.6)
    m = DereferenceMonitor(VOCAB, "x.", backend=be, deadline_s=0.5)
    time.sleep(0.3)
    assert m.active and not m.stats.abstentions
    assert 0.2 < m.stats.wait_s[0] < 0.5
    # not started ahead, the same analysis is past the deadline: an abstention
    m2 = DereferenceMonitor(VOCAB, "x.", backend=NamesBackend(["append"], delay=0.6), deadline_s=0.5,
                            prefetch=False)
    time.sleep(0.3)
    assert not m2.active and [a.reason for a in m2.stats.abstentions] == ["timeout"]


def test_forks_never_start_analyses_and_the_monitor_does_at_its_trigger():
    be = NamesBackend(["append"])
    m = DereferenceMonitor(VOCAB, "y = 1\n", backend=be)
    f = m.fork()
    for c in "x.":
        assert f.advance(ord(c) + 1)
    time.sleep(0.1)
    assert be.calls == 0 and not m.analysis_in_flight
    for c in "x.":
        assert m.advance(ord(c) + 1)
    deadline = time.monotonic() + 2.0
    while be.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert be.calls == 1
    assert m.active and f.active and be.calls == 1  # the fork shares the answer


def test_the_decoding_loop_runs_the_model_while_the_analysis_runs():
    for prefetch, calls_at_end in ((True, 1), (False, 0)):
        model = FakeModel(VOCAB.vocab_size)
        be = NamesBackend(["append", "apply"], delay=0.2, model=model)
        mon = DereferenceMonitor(VOCAB, "x.", backend=be, deadline_s=2.0, prefetch=prefetch)
        gen = iter_decode(model, [ord(c) + 1 for c in "x."], mon, vocab=VOCAB, max_tokens=3,
                          sampling=SamplingParams(temperature=0.0))
        toks = [t for chunk in gen for t in chunk]
        assert bytes(t - 1 for t in toks)[:1] == b"a"
        # started ahead, the analysis ended after the prefill; asked at the mask, before it
        assert be.model_calls_at_end == [calls_at_end]


def test_iter_decode_reuses_a_model_that_holds_the_prompts_head():
    prompt = [5, 6, 7, 8, 9]
    fresh = FakeModel(VOCAB.vocab_size)
    want = [t for c in iter_decode(fresh, prompt, None, vocab=VOCAB, max_tokens=6,
                                   sampling=SamplingParams(temperature=0.0)) for t in c]
    head = FakeModel(VOCAB.vocab_size)
    head.prefill(prompt[:-2])
    head.step_sizes.clear()
    got = [t for c in iter_decode(head, prompt, None, vocab=VOCAB, max_tokens=6,
                                  sampling=SamplingParams(temperature=0.0)) for t in c]
    assert got == want
    assert head.step_sizes[0] == 2  # only the two tokens it did not hold
    other = FakeModel(VOCAB.vocab_size)
    other.prefill([1, 2])  # not a head of the prompt: prefilled again
    other.step_sizes.clear()
    got2 = [t for c in iter_decode(other, prompt, None, vocab=VOCAB, max_tokens=6,
                                   sampling=SamplingParams(temperature=0.0)) for t in c]
    assert got2 == want and other.step_sizes[0] == len(prompt)
