"""A continuously batched KV cache: rows join (prefilled) and leave between decoding steps.

Every row is left-padded, with a 2-D attention mask and explicit position ids, so each row
computes what it would alone (up to floating-point reduction order). Joining rows are
prefilled together in their own cache and merged (the narrower side padded on the left);
leaving rows are dropped with ``index_select`` and all-padding columns trimmed, so the cache
width stays that of the longest live row.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..runtime.model import fit_logits, left_padded, logits_width


def _plain_cache():
    """A cache of plain growing layers (no sliding windows), whatever the model's config says:
    rows are merged and trimmed column by column, which sliding-window layers cannot do."""
    from transformers import DynamicCache

    return DynamicCache()


def _layers(cache) -> list:
    return list(cache.layers)


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    extra = width - t.shape[dim]
    if extra <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = extra
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class ContinuousBatch:
    """Rows of a causal LM decoding together: :meth:`add` prefills new rows, :meth:`step` feeds
    one token to every row, :meth:`keep` drops rows. Logits are float32 ``(rows, vocab_size)``."""

    def __init__(self, module, *, vocab_size: int | None = None, pad_id: int = 0):
        self.module = module
        self.vocab_size = int(vocab_size or logits_width(module))
        self.device = next(module.parameters()).device
        self.pad_id = int(pad_id)
        self._cache = None
        self._mask: torch.Tensor | None = None   # (rows, width) long
        self._pos: torch.Tensor | None = None    # (rows,) next position of each row
        self.forwards = 0

    @property
    def rows(self) -> int:
        """Number of live rows."""
        return 0 if self._pos is None else int(self._pos.shape[0])

    @property
    def width(self) -> int:
        """Cached columns (the longest live row, padding included)."""
        return 0 if self._mask is None else int(self._mask.shape[1])

    def _forward(self, ids, mask, positions, cache) -> tuple[torch.Tensor, object]:
        with torch.no_grad():
            out = self.module(input_ids=ids, attention_mask=mask, position_ids=positions,
                              past_key_values=cache, use_cache=True, logits_to_keep=1)
        self.forwards += 1
        logits = out.logits[:, -1].float()
        return fit_logits(logits, self.vocab_size), out.past_key_values

    def add(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """Prefill ``prompts`` as new rows appended after the live ones; their next-token logits."""
        prompts = [[int(t) for t in p] for p in prompts]
        ids, mask, positions = left_padded(prompts, self.pad_id)
        cache = _plain_cache()
        mask = mask.to(self.device)
        logits, cache = self._forward(ids.to(self.device), mask, positions.to(self.device), cache)
        pos = torch.tensor([len(p) for p in prompts], dtype=torch.long)
        if self._cache is None or self.rows == 0:
            self._cache, self._mask, self._pos = cache, mask, pos
            return logits
        w = max(self.width, mask.shape[1])
        for old, new in zip(_layers(self._cache), _layers(cache)):
            old.keys = torch.cat([_left_pad(old.keys, w, 2), _left_pad(new.keys, w, 2)], dim=0)
            old.values = torch.cat([_left_pad(old.values, w, 2), _left_pad(new.values, w, 2)], dim=0)
        self._mask = torch.cat([_left_pad(self._mask, w, 1), _left_pad(mask, w, 1)], dim=0)
        self._pos = torch.cat([self._pos, pos])
        return logits

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append one token to every live row; next-token logits ``(rows, V)``."""
        if self.rows == 0:
            raise RuntimeError("step() with no live rows")
        if len(tokens) != self.rows:
            raise ValueError(f"expected {self.rows} tokens, got {len(tokens)}")
        ids = torch.tensor([[int(t)] for t in tokens], dtype=torch.long, device=self.device)
        ones = torch.ones((self.rows, 1), dtype=self._mask.dtype, device=self.device)
        self._mask = torch.cat([self._mask, ones], dim=1)
        positions = self._pos.unsqueeze(1).to(self.device)
        self._pos = self._pos + 1
        logits, self._cache = self._forward(ids, self._mask, positions, self._cache)
        return logits

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in that order); drop the rest at once and trim padding columns."""
        rows = [int(r) for r in rows]
        if rows == list(range(self.rows)):
            return
        if not rows:
            self._cache = self._mask = self._pos = None
            return
        idx = torch.tensor(rows, dtype=torch.long, device=self.device)
        mask = self._mask.index_select(0, idx)
        used = mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else mask.shape[1]
        for layer in _layers(self._cache):
            layer.keys = layer.keys.index_select(0, idx)[:, :, start:]
            layer.values = layer.values.index_select(0, idx)[:, :, start:]
        self._mask = mask[:, start:].contiguous()
        self._pos = self._pos.index_select(0, idx.cpu())
