"""Apply an int32 token bitmask to logits in place: a torch reference and a Triton kernel.

Bit ``t % 32`` of word ``t // 32`` of a bitmask row set means token ``t`` is allowed (the XGrammar /
llguidance layout); tokens beyond the bitmask's width are disallowed and words beyond the logits'
width are ignored. Disallowed logits become ``-inf`` (a ``+inf`` or NaN one too); allowed logits keep
their exact values.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._triton import TritonKernel, next_pow2, triton_kernel, use_triton

tl = None  # triton.language, bound by TritonKernel on first launch (keeps Triton out of the import)

__all__ = ["apply_token_bitmask_inplace", "apply_token_bitmask_inplace_torch", "apply_token_bitmask_inplace_triton",
           "unpack_bits", "bitmask_ceiling"]

_TABLES: dict[tuple, torch.Tensor] = {}


def _byte_table(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``(256, 8)`` table: entry ``[b, i]`` is bit ``i`` of byte ``b`` (bool), or for a float dtype
    ``+inf`` where the bit is set and ``-inf`` where it is clear."""
    key = (device, dtype)
    t = _TABLES.get(key)
    if t is None:
        b = torch.arange(256, dtype=torch.int32).unsqueeze(1)
        bits = ((b >> torch.arange(8, dtype=torch.int32)) & 1) == 1
        if dtype != torch.bool:
            bits = torch.full((256, 8), float("-inf")).masked_fill_(bits, float("inf")).to(dtype)
        t = _TABLES[key] = bits.to(device)
    return t


def _expand(bitmask: torch.Tensor, vocab_size: int, dtype: torch.dtype, fill) -> torch.Tensor:
    """``(batch, vocab_size)`` per-token table lookup of a ``(batch, W)`` int32 bitmask (one byte at
    a time); columns at or beyond ``32 * W`` get ``fill``."""
    bm = bitmask if bitmask.dim() == 2 else bitmask.reshape(1, -1)
    batch, width = bm.shape[0], bm.shape[1] * 32
    if width == 0:
        return torch.full((batch, vocab_size), fill, dtype=dtype, device=bm.device)
    as_bytes = bm.contiguous().view(torch.uint8).reshape(-1).long()  # little-endian: byte k = bits 8k..8k+7
    out = _byte_table(bm.device, dtype).index_select(0, as_bytes).reshape(batch, width)
    if width >= vocab_size:
        return out[:, :vocab_size]
    pad = torch.full((batch, vocab_size - width), fill, dtype=dtype, device=bm.device)
    return torch.cat([out, pad], dim=1)


