"""Runtime tests that need no real model: sampler, masking, decoding loop, streaming, processor, CLI."""

from __future__ import annotations

import itertools
import math
import re
import sys
import types

import numpy as np
import pytest
import torch

from guidewire.core import bitmask_to_bool, ids_to_bitmask
from guidewire.grammar import compile_lark, compile_regex
from guidewire.runtime import (DeadEndError, GuidewireLogitsProcessor, IncompleteOutputError, Sampler,
                               SamplingParams, TextDeltaDecoder, apply_bitmask_, decode, decode_batch,
                               sampling_probs, stream_decode, unpack_bitmask)
from guidewire.runtime.decode import GenerationResult
from runtime_fakes import EOS, FakeBatchModel, FakeModel, byte_id, tiny_vocab


# -- sampler --------------------------------------------------------------------------------------
def reference_probs(logits: list[float], temperature: float, top_k: int, top_p: float,
                    min_p: float) -> list[float]:
    """Slow, enumerated reference of the documented sampling distribution."""
    n = len(logits)
    if temperature == 0:
        best = max(range(n), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(n)]
    keep = set(i for i in range(n) if logits[i] != -math.inf)
    if top_k:
        kth = sorted((logits[i] for i in keep), reverse=True)[min(top_k, len(keep)) - 1]
        keep = {i for i in keep if logits[i] >= kth}
    z = sum(math.exp(logits[i] / temperature) for i in keep)
    p = {i: math.exp(logits[i] / temperature) / z for i in keep}
    if top_p < 1:
        kept, mass = set(), 0.0
        for i in sorted(p, key=lambda i: -p[i]):
            if mass >= top_p:
                break
            kept.add(i)
            mass += p[i]
        p = {i: p[i] / mass for i in kept}
    if min_p > 0:
        m = max(p.values())
        p = {i: v for i, v in p.items() if v >= min_p * m}
        z = sum(p.values())
        p = {i: v / z for i, v in p.items()}
    return [p.get(i, 0.0) for i in range(n)]


CONFIGS = [(0, 0, 1.0, 0.0), (1.0, 0, 1.0, 0.0), (0.7, 3, 1.0, 0.0), (1.3, 0, 0.75, 0.0),
           (1.0, 0, 1.0, 0.2), (0.9, 5, 0.9, 0.05), (2.0, 2, 0.5, 0.5), (1.0, 0, 0.3, 0.0)]


@pytest.mark.parametrize("config", CONFIGS)
def test_sampling_probs_match_enumerated_reference(config):
    temperature, top_k, top_p, min_p = config
    rng = np.random.default_rng(7)
    params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    for _ in range(20):
        row = rng.normal(0, 2, size=9)
        row[rng.integers(0, 9)] = -np.inf  # a masked token
        got = sampling_probs(torch.tensor([row], dtype=torch.float32), params)[0].tolist()
        want = reference_probs(row.tolist(), temperature, top_k, top_p, min_p)
        assert got == pytest.approx(want, abs=2e-6)


def test_seeded_sampler_is_reproducible_and_follows_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, -np.inf, 0.0]])
    params = SamplingParams(temperature=1.0, top_p=0.9, seed=123)
    a = [int(Sampler(params).sample(logits)[0]) for _ in range(3)]
    s1, s2 = Sampler(params), Sampler(params)
    seq1 = [int(s1.sample(logits)[0]) for _ in range(50)]
    seq2 = [int(s2.sample(logits)[0]) for _ in range(50)]
    assert seq1 == seq2 and len(set(a)) == 1
    other = Sampler(SamplingParams(temperature=1.0, top_p=0.9, seed=124))
    assert [int(other.sample(logits)[0]) for _ in range(50)] != seq1
    # empirical frequencies against the enumerated distribution
    s = Sampler(SamplingParams(temperature=1.0, top_p=0.9, seed=5))
    draws = s.sample(logits.expand(20000, -1)).numpy()
    freq = np.bincount(draws, minlength=6) / draws.size
    want = reference_probs(logits[0].tolist(), 1.0, 0, 0.9, 0.0)
    assert np.abs(freq - want).max() < 0.015
    assert all(freq[i] == 0 for i in range(6) if want[i] == 0)


