"""Apply int32 token bitmasks to torch logits in place (device-agnostic torch code).

Bit ``t % 32`` of word ``t // 32`` of a row set means token ``t`` is allowed; tokens beyond the
bitmask's width are disallowed, extra bitmask words beyond the logits' width are ignored.
"""

from __future__ import annotations

import numpy as np
import torch

_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _shifts(device: torch.device) -> torch.Tensor:
    s = _SHIFTS.get(device)
    if s is None:
        s = _SHIFTS[device] = torch.arange(32, dtype=torch.int32, device=device)
    return s


def unpack_bitmask(bitmask, vocab_size: int, device=None) -> torch.Tensor:
    """Boolean ``(batch, vocab_size)`` tensor of allowed tokens from an int32 bitmask (numpy or torch)."""
    bm = torch.as_tensor(bitmask if not isinstance(bitmask, np.ndarray) else np.ascontiguousarray(bitmask))
    if device is not None:
        bm = bm.to(device)
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    bits = ((bm.unsqueeze(-1) >> _shifts(bm.device)) & 1).reshape(bm.shape[0], -1).bool()
    width = bits.shape[1]
    if width >= vocab_size:
        return bits[:, :vocab_size]
    pad = torch.zeros(bits.shape[0], vocab_size - width, dtype=torch.bool, device=bits.device)
    return torch.cat([bits, pad], dim=1)


_BIAS: dict[torch.device, torch.Tensor] = {}


def _bias_table(device: torch.device) -> torch.Tensor:
    """``(256, 8)`` float32: entry ``[b, i]`` is 0 if bit ``i`` of byte ``b`` is set, else -inf."""
    t = _BIAS.get(device)
    if t is None:
        b = torch.arange(256, dtype=torch.int32).unsqueeze(1)
        bits = (b >> torch.arange(8, dtype=torch.int32)) & 1
        t = torch.zeros(256, 8).masked_fill_(bits == 0, float("-inf"))
        t = _BIAS[device] = t.to(device)
    return t


def bitmask_bias(bitmask, vocab_size: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """Additive ``(batch, vocab_size)`` bias: 0 for allowed tokens, ``-inf`` for the rest.

    A branch-free byte lookup (much faster than a boolean ``masked_fill`` on a busy CPU).
    """
    bm = torch.as_tensor(bitmask if not isinstance(bitmask, np.ndarray) else np.ascontiguousarray(bitmask))
    if device is not None:
        bm = bm.to(device)
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    if bm.dtype != torch.int32:
        bm = bm.to(torch.int32)
    as_bytes = bm.contiguous().view(torch.uint8).long()  # little-endian: byte k of word w = bits 8k..8k+7
    bias = torch.nn.functional.embedding(as_bytes, _bias_table(bm.device)).reshape(bm.shape[0], -1)
    width = bias.shape[1]
    if width >= vocab_size:
        bias = bias[:, :vocab_size]
    else:
        pad = bias.new_full((bias.shape[0], vocab_size - width), float("-inf"))
        bias = torch.cat([bias, pad], dim=1)
    return bias if bias.dtype == dtype else bias.to(dtype)


def apply_bitmask_(logits: torch.Tensor, bitmask, indices=None) -> torch.Tensor:
    """Set disallowed logits to ``-inf`` in place and return ``logits``.

    ``logits`` is ``(batch, V)`` (or ``(V,)``), any float dtype and device; ``bitmask`` is
    ``(batch', ceil(V/32))`` int32, numpy or torch. Tokens beyond the bitmask's width are
    disallowed. With ``indices``, bitmask row ``i`` applies to logits row ``indices[i]``; rows not
    listed are left untouched. Allowed logits keep their exact values.
    """
    squeeze = logits.dim() == 1
    view = logits.unsqueeze(0) if squeeze else logits
    bias = bitmask_bias(bitmask, view.shape[-1], device=view.device, dtype=view.dtype)
    if indices is None:
        if bias.shape[0] != view.shape[0]:
            raise ValueError(f"bitmask has {bias.shape[0]} rows, logits {view.shape[0]}")
        view.add_(bias)
    else:
        idx = torch.as_tensor(list(indices), dtype=torch.long, device=view.device)
        if idx.numel() != bias.shape[0]:
            raise ValueError(f"bitmask has {bias.shape[0]} rows, indices {idx.numel()}")
        view.index_add_(0, idx, bias)
    return logits


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
