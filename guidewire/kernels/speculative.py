"""Verify speculative drafts by modified rejection sampling (Leviathan et al. 2023, Chen et al. 2023).

For draft tokens ``x_0 .. x_{k-1}`` proposed from distributions ``q_i`` and target distributions
``p_i`` (``p_i`` conditioned on the prefix and ``x_0 .. x_{i-1}``; ``p_k`` is the bonus position):
token ``i`` is accepted iff ``u_i < min(1, p_i(x_i) / q_i(x_i))`` (computed as ``u_i * q_i(x_i) <
p_i(x_i)``, so ``p = 0`` always rejects), stopping at the first rejection ``j``; the next token is then
drawn from ``normalize(max(p_j - q_j, 0))`` (``p_j`` if that is all zero), or from ``p_k`` when every
draft was accepted. Deterministic drafts (``draft_probs=None``) take ``q_i`` as a point mass on
``x_i``. Every emitted token is then distributed exactly as the target would have sampled it.
Randomness comes from caller-given uniforms, so the torch reference and the Triton kernel agree.
"""

from __future__ import annotations

import torch

from ._triton import next_pow2, triton_kernel, use_triton
from .sampling import inverse_cdf

tl = None  # triton.language, bound by TritonKernel on first launch (keeps Triton out of the import)

__all__ = ["speculative_accept", "speculative_accept_batch", "speculative_accept_torch",
           "speculative_accept_triton", "greedy_accept"]


def _check(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms, lengths, need_uniforms):
    """Validate shapes and move everything to the target's device; returns normalised tensors."""
    if target_probs.dim() != 3:
        raise ValueError(f"target_probs must be (B, k+1, V), got {tuple(target_probs.shape)}")
    batch, k1, vocab = target_probs.shape
    k = k1 - 1
    if k < 0:
        raise ValueError("target_probs needs at least one position (the bonus one)")
    dev = target_probs.device
    p = target_probs.float()
    x = torch.as_tensor(draft_tokens).to(dev, torch.long).reshape(batch, k)
    if k and (int(x.min()) < 0 or int(x.max()) >= vocab):
        raise ValueError("draft token id out of range")
    q = None
    if draft_probs is not None:
        q = torch.as_tensor(draft_probs).to(dev, torch.float32)
        if tuple(q.shape) != (batch, k, vocab):
            raise ValueError(f"draft_probs must be {(batch, k, vocab)}, got {tuple(q.shape)}")
    if lengths is None:
        n = torch.full((batch,), k, dtype=torch.long, device=dev)
    else:
        n = torch.as_tensor(lengths).to(dev, torch.long).reshape(batch)
        if batch and (int(n.min()) < 0 or int(n.max()) > k):
            raise ValueError(f"lengths must be in [0, {k}]")
    u = r = None
    if need_uniforms:
        if uniforms is None or residual_uniforms is None:
            raise ValueError("uniforms and residual_uniforms are required unless greedy=True")
        u = torch.as_tensor(uniforms, dtype=torch.float32).to(dev).reshape(batch, k)
        r = torch.as_tensor(residual_uniforms, dtype=torch.float32).to(dev).reshape(batch)
    return p, x, q, u, r, n


