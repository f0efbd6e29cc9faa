"""Token samplers: greedy, temperature, top-k, top-p (nucleus) and min-p, reproducible with a seed.

The distribution is built in a fixed order, each filter acting on the result of the previous one:
``softmax(logits / temperature)`` -> top-k (keep the ``k`` largest; ties with the k-th are kept)
-> top-p (keep the smallest set of most likely tokens whose mass reaches ``top_p``) -> min-p
(drop tokens below ``min_p`` times the largest probability) -> renormalise. ``temperature == 0``
is greedy (argmax; the lowest id wins ties).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import DeadEndError


@dataclass(frozen=True)
class SamplingParams:
    """How to choose a token from logits.

    Attributes:
        temperature: 0 for greedy decoding, otherwise the softmax temperature (> 0).
        top_k: keep only the ``top_k`` most likely tokens (0 = off).
        top_p: nucleus mass in (0, 1] (1 = off).
        min_p: drop tokens with probability below ``min_p * max_prob`` (0 = off).
        seed: seed of the sampler's ``torch.Generator`` (None = nondeterministic).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")

    @property
    def greedy(self) -> bool:
        """Whether these parameters pick the argmax."""
        return self.temperature == 0


def _check_rows(logits: torch.Tensor) -> None:
    dead = torch.isneginf(logits).all(dim=-1)
    if bool(dead.any()):
        rows = torch.nonzero(dead).flatten().tolist()
        raise DeadEndError(f"no token is allowed in batch row(s) {rows} (every logit is -inf)")


def sampling_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The exact distribution ``params`` samples from, ``(batch, V)`` float32 (one-hot when greedy)."""
    logits = logits.float()
    if logits.dim() == 1:
        logits = logits.unsqueeze(0)
    _check_rows(logits)
    if params.greedy:
        out = torch.zeros_like(logits)
        out.scatter_(1, logits.argmax(dim=-1, keepdim=True), 1.0)
        return out
    x = logits / params.temperature
    if params.top_k and params.top_k < x.shape[-1]:
        kth = torch.topk(x, params.top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly ahead of each token
        drop_sorted = before >= params.top_p
        drop_sorted[:, 0] = False
        drop = torch.zeros_like(drop_sorted).scatter_(1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if params.min_p > 0.0:
        thresh = probs.max(dim=-1, keepdim=True).values * params.min_p
        probs = probs.masked_fill(probs < thresh, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class Sampler:
    """Chooses tokens from ``(batch, V)`` logits with :class:`SamplingParams`; seeded => reproducible."""

    def __init__(self, params: SamplingParams | None = None, **kwargs):
        self.params = params if params is not None else SamplingParams(**kwargs)
        self.generator = torch.Generator()
        if self.params.seed is not None:
            self.generator.manual_seed(int(self.params.seed))
        else:
            self.generator.seed()

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """One token id per row, as a ``(batch,)`` int64 tensor on the CPU."""
        if logits.dim() == 1:
            logits = logits.unsqueeze(0)
        if self.params.greedy:
            _check_rows(logits)
            return logits.argmax(dim=-1).cpu()
        probs = sampling_probs(logits, self.params).cpu()
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)
