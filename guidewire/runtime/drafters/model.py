"""A small draft model (same tokenizer as the target) sampling a few tokens under the constraint.

The drafter owns a :class:`~guidewire.runtime.model.Model` state of its own. It prefills the prompt
in :meth:`begin`; :meth:`extend` only records the history, and each :meth:`propose` syncs lazily:
the cache is truncated to the longest common prefix of its tokens and the history and the missing
tokens are stepped in one forward. Draft tokens stay in the cache after a proposal, so when the
verifier accepts ``j`` of them and appends its own token, the next sync steps just that token.

Each draft token is sampled from ``q = sampling_probs(masked logits)`` (the constraint's bitmask
applied), with the drafter's own seeded generator (argmax when greedy). Drafting stops when the
constraint allows only EOS, or when the sample is an EOS id -- EOS is never proposed; the row
returned for a proposed token is ``q`` conditioned on "not EOS" (EOS mass removed, renormalised),
which is exactly the distribution the token was drawn from given that drafting went on. Modified
rejection sampling with these rows keeps the target distribution exact.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ...core.bitmask import allocate_token_bitmask, ids_to_bitmask
from ..drafting import Draft
from ..masking import apply_bitmask_
from ..sampling import SamplingParams, sampling_probs
from ._common import DrafterBase


class DraftModelDrafter(DrafterBase):
    """Drafts ``k`` tokens with a small model under the constraint.

    Args:
        model: the draft model's sequence state (``prefill``/``step``/``truncate``/``length``).
        vocab: the shared vocabulary (bitmask width, EOS ids).
        sampling: how draft tokens are chosen (``temperature == 0``: greedy); its ``seed`` seeds
            the drafter's generator.
        k: draft length.
    """

    name = "model"
    deterministic = False

    def __init__(self, model, vocab, sampling: SamplingParams | None = None, k: int = 4):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.model = model
        self.vocab = vocab
        self.sampling = sampling if sampling is not None else SamplingParams()
        self.k = int(k)
        self.generator = torch.Generator()
        if self.sampling.seed is not None:
            self.generator.manual_seed(int(self.sampling.seed))
        else:
            self.generator.seed()
        self.eos_ids = sorted(int(i) for i in vocab.eos_ids)
        width = int(vocab.vocab_size)
        self._bitmask = allocate_token_bitmask(1, width)
        self._not_eos = ~ids_to_bitmask(self.eos_ids, width)
        self._eos_cols = torch.tensor([i for i in self.eos_ids if i < model.vocab_size], dtype=torch.long)
        self._history: list[int] = []
        self._cached: list[int] = []  # the tokens in the model's cache
        self._logits: dict[int, torch.Tensor] = {}  # cache length -> next-token logits (V,)
        self.forwards = 0  # model calls made (prefill + steps)

    # -- history and cache sync ----------------------------------------------------------------
    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start a request: prefill the draft model with the prompt."""
        self._history = [int(t) for t in prompt_ids]
        self._cached = []
        self._logits = {}
        if self._history:
            out = self.model.prefill(self._history, last_only=True)
            self.forwards += 1
            self._cached = list(self._history)
            self._logits[len(self._cached)] = out[-1]

    def extend(self, tokens: Sequence[int]) -> None:
        """Record accepted tokens (the model catches up lazily)."""
        self._history.extend(int(t) for t in tokens)

    def _truncate(self, n: int) -> None:
        if n < len(self._cached):
            self.model.truncate(n)
            del self._cached[n:]
            for key in [key for key in self._logits if key > n]:
                del self._logits[key]

    def _sync(self) -> torch.Tensor | None:
        """Bring the cache to the history; the next-token logits after it (None: empty history)."""
        h, c = self._history, self._cached
        if not h:
            return None
        n = min(len(h), len(c))
        lcp = 0
        while lcp < n and h[lcp] == c[lcp]:
            lcp += 1
        self._logits = {n: x for n, x in self._logits.items() if n >= len(h)}  # drop stale rows
        if lcp == len(h) and len(h) in self._logits:
            self._truncate(lcp)
            return self._logits[lcp]
        keep = min(lcp, len(h) - 1)
        self._truncate(keep)
        if keep == 0:
            out = self.model.prefill(h, last_only=True)
        else:
            out = self.model.step(h[keep:], last_only=True)
        self.forwards += 1
        self._cached = list(h)
        self._logits[len(h)] = out[-1]
        return out[-1]

    # -- drafting ------------------------------------------------------------------------------
    def _choose(self, q: torch.Tensor) -> int:
        if self.sampling.greedy:
            return int(q.argmax())
        return int(torch.multinomial(q.detach().float().cpu(), 1, generator=self.generator))

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """Sample up to ``min(k, max_tokens)`` tokens; ``probs`` holds the rows they came from."""
        self.calls += 1
        steps = min(self.k, int(max_tokens))
        if prefix or steps <= 0:
            return self._emit([])
        logits = self._sync()
        if logits is None:
            return self._emit([])
        c = constraint.fork() if constraint is not None else None
        base = len(self._history)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        for i in range(steps):
            x = logits.detach().float().clone().unsqueeze(0)
            if c is not None:
                if c.is_terminated():
                    break
                c.fill_bitmask(self._bitmask, 0)
                if not (self._bitmask[0] & self._not_eos).any():
                    break  # nothing but EOS (or nothing at all) is allowed
                apply_bitmask_(x, self._bitmask)
            q = sampling_probs(x, self.sampling)[0]
            t = self._choose(q)
            if t in self.vocab.eos_ids:
                break
            if c is not None and not c.advance(t):
                break
            if self._eos_cols.numel():
                q = q.clone()
                q[self._eos_cols.to(q.device)] = 0.0
                q = q / q.sum()
            tokens.append(t)
            rows.append(q)
            if i + 1 < steps:  # the last draft token is not fed (the verifier does that)
                length = base + len(tokens)
                logits = self.model.step([t], last_only=True)[-1]
                self.forwards += 1
                self._cached.append(t)
                self._logits[length] = logits
        probs = torch.stack(rows) if rows else torch.zeros((0, int(logits.shape[-1])), device=logits.device)
        return self._emit(tokens, probs)
