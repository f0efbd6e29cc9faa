"""Non-finite logits under a bitmask: a disallowed ``+inf`` or NaN logit must become ``-inf``.

An additive ``-inf`` bias turns a disallowed ``+inf`` logit into ``inf - inf = NaN``, which argmax and
the samplers then pick. These tests put ``+inf`` / NaN on disallowed tokens and check every place the
runtime applies a bitmask (``apply_bitmask_``, the kernel, ``masked_softmax``, plain, batch and
speculative decoding, the HF logits processor) against an element-by-element reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_regex
from guidewire.kernels import apply_token_bitmask_inplace, masked_softmax
from guidewire.runtime import (GuidewireLogitsProcessor, SamplingParams, apply_bitmask_, decode, decode_batch)
from guidewire.runtime.speculative import speculative_decode
from runtime_fakes import EOS, FakeBatchModel, FakeModel, byte_id, tiny_vocab

SPECIALS = [math.inf, math.nan, -math.inf, 1e30, -1e30]


def _allowed(bm: np.ndarray, r: int, t: int) -> bool:
    w = t // 32
    return w < bm.shape[1] and bool((int(bm[r, w]) >> (t % 32)) & 1)


def _reference(logits: torch.Tensor, bm: np.ndarray) -> list[list[float]]:
    """Element by element: allowed logits unchanged (NaN stays NaN), the rest -inf."""
    return [[float(logits[r, t]) if _allowed(bm, r, t) else -math.inf for t in range(logits.shape[1])]
            for r in range(logits.shape[0])]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_non_finite_logits_masked_exactly(data):
    vocab = data.draw(st.integers(1, 130), label="vocab")
    batch = data.draw(st.integers(1, 3), label="batch")
    words = data.draw(st.integers(1, (vocab + 31) // 32 + 1), label="words")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31), label="seed"))
    bm = rng.integers(-2**31, 2**31, size=(batch, words), dtype=np.int64).astype(np.int32)
    base = torch.randn(batch, vocab)
    n_special = data.draw(st.integers(1, 8), label="n_special")
    for _ in range(n_special):  # specials land on allowed and disallowed tokens alike
        r, t = int(rng.integers(batch)), int(rng.integers(vocab))
        base[r, t] = SPECIALS[int(rng.integers(len(SPECIALS)))]
    for dtype in (torch.float32, torch.bfloat16):
        x = base.to(dtype)
        want_d = _reference(x, bm)
        for got in (apply_bitmask_(x.clone(), bm), apply_token_bitmask_inplace(x.clone(), torch.from_numpy(bm))):
            flat = got.float().tolist()
            assert all(_same(a, b) for ra, rb in zip(flat, want_d) for a, b in zip(ra, rb))


def test_disallowed_plus_inf_and_nan_become_minus_inf():
    # the regression itself, stated plainly: +inf/NaN on disallowed tokens, finite allowed ones
    bm = np.zeros((1, 1), dtype=np.int32)
    bm[0, 0] = 0b1010  # tokens 1 and 3 allowed
    logits = torch.tensor([[math.inf, 0.5, math.nan, -2.0, math.inf, math.nan]])
    got = apply_bitmask_(logits.clone(), bm)[0].tolist()
    assert got == [-math.inf, 0.5, -math.inf, -2.0, -math.inf, -math.inf]
    probs = masked_softmax(logits.clone(), torch.from_numpy(bm), 1.0)[0]
    assert torch.isfinite(probs).all() and probs[[0, 2, 4, 5]].sum() == 0
    assert abs(float(probs.sum()) - 1.0) < 1e-6


def _poison_bias(vocab_size: int, good: set[int]) -> torch.Tensor:
    """+inf on every other disallowed token, NaN on the rest: any leak wins argmax / sampling."""
    bias = torch.zeros(vocab_size)
    bad = [t for t in range(vocab_size) if t not in good]
    bias[bad[0::2]] = math.inf
    bias[bad[1::2]] = math.nan
    return bias


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decoding_never_picks_a_poisoned_disallowed_token(temperature):
    tiny = tiny_vocab()
    pattern = "[ab]{3,6}"
    g = compile_regex(pattern, tiny)
    good = {byte_id(b"a"), byte_id(b"b"), EOS, tiny.bytes_to_tokens()[b"ab"]}
    bias = _poison_bias(tiny.vocab_size, good)
    runs = 0
    for seed in range(6):
        params = SamplingParams(temperature=temperature, seed=seed)
        r = decode(FakeModel(tiny.vocab_size, bias=bias), [1], g.matcher(), vocab=tiny, max_tokens=10,
                   sampling=params)
        assert r.complete and set(r.text) <= set("ab") and 3 <= len(r.text) <= 6, r.text
        s = speculative_decode(FakeModel(tiny.vocab_size, bias=bias), [1], g.matcher(), vocab=tiny,
                               drafter=None, max_tokens=10, sampling=params)
        assert s.complete and set(s.text) <= set("ab") and 3 <= len(s.text) <= 6, s.text
        if temperature == 0:
            assert s.token_ids == r.token_ids
        batch = decode_batch(FakeBatchModel(tiny.vocab_size, bias=bias), [[1], [2]],
                             [g.matcher(), g.matcher()], vocab=tiny, max_tokens=10, sampling=params)
        for b in batch:
            assert b.complete and set(b.text) <= set("ab") and 3 <= len(b.text) <= 6, b.text
        runs += 1
    assert runs == 6


def test_logits_processor_masks_poisoned_scores():
    tiny = tiny_vocab()
    proc = GuidewireLogitsProcessor(compile_regex("(ab|ba)c", tiny))
    # allowed first tokens, by the pattern's own words: non-empty prefixes of "abc" / "bac"
    good = {t for bs, t in tiny.bytes_to_tokens().items() if bs and any(w.startswith(bs) for w in (b"abc", b"bac"))}
    assert len(good) == 4  # a, b, ab, abc
    scores = _poison_bias(tiny.vocab_size, good).repeat(2, 1)
    out = proc(torch.tensor([[7, 7], [8, 8]]), scores)
    for row in out:
        assert not torch.isnan(row).any()
        assert set(torch.nonzero(torch.isfinite(row)).flatten().tolist()) == good
        assert int(row.argmax()) in good
