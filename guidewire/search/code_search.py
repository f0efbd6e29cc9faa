"""Shared machinery of the code-search methods: the task, the stop rule, scoring programs on public
tests, masked log-probabilities and the model states the methods move through.

A method sees a :class:`SearchContext`: the prompt's token ids, the model (anything with
``sequence()`` returning a :class:`~guidewire.runtime.model.Model`, plus ``vocab``), an optional
grammar constraint (``fill_bitmask``/``advance``/``rollback``/``fork``) applied to every step's
logits, and counters (:class:`SearchStats`). Completions end at EOS, at the constraint's end, at
``max_new_tokens``, or -- for code, like the Codex paper's stop sequences -- at the first line that
starts at column 0 after the prompt (a new top-level ``def``/``class``/``if __name__``/``print``,
a Markdown fence, prose) or, for chat replies, at the fence closing the first code block.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..core.bitmask import allocate_token_bitmask
from ..runtime.masking import apply_bitmask_
from .sandbox import run_tests

_TOP_LEVEL = re.compile(r"\n(?=[^\s])")
_FENCE_OPEN = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n")


@dataclass
class CodeTask:
    """A completion task: ``prompt`` is the program prefix (e.g. a signature and docstring);
    ``public_tests`` are assertion snippets the search may run; ``stop="code"`` applies the
    top-level-line stop rule, ``stop=None`` ends only at EOS / the constraint / the length limit."""

    prompt: str
    entry_point: str = ""
    public_tests: Sequence[str] = ()
    timeout_s: float = 5.0
    max_new_tokens: int = 192
    stop: str | None = "code"
    prefix: str | None = None

    def program(self, completion: str) -> str:
        """The program a completion stands for: ``prompt + completion`` (``stop="code"`` or none);
        with ``stop="fence"`` the fenced code of the reply after ``prefix`` (the prompt's code,
        so its imports and helpers stay and the reply's definition replaces the stub)."""
        if self.stop == "fence":
            return (self.prefix if self.prefix is not None else self.prompt) + "\n\n" + fenced_code(completion)
        return self.prompt + completion


@dataclass
class SearchStats:
    """Counters of one search: model calls (``forwards``), token positions computed
    (``positions``), complete programs generated (``rollouts``), sandbox runs, cache hits, wall."""

    forwards: int = 0
    positions: int = 0
    rollouts: int = 0
    sandbox_runs: int = 0
    reward_cache_hits: int = 0
    sequence_cache_hits: int = 0
    prior_cache_hits: int = 0
    iterations: int = 0
    triggers: int = 0
    wall_s: float = 0.0
    best_by_rollout: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """Plain-dict view (for JSON reports)."""
        return {k: v for k, v in self.__dict__.items() if k != "best_by_rollout"}


def completion_text(raw: str, stop: str | None) -> tuple[str, bool]:
    """``(text, stopped)``: ``raw`` cut before its first top-level line when ``stop == "code"``,
    after the fence that closes the first code block when ``stop == "fence"``."""
    if stop == "code":
        m = _TOP_LEVEL.search(raw)
        if m is not None:
            return raw[:m.start() + 1], True
    elif stop == "fence":
        m = _FENCE_OPEN.search(raw)
        if m is not None:
            end = raw.find("```", m.end())
            if end >= 0:
                return raw[:end + 3], True
    elif stop is not None:
        raise ValueError(f"unknown stop rule {stop!r} (expected 'code', 'fence' or None)")
    return raw, False


def fenced_code(text: str) -> str:
    """The body of the first Markdown code block of ``text`` (to its end if unclosed); ``text``
    itself when it has no fence."""
    m = _FENCE_OPEN.search(text)
    if m is None:
        return text
    end = text.find("```", m.end())
    return text[m.end():end if end >= 0 else len(text)]


class SearchContext:
    """What every method shares for one task: model, prompt ids, constraint prototype, the reward
    cache (program text -> public-test pass fraction) and the stats."""

    def __init__(self, lm, task: CodeTask, prompt_ids: Sequence[int], constraint=None):
        self.lm = lm
        self.task = task
        self.vocab = lm.vocab
        self.vocab_size = int(lm.vocab.vocab_size)
        self.eos = frozenset(int(e) for e in lm.vocab.eos_ids)
        self.prompt_ids = [int(t) for t in prompt_ids]
        self.constraint = constraint
        self.stats = SearchStats()
        self.rewards: dict[str, float] = {}
        self.best: tuple[float, int, str] | None = None  # (reward, -order, program)
        self._bitmask = allocate_token_bitmask(1, self.vocab_size) if constraint is not None else None
        self._t0 = time.monotonic()

    # -- text ---------------------------------------------------------------------------------
    def text_of(self, tokens: Sequence[int]) -> tuple[str, bool]:
        """The completion text of ``tokens`` (cut by the stop rule) and whether it is finished."""
        raw = self.vocab.decode([t for t in tokens if t not in self.eos]).decode("utf-8", "replace")
        text, stopped = completion_text(raw, self.task.stop)
        return text, stopped

    def finished(self, tokens: Sequence[int], constraint=None) -> bool:
        """Whether a completion has ended (EOS, stop rule, constraint terminated, length)."""
        if tokens and tokens[-1] in self.eos:
            return True
        if len(tokens) >= self.task.max_new_tokens:
            return True
        if constraint is not None and constraint.is_terminated():
            return True
        return self.text_of(tokens)[1]

    def program(self, tokens: Sequence[int]) -> str:
        """The full program the completion ``tokens`` stand for (see :meth:`CodeTask.program`)."""
        return self.task.program(self.text_of(tokens)[0])

    # -- scoring ------------------------------------------------------------------------------
    def reward(self, program: str) -> float:
        """Public-test pass fraction of ``program`` (1/0 for loads/fails when there are no tests);
        cached by program text. Every new program becomes a best-so-far candidate."""
        r = self.rewards.get(program)
        if r is not None:
            self.stats.reward_cache_hits += 1
            return r
        run = run_tests(program, list(self.task.public_tests), timeout_s=self.task.timeout_s)
        self.stats.sandbox_runs += 1
        r = run.fraction if run.total else (1.0 if run.error is None else 0.0)
        self.rewards[program] = r
        key = (r, -len(self.rewards), program)
        if self.best is None or key[:2] > self.best[:2]:
            self.best = key
        return r

    def note_rollout(self) -> None:
        """Count one complete generated program and remember the best program so far."""
        self.stats.rollouts += 1
        self.stats.best_by_rollout.append(self.best[2] if self.best else self.task.prompt)

    # -- model ---------------------------------------------------------------------------------
    def count(self, positions: int) -> None:
        """Count one model call computing ``positions`` token positions."""
        self.stats.forwards += 1
        self.stats.positions += int(positions)

    def log_probs(self, logits: torch.Tensor, constraint=None) -> torch.Tensor:
        """Log-softmax of one ``(V,)`` logits row, masked by ``constraint`` (float32, CPU)."""
        row = logits.reshape(-1)[: self.vocab_size].float().cpu().clone()
        if constraint is not None:
            self._bitmask[:] = 0
            constraint.fill_bitmask(self._bitmask, 0)
            apply_bitmask_(row.unsqueeze(0), self._bitmask)
            if not torch.isfinite(row).any():
                raise RuntimeError("the constraint allows no token here (a dead end)")
        return torch.log_softmax(row, dim=-1)

    def wall(self) -> float:
        """Seconds since the context was made."""
        return time.monotonic() - self._t0


def entropy(logp: torch.Tensor) -> float:
    """Shannon entropy (nats) of a distribution given as log-probabilities."""
    p = logp.exp()
    return float(-(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum())


class Cursor:
    """One model state moved around a token tree: ``goto(prefix)`` truncates to the longest common
    prefix with where it is and steps only the missing tokens (KV reuse along the tree)."""

    def __init__(self, ctx: SearchContext):
        self.ctx = ctx
        self.model = ctx.lm.sequence()
        self.constraint = ctx.constraint.fork() if ctx.constraint is not None else None
        self.tokens: list[int] = []
        self.logits = self.model.prefill(ctx.prompt_ids, last_only=True)[-1]
        ctx.count(len(ctx.prompt_ids))

    def goto(self, prefix: Sequence[int]) -> torch.Tensor:
        """Move to the completion ``prefix``; the next-token logits there."""
        prefix = [int(t) for t in prefix]
        n = 0
        for a, b in zip(self.tokens, prefix):
            if a != b:
                break
            n += 1
        if n == len(self.tokens) == len(prefix):
            return self.logits
        base = len(self.ctx.prompt_ids)
        if n == len(prefix):  # an ancestor of where we are: recompute its last position
            keep = n - 1
            self._cut(keep)
            last = self.ctx.prompt_ids[-1] if keep < 0 else prefix[-1]
            if keep < 0:
                self.model.truncate(base - 1)
                self.logits = self.model.step([last], last_only=True)[-1]
                self.ctx.count(1)
                return self.logits
            return self.advance(prefix[keep:])
        self._cut(n)
        return self.advance(prefix[n:])

    def _cut(self, n: int) -> None:
        n = max(n, 0)
        if self.constraint is not None and len(self.tokens) > n:
            self.constraint.rollback(len(self.tokens) - n)
        self.model.truncate(len(self.ctx.prompt_ids) + n)
        del self.tokens[n:]

    def advance(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append ``tokens`` (one model call); the logits after the last."""
        tokens = [int(t) for t in tokens]
        if self.constraint is not None:
            for t in tokens:
                if t in self.ctx.eos and self.constraint.is_accepting():
                    continue
                if not self.constraint.advance(t):
                    raise RuntimeError(f"token {t} is not allowed by the constraint")
        self.logits = self.model.step(tokens, last_only=True)[-1]
        self.ctx.count(len(tokens))
        self.tokens.extend(tokens)
        return self.logits


class Rows:
    """A set of completions that advance in lockstep, one token per row per call, all from the
    same prompt (so no padding): batched through the HF module where there is one, else forks of
    the single-sequence model. ``select(idx)`` keeps/duplicates rows (beam reordering). With
    ``cursor``, the rows branch from the cursor's state (its cache copied, no model call).
    ``tokens`` holds each row's tokens since the start (the prompt / the cursor's position)."""

    def __init__(self, ctx: SearchContext, n: int, cursor: "Cursor | None" = None):
        self.ctx = ctx
        module = getattr(ctx.lm, "module", None)
        self._hf = module is not None and hasattr(module, "config")
        prompt = ctx.prompt_ids
        if cursor is not None:  # branch from where the cursor is (no model call)
            self._from_cursor(cursor, n, module)
            return
        if self._hf:
            from ..runtime.model import _new_cache, fit_logits

            self._fit = fit_logits
            self._module = module
            device = next(module.parameters()).device
            self._device = device
            cache = _new_cache(module)
            with torch.no_grad():
                out = module(input_ids=torch.tensor([prompt], device=device), past_key_values=cache,
                             use_cache=True, logits_to_keep=1)
            self._cache = out.past_key_values
            self._cache.reorder_cache(torch.zeros(n, dtype=torch.long, device=device))
            logits = fit_logits(out.logits[:, -1].float(), ctx.vocab_size).repeat(n, 1)
        else:
            base = ctx.lm.sequence()
            logits0 = base.prefill(prompt, last_only=True)[-1]
            self._rows = [base.fork() for _ in range(n)]
            logits = logits0.unsqueeze(0).repeat(n, 1)
        ctx.count(len(prompt))
        self.logits = logits
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        proto = ctx.constraint
        self.constraints = [proto.fork() for _ in range(n)] if proto is not None else None

    def _from_cursor(self, cursor: "Cursor", n: int, module) -> None:
        model = cursor.model
        if self._hf and hasattr(model, "cache_copy"):
            from ..runtime.model import fit_logits

            self._fit, self._module = fit_logits, module
            self._device = next(module.parameters()).device
            self._cache = model.cache_copy()    # from the static (CUDA graphs') cache too
            self._cache.reorder_cache(torch.zeros(n, dtype=torch.long, device=self._device))
        else:
            self._hf = False
            self._rows = [model.fork() for _ in range(n)]
        self.logits = cursor.logits.reshape(1, -1).repeat(n, 1)
        self.tokens = [[] for _ in range(n)]
        c = cursor.constraint
        self.constraints = [c.fork() for _ in range(n)] if c is not None else None

    def __len__(self) -> int:
        return len(self.tokens)

    def log_probs(self, i: int) -> torch.Tensor:
        """Masked log-probabilities of row ``i``'s next token."""
        return self.ctx.log_probs(self.logits[i], self.constraints[i] if self.constraints else None)

    def select(self, idx: Sequence[int]) -> None:
        """Keep rows ``idx`` in that order (repeats allowed)."""
        idx = [int(i) for i in idx]
        if self._hf:
            self._cache.reorder_cache(torch.tensor(idx, dtype=torch.long, device=self._device))
        else:
            self._rows = [self._rows[i].fork() for i in idx]
        self.logits = self.logits[idx]
        self.tokens = [list(self.tokens[i]) for i in idx]
        if self.constraints is not None:
            self.constraints = [self.constraints[i].fork() for i in idx]

    def step(self, tokens: Sequence[int]) -> None:
        """Append one token per row."""
        tokens = [int(t) for t in tokens]
        if self.constraints is not None:
            for c, t in zip(self.constraints, tokens):
                if not (t in self.ctx.eos and c.is_accepting()) and not c.advance(t):
                    raise RuntimeError(f"token {t} is not allowed by the constraint")
        for row, t in zip(self.tokens, tokens):
            row.append(t)
        if self._hf:
            ids = torch.tensor([[t] for t in tokens], dtype=torch.long, device=self._device)
            with torch.no_grad():
                out = self._module(input_ids=ids, past_key_values=self._cache, use_cache=True,
                                   logits_to_keep=1)
            self._cache = out.past_key_values
            self.logits = self._fit(out.logits[:, -1].float(), self.ctx.vocab_size)
        else:
            self.logits = torch.stack([m.step([t], last_only=True)[-1] for m, t in zip(self._rows, tokens)])
        self.ctx.count(len(tokens))


def top_k(logp: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` most likely allowed tokens of a log-probability row: ``[(id, prob), ...]``."""
    k = min(k, int(torch.isfinite(logp).sum()))
    vals, ids = torch.topk(logp, k)
    return [(int(i), float(np.exp(float(v)))) for v, i in zip(vals, ids)]
