"""Token bitmasks in the XGrammar / llguidance layout.

A bitmask is an ``int32`` array of shape ``(batch, ceil(V / 32))``; bit ``t % 32``
of word ``t // 32`` is set when token ``t`` is allowed. All helpers accept
numpy arrays; ``apply_token_bitmask`` also accepts torch tensors.
"""

from __future__ import annotations

import numpy as np


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words needed for ``vocab_size`` tokens."""
    return (int(vocab_size) + 31) // 32


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A zeroed ``(batch, ceil(vocab_size/32))`` int32 bitmask (nothing allowed)."""
    return np.zeros((int(batch), bitmask_words(vocab_size)), dtype=np.int32)


def ids_to_bitmask(ids, vocab_size: int) -> np.ndarray:
    """One bitmask row (1-D int32) with the bits of ``ids`` set."""
    words = np.zeros(bitmask_words(vocab_size), dtype=np.uint32)
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size:
        np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
    return words.view(np.int32)


def bitmask_to_bool(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """Unpack one bitmask row into a boolean array of length ``vocab_size``."""
    row = np.ascontiguousarray(row, dtype=np.int32).view(np.uint8)
    bits = np.unpackbits(row, bitorder="little")
    return bits[:vocab_size].astype(bool)


def bool_to_bitmask(allowed: np.ndarray) -> np.ndarray:
    """Pack a boolean array into one bitmask row (1-D int32)."""
    allowed = np.asarray(allowed, dtype=bool)
    n = bitmask_words(allowed.size) * 32
    padded = np.zeros(n, dtype=bool)
    padded[: allowed.size] = allowed
    return np.packbits(padded, bitorder="little").view(np.int32)


def bitmask_to_ids(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """Allowed token ids of one bitmask row."""
    return np.flatnonzero(bitmask_to_bool(row, vocab_size))


def bitmask_popcounts(rows: np.ndarray) -> np.ndarray:
    """Number of set bits in each row of a 2-D int32 bitmask (int64 per row)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(rows.view(np.uint32)).sum(axis=1, dtype=np.int64)
    return np.unpackbits(rows.view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)


def fill_row(bitmask, row: int, words: np.ndarray) -> None:
    """Copy one packed row into ``bitmask[row]`` (numpy or torch int32)."""
    n = min(bitmask.shape[1], words.shape[0])
    if isinstance(bitmask, np.ndarray):
        bitmask[row, :n] = words[:n]
        bitmask[row, n:] = 0
    elif bitmask.device.type == "cpu" and not bitmask.requires_grad:
        view = bitmask[row].numpy()  # shares the tensor's memory: no copy, no read-only tensor
        view[:n] = words[:n]
        view[n:] = 0
    else:  # a tensor on an accelerator: one host-to-device copy of a writable buffer
        import torch

        bitmask[row, :n] = torch.from_numpy(np.array(words[:n], dtype=np.int32))
        bitmask[row, n:] = 0


def apply_token_bitmask(logits, bitmask, indices=None):
    """Set logits of disallowed tokens to ``-inf`` in place and return ``logits``.

    ``logits`` is ``(batch, V)`` (numpy or torch), ``bitmask`` is ``(batch', ceil(V/32))``;
    with ``indices`` given, row ``i`` of the bitmask applies to logits row ``indices[i]``.
    Tokens beyond the bitmask's width are disallowed.
    """
    if isinstance(logits, np.ndarray):
        bm = np.asarray(bitmask)
        rows = range(bm.shape[0]) if indices is None else indices
        for i, r in enumerate(rows):
            allowed = bitmask_to_bool(bm[i], min(logits.shape[-1], bm.shape[1] * 32))
            view = logits[r]
            view[: allowed.size][~allowed] = -np.inf
            view[allowed.size:] = -np.inf
        return logits
    import torch

    bm = torch.as_tensor(bitmask, device=logits.device)
    vocab = logits.shape[-1]
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((bm.unsqueeze(-1) >> shifts) & 1).reshape(bm.shape[0], -1).bool()
    if bits.shape[1] < vocab:
        pad = torch.zeros(bits.shape[0], vocab - bits.shape[1], dtype=torch.bool, device=bits.device)
        bits = torch.cat([bits, pad], dim=1)
    bits = bits[:, :vocab]
    if indices is None:
        logits.masked_fill_(~bits, float("-inf"))
    else:
        idx = torch.as_tensor(indices, device=logits.device, dtype=torch.long)
        sub = logits[idx]
        sub.masked_fill_(~bits, float("-inf"))
        logits[idx] = sub
    return logits
