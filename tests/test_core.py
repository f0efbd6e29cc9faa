"""Vocab byte mapping against the tokenizers' own decoders; bitmask helpers against references."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.core import (Vocab, allocate_token_bitmask, apply_token_bitmask, bitmask_to_bool,
                            bitmask_to_ids, bool_to_bitmask, ids_to_bitmask)
from guidewire.core.errors import VocabError

TEXTS = ["Hello, world!", "Zoë's café — naïve ☃ 日本語 🎉", '{"a": [1, 2.5e-3, null]}\n\t  x',
         "SELECT * FROM t WHERE x <> 'y';", "   leading spaces and\nnewlines\r\n"]


@pytest.mark.parametrize("text", TEXTS)
def test_smollm2_bytes_match_decoder(smollm2, smol_tokenizer, text):
    ids = smol_tokenizer.encode(text, add_special_tokens=False)
    assert smollm2.decode(ids) == text.encode("utf-8")


@pytest.mark.parametrize("text", TEXTS)
def test_gemma3_bytes_match_decoder(gemma3, gemma_tokenizer, text):
    ids = gemma_tokenizer.encode(text, add_special_tokens=False)
    assert gemma3.decode(ids) == gemma_tokenizer.decode(ids).encode("utf-8")


def test_gemma3_byte_fallback_and_specials(gemma3, gemma_tokenizer):
    tid = gemma_tokenizer.convert_tokens_to_ids("<0xE2>")
    assert gemma3.token_bytes[tid] == b"\xe2"
    assert gemma3.token_bytes[gemma_tokenizer.convert_tokens_to_ids("▁the")] == b" the"
    for name in ("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"):
        i = gemma_tokenizer.convert_tokens_to_ids(name)
        assert i in gemma3.special_ids and gemma3.token_bytes[i] == b""
    assert gemma3.eos_ids == {1, 106}
    assert gemma3.vocab_size == 262144


def test_smollm2_specials_and_eos(smollm2):
    assert smollm2.eos_ids == {0, 2}
    assert smollm2.token_bytes[1] == b""  # <|im_start|>
    assert 1 in smollm2.special_ids
    assert len(smollm2) == smollm2.vocab_size == 49152
    assert len(smollm2.content_hash) == 64


def test_vocab_padding_and_missing_eos():
    v = Vocab((b"a", b"b", b""), frozenset({2}), frozenset({2}), 64)
    assert v.vocab_size == 64 and len(v) == 3
    with pytest.raises(VocabError):
        Vocab((b"a",), frozenset(), frozenset(), 1)
    with pytest.raises(VocabError):
        Vocab((b"a", b"b"), frozenset(), frozenset({1}), 1)


def test_can_spell():
    v = Vocab((b"ab", b"c", b""), frozenset({2}), frozenset({2}), 3)
    assert v.can_spell(b"abcab") and not v.can_spell(b"abb") and not v.can_spell(b"a")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.data())
def test_bitmask_roundtrip(vocab_size, data):
    ids = data.draw(st.lists(st.integers(0, vocab_size - 1), max_size=40))
    row = ids_to_bitmask(ids, vocab_size)
    assert row.dtype == np.int32 and row.shape == ((vocab_size + 31) // 32,)
    assert sorted(set(ids)) == bitmask_to_ids(row, vocab_size).tolist()
    allowed = bitmask_to_bool(row, vocab_size)
    assert np.array_equal(bool_to_bitmask(allowed), row)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 200), st.integers(1, 4), st.data())
def test_apply_bitmask_torch_and_numpy_match_reference(vocab_size, batch, data):
    bm = allocate_token_bitmask(batch, vocab_size)
    ref = np.zeros((batch, vocab_size), dtype=bool)
    for b in range(batch):
        ids = data.draw(st.lists(st.integers(0, vocab_size - 1), max_size=20))
        bm[b] = ids_to_bitmask(ids, vocab_size)
        ref[b, ids] = True
    logits = np.random.default_rng(0).standard_normal((batch, vocab_size)).astype(np.float32)
    expect = np.where(ref, logits, -np.inf)
    assert np.array_equal(apply_token_bitmask(logits.copy(), bm), expect)
    t = torch.from_numpy(logits.copy())
    assert np.array_equal(apply_token_bitmask(t, torch.from_numpy(bm)).numpy(), expect)
    # row indices: bitmask row 0 applies to logits row batch-1
    t = torch.from_numpy(logits.copy())
    apply_token_bitmask(t, torch.from_numpy(bm[:1]), indices=[batch - 1])
    assert np.array_equal(t[batch - 1].numpy(), expect[0] if batch == 1 else np.where(ref[0], logits[batch - 1], -np.inf))
