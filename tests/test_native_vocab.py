"""The compiled vocabulary indexes (``_native_vocab.c``) against their numpy references and a
brute-force scan: hub run ends over the flat layout, and each token's set of bytes."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.grammar import native
from guidewire.grammar.vocabindex import (SENTINEL, byte_words_numpy, loop_run_ends_numpy, vocab_layout,
                                          _byte_words)

pytestmark = pytest.mark.skipif(not native.available(), reason="the C extension is not built")


def _layout(tokens: list[bytes]) -> SimpleNamespace:
    """The flat form of ``tokens`` as the vocabulary layout has it: each token's bytes, then a sentinel."""
    flat, starts, ends = [], [], []
    for t in tokens:
        starts.append(len(flat))
        flat.extend(t)
        ends.append(len(flat))
        flat.append(SENTINEL)
    flat = np.array(flat, dtype=np.int64)
    raw = bytes(b if b < 256 else 0 for b in flat.tolist())
    return SimpleNamespace(flat=flat, flat16=flat.astype(np.uint16), raw=raw, starts=np.array(starts, dtype=np.int64),
                           ends=np.array(ends, dtype=np.int64), ids=np.arange(len(tokens)))


tokens_st = st.lists(st.binary(min_size=1, max_size=8), min_size=1, max_size=60)


@settings(max_examples=120, deadline=None, database=None, derandomize=True)
@given(tokens_st, st.lists(st.integers(0, 255), max_size=200))
def test_loop_run_ends_match_numpy_and_a_scan(tokens, loop_bytes):
    lay = _layout(tokens)
    loop = np.zeros(256, dtype=bool)
    loop[loop_bytes] = True
    got = np.empty(lay.flat.size, dtype=np.int32)
    native.module().loop_run_ends(lay.flat16, loop.astype(np.uint8), got)
    assert np.array_equal(got, loop_run_ends_numpy(lay.flat, loop))
    flat = lay.flat.tolist()
    for p in range(len(flat)):          # brute force: the first non-loop position at or after p
        q = p
        while q < len(flat) and flat[q] < 256 and loop[flat[q]]:
            q += 1
        assert got[p] == q


@settings(max_examples=120, deadline=None, database=None, derandomize=True)
@given(tokens_st, st.booleans())
def test_byte_words_match_numpy_and_a_scan(tokens, skip_first):
    lay = _layout(tokens)
    got = np.zeros((4, len(tokens)), dtype=np.uint64)
    native.module().byte_words(lay.raw, lay.starts, lay.ends, skip_first, got)
    skip = np.zeros(lay.flat.size, dtype=bool)
    skip[lay.ends] = True
    if skip_first:
        skip[lay.starts] = True
    assert np.array_equal(got, byte_words_numpy(lay, skip, 4))
    for i, t in enumerate(tokens):       # brute force: the token's byte set
        want = set(t[1:] if skip_first else t)
        have = {w * 64 + k for w in range(4) for k in range(64) if (int(got[w, i]) >> k) & 1}
        assert have == want


def test_real_layout_indexes_agree(smollm2):
    """On SmolLM2's whole layout the compiled indexes equal the numpy ones (both paths of
    ``_byte_words``; run ends for a string body's loop bytes)."""
    lay = vocab_layout(smollm2)
    loop = np.zeros(256, dtype=bool)
    loop[0x20:] = True
    loop[[0x22, 0x5C]] = False
    got = np.empty(lay.flat.size, dtype=np.int32)
    native.module().loop_run_ends(lay.flat16, loop.astype(np.uint8), got)
    assert np.array_equal(got, loop_run_ends_numpy(lay.flat, loop))
    old = native.set_enabled(False)
    try:
        ref = [_byte_words(lay, s) for s in (True, False)]
    finally:
        native.set_enabled(old)
    for s, r in zip((True, False), ref):
        assert np.array_equal(_byte_words(lay, s), r)
    assert lay.ids.size > 40_000


def test_bad_arrays_get_typed_errors():
    lay = _layout([b"ab", b"c"])
    c = native.module()
    with pytest.raises(ValueError, match="loop"):
        c.loop_run_ends(lay.flat16, np.zeros(255, dtype=np.uint8), np.empty(lay.flat.size, dtype=np.int32))
    with pytest.raises(ValueError, match="run_ends"):
        c.loop_run_ends(lay.flat16, np.zeros(256, dtype=np.uint8), np.empty(1, dtype=np.int32))
    with pytest.raises(ValueError, match="match"):
        c.byte_words(lay.raw, lay.starts, lay.ends, True, np.zeros((4, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="span"):
        c.byte_words(lay.raw, lay.starts, lay.ends + 100, True, np.zeros((4, 2), dtype=np.uint64))
    with pytest.raises(ValueError):     # read-only output
        out = np.zeros((4, 2), dtype=np.uint64)
        out.setflags(write=False)
        c.byte_words(lay.raw, lay.starts, lay.ends, True, out)
