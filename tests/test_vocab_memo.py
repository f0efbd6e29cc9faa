"""The per-vocabulary memos of the table build (``vocabindex._byte_set_cached``): bounded in bytes,
the bound scaling with the vocabulary's size, least recently used entries evicted first."""

import numpy as np

from guidewire.core import Vocab
from guidewire.grammar import tabletrie, vocabindex
from guidewire.grammar.vocabindex import _byte_set_cached, cache_budget, utf8_slice


def _vocab(n: int) -> Vocab:
    toks = [b"<eos>"] + [b"t%d" % i for i in range(n - 1)]
    return Vocab(tuple(toks), frozenset({0}), frozenset({0}), n, "memo")


def _set(*bs: int) -> np.ndarray:
    out = np.zeros(256, dtype=bool)
    out[list(bs)] = True
    return out


def test_the_bound_scales_with_the_vocabulary():
    small, large = _vocab(100), _vocab(5000)
    assert cache_budget(small, (1000, 4)) == 1000          # the floor
    assert cache_budget(large, (1000, 4)) == 20000         # 4 bytes a token
    assert cache_budget(large, (1000, 0)) == 1000
    # the real bounds: a 49k-token vocabulary keeps the floors, a 262k one (entries five times the
    # size) gets at least two and a half times as many bytes
    for bound in (vocabindex.SLICE_CACHE_BYTES, vocabindex.LOOP_CACHE_BYTES, tabletrie._SLICE_BYTES):
        assert cache_budget(_vocab(49152), bound) == bound[0], bound
        assert cache_budget(_vocab(262144), bound) >= 2.5 * bound[0], bound


def test_least_recently_used_entries_are_evicted_within_the_bound():
    v = _vocab(100)
    builds = []

    def build(_v, byte_set):
        builds.append(int(byte_set.nonzero()[0][0]))
        return np.zeros(10, dtype=np.int32)     # 40 bytes

    def get(b):
        return _byte_set_cached(v, "test.memo", _set(b), build, lambda a: a.nbytes, (100, 0))

    first = get(1)
    assert get(1) is first and builds == [1]    # memoised
    get(2)
    get(1)          # 1 is now the most recently used
    get(3)          # 120 bytes > 100: the least recently used (2) goes
    assert v._cache["test.memo.bytes"] <= 100
    assert builds == [1, 2, 3]
    get(1)
    get(3)
    assert builds == [1, 2, 3]                  # both still there
    get(2)                                      # rebuilt, and 1 (least recent) evicted
    assert builds == [1, 2, 3, 2]
    get(1)
    assert builds == [1, 2, 3, 2, 1]
    assert v._cache["test.memo.bytes"] <= 100 and len(v._cache["test.memo"]) == 2


def test_a_real_vocabulary_keeps_its_slices_within_the_bound(smollm2):
    """Many distinct slices of SmolLM2: the memo's running total stays within its bound and equals
    the sum of what it holds."""
    rng = np.random.default_rng(0)
    letters = np.arange(ord("a"), ord("z") + 1)
    for _ in range(12):
        utf8_slice(smollm2, _set(*rng.choice(letters, size=8, replace=False).tolist()))
    held = smollm2._cache[vocabindex._SLICE_KEY]
    total = smollm2._cache[vocabindex._SLICE_KEY + ".bytes"]
    assert len(held) >= 12 and total == sum(s.nbytes for s in held.values())
    assert total <= cache_budget(smollm2, vocabindex.SLICE_CACHE_BYTES)


def test_the_per_token_bound_decides_what_is_kept():
    """A 100-token vocabulary with a bound of (40 bytes, 1 byte a token): 100 bytes hold two 40-byte
    entries where the floor alone would hold one."""
    v = _vocab(100)
    for b in (1, 2, 3):
        _byte_set_cached(v, "test.scaled", _set(b), lambda _v, _s: np.zeros(10, dtype=np.int32),
                         lambda a: a.nbytes, (40, 1))
    assert len(v._cache["test.scaled"]) == 2 and v._cache["test.scaled.bytes"] == 80