def greedy_accept(target_probs: torch.Tensor, draft_tokens, lengths=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification: accept while ``argmax(p_i) == x_i``, then emit ``argmax(p_j)``.

    ``target_probs`` is ``(B, k+1, V)`` (probabilities or logits: only the argmax matters, lowest id
    on ties). Returns ``(n_accepted, next_token)``, both ``(B,)`` int64. Equal to the stochastic rule
    when the target rows are one-hot.
    """
    p, x, _, _, _, n = _check(target_probs, draft_tokens, None, None, None, lengths, False)
    best = p.argmax(dim=-1)  # (B, k+1); torch returns the first maximal index
    k = x.shape[1]
    ok = (best[:, :k] == x) & (torch.arange(k, device=p.device) < n.unsqueeze(1))
    accepted = torch.cumprod(ok.long(), dim=1).sum(dim=1)
    return accepted, best.gather(1, accepted.unsqueeze(1)).squeeze(1)


def speculative_accept_torch(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms, *,
                             lengths=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of :func:`speculative_accept_batch` (vectorised over the batch)."""
    p, x, q, u, r, n = _check(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms,
                              lengths, True)
    batch, k1, vocab = p.shape
    k = k1 - 1
    rows = torch.arange(batch, device=p.device)
    p_x = p[:, :k].gather(2, x.unsqueeze(2)).squeeze(2)
    q_x = torch.ones_like(p_x) if q is None else q.gather(2, x.unsqueeze(2)).squeeze(2)
    ok = (u * q_x < p_x) & (torch.arange(k, device=p.device) < n.unsqueeze(1))
    accepted = torch.cumprod(ok.long(), dim=1).sum(dim=1)
    p_j = p[rows, accepted]
    drafted = accepted < n  # a rejection (not the bonus position)
    j = accepted.clamp(max=max(k - 1, 0))
    if k == 0:
        q_j = torch.zeros_like(p_j)
    elif q is None:
        q_j = torch.zeros_like(p_j).scatter_(1, x[rows, j].unsqueeze(1), 1.0)
    else:
        q_j = q[rows, j]
    q_j = q_j * drafted.unsqueeze(1)
    resid = (p_j - q_j).clamp_(min=0.0)
    total = resid.sum(dim=1, dtype=torch.float64)
    empty = total == 0
    resid = torch.where(empty.unsqueeze(1), p_j, resid)
    total = torch.where(empty, p_j.sum(dim=1, dtype=torch.float64), total)
    return accepted, inverse_cdf(resid, r.double() * total)


@triton_kernel
def _speculative_kernel(p_ptr, x_ptr, q_ptr, u_ptr, r_ptr, len_ptr, acc_ptr, next_ptr, k, vocab,
                        HAS_Q: tl.constexpr, BLOCK: tl.constexpr):
    """One program per draft: the accept tests, then a residual-sum pass and a CDF-search pass."""
    b = tl.program_id(0).to(tl.int64)
    length = tl.load(len_ptr + b).to(tl.int32)
    p_row = p_ptr + b * (k + 1) * vocab
    q_row = q_ptr + b * k * vocab
    n = 0
    alive = 1
    for i in range(0, length):
        x = tl.load(x_ptr + b * k + i)
        p_x = tl.load(p_row + i * vocab + x)
        q_x = 1.0
        if HAS_Q:
            q_x = tl.load(q_row + i * vocab + x)
        u = tl.load(u_ptr + b * k + i)
        alive = alive * (u * q_x < p_x).to(tl.int32)
        n += alive
    drafted = n < length  # rejected at draft n (else n is the bonus position)
    x_j = tl.load(x_ptr + b * k + n, mask=drafted, other=-1)
    p_j = p_row + n * vocab
    q_j = q_row + n * vocab
    q_lim = tl.where(drafted, vocab, 0)  # the bonus position has no draft distribution
    offs0 = tl.arange(0, BLOCK)
    tot_r = 0.0
    tot_p = 0.0
    for start in range(0, vocab, BLOCK):
        offs = start + offs0
        p = tl.load(p_j + offs, mask=offs < vocab, other=0.0)
        if HAS_Q:
            q = tl.load(q_j + offs, mask=offs < q_lim, other=0.0)
        else:
            q = tl.where(offs == x_j, 1.0, 0.0)
        tot_r += tl.reduce(tl.maximum(p - q, 0.0), 0, tl.standard._sum_combine)
        tot_p += tl.reduce(p, 0, tl.standard._sum_combine)
    use_p = tot_r == 0.0
    threshold = tl.load(r_ptr + b) * tl.where(use_p, tot_p, tot_r)
    carry = 0.0
    first = vocab
    last = -1
    for start in range(0, vocab, BLOCK):
        offs = start + offs0
        p = tl.load(p_j + offs, mask=offs < vocab, other=0.0)
        if HAS_Q:
            q = tl.load(q_j + offs, mask=offs < q_lim, other=0.0)
        else:
            q = tl.where(offs == x_j, 1.0, 0.0)
        w = tl.where(use_p, p, tl.maximum(p - q, 0.0))
        c = tl.associative_scan(w, 0, tl.standard._sum_combine) + carry
        first = tl.minimum(first, tl.reduce(tl.where((c > threshold) & (offs < vocab), offs, vocab), 0,
                                            tl.standard._elementwise_min))
        last = tl.maximum(last, tl.reduce(tl.where(w > 0.0, offs, -1), 0, tl.standard._elementwise_max))
        carry += tl.reduce(w, 0, tl.standard._sum_combine)
    tl.store(acc_ptr + b, n.to(tl.int64))
    tl.store(next_ptr + b, tl.minimum(first, last).to(tl.int64))


def speculative_accept_triton(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms, *,
                              lengths=None, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`speculative_accept_batch`: one program per draft."""
    p, x, q, u, r, n = _check(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms,
                              lengths, True)
    batch, k1, vocab = p.shape
    k = k1 - 1
    dev = p.device
    accepted = torch.zeros(batch, dtype=torch.long, device=dev)
    nxt = torch.zeros(batch, dtype=torch.long, device=dev)
    if batch == 0:
        return accepted, nxt
    on_cuda = dev.type == "cuda"
    if block is None:
        block = min(next_pow2(vocab), 4096 if on_cuda else 32768)
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)  # stands in for empty tensors
    p = p.contiguous()
    xs = x.contiguous() if k else torch.zeros(1, dtype=torch.long, device=dev)
    qs = q.contiguous() if q is not None and k else dummy
    us = u.contiguous() if k else dummy
    _speculative_kernel.launch(dev, (batch,), p, xs, qs, us, r.contiguous(), n.contiguous(), accepted, nxt,
                               k, vocab, HAS_Q=q is not None, BLOCK=block,
                               **({"num_warps": 8} if on_cuda else {}))
    return accepted, nxt


def speculative_accept_batch(target_probs, draft_tokens, draft_probs=None, uniforms=None,
                             residual_uniforms=None, *, lengths=None, greedy: bool = False,
                             backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Verify ``B`` independent drafts; returns ``(n_accepted, next_token)``, both ``(B,)`` int64.

    Args:
        target_probs: ``(B, k+1, V)`` target distributions (masked and normalised) at each draft
            position plus the bonus one.
        draft_tokens: ``(B, k)`` int64 drafted ids.
        draft_probs: ``(B, k, V)`` draft distributions, or None for deterministic drafts.
        uniforms: ``(B, k)`` in ``[0, 1)`` for the accept tests.
        residual_uniforms: ``(B,)`` in ``[0, 1)`` for the final draw.
        lengths: optional ``(B,)`` number of real drafts per row (<= k); row ``b``'s bonus position
            is then ``lengths[b]`` (later positions are ignored).
        greedy: accept while the target argmax equals the draft (see :func:`greedy_accept`);
            ``draft_probs`` and the uniforms are then unused.
        backend: "auto" (Triton for CUDA tensors when Triton imports), "torch" or "triton"; the
            greedy rule is plain torch on either.
    """
    if greedy:
        return greedy_accept(target_probs, draft_tokens, lengths)
    if use_triton(backend, target_probs.device):
        return speculative_accept_triton(target_probs, draft_tokens, draft_probs, uniforms,
                                         residual_uniforms, lengths=lengths)
    return speculative_accept_torch(target_probs, draft_tokens, draft_probs, uniforms, residual_uniforms,
                                    lengths=lengths)


def speculative_accept(target_probs, draft_tokens, draft_probs=None, uniforms=None, residual_uniforms=None,
                       *, greedy: bool = False, backend: str = "auto") -> tuple[int, int]:
    """Verify one draft; returns ``(n_accepted, next_token)`` as Python ints.

    ``target_probs`` is ``(k+1, V)``, ``draft_tokens`` ``(k,)``, ``draft_probs`` ``(k, V)`` or None
    (deterministic drafts), ``uniforms`` ``(k,)`` and ``residual_uniforms`` a scalar or ``(1,)``; see
    :func:`speculative_accept_batch`. The emitted tokens are ``draft_tokens[:n_accepted]`` followed by
    ``next_token``.
    """
    p = torch.as_tensor(target_probs)
    if p.dim() != 2:
        raise ValueError(f"target_probs must be (k+1, V), got {tuple(p.shape)}")
    k = p.shape[0] - 1
    x = torch.as_tensor(draft_tokens).reshape(1, k)
    q = None if draft_probs is None else torch.as_tensor(draft_probs).unsqueeze(0)
    u = None if uniforms is None else torch.as_tensor(uniforms).reshape(1, k)
    r = None if residual_uniforms is None else torch.as_tensor(residual_uniforms).reshape(1)
    acc, nxt = speculative_accept_batch(p.unsqueeze(0), x, q, u, r, greedy=greedy, backend=backend)
    return int(acc[0]), int(nxt[0])
