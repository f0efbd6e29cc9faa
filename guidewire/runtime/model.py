"""The model side of decoding: a sequence-state protocol and its Hugging Face implementation.

:class:`Model` is one sequence with an explicit KV cache (``prefill``/``step``/``fork``/
``truncate``); :class:`BatchModel` is a batch of sequences that advance in lockstep, one token
per row per step, left-padded at prefill so every row has its own length, attention mask and
positions. Logits are returned as float32 CPU-or-device tensors of width ``vocab_size``.
"""

from __future__ import annotations

import copy
import os
import weakref
from typing import Protocol, Sequence, runtime_checkable

import torch


@runtime_checkable
class Model(Protocol):
    """One sequence's model state (tokens consumed so far and their KV cache)."""

    vocab_size: int

    @property
    def length(self) -> int:
        """Number of tokens in the sequence so far."""

    def prefill(self, tokens: Sequence[int], last_only: bool = False) -> torch.Tensor:
        """Start over with ``tokens``; logits ``(len(tokens), V)`` (``(1, V)`` with ``last_only``)."""

    def step(self, new_tokens: Sequence[int], last_only: bool = False) -> torch.Tensor:
        """Append one or more tokens; logits after each of them, ``(len(new_tokens), V)``."""

    def fork(self) -> "Model":
        """An independent copy of this sequence state (later steps do not affect each other)."""

    def truncate(self, length: int) -> None:
        """Crop the sequence (and its cache) back to its first ``length`` tokens."""


@runtime_checkable
class BatchModel(Protocol):
    """A batch of sequences decoded in lockstep."""

    vocab_size: int

    def prefill(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Start over with one prompt per row (any lengths); next-token logits ``(batch, V)``."""

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append one token to every row; next-token logits ``(batch, V)``."""


def logits_width(module) -> int:
    """Width of a Hugging Face causal LM's logits (its output embedding rows)."""
    emb = module.get_output_embeddings()
    if emb is not None and getattr(emb, "weight", None) is not None:
        return int(emb.weight.shape[0])
    return int(module.config.get_text_config().vocab_size)


def _new_cache(module):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=module.config)
    except TypeError:  # older transformers
        return DynamicCache()


def _full_attention_only(config) -> bool:
    """Whether every layer of the model attends to the whole sequence (no sliding window)."""
    if getattr(config, "sliding_window", None):
        return False
    return all(t == "full_attention" for t in getattr(config, "layer_types", None) or ())


def _static_decoder(module, device: torch.device, static: bool | None):
    """The sequence's :class:`~guidewire.runtime.static_cache.StaticDecoder`, or None (a dynamic
    cache): on CUDA unless ``GUIDEWIRE_CUDA_GRAPHS=0``, or wherever ``static`` is True; never for
    models with sliding-window layers (their static layers keep a host-side position)."""
    if static is None:
        static = device.type == "cuda" and os.environ.get("GUIDEWIRE_CUDA_GRAPHS", "1") != "0"
    if not static or not _full_attention_only(module.config):
        return None
    from .static_cache import acquire, static_cache_tokens

    return acquire(module, static_cache_tokens(module), graph=device.type == "cuda")


