"""Lossless speculative decoding under constraints: draft, validate, verify in one forward, roll back.

Each iteration a :class:`~.drafting.Drafter` proposes a few tokens; the constraint cuts the draft
at its first disallowed token (``validate``); the target model runs the pending tokens plus the
draft in one forward pass, which yields the next-token logits at every draft position. Each
position's logits are masked with the constraint's bitmask *in the state after the preceding draft
tokens* and turned into the exact distribution plain constrained decoding samples from
(:func:`~.sampling.sampling_probs`). Modified rejection sampling (Leviathan et al.; Chen et al.)
accepts a prefix of the draft and draws one more token, so every emitted token has exactly the
distribution of plain constrained decoding; with greedy sampling the output is the plain greedy
output. Rejected draft tokens are dropped from the KV cache (``Model.truncate``) and the
constraint is rolled back.

Two more lossless shortcuts: while the constraint allows exactly one token (probability 1 under
any sampler) it is emitted without a model call, and when it allows nothing but EOS generation
stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch

from ..core.bitmask import allocate_token_bitmask
from .decode import GenerationResult, Usage, _dead_end_message, _eos_row, _sampler
from .drafting import Draft, Drafter
from .errors import ConstraintViolationError, DeadEndError
from .masking import apply_bitmask_, only_tokens_allowed, single_allowed_token, unpack_bitmask
from .model import Model
from .sampling import SamplingParams, sampling_probs
from .streaming import decode_text


@dataclass
class DrafterStats:
    """Per-drafter counts: verification rounds it drafted, tokens proposed and tokens accepted."""

    rounds: int = 0
    proposed: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        """Fraction of proposed tokens that were accepted."""
        return self.accepted / self.proposed if self.proposed else 0.0


@dataclass
class SpeculationStats:
    """What speculation did during one generation.

    Attributes:
        forwards: target forward passes (prefill included).
        single_allowed: tokens emitted without a model call because the constraint allowed only them.
        drafters: :class:`DrafterStats` per drafter source name (``"forced+lookup"`` counts a
            combined draft under its combined name).
    """

    forwards: int = 0
    single_allowed: int = 0
    drafters: dict[str, DrafterStats] = field(default_factory=dict)

    def tokens_per_forward(self, completion_tokens: int) -> float:
        """Emitted tokens per target forward pass."""
        return completion_tokens / self.forwards if self.forwards else 0.0

    def as_dict(self) -> dict:
        """A JSON-friendly summary."""
        return {"forwards": self.forwards, "single_allowed": self.single_allowed,
                "drafters": {k: {"rounds": v.rounds, "proposed": v.proposed, "accepted": v.accepted}
                             for k, v in self.drafters.items()}}


def accept_draft(target_probs: torch.Tensor, draft: Sequence[int], draft_probs: torch.Tensor | None,
                 generator: torch.Generator, greedy: bool) -> tuple[int, int]:
    """Modified rejection sampling over one linear draft.

    ``target_probs`` is ``(k+1, V)``: row ``i`` is the target's (masked, filtered) distribution
    before draft token ``i``, row ``k`` the one after the whole draft. ``draft_probs`` is ``None``
    for deterministic drafts or ``(k, V)``. Returns ``(accepted, next_token)``: the number of draft
    tokens kept and one more token drawn from the residual (or from row ``k`` when all are kept).
    Greedy: keep draft tokens while they are the argmax, then the argmax.
    """
    k = len(draft)
    if greedy:
        best = target_probs.argmax(dim=-1).tolist()
        n = 0
        while n < k and best[n] == draft[n]:
            n += 1
        return n, int(best[n])
    from ..kernels import speculative_accept

    uniforms = torch.rand(k, generator=generator) if k else torch.empty(0)
    residual_u = torch.rand(1, generator=generator)
    tokens = torch.as_tensor(list(draft), dtype=torch.long)
    n, nxt = speculative_accept(target_probs, tokens, draft_probs, uniforms, residual_u)
    return int(n), int(nxt)


class _AdaptiveLength:
    """Draft length from recent acceptance: an EMA of accepted tokens per round, per source."""

    def __init__(self, max_draft: int):
        self.max_draft = max_draft
        self.ema: dict[str, float] = {}

    def limit(self) -> int:
        """Longest draft worth verifying now (the best source's expectation, with headroom)."""
        if not self.ema:
            return self.max_draft
        best = max(self.ema.values())
        return max(2, min(self.max_draft, int(math.ceil(1.5 * best)) + 2))

    def update(self, source: str, accepted: int) -> None:
        """Record that a draft from ``source`` had ``accepted`` tokens kept."""
        prev = self.ema.get(source, float(self.max_draft))
        self.ema[source] = 0.6 * prev + 0.4 * accepted


def iter_speculative_decode(model: Model, prompt_ids: Sequence[int], constraint=None, *, vocab,
                            drafter: Drafter | None, max_tokens: int = 256, sampling=None,
                            max_draft: int = 8, adaptive: bool = True,
                            stats: SpeculationStats | None = None) -> Iterator[list[int]]:
    """Generator form of :func:`speculative_decode`: yields chunks of emitted ids, returns the result.

    ``stats`` (optional) is filled in as decoding goes.
    """
    if not prompt_ids:
        raise ValueError("the prompt needs at least one token")
    if max_draft < 0:
        raise ValueError(f"max_draft must be >= 0, got {max_draft}")
    sampler = _sampler(sampling)
    params: SamplingParams = sampler.params
    eos_ids = vocab.eos_ids
    eos_row = _eos_row(vocab)
    stats = stats if stats is not None else SpeculationStats()
    lengths = _AdaptiveLength(max_draft)
    bitmask = torch.from_numpy(allocate_token_bitmask(max_draft + 1, vocab.vocab_size))
    bm_np = bitmask.numpy()
    if drafter is not None:
        drafter.begin(list(prompt_ids))
    out: list[int] = []
    pending: list[int] = list(prompt_ids)
    prefilled = False
    finish = "length"
    usage = Usage(prompt_tokens=len(prompt_ids))

    def emit(tokens: list[int], to_feed: list[int]) -> None:
        out.extend(tokens)
        pending.extend(to_feed)
        if drafter is not None:
            drafter.extend(tokens)

    while len(out) < max_tokens:
        # the lossless shortcuts: constraint finished / only EOS / exactly one token allowed
        if constraint is not None:
            if constraint.is_terminated():
                if not constraint.is_accepting():
                    raise DeadEndError(_dead_end_message(constraint))
                finish = "stop"
                break
            constraint.fill_bitmask(bm_np, 0)
            row = bm_np[0]
            if only_tokens_allowed(row, eos_row):
                finish = "stop"
                break
            if not row.any():
                raise DeadEndError(_dead_end_message(constraint))
            only = single_allowed_token(row)
            if only is not None:
                if not constraint.advance(only):
                    raise ConstraintViolationError(f"constraint refused its only allowed token {only}")
                stats.single_allowed += 1
                usage.forced_tokens += 1
                emit([only], [only])
                yield [only]
                continue

        # draft, cut at the first token the constraint refuses (and never past max_tokens)
        room = min(max_tokens - len(out) - 1, lengths.limit() if adaptive else max_draft)
        draft = drafter.propose(constraint, room) if (drafter is not None and room > 0) else Draft()
        tokens = [int(t) for t in draft.tokens[:max(room, 0)]]
        cut = next((i for i, t in enumerate(tokens) if t in eos_ids), len(tokens))
        if constraint is not None and cut:
            cut = constraint.validate(tokens[:cut])
        tokens = tokens[:cut]
        q = draft.probs[:cut] if (draft.probs is not None and cut) else None
        k = len(tokens)

        # one target forward over pending + draft
        base = model.length if prefilled else 0
        feed = pending + tokens
        logits = model.step(feed) if prefilled else model.prefill(feed)
        prefilled = True
        stats.forwards += 1
        logits = logits[len(pending) - 1:].clone()  # (k+1, V): before each draft token, and after

        # per-position masks: the constraint state after each draft prefix
        if constraint is not None:
            for i in range(k + 1):
                if i:
                    if not constraint.advance(tokens[i - 1]):
                        raise ConstraintViolationError(f"constraint refused validated draft token {tokens[i - 1]}")
                constraint.fill_bitmask(bm_np, i)
            apply_bitmask_(logits, bitmask[:k + 1])
        if q is not None and not params.greedy:
            q = _conditioned_draft_probs(q, bitmask[:k] if constraint is not None else None, vocab)
        probs = sampling_probs(logits, params) if not params.greedy else logits
        n, nxt = accept_draft(probs, tokens, q, sampler.generator, params.greedy)
        if constraint is not None and k - n:
            constraint.rollback(k - n)
        model.truncate(base + len(pending) + n)
        pending = []
        if k:
            src = stats.drafters.setdefault(draft.source or "draft", DrafterStats())
            src.rounds += 1
            src.proposed += k
            src.accepted += n
            lengths.update(draft.source or "draft", n)
            _credit(drafter, draft.source, n)
        chunk = tokens[:n]
        done = nxt in eos_ids
        if not done:
            if constraint is not None and not constraint.advance(nxt):
                raise ConstraintViolationError(f"constraint refused token {nxt} that its mask allowed")
            chunk = chunk + [nxt]
        chunk = chunk[:max_tokens - len(out)]
        if chunk:
            emit(chunk, chunk[n:])  # the accepted draft tokens are in the cache already
            yield chunk
        if done:
            finish = "stop"
            break

    usage.completion_tokens = len(out)
    usage.model_calls = stats.forwards
    complete = True if constraint is None else bool(constraint.is_accepting())
    result = GenerationResult(decode_text(vocab, out), out, finish, complete, usage)
    result.speculation = stats
    return result


def _conditioned_draft_probs(q: torch.Tensor, bitmask, vocab) -> torch.Tensor:
    """Draft rows conditioned on what survives the cut: allowed by the constraint and not EOS.

    A draft is cut at its first EOS or disallowed token, so each kept token was in effect drawn
    from its row restricted to allowed, non-EOS tokens. Verifying against that conditional (not the
    raw row) keeps rejection sampling exact; the cut position itself falls back to the target.
    """
    q = q.float().clone()
    if bitmask is not None:
        q.mul_(unpack_bitmask(bitmask, q.shape[-1], device=q.device))
    eos = [t for t in vocab.eos_ids if t < q.shape[-1]]
    if eos:
        q[:, eos] = 0.0
    return q / q.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def _credit(drafter, source: str, accepted: int) -> None:
    """Let a drafter (or chain) count accepted tokens when it keeps its own statistics."""
    hook = getattr(drafter, "record_accepted", None)
    if hook is not None:
        hook(source, accepted)


def speculative_decode(model: Model, prompt_ids: Sequence[int], constraint=None, *, vocab,
                       drafter: Drafter | None, max_tokens: int = 256, sampling=None,
                       max_draft: int = 8, adaptive: bool = True) -> GenerationResult:
    """Decode like :func:`~.decode.decode`, verifying drafts from ``drafter`` (lossless).

    The output has exactly the distribution of plain constrained decoding with the same
    ``sampling`` (byte-identical when greedy); only the number of target forward passes changes.
    ``max_draft`` caps a draft's length (``adaptive`` shortens drafts while acceptance is low).
    The result's ``speculation`` attribute holds a :class:`SpeculationStats`.
    """
    gen = iter_speculative_decode(model, prompt_ids, constraint, vocab=vocab, drafter=drafter,
                                  max_tokens=max_tokens, sampling=sampling, max_draft=max_draft,
                                  adaptive=adaptive)
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value
