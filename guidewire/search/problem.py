"""What every sampler works on: the scored target, the compiled constraint and the counters."""

from __future__ import annotations

import time

import numpy as np

from ..core.bitmask import bitmask_to_bool
from .errors import SearchBudgetExceeded, SearchError
from .sampleset import SearchStats
from .target import Target


class Problem:
    """A target, a compiled grammar, the length limit, a seeded generator and the stats.

    Sequences have at most ``max_tokens`` tokens before EOS (the target is restricted to them).
    ``budget`` caps the target's forward passes and ``max_seconds`` the wall time of one call.
    """

    def __init__(self, target: Target, grammar, vocab, *, max_tokens: int, rng: np.random.Generator,
                 budget: int | None = None, max_seconds: float | None = None):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.target = target
        self.grammar = grammar
        self.vocab = vocab
        self.vocab_size = target.vocab_size
        self.max_tokens = int(max_tokens)
        self.rng = rng
        self.budget = budget
        self.max_seconds = max_seconds
        self.stats = SearchStats()
        self.eos_ids = np.array(sorted(i for i in vocab.eos_ids if i < self.vocab_size), dtype=np.int64)
        self.eos_set = frozenset(int(i) for i in self.eos_ids)
        self._eos_bool = np.zeros(self.vocab_size, dtype=bool)
        self._eos_bool[self.eos_ids] = True
        self._bm = np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)
        self._t0 = time.perf_counter()
        self._passes0 = target.stats.forward_passes
        self._scored0 = target.stats.tokens_scored

    # -- model ---------------------------------------------------------------------------------
    def logprobs(self, prefix) -> np.ndarray:
        """The target's next-token log-probs after ``prefix`` (float32, cached)."""
        self.check_budget()
        return self.target.logprobs(prefix)

    def check_budget(self) -> None:
        """Raise :class:`SearchBudgetExceeded` past the forward-pass budget or the time limit."""
        used = self.target.stats.forward_passes - self._passes0
        if self.budget is not None and used >= self.budget:
            raise SearchBudgetExceeded(f"forward-pass budget of {self.budget} spent before all samples were drawn")
        if self.max_seconds is not None and time.perf_counter() - self._t0 > self.max_seconds:
            raise SearchBudgetExceeded(f"time limit of {self.max_seconds} s reached before all samples were drawn")

    def new_proposal(self, limit: int) -> None:
        """Count one proposal; raise :class:`SearchBudgetExceeded` past ``limit`` of them."""
        if self.stats.proposals >= limit:
            raise SearchBudgetExceeded(f"{limit} proposals made, {self.stats.accepted} accepted: "
                                       "raise max_proposals or max_tokens")
        self.stats.proposals += 1
        self.check_budget()

    # -- constraint ----------------------------------------------------------------------------
    def mask_row(self, matcher) -> np.ndarray:
        """The grammar's full bitmask row here (a copy; counts ``vocab_size`` checks)."""
        matcher.fill_bitmask(self._bm, 0)
        self.stats.masks += 1
        self.stats.constraint_checks += self.vocab_size
        _raise_matcher_error(matcher)
        return self._bm[0].copy()

    def allowed_from_row(self, row: np.ndarray, depth: int) -> np.ndarray:
        """Boolean ``(vocab_size,)`` of the tokens a mask row allows after ``depth`` tokens (EOS
        only at ``depth == max_tokens``)."""
        allowed = bitmask_to_bool(row, self.vocab_size)
        if depth >= self.max_tokens:
            allowed &= self._eos_bool
        return allowed

    def allowed(self, matcher, depth: int) -> np.ndarray:
        """Boolean ``(vocab_size,)`` of the tokens allowed after a prefix of ``depth`` tokens: the
        grammar's full mask (``vocab_size`` checks), EOS only at ``depth == max_tokens``."""
        return self.allowed_from_row(self.mask_row(matcher), depth)

    def check(self, matcher, token: int, depth: int) -> bool:
        """Whether one token is allowed after a prefix of ``depth`` tokens (one check)."""
        token = int(token)
        if depth >= self.max_tokens and token not in self.eos_set:
            return False
        self.stats.constraint_checks += 1
        if matcher.advance(token):        # advance + rollback: a limit hit is recorded, not swallowed
            matcher.rollback(1)
            return True
        _raise_matcher_error(matcher)
        return False

    def is_eos(self, token: int) -> bool:
        """Whether ``token`` ends the sequence."""
        return int(token) in self.eos_set

    def length_pool(self, depth: int) -> np.ndarray | None:
        """Boolean pool of candidates allowed by the length rule alone (``None``: every token)."""
        return self._eos_bool if depth >= self.max_tokens else None

    # -- results -------------------------------------------------------------------------------
    def draw(self, weights: np.ndarray) -> int:
        """One index drawn with probability proportional to non-negative ``weights``."""
        cdf = np.cumsum(weights)
        total = cdf[-1]
        if not total > 0:
            raise ValueError("draw from all-zero weights")
        return int(min(np.searchsorted(cdf, self.rng.random() * total, side="right"), len(cdf) - 1))

    def text(self, tokens) -> str:
        """The text of output tokens."""
        return self.vocab.decode([int(t) for t in tokens]).decode("utf-8", errors="replace")

    def finish(self) -> SearchStats:
        """The stats with the target's counters and the wall time filled in."""
        s = self.stats
        s.forward_passes = self.target.stats.forward_passes - self._passes0
        s.tokens_scored = self.target.stats.tokens_scored - self._scored0
        s.wall_seconds = time.perf_counter() - self._t0
        return s


def _raise_matcher_error(matcher) -> None:
    """A matcher past its work or memory limit answers "nothing allowed": never read that as a
    dead end (it would silently bias the samples); raise its typed error instead."""
    exc = getattr(matcher, "exception", None)
    if exc is not None:
        raise exc


def collect_samples(pb: Problem, n: int, limit: int, propose, *, empty=None) -> list[list[int]]:
    """``n`` accepted sequences from ``propose(pb)`` (``None`` = a rejected proposal), each proposal
    counted against ``limit`` by ``pb.new_proposal``; ``empty()`` true (no valid mass left) raises."""
    out: list[list[int]] = []
    while len(out) < n:
        if empty is not None and empty():
            raise SearchError(f"no sequence of at most {pb.max_tokens} tokens satisfies the constraint "
                              "with non-zero probability")
        pb.new_proposal(limit)
        seq = propose(pb)
        if seq is None:
            pb.stats.rejected += 1
        else:
            pb.stats.accepted += 1
            out.append(seq)
    return out

