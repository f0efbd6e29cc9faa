"""Masked softmax and inverse-CDF sampling over the vocabulary: torch references and Triton kernels.

The distribution of a row is ``softmax(logits / temperature)`` over the tokens its bitmask allows
(exact zeros elsewhere; ``temperature == 0`` is a one-hot at the argmax, lowest id on ties). Sampling
takes its randomness from caller-given uniforms ``u`` in ``[0, 1)``: the token is the first ``t``
whose cumulative probability exceeds ``u`` (clamped to the last token with positive probability),
so the torch and Triton paths pick the same token except when ``u`` lies within float rounding of
a CDF boundary.
"""

from __future__ import annotations

import torch

from ._triton import next_pow2, triton_kernel, use_triton
from .bitmask import bitmask_ceiling, clear_disallowed_nans_

tl = None  # triton.language, bound by TritonKernel on first launch (keeps Triton out of the import)

__all__ = ["masked_softmax", "masked_softmax_torch", "masked_softmax_triton", "sample_masked",
           "sample_masked_torch", "sample_masked_triton", "inverse_cdf"]


def _dead_rows_error(rows) -> ValueError:
    return ValueError(f"no token is allowed in row(s) {rows}: every logit is masked or -inf")


def _as_2d(logits: torch.Tensor) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError("logits must be a floating-point torch tensor")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits must be 1-D or 2-D, got {logits.dim()}-D")
    return logits.unsqueeze(0) if logits.dim() == 1 else logits


def _temperatures(temperature, batch: int, device) -> torch.Tensor:
    """Per-row float32 temperatures ``(batch,)`` from a number or a ``(batch,)`` tensor."""
    t = torch.as_tensor(temperature, dtype=torch.float32).to(device).reshape(-1)
    if t.numel() == 1:
        t = t.expand(batch)
    if t.numel() != batch:
        raise ValueError(f"temperature has {t.numel()} entries for {batch} rows")
    if bool((t < 0).any()) or bool(torch.isnan(t).any()):
        raise ValueError("temperature must be >= 0")
    return t.contiguous()


def _bitmask_2d(bitmask, batch: int, device) -> torch.Tensor | None:
    if bitmask is None:
        return None
    bm = torch.as_tensor(bitmask)
    if bm.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bm.dtype}")
    bm = (bm.unsqueeze(0) if bm.dim() == 1 else bm).to(device)
    if bm.shape[0] != batch:
        raise ValueError(f"bitmask has {bm.shape[0]} rows, logits {batch}")
    return bm.contiguous()


def masked_softmax_torch(logits: torch.Tensor, bitmask=None, temperature=1.0) -> torch.Tensor:
    """Torch reference of :func:`masked_softmax`."""
    x = _as_2d(logits).float()
    t = _temperatures(temperature, x.shape[0], x.device)
    if bitmask is not None:
        ceiling = bitmask_ceiling(_bitmask_2d(bitmask, x.shape[0], x.device), x.shape[1])
        x = clear_disallowed_nans_(torch.minimum(x, ceiling), ceiling)
    dead = torch.isneginf(x).all(dim=-1)
    if bool(dead.any()):
        raise _dead_rows_error(torch.nonzero(dead).flatten().tolist())
    greedy = t == 0
    probs = torch.softmax(x / torch.where(greedy, 1.0, t).unsqueeze(1), dim=-1)
    # torch.softmax's float32 sum drifts by ~1e-5 over 100k+ tokens: renormalise with a float64 sum
    probs = probs / probs.sum(dim=-1, keepdim=True, dtype=torch.float64).float()
    if bool(greedy.any()):
        onehot = torch.zeros_like(probs).scatter_(1, x.argmax(dim=-1, keepdim=True), 1.0)
        probs = torch.where(greedy.unsqueeze(1), onehot, probs)
    return probs