def test_greedy_sampler_and_dead_rows():
    logits = torch.tensor([[0.1, 3.0, 3.0, -1.0], [5.0, 0.0, 0.0, 0.0]])
    assert Sampler(SamplingParams()).sample(logits).tolist() == [1, 0]
    with pytest.raises(DeadEndError):
        Sampler(SamplingParams()).sample(torch.full((1, 4), -np.inf))
    with pytest.raises(DeadEndError):
        Sampler(SamplingParams(temperature=1.0, seed=0)).sample(torch.full((1, 4), -np.inf))
    for bad in ({"temperature": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"min_p": 2.0}, {"top_k": -1}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


# -- masking --------------------------------------------------------------------------------------
def slow_apply(logits: torch.Tensor, bitmask: np.ndarray) -> torch.Tensor:
    out = logits.clone()
    for r in range(out.shape[0]):
        for t in range(out.shape[1]):
            w = t // 32
            allowed = w < bitmask.shape[1] and (int(bitmask[r, w]) >> (t % 32)) & 1
            if not allowed:
                out[r, t] = -math.inf
    return out


@pytest.mark.parametrize("vocab,words", [(100, 4), (100, 3), (96, 3), (70, 5), (1, 1)])
def test_apply_bitmask_matches_slow_reference(vocab, words):
    rng = np.random.default_rng(vocab * 10 + words)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        logits = torch.randn(3, vocab).to(dtype)
        bm = rng.integers(-2**31, 2**31, size=(3, words), dtype=np.int64).astype(np.int32)
        want = slow_apply(logits, bm)
        got = apply_bitmask_(logits.clone(), bm)
        assert torch.equal(got, want)
        got_t = apply_bitmask_(logits.clone(), torch.from_numpy(bm))
        assert torch.equal(got_t, want)
    # 1-D logits, and rows selected by indices
    flat = torch.randn(vocab)
    assert torch.equal(apply_bitmask_(flat.clone(), bm[:1]), slow_apply(flat[None], bm[:1])[0])
    logits = torch.randn(3, vocab)
    got = apply_bitmask_(logits.clone(), bm[:2], indices=[2, 0])
    assert torch.equal(got[1], logits[1])
    assert torch.equal(got[2], slow_apply(logits[2:3], bm[0:1])[0])
    assert torch.equal(got[0], slow_apply(logits[0:1], bm[1:2])[0])


def test_unpack_bitmask_agrees_with_core():
    rng = np.random.default_rng(1)
    ids = rng.choice(49152, size=500, replace=False)
    row = ids_to_bitmask(ids, 49152)
    got = unpack_bitmask(row[None], 49152)[0].numpy()
    assert np.array_equal(got, bitmask_to_bool(row, 49152))
    assert sorted(np.flatnonzero(got).tolist()) == sorted(ids.tolist())


# -- decoding loop on the fake model ----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return tiny_vocab()


def test_constrained_sampling_always_matches(tiny):
    pattern = r"[ab]{2,4}c(hello| world)?"
    g = compile_regex(pattern, tiny)
    for seed in range(12):
        model = FakeModel(tiny.vocab_size, scale=2.0)
        r = decode(model, [byte_id(b"x")], g.matcher(), vocab=tiny, max_tokens=40,
                   sampling=SamplingParams(temperature=1.0, seed=seed))
        assert r.finish_reason == "stop" and r.complete
        assert re.fullmatch(pattern, r.text), r.text
        assert tiny.decode(r.token_ids).decode() == r.text
        assert r.usage.completion_tokens == len(r.token_ids)


def test_eos_masked_until_accepting_and_no_call_for_eos_only(tiny):
    bias = torch.zeros(tiny.vocab_size)
    bias[EOS] = 100.0  # the model always wants to stop
    model = FakeModel(tiny.vocab_size, bias=bias)
    g = compile_regex(r"a+b?", tiny)
    r = decode(model, [byte_id(b"x")], g.matcher(), vocab=tiny, max_tokens=10)
    assert r.text == "a" and r.finish_reason == "stop"  # EOS first allowed (and taken) after "a"
    # `ab` exactly: after "ab" only EOS is possible, so the loop stops without another model call
    model = FakeModel(tiny.vocab_size)
    g = compile_regex(r"abx", tiny)
    r = decode(model, [byte_id(b"x")], g.matcher(), vocab=tiny, max_tokens=10, use_forced=False)
    assert r.text == "abx" and r.finish_reason == "stop"
    assert model.calls == len(r.token_ids)


def test_single_allowed_tokens_skip_model_calls_losslessly(tiny):
    # x, y, z, q start no multi-byte token of the tiny vocab: each is the only allowed token in turn
    pattern = r"xyz(hello| world)q[0-9]"
    for sampling in (None, SamplingParams(temperature=1.0, seed=3)):
        g = compile_regex(pattern, tiny)
        model = FakeModel(tiny.vocab_size)
        r = decode(model, [byte_id(b"x")], g.matcher(), vocab=tiny, max_tokens=40, sampling=sampling)
        assert re.fullmatch(pattern, r.text)
        assert r.usage.forced_tokens >= 4  # x, y, z, q (and the rest of "world" after a lone " ")
        assert model.calls == len(r.token_ids) - r.usage.forced_tokens and max(model.step_sizes) > 1
        slow = FakeModel(tiny.vocab_size)
        r2 = decode(slow, [byte_id(b"x")], g.matcher(), vocab=tiny, max_tokens=40, use_forced=False,
                    sampling=sampling)
        assert slow.calls > model.calls
        if sampling is None:  # greedy: identical output (a forced token has probability 1)
            assert r2.token_ids == r.token_ids
    # "hello" vs "h": several tokens spell the forced text, so the model chooses the first one
    g = compile_regex(r"hello world [0-9]", tiny)
    model = FakeModel(tiny.vocab_size)
    r = decode(model, [1], g.matcher(), vocab=tiny, max_tokens=40)
    assert model.step_sizes[0] == 1 and re.fullmatch(r"hello world [0-9]", r.text)


def test_length_inside_incomplete_value_is_reported(tiny):
    from guidewire.api import validate_json_output

    g = compile_regex(r"a{5}", tiny)
    r = decode(FakeModel(tiny.vocab_size), [1], g.matcher(), vocab=tiny, max_tokens=3)
    assert r.finish_reason == "length" and not r.complete and r.text == "aaa"
    json_g = compile_lark('start: "{" "\\"k\\"" ":" "1" "}"', tiny)
    r = decode(FakeModel(tiny.vocab_size), [1], json_g.matcher(), vocab=tiny, max_tokens=2)
    assert r.finish_reason == "length" and not r.complete
    with pytest.raises(IncompleteOutputError) as info:
        validate_json_output({"type": "object"}, r)
    assert info.value.result is r


def test_unconstrained_ignore_eos_gives_exact_length(tiny):
    bias = torch.zeros(tiny.vocab_size)
    bias[EOS] = 100.0
    r = decode(FakeModel(tiny.vocab_size, bias=bias), [1], None, vocab=tiny, max_tokens=17, ignore_eos=True)
    assert len(r.token_ids) == 17 and r.finish_reason == "length" and EOS not in r.token_ids
    r = decode(FakeModel(tiny.vocab_size, bias=bias), [1], None, vocab=tiny, max_tokens=17)
    assert r.token_ids == [] and r.finish_reason == "stop"


class _DeadConstraint:
    error = "limit hit"

    def fill_bitmask(self, bitmask, row=0):
        bitmask[row] = 0

    def is_terminated(self):
        return False

    def is_accepting(self):
        return False

    def forced_tokens(self):
        return []

    def advance(self, t):
        return False


def test_dead_end_raises(tiny):
    with pytest.raises(DeadEndError, match="limit hit"):
        decode(FakeModel(tiny.vocab_size), [1], _DeadConstraint(), vocab=tiny, max_tokens=5)


def test_text_delta_decoder_keeps_multibyte_characters_whole(tiny):
    text = "é日x"
    data = text.encode()
    ids = [byte_id(bytes([b])) for b in data]
    dec = TextDeltaDecoder(tiny)
    deltas = [dec.feed([i]) for i in ids] + [dec.flush()]
    assert "".join(deltas) == text
    assert deltas[:2] == ["", "é"] and deltas[2:5] == ["", "", "日"]
    assert all("\ufffd" not in d for d in deltas)
    dec = TextDeltaDecoder(tiny)
    assert dec.feed([byte_id(b"\xe6")]) == "" and dec.flush() == "\ufffd"


def test_stream_decode_deltas_join_to_the_result(tiny):
    pattern = "(é|日)+x"
    g = compile_regex(pattern, tiny)
    for seed in range(4):
        stream = stream_decode(FakeModel(tiny.vocab_size), [1], g.matcher(), vocab=tiny, max_tokens=60,
                               sampling=SamplingParams(temperature=1.0, seed=seed))
        deltas = list(stream)
        assert "".join(deltas) == stream.result.text
        if stream.result.finish_reason == "stop":
            assert re.fullmatch(pattern, stream.result.text)
        else:  # cut by max_tokens: a proper prefix, reported as incomplete
            assert not stream.result.complete and re.fullmatch("(é|日)*", stream.result.text)
        assert all(d and "\ufffd" not in d for d in deltas)


def test_decode_batch_equals_single_decodes(tiny):
    patterns = [r"[ab]{3}c", None, r"(hello|abc)+!", r"x"]
    prompts = [[1, 2, 3], [5], [7, 8], [9, 9, 9, 9]]
    constraints = [compile_regex(p, tiny).matcher() if p else None for p in patterns]
    outs = decode_batch(FakeBatchModel(tiny.vocab_size), prompts, constraints, vocab=tiny, max_tokens=12)
    for p, prompt, got in zip(patterns, prompts, outs):
        want = decode(FakeModel(tiny.vocab_size), prompt, compile_regex(p, tiny).matcher() if p else None,
                      vocab=tiny, max_tokens=12, use_forced=False)
        assert got.token_ids == want.token_ids and got.finish_reason == want.finish_reason
        if p is not None and got.finish_reason == "stop":
            assert re.fullmatch(p, got.text)


# -- LogitsProcessor ----------------------------------------------------------------------------------
def test_logits_processor_tracks_rows_and_new_generations(tiny):
    g = compile_regex(r"(ab|ba)c", tiny)
    proc = GuidewireLogitsProcessor(g)
    V = tiny.vocab_size

    def allowed(scores):
        return [set(torch.nonzero(torch.isfinite(s)).flatten().tolist()) for s in scores]

    a, b, c = byte_id(b"a"), byte_id(b"b"), byte_id(b"c")
    prompt = torch.tensor([[7, 7, 7], [8, 8, 8]])
    first = allowed(proc(prompt, torch.zeros(2, V)))
    assert first[0] == first[1] and {a, b, tiny.bytes_to_tokens()[b"ab"]} <= first[0] and EOS not in first[0]
    ids = torch.cat([prompt, torch.tensor([[a], [b]])], dim=1)
    second = allowed(proc(ids, torch.zeros(2, V)))
    assert second == [{b}, {a}]
    ids = torch.cat([ids, torch.tensor([[b], [a]])], dim=1)
    assert allowed(proc(ids, torch.zeros(2, V))) == [{c}, {c}]
    ids = torch.cat([ids, torch.tensor([[c], [c]])], dim=1)
    assert allowed(proc(ids, torch.zeros(2, V))) == [{EOS}, {EOS}]
    ids = torch.cat([ids, torch.tensor([[EOS], [EOS]])], dim=1)
    assert allowed(proc(ids, torch.zeros(2, V))) == [{EOS}, {EOS}]  # finished rows: EOS/pad only
    # reordered rows (beam search): each row is re-synchronised with its own tokens
    swapped = torch.tensor([[7, 7, 7, b], [8, 8, 8, a]])
    proc2 = GuidewireLogitsProcessor(g)
    proc2(swapped[:, :3], torch.zeros(2, V))
    assert allowed(proc2(swapped.flip(0), torch.zeros(2, V))) == [{b}, {a}]
    # a new, longer prompt starts a new generation with fresh matchers
    again = allowed(proc(torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]), torch.zeros(1, V)))
    assert again == [first[0]]
    with pytest.raises(Exception, match="not allowed"):
        proc(torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, c]]), torch.zeros(1, V))


# -- CLI (no model needed) -------------------------------------------------------------------------
def test_cli_errors_exit_2_without_traceback(capsys, tmp_path):
    from guidewire.cli import main

    assert main(["generate", "x", "--regex", "(?<=a)b", "-q"]) == 2
    err = capsys.readouterr().err
    assert "UnsupportedFeatureError" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["json", str(tmp_path / "missing.json"), "x", "-q"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["json", str(bad), "x", "-q"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_cli_bench_delegates_to_maskbench(monkeypatch):
    from guidewire.cli import main

    seen = []
    fake = types.ModuleType("guidewire.maskbench")
    fake.main = lambda argv, prog: seen.append((argv, prog)) or 7
    monkeypatch.setitem(sys.modules, "guidewire.maskbench", fake)
    assert main(["bench", "maskbench", "--engines", "guidewire", "-n", "3"]) == 7
    assert seen == [(["--engines", "guidewire", "-n", "3"], "guidewire bench maskbench")]


def test_api_argument_errors():
    from guidewire.api import generate

    with pytest.raises(ValueError, match="at most one"):
        generate("x", regex="a", choices=["a"], model=object())
    with pytest.raises(TypeError):
        generate("x", regex="a", lenient=True, model=object())
