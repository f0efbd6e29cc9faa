"""The compiled vocabulary indexes (``_native_vocab.c``) against their numpy references and a
brute-force scan: where a run of a hub's loop bytes ends, a hub's exits, and each token's set of bytes."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.grammar import native
from guidewire.grammar.vocabindex import (SENTINEL, _byte_words, _loop_runs, byte_words_numpy,
                                          loop_run_ends_numpy, vocab_layout)

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
@given(tokens_st, st.lists(st.integers(0, 255), max_size=200), st.integers(0, 2**32 - 1))
def test_first_outside_matches_numpy_run_ends_and_a_scan(tokens, loop_bytes, seed):
    lay = _layout(tokens)
    loop = np.zeros(256, dtype=bool)
    loop[loop_bytes] = True
    pos = np.random.default_rng(seed).integers(0, lay.flat.size + 1, size=30).astype(np.int64)
    got = np.empty(pos.size, dtype=np.int64)
    native.module().first_outside(lay.flat16, pos, loop.astype(np.uint8), got)
    ends = loop_run_ends_numpy(lay.flat, loop)
    flat = lay.flat.tolist()
    for p, g in zip(pos.tolist(), got.tolist()):
        if p < len(flat):
            assert g == ends[p]
        q = p                           # brute force: the first non-loop position at or after p
        while q < len(flat) and flat[q] < 256 and loop[flat[q]]:
            q += 1
        assert g == q


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
    """On SmolLM2's whole layout the compiled paths equal the numpy ones: each token's byte sets,
    and a hub's exits, exit bytes and staying tokens (an identifier's loop bytes), the latter also
    against a scan of every token."""
    lay = vocab_layout(smollm2)
    loop = np.zeros(256, dtype=bool)
    loop[ord("a"):ord("z") + 1] = True      # an identifier-like hub
    loop[ord("0"):ord("9") + 1] = True
    def forget():        # the per-vocabulary byte-set indexes, so that each path builds its own
        for key in [k for k in smollm2._cache if "tails" in k]:
            del smollm2._cache[key]

    forget()
    old = native.set_enabled(False)
    try:
        ref = [_byte_words(lay, s) for s in (True, False)]
        ref_runs = _loop_runs(smollm2, loop)
    finally:
        native.set_enabled(old)
        forget()
    for s, r in zip((True, False), ref):
        assert np.array_equal(_byte_words(lay, s), r)
    runs = _loop_runs(smollm2, loop)
    for name in ("exits", "exit_bucket", "stay_row", "exit_byte"):
        assert np.array_equal(getattr(runs, name), getattr(ref_runs, name)), name
    exits = set(runs.exits.tolist())
    exit_byte = dict(zip(runs.exits.tolist(), runs.exit_byte.tolist()))
    stay_ids = set(np.flatnonzero(np.unpackbits(runs.stay_row.view(np.uint8), bitorder="little")).tolist())
    for i, tid in enumerate(lay.ids.tolist()):      # brute force over every token
        tail = smollm2.token_bytes[tid][1:]
        out = [b for b in tail if not loop[b]]
        assert (i in exits) == bool(out) 
        assert (tid in stay_ids) == (not out)
        if out:
            assert exit_byte[i] == out[0]
    assert len(exits) > 1000 and len(stay_ids) > 1000


def test_bad_arrays_get_typed_errors():
    lay = _layout([b"ab", b"c"])
    c = native.module()
    pos = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="loop"):
        c.first_outside(lay.flat16, pos, np.zeros(255, dtype=np.uint8), np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="out"):
        c.first_outside(lay.flat16, pos, np.zeros(256, dtype=np.uint8), np.empty(1, dtype=np.int64))
    with pytest.raises(IndexError):
        c.first_outside(lay.flat16, pos + 99, np.zeros(256, dtype=np.uint8), np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="match"):
        c.byte_words(lay.raw, lay.starts, lay.ends, True, np.zeros((4, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="span"):
        c.byte_words(lay.raw, lay.starts, lay.ends + 100, True, np.zeros((4, 2), dtype=np.uint64))
    with pytest.raises(ValueError):     # read-only output
        out = np.zeros((4, 2), dtype=np.uint64)
        out.setflags(write=False)
        c.byte_words(lay.raw, lay.starts, lay.ends, True, out)
