"""Apply int32 token bitmasks to torch logits in place (device-agnostic torch code).

Bit ``t % 32`` of word ``t // 32`` of a row set means token ``t`` is allowed; tokens beyond the
bitmask's width are disallowed, extra bitmask words beyond the logits' width are ignored.
"""

from __future__ import annotations

import numpy as np
import torch

from ..kernels.bitmask import apply_token_bitmask_inplace, unpack_bits


def _as_int32_tensor(bitmask) -> torch.Tensor:
    bm = torch.as_tensor(bitmask if not isinstance(bitmask, np.ndarray) else np.ascontiguousarray(bitmask))
    return bm if bm.dtype == torch.int32 else bm.to(torch.int32)


def unpack_bitmask(bitmask, vocab_size: int, device=None) -> torch.Tensor:
    """Boolean ``(batch, vocab_size)`` tensor of allowed tokens from an int32 bitmask (numpy or torch)."""
    bm = _as_int32_tensor(bitmask)
    if device is not None:
        bm = bm.to(device)
    return unpack_bits(bm if bm.dim() == 2 else bm.reshape(1, -1), vocab_size)


def apply_bitmask_(logits: torch.Tensor, bitmask, indices=None) -> torch.Tensor:
    """Set disallowed logits to ``-inf`` in place and return ``logits``.

    The runtime's one bitmask-apply: :func:`guidewire.kernels.apply_token_bitmask_inplace` (Triton on
    CUDA, torch elsewhere). ``logits`` is ``(batch, V)`` (or ``(V,)``), any float
    dtype and device; ``bitmask`` is ``(batch', ceil(V/32))`` int32, numpy or torch. Tokens beyond the
    bitmask's width are disallowed. With ``indices``, bitmask row ``i`` applies to logits row
    ``indices[i]``; rows not listed are left untouched. Every disallowed logit becomes ``-inf`` (a
    ``+inf`` or NaN one included: no additive bias, so no ``inf - inf = NaN``); allowed logits keep
    their exact values.
    """
    return apply_token_bitmask_inplace(logits, _as_int32_tensor(bitmask), indices=indices)


def only_tokens_allowed(row: np.ndarray, tokens_row: np.ndarray) -> bool:
    """Whether bitmask ``row`` allows some token and only tokens of ``tokens_row`` (both 1-D int32)."""
    n = min(row.shape[0], tokens_row.shape[0])
    if row[n:].any():
        return False
    r = row[:n]
    return bool(r.any()) and not bool((r & ~tokens_row[:n]).any())


def single_allowed_token(row: np.ndarray) -> int | None:
    """The token id if bitmask ``row`` (1-D int32) allows exactly one token, else ``None``."""
    nz = np.flatnonzero(row)
    if nz.size != 1:
        return None
    word = int(np.uint32(row[nz[0]]))
    if word & (word - 1):
        return None
    return int(nz[0]) * 32 + word.bit_length() - 1
