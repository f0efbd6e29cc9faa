"""A sequence on a preallocated (static) KV cache against the same sequence on a dynamic one.

On a CUDA device :class:`~guidewire.runtime.HFModel` decodes on a static cache and replays its
one-token step as a CUDA graph; here (CPU) the same cache runs eagerly (``static=True``) and the
oracle is the dynamic-cache model: the same logits (float32, up to the attention kernels'
rounding) through prefill, steps, forks, truncation and a sequence that outgrows the cache.
The graph itself is checked on a GPU by ``tests/test_cuda_runtime.py``.
"""

from __future__ import annotations

import pytest
import torch

from guidewire.runtime import HFModel

ATOL = 1e-4


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert float((a - b).abs().max()) <= ATOL


def test_static_cache_matches_the_dynamic_one(smol_model):
    ids = smol_model.encode_prompt("Name three rivers in Europe.")
    dyn = HFModel(smol_model.module)
    sta = HFModel(smol_model.module, static=True)
    assert dyn.static_decoder is None and sta.static_decoder is not None
    _close(sta.prefill(ids), dyn.prefill(ids))
    toks = []
    for _ in range(6):                                  # one-token steps
        lg_d = dyn.step([toks[-1]] if toks else [7], last_only=True)
        lg_s = sta.step([toks[-1]] if toks else [7], last_only=True)
        _close(lg_s, lg_d)
        toks.append(int(lg_d[-1].argmax()))
    _close(sta.step(toks[:3]), dyn.step(toks[:3]))      # several tokens at once
    n = dyn.length
    assert sta.length == n
    # truncate: the static cache forgets the length; what follows sees only the kept positions
    dyn.truncate(n - 4)
    sta.truncate(n - 4)
    _close(sta.step([11, 12], last_only=True), dyn.step([11, 12], last_only=True))
    # a fork is an independent dynamic copy; the original goes on on its static cache
    f = sta.fork()
    assert f.static_decoder is None and f.tokens == sta.tokens
    _close(f.step([5], last_only=True), dyn.fork().step([5], last_only=True))
    _close(sta.step([13], last_only=True), dyn.step([13], last_only=True))
    # prefill again reuses the cache: positions from the first sequence are overwritten or unseen
    short = ids[:5]
    _close(sta.prefill(short, last_only=True), dyn.prefill(short, last_only=True))
    _close(sta.step([3], last_only=True), dyn.step([3], last_only=True))


def test_a_sequence_that_outgrows_the_static_cache_goes_on(smol_model, monkeypatch):
    monkeypatch.setenv("GUIDEWIRE_STATIC_CACHE_TOKENS", "48")
    ids = smol_model.encode_prompt("Count from one to twenty.")
    assert len(ids) < 48
    dyn = HFModel(smol_model.module)
    sta = HFModel(smol_model.module, static=True)
    assert sta.static_decoder.max_len == 48
    _close(sta.prefill(ids, last_only=True), dyn.prefill(ids, last_only=True))
    steps = 0
    while dyn.length < 56:
        _close(sta.step([42], last_only=True), dyn.step([42], last_only=True))
        steps += 1
    assert sta.static_decoder is None and sta.length == dyn.length == 56 and steps == 56 - len(ids)


def test_static_is_off_on_the_cpu_by_default_and_when_disabled(smol_model, monkeypatch):
    assert HFModel(smol_model.module).static_decoder is None
    monkeypatch.setenv("GUIDEWIRE_CUDA_GRAPHS", "0")
    assert HFModel(smol_model.module, static=None).static_decoder is None
    with pytest.raises(ValueError, match="at least one token"):
        HFModel(smol_model.module, static=True).prefill([])


def test_a_dropped_sequence_gives_its_cache_to_the_next(smol_model):
    """The next sequence reuses the dropped one's decoder (its cache and, on CUDA, its graph), and
    the first sequence's positions do not leak into it."""
    ids = smol_model.encode_prompt("Name a colour.")
    first = HFModel(smol_model.module, static=True)
    first.prefill(ids + [5, 6, 7, 8, 9], last_only=True)
    dec = first.static_decoder
    del first                                      # the finalizer returns the decoder to the pool
    second = HFModel(smol_model.module, static=True)
    assert second.static_decoder is dec
    dyn = HFModel(smol_model.module)
    _close(second.prefill(ids[:6], last_only=True), dyn.prefill(ids[:6], last_only=True))
    _close(second.step([11], last_only=True), dyn.step([11], last_only=True))
    third = HFModel(smol_model.module, static=True)   # the pool is empty while second lives
    assert third.static_decoder is not dec
