"""AdaDec ("Towards Better Code Generation: Adaptive Decoding with Uncertainty Guidance", 2025).

Greedy while the next-token entropy is below a threshold ``tau``; at an uncertain step, the top
``B`` candidates are each followed by a greedy lookahead of ``L`` tokens (the ``B`` lookaheads run
as one batch branching from the current KV cache) and the one with the best average
log-probability (candidate + lookahead) is kept. The chosen candidate's lookahead is what
greedy decoding would produce next as long as each of its steps stays under ``tau``, so those
tokens are committed at once (the same output, fewer calls).

``tau`` is learned per model by :func:`learn_tau`: a logistic regression of "the reference token is
the model's top-1" on the entropy, teacher-forced on reference solutions; ``tau`` is the entropy
where the fitted probability crosses 1/2.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .code_search import Cursor, Rows, SearchContext, entropy, top_k


def adadec(ctx: SearchContext, tau: float, *, beams: int = 3, lookahead: int = 5) -> str:
    """Decode one program with entropy-triggered lookahead reranking; returns it."""
    if beams < 1 or not 1 <= lookahead <= 64:
        raise ValueError(f"beams must be >= 1 and 1 <= lookahead <= 64 (got {beams}, {lookahead})")
    cur = Cursor(ctx)
    toks: list[int] = []
    logits = cur.logits
    while True:
        logp = ctx.log_probs(logits, cur.constraint)
        if entropy(logp) < tau:
            toks.append(int(logp.argmax()))
            if ctx.finished(toks):
                break
            logits = cur.advance([toks[-1]])
            if cur.constraint is not None and cur.constraint.is_terminated():
                break
            continue
        ctx.stats.triggers += 1
        best = None
        for seq, lps, ents in _lookahead(ctx, cur, toks, top_k(logp, beams), lookahead):
            score = float(np.mean(lps))
            if best is None or score > best[0]:
                best = (score, seq, ents)
        _, seq, ents = best
        commit = [seq[0]]  # the candidate, then lookahead tokens greedy would take under tau
        for t, h in zip(seq[1:], ents[1:]):
            if h >= tau:
                break
            commit.append(t)
        stop = False
        for n in range(1, len(commit) + 1):
            if ctx.finished(toks + commit[:n]):
                commit, stop = commit[:n], True
                break
        toks.extend(commit)
        if stop:
            break
        logits = cur.goto(toks)
        if cur.constraint is not None and cur.constraint.is_terminated():
            break
    program = ctx.program(toks)
    ctx.reward(program)
    ctx.note_rollout()
    return program


def _lookahead(ctx: SearchContext, cur: Cursor, toks: list[int], cands: list[tuple[int, float]],
               length: int) -> list[tuple[list[int], list[float], list[float]]]:
    """Greedy continuations of ``toks + [c]`` for each candidate, up to ``length`` tokens each,
    decoded as one batch branching from the cursor: per candidate its tokens, their
    log-probabilities and the entropy each was chosen from (``inf`` for the candidate)."""
    out = [([t], [float(np.log(max(p, 1e-30)))], [float("inf")]) for t, p in cands]
    live = [i for i, (seq, _, _) in enumerate(out) if not ctx.finished(toks + seq)]
    if not live:
        return out
    rows = Rows(ctx, len(live), cursor=cur)
    rows.step([out[i][0][0] for i in live])
    for _ in range(length):
        picks, still = [], []
        for j, i in enumerate(live):
            logp = rows.log_probs(j)
            t = int(logp.argmax())
            seq, lps, ents = out[i]
            seq.append(t)
            lps.append(float(logp[t]))
            ents.append(entropy(logp))
            if not ctx.finished(toks + seq):
                still.append(j)
                picks.append(t)
        if not still or _ == length - 1:
            break
        if len(still) < len(live):
            rows.select(still)
            live = [live[j] for j in still]
        rows.step(picks)
    return out


def fit_logistic(x: Sequence[float], y: Sequence[int], *, iterations: int = 50,
                 ridge: float = 1e-6) -> tuple[float, float]:
    """``(a, b)`` of ``P(y=1|x) = sigmoid(a + b x)`` by Newton's method (IRLS)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape:
        raise ValueError("fit_logistic needs equally long, non-empty x and y")
    X = np.stack([np.ones_like(x), x], axis=1)
    w = np.zeros(2)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(X @ w, -30, 30)))
        g = X.T @ (y - p) - ridge * w
        H = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
        step = np.linalg.solve(H, g)
        w = w + step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def tau_from_fit(a: float, b: float) -> float:
    """The entropy where ``sigmoid(a + b * H)`` is 1/2 (needs ``b < 0``: higher entropy, less
    often right)."""
    if not b < 0:
        raise ValueError(f"the fit does not fall with entropy (slope {b:.4g}); cannot place tau")
    return -a / b


def teacher_forced(lm, prompt_ids: Sequence[int], solution_ids: Sequence[int]) -> tuple[list[float], list[int]]:
    """Entropy of each solution position's next-token distribution and whether the reference
    token is the top-1 (one model call over prompt + solution)."""
    ids = [int(t) for t in prompt_ids] + [int(t) for t in solution_ids]
    m = lm.sequence()
    logits = m.prefill(ids)
    start = len(prompt_ids) - 1
    rows = logits[start:len(ids) - 1].float()
    logp = torch.log_softmax(rows, dim=-1)
    p = logp.exp()
    ent = (-(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)).tolist()
    ref = torch.tensor(ids[start + 1:], dtype=torch.long, device=rows.device)
    top1 = (rows.argmax(-1) == ref).to(torch.int64).tolist()
    return ent, top1


def learn_tau(lm, references: Sequence[tuple[str | Sequence[int], str]], *, max_tokens: int = 1024) -> dict:
    """Learn AdaDec's ``tau`` on ``(prompt, reference solution)`` pairs; a prompt is plain text
    or already-encoded token ids (e.g. a chat-templated prompt).
    Returns ``{"tau", "a", "b", "tokens", "top1_rate"}``."""
    xs: list[float] = []
    ys: list[int] = []
    for prompt, solution in references:
        p = (list(lm.tokenizer.encode(prompt, add_special_tokens=True)) if isinstance(prompt, str)
             else [int(t) for t in prompt])
        s = list(lm.tokenizer.encode(solution, add_special_tokens=False))
        if not s or len(p) + len(s) > max_tokens:
            continue
        e, t = teacher_forced(lm, p, s)
        xs.extend(e)
        ys.extend(t)
    if not xs:
        raise ValueError("no usable reference solutions to learn tau from")
    a, b = fit_logistic(xs, ys)
    return {"tau": tau_from_fit(a, b), "a": a, "b": b, "tokens": len(xs),
            "top1_rate": float(np.mean(ys))}
