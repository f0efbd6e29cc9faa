"""Exact best-first search for the most probable constrained *segment* (e.g. one identifier).

Greedy decoding under a mask is myopic: after ``obj.`` the model may put most of its mass on
``get`` because it wants ``get_final_codec`` (which does not exist); the mask then forces some
``get...`` name that exists, while a legal name with a likelier whole spelling was there.
:func:`best_segment` finds the most probable token path from the current state to the end of
the segment (the first token after which ``ends(constraint)`` holds, e.g. a monitor is dormant
again) among the paths the constraint allows, scored by the model's *unrenormalised* log
probabilities (so the winner is the argmax of ``P(path | path allowed)``).

It is uniform-cost search: every step adds a log probability <= 0, so the first finished path
taken off the frontier is the most probable one among the paths the frontier covers (each
expansion keeps its ``top_k`` allowed tokens; ``top_k`` = vocabulary size makes the search exact).
Each expansion is one model call on the path's tokens from the segment's start (the KV cache is
truncated back to it first). With ``max_expansions`` used up the best unfinished path is
returned (``finished=False``) and the caller continues from it greedily.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ..core.bitmask import allocate_token_bitmask, apply_token_bitmask


@dataclass
class SegmentResult:
    """The chosen ``tokens``; ``finished`` (the segment ended within them), ``log_prob`` (their
    model log probability), ``expansions`` (model calls made), ``greedy_agrees`` (whether greedy
    decoding would have taken the same first token)."""

    tokens: list[int]
    finished: bool
    log_prob: float
    expansions: int
    greedy_agrees: bool = field(default=True)
    alternatives: list = field(default_factory=list)  # finished ``(tokens, log_prob)``, best first


def segment_open(constraint) -> bool:
    """Whether ``constraint`` is inside a masked segment now (a monitor whose trigger fired and
    answered, its name unfinished; for compositions, any part): the default segment test of
    :func:`best_segment`. Never runs an analysis (a fork that starts a new trigger has left)."""
    return bool(getattr(constraint, "segment_open", False))


def _children(constraint, logits: torch.Tensor, bitmask: np.ndarray, top_k: int, eos_ids,
              closing: torch.Tensor | None) -> tuple[list, tuple | None]:
    """The ``top_k`` allowed tokens with their log probabilities, and (with ``closing``) the
    closing mass: ``(logsumexp, best token)`` over the allowed tokens that start by closing the
    segment (those are then left out of the list)."""
    constraint.fill_bitmask(bitmask, 0)
    masked = torch.log_softmax(logits.float().reshape(1, -1), dim=-1)  # a new tensor: ours to mask
    apply_token_bitmask(masked, torch.from_numpy(bitmask))
    for t in eos_ids:
        if t < masked.shape[1]:
            masked[0, t] = float("-inf")
    row = masked[0]
    close = None
    if closing is not None:
        width = min(row.shape[0], closing.shape[0])
        ends = torch.where(closing[:width], row[:width], torch.tensor(float("-inf")))
        total = float(torch.logsumexp(ends, dim=0))
        if total != float("-inf"):
            best = int(torch.argmax(ends))
            close = (total, best, float(ends[best]))
        row[:width][closing[:width]] = float("-inf")
    k = min(top_k, row.shape[0])
    vals, idx = torch.topk(row, k)
    return [(float(v), int(i)) for v, i in zip(vals.tolist(), idx.tolist()) if v != float("-inf")], close


def _check_budget(top_k: int, max_expansions: int, max_tokens: int) -> None:
    if top_k < 1 or max_expansions < 0 or max_tokens < 1:
        raise ValueError("top_k and max_tokens must be >= 1 and max_expansions >= 0")


def best_segment(model, constraint, logits: torch.Tensor, *, vocab, ends: Callable | None = None,
                 top_k: int = 4, max_expansions: int = 8, max_tokens: int = 16,
                 closing: torch.Tensor | None = None, candidates: int = 1) -> SegmentResult:
    """The most probable allowed token path from here to the end of the segment.

    ``model`` holds the sequence so far (its length is restored before returning); ``logits``
    are the model's next-token logits there; ``constraint`` is not changed (forks are advanced).
    ``ends(c)`` says a fork ``c`` has left the segment (default: ``not segment_open(c)``).
    ``max_tokens`` bounds a path's length. ``closing`` (a boolean vector over the vocabulary)
    marks tokens whose first byte closes the segment (a break after a name): the segment's
    *text* is then scored, not one spelling of its closing: the allowed closing tokens after a
    path count as one outcome with their summed probability (continued by the likeliest of
    them), so a name is not penalised because what follows it is uncertain.
    ``candidates`` > 1 goes on after the best finished path until that many are finished (or the
    budget is spent): ``alternatives`` holds them, most probable first (the frontier hands
    finished paths out in that order).
    See the module docstring for the search.
    """
    _check_budget(top_k, max_expansions, max_tokens)
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
    ends = ends or (lambda c: not segment_open(c))
    base = model.length
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    eos = sorted(vocab.eos_ids)
    tie = itertools.count()
    frontier: list = []

    def push(score, path, fork, done):
        heapq.heappush(frontier, (-score, next(tie), path, fork, done))

    def grow(score, path, fork, children, close):
        for lp, tok in children:
            f = fork.fork()
            if f.advance(tok):
                push(score + lp, path + (tok,), f, ends(f))
        if close is not None:
            f = fork.fork()
            if f.advance(close[1]) and ends(f):
                push(score + close[0], path + (close[1],), f, True)

    if closing is not None and closing.device != logits.device:
        closing = closing.to(logits.device)     # once per search, where the logits are
    root, close = _children(constraint, logits, bitmask, top_k, eos, closing)
    if not root and close is None:
        return SegmentResult([], False, 0.0, 0)
    greedy_first = max(root[:1] + ([(close[2], close[1])] if close else []))[1]
    grow(0.0, (), constraint, root, close)
    expansions = 0
    best = None
    found: list = []
    try:
        while frontier:
            neg, _, path, fork, done = heapq.heappop(frontier)
            if done:
                found.append((list(path), -neg))
                if len(found) >= candidates:
                    break
                continue
            if len(path) >= max_tokens or expansions >= max_expansions:
                best = (path, -neg, False)
                break
            model.truncate(base)
            step = model.step(list(path), last_only=True)
            expansions += 1
            grow(-neg, path, fork, *_children(fork, step[-1], bitmask, top_k, eos, closing))
    finally:
        model.truncate(base)
    if found:
        best = (found[0][0], found[0][1], True)
    if best is None:
        return SegmentResult([], False, 0.0, expansions)
    path, score, done = best
    return SegmentResult(list(path), done, score, expansions, path[0] == greedy_first, found)


class SegmentSearch:
    """A decoding-loop hook (``iter_decode(..., segment_search=)``): at a step where the
    constraint opens a segment (:func:`segment_open`), choose the segment's tokens with
    :func:`best_segment` instead of one greedy token (``closing="identifier"``: the segment is a
    name, closed by a token starting with a byte that cannot be in an identifier). Counts
    ``searches``, ``expansions`` (model calls spent) and ``changed`` (searches whose first token
    differs from the greedy one)."""

    def __init__(self, vocab, *, top_k: int = 4, max_expansions: int = 8, max_tokens: int = 16,
                 closing="identifier", candidates: int = 1, rerank: Callable | None = None):
        _check_budget(top_k, max_expansions, max_tokens)
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates}")
        self.candidates, self.rerank = candidates, rerank
        self.vocab = vocab
        if isinstance(closing, str):
            if closing != "identifier":
                raise ValueError(f"closing must be 'identifier', a boolean vector or None, got {closing!r}")
            from ..core.bitmask import bitmask_to_bool
            from ..monitors.identindex import IdentIndex

            closing = torch.from_numpy(bitmask_to_bool(IdentIndex.for_vocab(vocab).break_row, vocab.vocab_size))
        self.closing = closing
        self.top_k, self.max_expansions, self.max_tokens = top_k, max_expansions, max_tokens
        self.searches = self.expansions = self.changed = 0

    def __call__(self, model, constraint, logits) -> list[int]:
        """The tokens to emit now (empty: no segment here, sample as usual)."""
        if not segment_open(constraint):
            return []
        if self.closing is not None and self.closing.device != logits.device:
            self.closing = self.closing.to(logits.device)   # once, where the model's logits are
        res = best_segment(model, constraint, logits, vocab=self.vocab, top_k=self.top_k,
                           max_expansions=self.max_expansions, max_tokens=self.max_tokens,
                           closing=self.closing, candidates=self.candidates)
        self.searches += 1
        self.expansions += res.expansions
        self.changed += not res.greedy_agrees
        if self.rerank is not None and len(res.alternatives) > 1:
            return list(res.alternatives[self.rerank(constraint, res.alternatives)][0])
        return res.tokens

    def stats(self) -> dict:
        """``searches``, ``expansions``, ``changed`` as a dict."""
        return {"searches": self.searches, "expansions": self.expansions, "changed": self.changed}
