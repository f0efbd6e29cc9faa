"""Beam search and diverse beam search (Vijayakumar et al. 2018: groups, a Hamming penalty on
tokens earlier groups chose at the same step) over masked log-probabilities; the finished
hypotheses are scored on the public tests and the best is returned (ties: the higher beam score)."""

from __future__ import annotations

from .code_search import Rows, SearchContext


def beam_search(ctx: SearchContext, width: int, *, groups: int = 1, diversity: float = 0.5,
                length_penalty: float = 1.0) -> str:
    """Beam search of ``width`` beams (split into ``groups`` for diverse beam search); collects up
    to ``width`` finished programs and returns the public-test best."""
    if width < 1 or groups < 1 or width % groups:
        raise ValueError(f"width ({width}) must be a positive multiple of groups ({groups})")
    per = width // groups
    rows = Rows(ctx, 1)
    scores = [0.0]
    group_of = [0]
    finished: list[tuple[float, list[int]]] = []
    first = True
    while len(rows) and len(finished) < width:
        chosen: list[tuple[int, int, float, int]] = []  # (row, token, score, group)
        used: dict[int, int] = {}
        for g in range(groups):
            members = [i for i in range(len(rows)) if first or group_of[i] == g]
            cand = []
            for i in members:
                logp = rows.log_probs(i)
                k = min(2 * per, int(logp.isfinite().sum()))
                vals, ids = logp.topk(k)
                for v, t in zip(vals.tolist(), ids.tolist()):
                    pen = diversity * used.get(t, 0) if groups > 1 else 0.0
                    cand.append((scores[i] + v - pen, scores[i] + v, i, t))
            cand.sort(key=lambda c: -c[0])
            taken = 0
            for _, raw, i, t in cand:
                if taken >= per:
                    break
                toks = rows.tokens[i] + [t]
                if ctx.finished(toks):
                    norm = raw / (len(toks) ** length_penalty)
                    finished.append((norm, toks))
                else:
                    chosen.append((i, t, raw, g))
                taken += 1
                used[t] = used.get(t, 0) + 1
        first = False
        if not chosen or len(finished) >= width:
            break
        rows.select([c[0] for c in chosen])
        scores = [c[2] for c in chosen]
        group_of = [c[3] for c in chosen]
        rows.step([c[1] for c in chosen])
        if rows.constraints:
            keep = []
            for j, c in enumerate(rows.constraints):
                if c.is_terminated():
                    finished.append((scores[j] / len(rows.tokens[j]) ** length_penalty, rows.tokens[j]))
                else:
                    keep.append(j)
            if len(keep) < len(rows):
                if not keep:
                    break
                rows.select(keep)
                scores = [scores[j] for j in keep]
                group_of = [group_of[j] for j in keep]
    if not finished:  # every beam hit a dead end at once: keep the live ones
        finished = [(s, t) for s, t in zip(scores, rows.tokens)]
    finished.sort(key=lambda f: -f[0])
    best = None
    for score, toks in finished[:width]:
        program = ctx.program(toks)
        r = ctx.reward(program)
        ctx.note_rollout()
        if best is None or r > best[0]:
            best = (r, program)
    return best[1]
