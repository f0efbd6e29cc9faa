"""The reference methods: greedy decoding, and sampling N programs then keeping the one that
passes the most public tests (ties: the earliest sampled)."""

from __future__ import annotations

import torch

from .code_search import Rows, SearchContext
from .rollout import GreedyRoller


def greedy(ctx: SearchContext) -> str:
    """One greedy completion; returns the program."""
    tokens, _ = GreedyRoller(ctx, k=1).complete(())
    program = ctx.program(tokens)
    ctx.reward(program)
    ctx.note_rollout()
    return program


def sample_filter(ctx: SearchContext, n: int, *, temperature: float = 0.8, top_p: float = 0.95,
                  seed: int | None = None) -> str:
    """``n`` samples (temperature + nucleus) decoded in lockstep, each scored on the public tests;
    the best program."""
    if n < 1:
        raise ValueError(f"the sampling budget must be >= 1 (got {n})")
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
    rows = Rows(ctx, n)
    live = list(range(n))
    done: dict[int, list[int]] = {}
    while live:
        picks = []
        for j in range(len(live)):
            logp = rows.log_probs(j) / max(temperature, 1e-6)
            probs = torch.softmax(logp, dim=-1)
            sp, si = torch.sort(probs, descending=True)
            keep = (sp.cumsum(0) - sp) < top_p
            sp = torch.where(keep, sp, torch.zeros_like(sp))
            picks.append(int(si[torch.multinomial(sp / sp.sum(), 1, generator=gen)]))
        still = []
        for j, t in enumerate(picks):
            toks = rows.tokens[j] + [t]
            if ctx.finished(toks):
                done[live[j]] = toks
            else:
                still.append(j)
        if not still:
            break
        if len(still) < len(live):
            rows.select(still)
            picks = [picks[j] for j in still]
            live = [live[j] for j in still]
        rows.step(picks)
        for j in range(len(live)):
            c = rows.constraints[j] if rows.constraints else None
            if c is not None and c.is_terminated():
                done[live[j]] = rows.tokens[j]
        if rows.constraints:
            keep = [j for j in range(len(live)) if live[j] not in done]
            if len(keep) < len(live):
                if not keep:
                    break
                rows.select(keep)
                live = [live[j] for j in keep]
    best = None
    for i in range(n):  # score in sampling order so best_by_rollout is the any-time curve
        program = ctx.program(done[i])
        r = ctx.reward(program)
        ctx.note_rollout()
        if best is None or r > best[0]:
            best = (r, program)
    return best[1]