def unpack_bits(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Boolean ``(batch, vocab_size)`` allowed-token table of an int32 ``(batch, W)`` bitmask.

    Columns at or beyond ``32 * W`` are False (disallowed).
    """
    return _expand(bitmask, vocab_size, torch.bool, False)


def bitmask_ceiling(bitmask: torch.Tensor, vocab_size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``(batch, vocab_size)`` tensor: ``+inf`` for allowed tokens, ``-inf`` for the rest.

    ``torch.minimum(logits, ceiling)`` masks logits; on the CPU that is several times faster than a
    boolean ``masked_fill``; NaN logits stay NaN, see :func:`clear_disallowed_nans_`.
    """
    return _expand(bitmask, vocab_size, dtype, float("-inf"))


def clear_disallowed_nans_(rows: torch.Tensor, ceiling: torch.Tensor) -> torch.Tensor:
    """After ``torch.minimum(rows, ceiling)``: turn the NaN logits of disallowed tokens into ``-inf``.

    ``minimum`` keeps NaN, so a NaN logit on a disallowed token would survive the mask (a ``+inf``
    one is fine: ``min(+inf, -inf) = -inf``). On the CPU one sum tells whether any NaN is left (it is
    NaN iff some term is NaN or ``+inf`` meets ``-inf``) and the fix runs only then; elsewhere the fix
    always runs (no host sync). Allowed logits, NaN included, are left as they are. Returns ``rows``.
    """
    if rows.device.type == "cpu" and not math.isnan(float(rows.sum())):
        return rows
    return rows.masked_fill_(torch.isnan(rows) & (ceiling < 0), float("-inf"))


def _prepare(logits, bitmask, vocab_size, indices):
    """Common argument checks: returns ``(rows_view, bitmask_2d, vocab, index_tensor_or_None)``."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError("logits must be a floating-point torch tensor")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits must be 1-D or 2-D, got {logits.dim()}-D")
    view = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bm = bitmask if isinstance(bitmask, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(bitmask))
    if bm.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bm.dtype}")
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    if bm.dim() != 2:
        raise ValueError(f"bitmask must be 1-D or 2-D, got {bm.dim()}-D")
    bm = bm.to(view.device)
    vocab = view.shape[-1] if vocab_size is None else int(vocab_size)
    if not 0 <= vocab <= view.shape[-1]:
        raise ValueError(f"vocab_size {vocab} is outside [0, {view.shape[-1]}]")
    idx = None
    if indices is not None:
        idx = torch.as_tensor(indices if isinstance(indices, torch.Tensor) else list(indices),
                              dtype=torch.long).to(view.device).reshape(-1)
        if idx.numel() != bm.shape[0]:
            raise ValueError(f"bitmask has {bm.shape[0]} rows, indices {idx.numel()}")
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= view.shape[0]):
            raise IndexError(f"indices out of range for {view.shape[0]} logits rows")
    elif bm.shape[0] != view.shape[0]:
        raise ValueError(f"bitmask has {bm.shape[0]} rows, logits {view.shape[0]}")
    return view, bm, vocab, idx


def apply_token_bitmask_inplace_torch(logits: torch.Tensor, bitmask, vocab_size: int | None = None,
                                      indices=None) -> torch.Tensor:
    """Torch reference of :func:`apply_token_bitmask_inplace` (any device); returns ``logits``."""
    view, bm, vocab, idx = _prepare(logits, bitmask, vocab_size, indices)
    if vocab == 0 or bm.shape[0] == 0:
        return logits
    ceiling = bitmask_ceiling(bm, vocab, view.dtype)
    part = view[:, :vocab]
    if idx is None:
        clear_disallowed_nans_(torch.minimum(part, ceiling, out=part), ceiling)
    else:
        part.index_copy_(0, idx, clear_disallowed_nans_(torch.minimum(part.index_select(0, idx), ceiling), ceiling))
    return logits


@triton_kernel
def _bitmask_kernel(logits_ptr, bitmask_ptr, rows_ptr, vocab, n_words, logits_row_stride,
                    bitmask_row_stride, HAS_ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Program ``(r, b)``: vocab block ``b`` of logits row ``rows[r]`` (or ``r``) under bitmask row ``r``."""
    r = tl.program_id(0)
    blk = tl.program_id(1)
    if HAS_ROWS:
        row = tl.load(rows_ptr + r).to(tl.int64)
    else:
        row = r.to(tl.int64)
    words_per_block: tl.constexpr = BLOCK // 32
    w = blk * words_per_block + tl.arange(0, words_per_block)
    words = tl.load(bitmask_ptr + r.to(tl.int64) * bitmask_row_stride + w, mask=w < n_words, other=0)
    bit = tl.arange(0, 32)
    allowed = ((words[:, None] >> bit[None, :]) & 1) != 0
    offs = w[:, None] * 32 + bit[None, :]
    in_vocab = offs < vocab
    ptrs = logits_ptr + row * logits_row_stride + offs
    x = tl.load(ptrs, mask=in_vocab)
    tl.store(ptrs, tl.where(allowed, x, -float("inf")), mask=in_vocab)


def apply_token_bitmask_inplace_triton(logits: torch.Tensor, bitmask, vocab_size: int | None = None,
                                       indices=None, *, block: int | None = None) -> torch.Tensor:
    """Triton version of :func:`apply_token_bitmask_inplace`; returns ``logits``.

    A 2-D grid (bitmask rows x vocab blocks of ``block`` tokens). CUDA tensors run compiled; other
    devices run through Triton's interpreter (slow: for testing).
    """
    view, bm, vocab, idx = _prepare(logits, bitmask, vocab_size, indices)
    if vocab == 0 or bm.shape[0] == 0:
        return logits
    kernel: TritonKernel = _bitmask_kernel
    on_cuda = view.device.type == "cuda"
    if block is None:
        block = 4096 if on_cuda else min(max(next_pow2(vocab), 1024), 32768)
    if block < 32 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 32, got {block}")
    target = view if view.stride(-1) == 1 else view.contiguous()
    bm = bm if bm.stride(-1) == 1 else bm.contiguous()
    rows = idx.to(torch.int32) if idx is not None else bm  # any tensor when HAS_ROWS is False
    grid = (bm.shape[0], (vocab + block - 1) // block)
    kernel.launch(view.device, grid, target, bm, rows, vocab, bm.shape[1], target.stride(0), bm.stride(0),
                  HAS_ROWS=idx is not None, BLOCK=block, **({"num_warps": 8} if on_cuda else {}))
    if target is not view:
        view.copy_(target)
    return logits


def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask, vocab_size: int | None = None,
                                indices=None, *, backend: str = "auto") -> torch.Tensor:
    """Set disallowed logits to ``-inf`` in place and return ``logits``.

    Args:
        logits: ``(batch, V)`` or ``(V,)`` float32 / float16 / bfloat16 tensor.
        bitmask: ``(batch', W)`` int32 tensor (numpy accepted); bit ``t % 32`` of word ``t // 32``
            allows token ``t``; tokens at or beyond ``32 * W`` are disallowed.
        vocab_size: only ``logits[..., :vocab_size]`` is masked (None = all of it), so padded
            vocabulary columns can be left alone.
        indices: optional logits rows (list or tensor, unique): bitmask row ``i`` applies to logits
            row ``indices[i]``; other rows are untouched. Without it, ``batch' == batch``.
        backend: "auto" (Triton for CUDA tensors when Triton imports, else torch), "torch" or
            "triton" (forced; on the CPU it runs through Triton's interpreter).

    Same call shape as ``xgrammar.apply_token_bitmask_inplace``. Two differences: with ``indices``,
    xgrammar reads bitmask row ``indices[i]`` (we read row ``i``, as the runtime does), and without
    ``vocab_size`` xgrammar leaves logits beyond ``32 * W`` unmasked (we disallow them).
    """
    if use_triton(backend, logits.device):
        return apply_token_bitmask_inplace_triton(logits, bitmask, vocab_size, indices)
    return apply_token_bitmask_inplace_torch(logits, bitmask, vocab_size, indices)