def inverse_cdf(weights: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """Per row, the first index whose running sum of ``weights`` exceeds ``thresholds[row]``.

    ``weights`` is ``(batch, V)`` non-negative (not necessarily normalised), ``thresholds``
    ``(batch,)``; the result is clamped to the row's last positive weight, so rounding can never
    pick a zero-weight token. Returns ``(batch,)`` int64.
    """
    cdf = torch.cumsum(weights, dim=-1, dtype=torch.float64)  # a float32 running sum drifts over 100k+ tokens
    first = torch.searchsorted(cdf, thresholds.to(cdf.dtype).reshape(-1, 1).contiguous(), right=True)
    last = torch.searchsorted(cdf, cdf[:, -1:].contiguous())  # where the CDF first reaches its total
    return torch.minimum(first, last).squeeze(1)


def sample_masked_torch(logits: torch.Tensor, bitmask, temperature, uniforms) -> torch.Tensor:
    """Torch reference of :func:`sample_masked`."""
    probs = masked_softmax_torch(logits, bitmask, temperature)
    u = torch.as_tensor(uniforms, dtype=torch.float32).to(probs.device).reshape(-1)
    if u.numel() != probs.shape[0]:
        raise ValueError(f"uniforms has {u.numel()} entries for {probs.shape[0]} rows")
    return inverse_cdf(probs, u)


@triton_kernel
def _softmax_sample_kernel(logits_ptr, bitmask_ptr, temp_ptr, u_ptr, probs_ptr, token_ptr, rowmax_ptr,
                           vocab, n_words, logits_row_stride, bitmask_row_stride,
                           HAS_MASK: tl.constexpr, WRITE_PROBS: tl.constexpr, SAMPLE: tl.constexpr,
                           BLOCK: tl.constexpr):
    """One program per row: online max/sum (and argmax) pass, then a probability / CDF-search pass."""
    row = tl.program_id(0).to(tl.int64)
    t = tl.load(temp_ptr + row)
    greedy = t == 0.0
    scale = tl.where(greedy, 1.0, t)
    offs0 = tl.arange(0, BLOCK)
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    s_vec = tl.full([BLOCK], 0.0, tl.float32)
    i_vec = tl.full([BLOCK], 0, tl.int32)
    for start in range(0, vocab, BLOCK):
        offs = start + offs0
        x = tl.load(logits_ptr + row * logits_row_stride + offs, mask=offs < vocab,
                    other=-float("inf")).to(tl.float32)
        if HAS_MASK:
            word = tl.load(bitmask_ptr + row * bitmask_row_stride + offs // 32,
                           mask=(offs < vocab) & (offs // 32 < n_words), other=0)
            x = tl.where(((word >> (offs % 32)) & 1) != 0, x, -float("inf"))
        x = x / scale
        m_new = tl.maximum(m_vec, x)
        alpha = tl.where(m_vec == -float("inf"), 0.0, tl.exp(m_vec - m_new))
        beta = tl.where(x == -float("inf"), 0.0, tl.exp(x - m_new))
        s_vec = s_vec * alpha + beta
        i_vec = tl.where(x > m_vec, offs, i_vec)
        m_vec = m_new
    m = tl.reduce(m_vec, 0, tl.standard._elementwise_max)
    s = tl.reduce(tl.where(m_vec == -float("inf"), 0.0, s_vec * tl.exp(m_vec - m)), 0, tl.standard._sum_combine)
    arg = tl.reduce(tl.where(m_vec == m, i_vec, vocab), 0, tl.standard._elementwise_min)
    tl.store(rowmax_ptr + row, m)
    u = 0.0
    if SAMPLE:
        u = tl.load(u_ptr + row)
    carry = 0.0
    first = vocab
    last = -1
    for start in range(0, vocab, BLOCK):
        offs = start + offs0
        x = tl.load(logits_ptr + row * logits_row_stride + offs, mask=offs < vocab,
                    other=-float("inf")).to(tl.float32)
        if HAS_MASK:
            word = tl.load(bitmask_ptr + row * bitmask_row_stride + offs // 32,
                           mask=(offs < vocab) & (offs // 32 < n_words), other=0)
            x = tl.where(((word >> (offs % 32)) & 1) != 0, x, -float("inf"))
        x = x / scale
        p = tl.where(x == -float("inf"), 0.0, tl.exp(x - m) / s)
        if WRITE_PROBS:
            out = tl.where(greedy, tl.where(offs == arg, 1.0, 0.0), p)
            tl.store(probs_ptr + row * vocab + offs, out, mask=offs < vocab)
        if SAMPLE:
            c = tl.associative_scan(p, 0, tl.standard._sum_combine) + carry
            first = tl.minimum(first, tl.reduce(tl.where((c > u) & (offs < vocab), offs, vocab), 0,
                                                 tl.standard._elementwise_min))
            last = tl.maximum(last, tl.reduce(tl.where(p > 0.0, offs, -1), 0, tl.standard._elementwise_max))
            carry += tl.reduce(p, 0, tl.standard._sum_combine)
    if SAMPLE:
        tok = tl.where(greedy, arg, tl.minimum(first, last))
        tl.store(token_ptr + row, tok.to(tl.int64))


def _softmax_sample_triton(logits, bitmask, temperature, uniforms, write_probs: bool, block=None):
    x = _as_2d(logits)
    batch, vocab = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    t = _temperatures(temperature, batch, x.device)
    bm = _bitmask_2d(bitmask, batch, x.device)
    on_cuda = x.device.type == "cuda"
    if block is None:
        block = min(next_pow2(vocab), 4096 if on_cuda else 32768)
    rowmax = torch.empty(batch, dtype=torch.float32, device=x.device)
    probs = torch.empty((batch, vocab) if write_probs else (1,), dtype=torch.float32, device=x.device)
    tokens = torch.empty(batch if uniforms is not None else 1, dtype=torch.int64, device=x.device)
    u = t
    if uniforms is not None:
        u = torch.as_tensor(uniforms, dtype=torch.float32).to(x.device).reshape(-1).contiguous()
        if u.numel() != batch:
            raise ValueError(f"uniforms has {u.numel()} entries for {batch} rows")
    if batch and vocab:
        _softmax_sample_kernel.launch(
            x.device, (batch,), x, bm if bm is not None else t, t, u, probs, tokens, rowmax, vocab,
            bm.shape[1] if bm is not None else 0, x.stride(0), bm.stride(0) if bm is not None else 0,
            HAS_MASK=bm is not None, WRITE_PROBS=write_probs, SAMPLE=uniforms is not None, BLOCK=block,
            **({"num_warps": 8} if on_cuda else {}))
    dead = torch.isneginf(rowmax) if vocab else torch.ones(batch, dtype=torch.bool)
    if bool(dead.any()):
        raise _dead_rows_error(torch.nonzero(dead).flatten().tolist())
    return probs, tokens


def masked_softmax_triton(logits: torch.Tensor, bitmask=None, temperature=1.0, *,
                          block: int | None = None) -> torch.Tensor:
    """Triton version of :func:`masked_softmax`: one program per row (online softmax over blocks)."""
    return _softmax_sample_triton(logits, bitmask, temperature, None, True, block)[0]


def sample_masked_triton(logits: torch.Tensor, bitmask, temperature, uniforms, *,
                         block: int | None = None) -> torch.Tensor:
    """Triton version of :func:`sample_masked`: one program per row, block-wise CDF search."""
    return _softmax_sample_triton(logits, bitmask, temperature, uniforms, False, block)[1]


def masked_softmax(logits: torch.Tensor, bitmask=None, temperature=1.0, *, backend: str = "auto") -> torch.Tensor:
    """Probabilities ``(batch, V)`` float32 of ``softmax(logits / temperature)`` over allowed tokens.

    Args:
        logits: ``(batch, V)`` or ``(V,)`` float tensor (``-inf`` entries count as disallowed).
        bitmask: optional int32 ``(batch, W)`` token bitmask (tokens beyond ``32 * W`` disallowed).
        temperature: a number or a ``(batch,)`` tensor, >= 0; 0 gives a one-hot at the argmax
            (lowest id on ties).
        backend: "auto" (Triton for CUDA tensors when Triton imports), "torch" or "triton".

    Disallowed tokens get exactly 0. Raises ``ValueError`` when a row allows no token.
    """
    if use_triton(backend, logits.device):
        return masked_softmax_triton(logits, bitmask, temperature)
    return masked_softmax_torch(logits, bitmask, temperature)


def sample_masked(logits: torch.Tensor, bitmask, temperature, uniforms, *, backend: str = "auto") -> torch.Tensor:
    """Sample one token per row from :func:`masked_softmax` by inverse CDF; ``(batch,)`` int64.

    ``uniforms`` is ``(batch,)`` in ``[0, 1)`` (the caller's randomness, e.g. ``torch.rand`` with a
    seeded generator); the token is the first whose cumulative probability exceeds ``u``.
    ``temperature == 0`` rows take the argmax (lowest id on ties) and ignore ``u``.
    """
    if use_triton(backend, logits.device):
        return sample_masked_triton(logits, bitmask, temperature, uniforms)
    return sample_masked_torch(logits, bitmask, temperature, uniforms)
