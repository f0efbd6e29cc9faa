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

import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from ..core.bitmask import allocate_token_bitmask
from .decode import GenerationResult, Usage, _eos_row, _sampler, constrained_shortcut
from .drafting import Draft, Drafter
from .errors import ConstraintViolationError
from .masking import apply_bitmask_, unpack_bitmask
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

    dev = target_probs.device   # drawn on the CPU generator (reproducible), used where the probabilities are
    uniforms = (torch.rand(k, generator=generator) if k else torch.empty(0)).to(dev)
    residual_u = torch.rand(1, generator=generator).to(dev)
    tokens = torch.as_tensor(list(draft), dtype=torch.long, device=dev)
    n, nxt = speculative_accept(target_probs, tokens, draft_probs, uniforms, residual_u)
    return int(n), int(nxt)


class DraftPolicy:
    """Chooses how much of a draft to verify: the length that maximises expected emitted tokens
    per unit of forward time.

    Per draft source it keeps a Beta estimate of the per-token acceptance rate ``a`` (accepted
    tokens vs rounds cut short), so verifying ``k`` tokens emits ``(1 - a^(k+1)) / (1 - a)`` tokens
    on average. The forward cost is fitted online as ``c0 + c1 * fed_tokens`` (least squares over
    recent forwards, exponentially decayed), so drafts grow where wide forwards are cheap (a GPU)
    and shrink on a CPU whose forward time grows with the tokens fed. Only the verification
    length is chosen here; what is emitted never depends on it.
    """

    def __init__(self, max_draft: int, *, prior_cost_slope: float = 0.1, decay: float = 0.97):
        self.max_draft = max_draft
        self.decay = decay
        self.prior_slope = prior_cost_slope
        self.accept: dict[str, list[float]] = {}
        self._sums = [0.0] * 5  # weight, sum k, sum k^2, sum t, sum k*t

    def rate(self, source: str) -> float:
        """Estimated probability that the next draft token from ``source`` is accepted."""
        acc, rej = self.accept.get(source, (0.0, 0.0))
        return (acc + 2.0) / (acc + rej + 3.0)  # a Beta(2, 1) prior: optimistic for new sources

    def slope(self) -> float:
        """Fitted cost of one more fed token, relative to a forward's fixed cost."""
        w, sk, skk, st, skt = self._sums
        if w < 4:
            return self.prior_slope
        mk, mt = sk / w, st / w
        var = skk / w - mk * mk
        if var < 0.5:
            return self.prior_slope
        c1 = max(0.0, (skt / w - mk * mt) / var)
        c0 = max(mt - c1 * mk, 1e-9)
        return c1 / c0

    def choose(self, source: str, available: int, pending: int) -> int:
        """How many of ``available`` draft tokens to verify after ``pending`` fed tokens."""
        if available <= 0:
            return 0
        a, beta = min(self.rate(source), 0.999), self.slope()
        best_k, best = 0, 0.0
        gain = 0.0
        for k in range(0, min(available, self.max_draft) + 1):
            gain += a ** k  # expected emitted tokens when verifying k draft tokens
            value = gain / (1.0 + beta * (pending + k))
            if value > best + 1e-12:
                best_k, best = k, value
        return best_k

    def record(self, source: str, verified: int, accepted: int) -> None:
        """A round of ``verified`` draft tokens from ``source`` kept ``accepted`` of them."""
        acc = self.accept.setdefault(source, [0.0, 0.0])
        acc[0] = acc[0] * self.decay + accepted
        acc[1] = acc[1] * self.decay + (1.0 if accepted < verified else 0.0)

    def timed(self, fed: int, seconds: float) -> None:
        """A forward over ``fed`` tokens took ``seconds``."""
        d, s = self.decay, self._sums
        for i, v in enumerate((1.0, fed, fed * fed, seconds, fed * seconds)):
            s[i] = s[i] * d + v


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
    policy = DraftPolicy(max_draft)
    # seeded sampling stays reproducible: the draft lengths (hence the random draws) must not
    # depend on measured time, so the cost model keeps its prior there
    timed_policy = params.greedy or params.seed is None
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
            action, only = constrained_shortcut(constraint, bm_np, eos_row)
            if action == "stop":
                finish = "stop"
                break
            if action == "forced":
                stats.single_allowed += 1
                usage.forced_tokens += 1
                emit([only], [only])
                yield [only]
                continue

        # draft, cut at the first token the constraint refuses (and never past max_tokens)
        room = min(max_tokens - len(out) - 1, max_draft)
        draft = drafter.propose(constraint, room) if (drafter is not None and room > 0) else Draft()
        tokens = [int(t) for t in draft.tokens[:max(room, 0)]]
        cut = next((i for i, t in enumerate(tokens) if t in eos_ids), len(tokens))
        if constraint is not None and cut:
            cut = constraint.validate(tokens[:cut])
        if adaptive and cut:
            cut = policy.choose(draft.source or "draft", cut, len(pending))
        tokens = tokens[:cut]
        q = draft.probs[:cut] if (draft.probs is not None and cut) else None
        k = len(tokens)

        # one target forward over pending + draft
        base = model.length if prefilled else 0
        feed = pending + tokens
        t0 = time.perf_counter()
        logits = model.step(feed) if prefilled else model.prefill(feed)
        if prefilled and timed_policy:
            policy.timed(len(feed), time.perf_counter() - t0)
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
            policy.record(draft.source or "draft", k, n)
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
    ``max_draft`` caps a draft's length; ``adaptive`` verifies only as much of each draft as pays
    off (:class:`DraftPolicy`).
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
