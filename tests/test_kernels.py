"""guidewire.kernels: Triton kernels (run by Triton's interpreter on the CPU) against the torch
references and slow pure-Python references; exactness of speculative rejection sampling."""

import os

_PREVIOUS_INTERPRET = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported (the kernels work either way)

import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from guidewire.core import bitmask_to_bool, bool_to_bitmask  # noqa: E402
from guidewire.kernels import (DraftTree, apply_token_bitmask_inplace, apply_token_bitmask_inplace_torch,  # noqa: E402
                               apply_token_bitmask_inplace_triton, greedy_accept, masked_softmax,
                               masked_softmax_torch, masked_softmax_triton, sample_masked, sample_masked_torch,
                               sample_masked_triton, speculative_accept, speculative_accept_batch,
                               speculative_accept_torch, speculative_accept_triton, tree_ancestors,
                               tree_attention_mask, tree_attention_mask_torch, tree_attention_mask_triton,
                               tree_position_ids, triton_available, triton_importable)



def _restore_interpret_flag():
    if _PREVIOUS_INTERPRET is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _PREVIOUS_INTERPRET


_restore_interpret_flag()  # the rest of the session keeps its own setting; see the fixture below


@pytest.fixture(autouse=True, scope="module")
def _interpret_flag():
    """``TRITON_INTERPRET=1`` while this module's tests run, restored afterwards."""
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    _restore_interpret_flag()


needs_triton = pytest.mark.skipif(not triton_importable(), reason="triton is not installed")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def random_bitmask(rng: np.random.Generator, batch: int, width: int, density: float) -> torch.Tensor:
    """``(batch, width)`` int32 bitmask with each bit set with probability ``density``."""
    bits = rng.random((batch, width * 32)) < density
    rows = [bool_to_bitmask(r) for r in bits] if width else [np.zeros(0, np.int32)] * batch
    return torch.from_numpy(np.stack(rows).astype(np.int32).reshape(batch, width))


def slow_apply(logits: torch.Tensor, bitmask: torch.Tensor, vocab_size=None, indices=None) -> torch.Tensor:
    """Pure-Python bit unpacking, one token at a time (the spec, spelled out)."""
    out = logits.clone()
    view = out.unsqueeze(0) if out.dim() == 1 else out
    vocab = view.shape[1] if vocab_size is None else vocab_size
    words = bitmask.reshape(bitmask.shape[0], -1).tolist()
    rows = range(len(words)) if indices is None else list(indices)
    for i, r in enumerate(rows):
        for t in range(vocab):
            w = t // 32
            if w >= len(words[i]) or not (words[i][w] >> (t % 32)) & 1:
                view[r, t] = float("-inf")
    return out


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (tells NaN payloads and signed zeros apart, unlike ``==``)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


# ---------------------------------------------------------------------------------------- bitmask