class HFModel:
    """:class:`Model` over a Hugging Face causal LM with an explicit ``DynamicCache``.

    Forks share the weights and deep-copy the cache. ``truncate`` crops the cache; where a cache
    layer cannot be cropped (a sliding window already filled) the kept tokens are re-prefilled.
    On a CUDA device the sequence keeps a preallocated cache instead and replays its one-token
    step as a CUDA graph (:mod:`guidewire.runtime.static_cache`; ``static=False`` or
    ``GUIDEWIRE_CUDA_GRAPHS=0`` turns it off, ``static=True`` forces it, eagerly, on any device);
    its forks, and a sequence that outgrows the cache, go on with a dynamic cache.
    """

    def __init__(self, module, *, vocab_size: int | None = None, static: bool | None = None):
        self.module = module
        self.vocab_size = int(vocab_size or logits_width(module))
        self.device = next(module.parameters()).device
        self._static = _static_decoder(module, self.device, static)
        self._cache = _new_cache(module) if self._static is None else None   # made if it is outgrown
        if self._static is not None:   # back to the pool when this sequence is dropped
            from .static_cache import release

            weakref.finalize(self, release, module, self._static)
        self._tokens: list[int] = []
        self.calls = 0

    @property
    def length(self) -> int:
        """Number of tokens in the sequence (= cached positions)."""
        return len(self._tokens)

    @property
    def static_decoder(self):
        """The :class:`~guidewire.runtime.static_cache.StaticDecoder` this sequence decodes with
        (its ``graph``, ``graph_error``, ``replays``), or None on a dynamic cache."""
        return self._static

    @property
    def tokens(self) -> list[int]:
        """A copy of the sequence's token ids."""
        return list(self._tokens)

    def _forward(self, tokens: Sequence[int], last_only: bool) -> torch.Tensor:
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise ValueError("step/prefill needs at least one token")
        static = self._static
        if static is not None:
            if len(self._tokens) + len(tokens) <= static.max_len:
                logits = static.forward(tokens, len(self._tokens), last_only)
                self.calls += 1
                self._tokens.extend(tokens)
                return fit_logits(logits, self.vocab_size)
            self._cache = static.to_dynamic(len(self._tokens))   # outgrown: on with a dynamic cache
            self._static = None
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        with torch.no_grad():
            out = self.module(input_ids=ids, past_key_values=self._cache, use_cache=True,
                              logits_to_keep=1 if last_only else 0)
        self.calls += 1
        self._cache = out.past_key_values
        self._tokens.extend(tokens)
        return fit_logits(out.logits[0].float(), self.vocab_size)

    def prefill(self, tokens: Sequence[int], last_only: bool = False) -> torch.Tensor:
        """Reset the cache and run ``tokens``; logits for every position (or the last)."""
        if self._static is None:
            self._cache = _new_cache(self.module)
        self._tokens = []
        return self._forward(tokens, last_only)

    def step(self, new_tokens: Sequence[int], last_only: bool = False) -> torch.Tensor:
        """Append ``new_tokens``; logits after each (or the last)."""
        return self._forward(new_tokens, last_only)

    def fork(self) -> "HFModel":
        """An independent copy sharing the weights."""
        other = HFModel.__new__(HFModel)
        other.module, other.vocab_size, other.device = self.module, self.vocab_size, self.device
        other._static = None
        other._cache = self.cache_copy()
        other._tokens = list(self._tokens)
        other.calls = 0
        return other

    def cache_copy(self):
        """A ``DynamicCache`` holding a copy of this sequence's positions (from the static cache
        when it decodes on one), for a caller that goes on from here with a cache of its own."""
        if self._static is not None:
            return self._static.to_dynamic(len(self._tokens))
        return copy.deepcopy(self._cache)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens."""
        remove = self.length - int(length)
        if length < 0 or remove < 0:
            raise ValueError(f"cannot truncate a sequence of {self.length} tokens to {length}")
        if remove == 0:
            return
        if self._static is not None:   # positions past the length are never seen (causal mask)
            self._tokens = self._tokens[:length]
            return
        try:
            self._cache.crop(-remove)
            self._tokens = self._tokens[:length]
        except (RuntimeError, ValueError, NotImplementedError):
            kept = self._tokens[:length]
            self._cache = _new_cache(self.module)
            self._tokens = []
            if kept:
                self._forward(kept, last_only=True)


def left_padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask, position_ids)`` of token rows left-padded to one width, so each row
    computes what it would alone (positions count only its own tokens)."""
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("every batch row needs at least one prompt token")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def fit_logits(logits: torch.Tensor, width: int) -> torch.Tensor:
    """Pad (with -inf) or cut logits to ``width`` columns (the vocabulary's padded size)."""
    n = logits.shape[-1]
    if n == width:
        return logits
    if n > width:
        return logits[..., :width]
    pad = logits.new_full(logits.shape[:-1] + (width - n,), float("-inf"))
    return torch.cat([logits, pad], dim=-1)


class HFBatchModel:
    """:class:`BatchModel` over a Hugging Face causal LM: left padding, a 2-D attention mask and
    explicit position ids so each row behaves as if decoded alone."""

    def __init__(self, module, *, vocab_size: int | None = None, pad_id: int = 0):
        self.module = module
        self.vocab_size = int(vocab_size or logits_width(module))
        self.device = next(module.parameters()).device
        self.pad_id = int(pad_id)
        self._cache = None
        self._mask: torch.Tensor | None = None
        self._pos: torch.Tensor | None = None
        self.calls = 0

    @property
    def batch_size(self) -> int:
        """Number of rows (0 before ``prefill``)."""
        return 0 if self._pos is None else int(self._pos.shape[0])

    def _run(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = self.module(input_ids=ids, attention_mask=self._mask, position_ids=positions,
                              past_key_values=self._cache, use_cache=True, logits_to_keep=1)
        self.calls += 1
        self._cache = out.past_key_values
        return fit_logits(out.logits[:, -1].float(), self.vocab_size)

    def prefill(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Left-pad the prompts, run them, return each row's next-token logits."""
        rows = [[int(t) for t in r] for r in rows]
        ids, mask, positions = left_padded(rows, self.pad_id)
        self._cache = _new_cache(self.module)
        self._mask = mask.to(self.device)
        self._pos = torch.tensor([len(r) for r in rows], dtype=torch.long)
        return self._run(ids.to(self.device), positions.to(self.device))

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append one token per row; next-token logits ``(batch, V)``."""
        if self._pos is None:
            raise RuntimeError("step() before prefill()")
        if len(tokens) != self._pos.shape[0]:
            raise ValueError(f"expected {self._pos.shape[0]} tokens, got {len(tokens)}")
        ids = torch.tensor([[int(t)] for t in tokens], dtype=torch.long, device=self.device)
        ones = torch.ones((ids.shape[0], 1), dtype=self._mask.dtype, device=self.device)
        self._mask = torch.cat([self._mask, ones], dim=1)
        positions = self._pos.unsqueeze(1).to(self.device)
        self._pos = self._pos + 1
        return self._run(ids, positions)
