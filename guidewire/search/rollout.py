"""Greedy rollouts with the two caches PG-TD needs: the sequence cache (a prefix that lies on an
earlier greedy rollout has that rollout's completion, at no model call) and the prior cache (the
top-k next tokens of every position a rollout passed through, so later expansions along it are
free)."""

from __future__ import annotations

from typing import Sequence

from .code_search import Cursor, SearchContext, top_k


class GreedyRoller:
    """Greedy completions from any prefix, through one :class:`Cursor`, with sequence/prior caches
    bounded by ``max_entries`` prefixes each (oldest dropped first)."""

    def __init__(self, ctx: SearchContext, *, k: int = 3, max_entries: int = 200_000):
        self.ctx = ctx
        self.k = int(k)
        self.cursor = Cursor(ctx)
        self.max_entries = int(max_entries)
        self.sequences: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.priors: dict[tuple[int, ...], list[tuple[int, float]]] = {}

    def _bound(self, d: dict) -> None:
        while len(d) > self.max_entries:
            d.pop(next(iter(d)))

    def prior(self, prefix: Sequence[int]) -> list[tuple[int, float]]:
        """The top-k ``(token, prob)`` after ``prefix`` (cached; else one model call at most)."""
        key = tuple(prefix)
        hit = self.priors.get(key)
        if hit is not None:
            self.ctx.stats.prior_cache_hits += 1
            return hit
        logits = self.cursor.goto(key)
        pri = top_k(self.ctx.log_probs(logits, self.cursor.constraint), self.k)
        self.priors[key] = pri
        self._bound(self.priors)
        return pri

    def complete(self, prefix: Sequence[int]) -> tuple[tuple[int, ...], bool]:
        """``(tokens, generated)``: the greedy completion of ``prefix``; ``generated`` is False
        when it came from the sequence cache (or ``prefix`` was already finished)."""
        key = tuple(int(t) for t in prefix)
        hit = self.sequences.get(key)
        if hit is not None:
            self.ctx.stats.sequence_cache_hits += 1
            return hit, False
        ctx = self.ctx
        if ctx.finished(key):
            self.sequences[key] = key
            return key, False
        logits = self.cursor.goto(key)
        toks = list(key)
        visited = [key]
        while True:
            logp = ctx.log_probs(logits, self.cursor.constraint)
            pri = top_k(logp, self.k)
            self.priors.setdefault(tuple(toks), pri)
            t = pri[0][0]
            toks.append(t)
            visited.append(tuple(toks))
            if ctx.finished(toks):
                break
            logits = self.cursor.advance([t])
            if self.cursor.constraint is not None and self.cursor.constraint.is_terminated():
                break
        done = tuple(toks)
        for p in visited:
            self.sequences[p] = done
        self._bound(self.sequences)
        self._bound(self.priors)
        return done, True