@needs_triton
@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 4), vocab=st.integers(1, 300), extra_words=st.integers(-3, 2),
       density=st.sampled_from([0.0, 0.01, 0.5, 0.99, 1.0]), dtype=st.sampled_from(DTYPES),
       use_indices=st.booleans(), cut_vocab=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_bitmask_triton_torch_slow_agree(batch, vocab, extra_words, density, dtype, use_indices, cut_vocab, seed):
    rng = np.random.default_rng(seed)
    width = max(0, (vocab + 31) // 32 + extra_words)  # narrower or wider than the vocabulary
    logits = torch.from_numpy(rng.standard_normal((batch, vocab)).astype(np.float32)).to(dtype)
    logits[0, 0] = float("inf") if vocab > 1 else logits[0, 0]
    indices = None
    bm_rows = batch
    if use_indices:
        indices = rng.permutation(batch)[: rng.integers(1, batch + 1)].tolist()
        bm_rows = len(indices)
    bitmask = random_bitmask(rng, bm_rows, width, density)
    vocab_size = int(rng.integers(0, vocab + 1)) if cut_vocab else None
    want = slow_apply(logits, bitmask, vocab_size, indices)
    got_torch = apply_token_bitmask_inplace_torch(logits.clone(), bitmask, vocab_size, indices)
    got_triton = apply_token_bitmask_inplace_triton(logits.clone(), bitmask, vocab_size, indices, block=128)
    assert same_bits(got_torch, want)
    assert same_bits(got_triton, want)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bitmask_gemma_sized_vocab(dtype):
    rng = np.random.default_rng(7)
    vocab = 262144
    logits = torch.from_numpy(rng.standard_normal((2, vocab)).astype(np.float32)).to(dtype)
    bitmask = torch.cat([random_bitmask(rng, 1, vocab // 32, 0.01), random_bitmask(rng, 1, vocab // 32, 0.99)])
    allowed = np.stack([bitmask_to_bool(r, vocab) for r in bitmask.numpy()])  # numpy unpack (core helper)
    want = logits.clone()
    want[torch.from_numpy(~allowed)] = float("-inf")
    assert same_bits(apply_token_bitmask_inplace_torch(logits.clone(), bitmask), want)
    assert same_bits(apply_token_bitmask_inplace_triton(logits.clone(), bitmask), want)


@needs_triton
def test_bitmask_one_dim_strided_and_returns_logits():
    rng = np.random.default_rng(3)
    bm = random_bitmask(rng, 1, 2, 0.5)
    row = torch.randn(50)
    for fn in (apply_token_bitmask_inplace_torch, apply_token_bitmask_inplace_triton):
        x = row.clone()
        assert fn(x, bm[0]) is x
        assert same_bits(x, slow_apply(row, bm))
        wide = torch.randn(2, 100)
        view = wide[:, ::2]  # non-contiguous rows: masked through a copy
        want = slow_apply(view.contiguous(), torch.cat([bm, bm]))
        fn(view, torch.cat([bm, bm]))
        assert same_bits(wide[:, ::2].contiguous(), want)


def test_bitmask_auto_backend_and_errors():
    x = torch.randn(2, 40)
    bm = torch.tensor([[1, 0], [-1, 255]], dtype=torch.int32)
    want = slow_apply(x, bm)
    assert same_bits(apply_token_bitmask_inplace(x.clone(), bm), want)  # CPU: the torch path
    assert same_bits(apply_token_bitmask_inplace(x.clone(), bm, backend="torch"), want)
    with pytest.raises(TypeError):
        apply_token_bitmask_inplace(x.clone(), bm.long())
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(x.clone(), bm[:1])
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(x.clone(), bm, indices=[0])
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(x.clone(), bm, backend="cuda")


def test_bitmask_matches_xgrammar_cpu():
    xgr = pytest.importorskip("xgrammar")
    rng = np.random.default_rng(11)
    x = torch.randn(3, 1000)
    bm = random_bitmask(rng, 3, 32, 0.3)  # full width: the two conventions coincide
    ours = apply_token_bitmask_inplace(x.clone(), bm)
    theirs = x.clone()
    xgr.apply_token_bitmask_inplace(theirs, bm)
    assert same_bits(ours, theirs)


# ---------------------------------------------------------------------------------------- sampling


def slow_softmax(logits: torch.Tensor, bitmask, temperature) -> torch.Tensor:
    """float64 softmax over the allowed tokens, one-hot (first max) for temperature 0."""
    x = logits.double().clone()
    if bitmask is not None:
        x = slow_apply(x, bitmask)
    t = torch.as_tensor(temperature, dtype=torch.float64).expand(x.shape[0])
    out = []
    for row, temp in zip(x, t.tolist()):
        if temp == 0:
            out.append(torch.nn.functional.one_hot(row.argmax(), row.numel()).double())
        else:
            out.append(torch.softmax(row / temp, dim=0))
    return torch.stack(out)


def sampling_case(seed: int, batch: int, vocab: int, density: float, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    logits = torch.randn(batch, vocab, generator=g) * 4
    if ties:
        logits = logits.round()
    logits[0, -1] = float("-inf")
    bitmask = random_bitmask(rng, batch, (vocab + 31) // 32, density)
    bitmask[:, 0] |= 1 << 3 if vocab > 3 else 1  # every row allows something
    temperature = torch.tensor([[0.0, 0.5, 1.0, 2.0][i % 4] for i in range(batch)])
    return logits, bitmask, temperature, torch.rand(batch, generator=g)


@needs_triton
@pytest.mark.parametrize("seed,batch,vocab,density,block", [
    (0, 4, 37, 0.5, 32), (1, 3, 1000, 0.05, 128), (2, 5, 300, 0.99, 64), (3, 2, 70000, 0.5, None),
])
def test_masked_softmax_parity(seed, batch, vocab, density, block):
    logits, bitmask, temperature, _ = sampling_case(seed, batch, vocab, density)
    want = slow_softmax(logits, bitmask, temperature)
    ref = masked_softmax_torch(logits, bitmask, temperature)
    tri = masked_softmax_triton(logits, bitmask, temperature, block=block)
    assert ref.dtype == tri.dtype == torch.float32
    assert (ref.double() - want).abs().max() < 1e-6
    assert (tri.double() - want).abs().max() < 1e-6
    assert torch.equal(ref == 0, want == 0) and torch.equal(tri == 0, want == 0)  # exact zeros when masked
    assert torch.allclose(tri.sum(1), torch.ones(batch), atol=1e-5)


@needs_triton
@pytest.mark.parametrize("fn", [masked_softmax_torch, masked_softmax_triton, sample_masked_torch, sample_masked_triton])
def test_dead_rows_raise(fn):
    logits = torch.randn(2, 40)
    bitmask = torch.tensor([[1, 0], [0, 0]], dtype=torch.int32)
    args = (logits, bitmask, 1.0) + ((torch.rand(2),) if "sample" in fn.__name__ else ())
    with pytest.raises(ValueError, match=r"row\(s\) \[1\]"):
        fn(*args)
    with pytest.raises(ValueError):
        masked_softmax(torch.full((1, 5), float("-inf")))


def cdf_interval_ok(probs64: torch.Tensor, tokens: torch.Tensor, u: torch.Tensor, tol: float = 1e-6) -> None:
    """Each sampled token has positive probability and its CDF interval contains ``u`` (within tol)."""
    cdf = probs64.cumsum(1)
    for row, (t, uu) in enumerate(zip(tokens.tolist(), u.double().tolist())):
        lo = float(cdf[row, t - 1]) if t else 0.0
        assert probs64[row, t] > 0
        assert lo - tol <= uu < float(cdf[row, t]) + tol


def near_boundary(probs64: torch.Tensor, u: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
    """Rows whose ``u`` lies within ``tol`` of a CDF step (torch and Triton may then differ)."""
    cdf = probs64.cumsum(1)
    return ((cdf - u.double().unsqueeze(1)).abs() < tol).any(1)


@needs_triton
@pytest.mark.parametrize("seed,batch,vocab,density,block,ties", [
    (0, 8, 37, 0.5, 32, True), (1, 4, 1000, 0.05, 128, False), (2, 6, 300, 0.99, 64, True),
    (3, 2, 70000, 0.5, None, False),
])
def test_sample_masked_parity(seed, batch, vocab, density, block, ties):
    logits, bitmask, temperature, u = sampling_case(seed, batch, vocab, density, ties)
    want = slow_softmax(logits, bitmask, temperature)
    ref = sample_masked_torch(logits, bitmask, temperature, u)
    tri = sample_masked_triton(logits, bitmask, temperature, u, block=block)
    assert ref.dtype == tri.dtype == torch.int64
    cdf_interval_ok(want, ref, u)
    cdf_interval_ok(want, tri, u)
    clear = ~near_boundary(want, u)
    assert torch.equal(ref[clear], tri[clear])
    greedy = temperature == 0
    masked = slow_apply(logits, bitmask)
    assert torch.equal(ref[greedy], masked[greedy].argmax(1))  # lowest id among tied maxima


def test_sample_masked_frequencies_are_exact_with_stratified_uniforms():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(1, 50, generator=g)
    bitmask = random_bitmask(np.random.default_rng(5), 1, 2, 0.6)
    n = 20000
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    tokens = sample_masked(logits.expand(n, 50), bitmask.expand(n, 2), 0.8, u.float())
    counts = torch.bincount(tokens, minlength=50).double()
    probs = slow_softmax(logits, bitmask, 0.8)[0]
    assert (counts - n * probs).abs().max() <= 2  # each token gets its CDF interval's share of u's


# ------------------------------------------------------------------------------------- speculative


def naive_accept(p, x, q, u, r):
    """The rule of Leviathan et al., one Python float at a time (float64)."""
    p = p.double().tolist()
    q = None if q is None else q.double().tolist()
    k = len(x)
    for i in range(k):
        px = p[i][x[i]]
        qx = 1.0 if q is None else q[i][x[i]]
        if not (px > 0 and u[i] * qx < px):
            qrow = [1.0 if t == x[i] else 0.0 for t in range(len(p[i]))] if q is None else q[i]
            resid = [max(a - b, 0.0) for a, b in zip(p[i], qrow)]
            return i, resid if sum(resid) > 0 else p[i]
    return k, p[k]


def draw(weights, r):
    """Inverse CDF of unnormalised float64 weights."""
    total = sum(weights)
    acc = 0.0
    for t, w in enumerate(weights):
        acc += w
        if acc > r * total and w > 0:
            return t
    return max(t for t, w in enumerate(weights) if w > 0)


def spec_case(seed, batch, k, vocab, with_q, zeros=0.2):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(batch, k + 1, vocab, generator=g) * 2, -1)
    p = p * (torch.rand(p.shape, generator=g) > zeros)
    p[..., 0] += 1e-3
    p = p / p.sum(-1, keepdim=True)
    q = torch.softmax(torch.randn(batch, k, vocab, generator=g) * 2, -1) if with_q else None
    x = torch.randint(0, vocab, (batch, k), generator=g)
    # drafts that the target likes, so that many get accepted
    x = torch.where(torch.rand(batch, k, generator=g) < 0.6, p[:, :k].argmax(-1), x)
    return p, x, q, torch.rand(batch, k, generator=g), torch.rand(batch, generator=g)


@pytest.mark.parametrize("with_q", [True, False])
def test_speculative_torch_matches_naive(with_q):
    p, x, q, u, r = spec_case(0, 64, 3, 9, with_q)
    acc, nxt = speculative_accept_torch(p, x, q, u, r)
    for b in range(p.shape[0]):
        n, weights = naive_accept(p[b], x[b].tolist(), None if q is None else q[b], u[b].tolist(), r[b].item())
        assert acc[b] == n
        assert nxt[b] == draw(weights, r[b].item())
    assert 0 < acc.float().mean() < 3


@needs_triton
@pytest.mark.parametrize("seed,batch,k,vocab,with_q,block,ragged", [
    (0, 16, 3, 9, True, 32, False), (1, 16, 3, 9, False, 32, True), (2, 6, 4, 1000, True, 128, True),
    (3, 4, 0, 50, True, 32, False), (4, 3, 2, 40000, False, None, True),
])
def test_speculative_triton_parity(seed, batch, k, vocab, with_q, block, ragged):
    p, x, q, u, r = spec_case(seed, batch, k, vocab, with_q)
    lengths = torch.randint(0, k + 1, (batch,), generator=torch.Generator().manual_seed(seed)) if ragged else None
    acc_ref, nxt_ref = speculative_accept_torch(p, x, q, u, r, lengths=lengths)
    acc_tri, nxt_tri = speculative_accept_triton(p, x, q, u, r, lengths=lengths, block=block)
    assert torch.equal(acc_ref, acc_tri)
    if lengths is not None:
        assert bool((acc_ref <= lengths).all())
    # the draw of the next token: same token unless its threshold sits on a CDF step
    for b in range(batch):
        n = int(acc_ref[b])
        limit = k if lengths is None else int(lengths[b])
        if n < limit:
            qrow = q[b, n] if q is not None else torch.nn.functional.one_hot(x[b, n], vocab).float()
            w = (p[b, n] - qrow).clamp(min=0).double()
            w = w if w.sum() > 0 else p[b, n].double()
        else:
            w = p[b, n].double()
        cdf = w.cumsum(0) / w.sum()
        if not bool(((cdf - r[b].double()).abs() < 1e-6).any()):
            assert nxt_ref[b] == nxt_tri[b]
        t = int(nxt_tri[b])
        assert w[t] > 0 and (cdf[t - 1] if t else 0.0) - 1e-6 <= r[b] < cdf[t] + 1e-6


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
def test_speculative_one_hot_targets_are_greedy(backend):
    g = torch.Generator().manual_seed(9)
    batch, k, vocab = 32, 4, 12
    logits = torch.randn(batch, k + 1, vocab, generator=g).round()  # ties: lowest id is the argmax
    best = logits.argmax(-1)
    onehot = torch.nn.functional.one_hot(best, vocab).float()
    other = torch.randint(0, vocab, (batch, k), generator=g)
    x = torch.where(torch.rand(batch, k, generator=g) < 0.7, best[:, :k], other)
    q = torch.softmax(torch.randn(batch, k, vocab, generator=g), -1)
    u, r = torch.rand(batch, k, generator=g), torch.rand(batch, generator=g)
    acc_g, nxt_g = greedy_accept(logits, x)
    want = torch.stack([torch.tensor([next((i for i in range(k) if x[b, i] != best[b, i]), k)]) for b in range(batch)])
    assert torch.equal(acc_g, want.flatten())
    assert torch.equal(nxt_g, best[torch.arange(batch), acc_g])
    for qq in (None, q):
        acc, nxt = speculative_accept_batch(onehot, x, qq, u, r, backend=backend)
        assert torch.equal(acc, acc_g) and torch.equal(nxt, nxt_g)
    assert speculative_accept_batch(logits, x, greedy=True)[0].tolist() == acc_g.tolist()


def test_speculative_zero_probability_edges():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    q = torch.tensor([[0.0, 1.0, 0.0]])
    # p(x) = 0 rejects even though q(x) = 0 too (0/0); the residual is p itself
    assert speculative_accept(p, [0], q, [0.0], 0.99) == (0, 1)
    # q(x) = 0 < p(x): always accepted
    assert speculative_accept(torch.tensor([[0.2, 0.8, 0.0], [0.5, 0.5, 0.0]]), [0], q, [0.999], 0.1) == (1, 0)
    # deterministic draft, rejected: the residual is p without the drafted token
    assert speculative_accept(torch.tensor([[0.3, 0.3, 0.4], [1.0, 0, 0]]), [2], None, [0.5], 0.0) == (0, 0)
    assert speculative_accept(torch.tensor([[0.3, 0.3, 0.4], [1.0, 0, 0]]), [2], None, [0.3], 0.0) == (1, 0)
    with pytest.raises(ValueError):
        speculative_accept(p, [0], q, None, None)


def chi2_bound(df: int, z: float = 4.75) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile at about 1 - 1e-6."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_check(counts: torch.Tensor, expected_p: torch.Tensor, n: int) -> None:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled; zero-probability cells
    must be empty."""
    counts, expected = counts.double().flatten(), (expected_p.double() * n).flatten()
    assert counts[expected == 0].sum() == 0, "an impossible outcome was emitted"
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum().reshape(1)])
    exp = torch.cat([expected[big], expected[~big].sum().reshape(1)])
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    assert stat < chi2_bound(int(keep.sum()) - 1), stat


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["draft_probs", "point_mass_sampled", "point_mass_argmax"])
def test_speculative_output_distribution_is_exact(mode):
    """Rounds of k = 2 drafts until each trial has emitted 3 tokens: the emitted prefix must be
    distributed as the target's own sampling, p(a) p(b|a) p(c|ab), over V = 6."""
    vocab, k, depth, n = 6, 2, 3, 30000
    seed = {"draft_probs": 1, "point_mass_sampled": 2, "point_mass_argmax": 3}[mode]
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    max_ctx = depth - 1 + k  # longest context that needs a distribution
    offsets = torch.tensor([sum(vocab ** d for d in range(L)) for L in range(max_ctx + 2)])
    contexts = int(offsets[-1])

    def table():
        t = torch.from_numpy(rng.dirichlet(np.full(vocab, 1.5), size=contexts)).float()
        t = t * (torch.rand(contexts, vocab, generator=g) > 0.2)  # impossible tokens
        t[torch.arange(contexts), torch.randint(0, vocab, (contexts,), generator=g)] += 0.05
        return t / t.sum(1, keepdim=True)

    P, Q = table(), table()

    def child(code, length, tok):
        return offsets[length + 1] + (code - offsets[length]) * vocab + tok

    seq = torch.zeros(n, depth, dtype=torch.long)
    have = torch.zeros(n, dtype=torch.long)
    while bool((have < depth).any()):
        act = torch.nonzero(have < depth).flatten()
        L = have[act]
        val = torch.zeros_like(L)
        for i in range(depth):
            val = torch.where(i < L, val * vocab + seq[act, i], val)
        c0 = offsets[L] + val
        if mode == "point_mass_argmax":
            x0 = Q[c0].argmax(1)
        else:
            x0 = torch.multinomial(Q[c0], 1, generator=g).squeeze(1)
        c1 = child(c0, L, x0)
        x1 = Q[c1].argmax(1) if mode == "point_mass_argmax" else torch.multinomial(Q[c1], 1, generator=g).squeeze(1)
        c2 = child(c1, L + 1, x1)
        targets = torch.stack([P[c0], P[c1], P[c2]], 1)
        drafts = torch.stack([x0, x1], 1)
        qs = torch.stack([Q[c0], Q[c1]], 1) if mode == "draft_probs" else None
        u, r = torch.rand(len(act), k, generator=g), torch.rand(len(act), generator=g)
        acc, nxt = speculative_accept_torch(targets, drafts, qs, u, r)
        emitted = torch.cat([drafts, torch.zeros(len(act), 1, dtype=torch.long)], 1)
        emitted[torch.arange(len(act)), acc] = nxt
        for j in range(k + 1):  # append emitted[:, :acc+1], clipped to depth
            ok = (j <= acc) & (L + j < depth)
            seq[act[ok], (L + j)[ok]] = emitted[ok, j]
        have[act] = torch.clamp(L + acc + 1, max=depth)
    p_a = P[0]
    p_ab = p_a[:, None] * P[offsets[1] + torch.arange(vocab)]
    codes2 = offsets[2] + torch.arange(vocab * vocab)
    p_abc = p_ab.reshape(-1, 1) * P[codes2]
    chi2_check(torch.bincount(seq[:, 0], minlength=vocab), p_a, n)
    chi2_check(torch.bincount(seq[:, 0] * vocab + seq[:, 1], minlength=vocab ** 2), p_ab, n)
    code3 = (seq[:, 0] * vocab + seq[:, 1]) * vocab + seq[:, 2]
    chi2_check(torch.bincount(code3, minlength=vocab ** 3), p_abc, n)


# ---------------------------------------------------------------------------------- tree attention


def slow_tree_mask(parents, prefix_len):
    n = len(parents)
    out = torch.full((n, prefix_len + n), torch.finfo(torch.float32).min)
    out[:, :prefix_len] = 0
    for i in range(n):
        j = i
        while j >= 0:
            out[i, prefix_len + j] = 0
            j = parents[j]
    return out.reshape(1, 1, n, -1)


def random_parents(rng, n):
    return [int(rng.integers(-1, i)) for i in range(n)]


@pytest.mark.parametrize("seed,n,prefix", [(0, 1, 0), (1, 7, 3), (2, 40, 17), (3, 130, 300)])
def test_tree_mask_torch_and_triton(seed, n, prefix):
    parents = random_parents(np.random.default_rng(seed), n)
    want = slow_tree_mask(parents, prefix)
    assert torch.equal(tree_attention_mask_torch(parents, prefix), want)
    assert torch.equal(tree_attention_mask(parents, prefix), want)
    if triton_importable():
        assert torch.equal(tree_attention_mask_triton(parents, prefix, block=64), want)
        for dtype in (torch.float16, torch.bfloat16):
            got = tree_attention_mask_triton(parents, prefix, dtype=dtype)
            assert got.dtype == dtype and torch.equal(got, tree_attention_mask_torch(parents, prefix, dtype=dtype))
            assert n == 1 or got.min() == torch.finfo(dtype).min
    anc = tree_ancestors(parents)
    depth = [0 if p < 0 else None for p in parents]
    for i, p in enumerate(parents):
        depth[i] = 0 if p < 0 else depth[p] + 1
    assert tree_position_ids(parents, prefix).tolist() == [[prefix + d for d in depth]]
    assert anc.sum(1).tolist() == [d + 1 for d in depth]


def test_tree_bad_parents_raise():
    for bad in ([0], [-1, 1], [-1, -2], [-1, 0, 5]):
        with pytest.raises(ValueError):
            tree_attention_mask(bad, 3)
        with pytest.raises(ValueError):
            DraftTree(tuple(range(len(bad))), tuple(bad))


def test_draft_tree_from_paths_round_trip():
    paths = [[1, 2, 3], [1, 2, 4], [5], [1, 6], [1, 2]]
    tree = DraftTree.from_paths(paths)
    assert tree.tokens == (1, 2, 3, 4, 5, 6) and tree.parents == (-1, 0, 1, 1, -1, 0)
    assert tree.paths() == [[0, 1, 2], [0, 1, 3], [4], [0, 5]]
    assert tree.token_paths() == [[1, 2, 3], [1, 2, 4], [5], [1, 6]]
    assert tree.depths() == [0, 1, 2, 2, 0, 1]
    assert tree.position_ids(10).tolist() == [[10, 11, 12, 12, 10, 11]]
    assert torch.equal(tree.attention_mask(4), slow_tree_mask(list(tree.parents), 4))
    assert DraftTree.from_paths(tree.token_paths()) == tree
    assert len(DraftTree.from_paths([])) == 0


def test_draft_tree_accept_greedy():
    tree = DraftTree.from_paths([[1, 2, 3], [1, 2, 4], [5], [1, 6]])
    # predicted[0] follows the prefix, predicted[i + 1] follows node i
    assert tree.accept_greedy([1, 2, 4, 9, 9, 9, 9]) == ([0, 1, 3], 9)
    assert tree.accept_greedy([7, 0, 0, 0, 0, 0, 0]) == ([], 7)
    assert tree.accept_greedy(torch.tensor([5, 0, 0, 0, 0, 3, 0])) == ([4], 3)
    assert tree.accept_greedy([1, 6, 0, 0, 0, 0, 8]) == ([0, 5], 8)


# ---------------------------------------------------------------------------------------- plumbing


def test_triton_available_follows_interpret_flag():
    assert triton_available() == (triton_importable() and (torch.cuda.is_available()
                                                           or os.environ.get("TRITON_INTERPRET") == "1"))


@needs_triton
def test_kernels_run_when_triton_was_imported_without_interpreter_flag():
    """The interpreter is picked per launch, so the import order of Triton does not matter."""
    code = (
        "import os; os.environ.pop('TRITON_INTERPRET', None)\n"
        "import triton, triton.language, torch\n"
        "from guidewire.kernels import apply_token_bitmask_inplace_triton as apply\n"
        "from guidewire.kernels import masked_softmax_triton, masked_softmax_torch\n"
        "x = torch.randn(2, 100); bm = torch.tensor([[5, -1, 0, 7], [-8, 3, 1, 0]], dtype=torch.int32)\n"
        "a = apply(x.clone(), bm)\n"
        "assert torch.equal(torch.isneginf(a), torch.isneginf(masked_softmax_torch(x, bm).log()))\n"
        "assert (masked_softmax_triton(x, bm) - masked_softmax_torch(x, bm)).abs().max() < 1e-6\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_kernels_do_not_import_runtime():
    code = ("import sys, guidewire.kernels\n"
            "bad = [m for m in sys.modules if m.startswith('guidewire.runtime') or m == 'triton']\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]
