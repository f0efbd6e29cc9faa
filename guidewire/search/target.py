"""The scored model: next-token log-probabilities after any prefix of the output, with the
sampler's temperature applied to the logits, cached by prefix and computed with KV reuse.

One cursor sequence (a :class:`~guidewire.runtime.Model`) holds the prompt plus the last prefix
scored; a new prefix is reached by truncating the cursor to the longest common prefix and
stepping the rest in one forward pass. Log-prob rows are cached per prefix in an LRU bounded in
bytes, so samples that share a prefix spend forward passes only on their new tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

DEFAULT_CACHE_BYTES = 256 << 20


@dataclass
class TargetStats:
    """Work spent by a :class:`Target`: model forward passes and the tokens they consumed."""

    forward_passes: int = 0
    tokens_scored: int = 0
    cache_hits: int = 0


class Target:
    """Next-token log-probs ``log softmax(logits / temperature)`` after ``prompt + prefix``.

    ``model`` follows the runtime's Model protocol (``prefill``/``step``/``truncate``/``length``).
    ``cache_bytes`` bounds the cached rows (float32, ``4 * vocab_size`` bytes each).
    """

    def __init__(self, model, prompt_ids: Sequence[int], *, temperature: float = 1.0,
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        if not prompt_ids:
            raise ValueError("the prompt needs at least one token")
        if not (temperature > 0 and np.isfinite(temperature)):
            raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
        self.model = model
        self.prompt_ids = [int(t) for t in prompt_ids]
        self.temperature = float(temperature)
        self.vocab_size = int(model.vocab_size)
        self.cache_bytes = int(cache_bytes)
        self.stats = TargetStats()
        self._cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._cursor: list[int] | None = None   # output tokens the model state holds (after the prompt)

    @property
    def row_bytes(self) -> int:
        """Bytes of one cached row."""
        return 4 * self.vocab_size

    def cached_bytes(self) -> int:
        """Bytes held by the row cache now."""
        return len(self._cache) * self.row_bytes

    def logprobs(self, prefix: Sequence[int]) -> np.ndarray:
        """Float32 ``(vocab_size,)`` next-token log-probs after ``prefix`` (read-only view)."""
        key = tuple(int(t) for t in prefix)
        row = self._cache.get(key)
        if row is not None:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            return row
        row = self._score(list(key))
        row.setflags(write=False)
        if self.row_bytes <= self.cache_bytes:
            self._cache[key] = row
            while self.cached_bytes() > self.cache_bytes:
                self._cache.popitem(last=False)
        return row

    def _score(self, prefix: list[int]) -> np.ndarray:
        model = self.model
        full = self.prompt_ids + prefix
        common = 0
        if self._cursor is not None:
            held = self.prompt_ids + self._cursor
            limit = min(len(held), len(full))
            while common < limit and held[common] == full[common]:
                common += 1
            common = min(common, len(full) - 1)   # the row needs a pass over the last token
        self._cursor = None          # unknown until the call below returns
        if common == 0:
            logits = model.prefill(full, last_only=True)
        else:
            model.truncate(common)
            logits = model.step(full[common:], last_only=True)
        self._cursor = prefix
        self.stats.forward_passes += 1
        self.stats.tokens_scored += len(full) - common
        x = logits[-1].double() / self.temperature
        return torch.log_softmax(x, dim=-1).float().cpu().numpy().copy()
