"""A tiny byte-level vocabulary and a fake model implementing the runtime's Model/BatchModel protocols.

The fake model's logits are a pure function of the whole token prefix (a seeded random vector per
prefix, plus an optional bias), so prefill/step/fork/truncate and batch/single decoding can be
compared exactly, and decoding tests need no real model.
"""

from __future__ import annotations

import zlib

import torch

from guidewire.core import Vocab

EOS = 0
MULTI = [b"hello", b" world", b"ab", b"abc", b"\xc3\xa9", b"\xe6\x97", b"\xa5", b"{\"", b"\":"]


def tiny_vocab(pad_to: int = 300) -> Vocab:
    """EOS (id 0), the 256 single bytes (ids 1..256), a few multi-byte tokens, padded to ``pad_to``."""
    toks = [b""] + [bytes([b]) for b in range(256)] + MULTI
    return Vocab(tuple(toks), frozenset({EOS}), frozenset({EOS}), pad_to, "tiny")


def byte_id(b: bytes) -> int:
    """Id of a single-byte token of :func:`tiny_vocab`."""
    return b[0] + 1


class FakeModel:
    """Implements ``guidewire.runtime.Model``; logits depend on the whole prefix."""

    def __init__(self, vocab_size: int, bias: torch.Tensor | None = None, scale: float = 3.0):
        self.vocab_size = vocab_size
        self.bias = bias
        self.scale = scale
        self.tokens: list[int] = []
        self.calls = 0
        self.step_sizes: list[int] = []

    def logits_for(self, prefix) -> torch.Tensor:
        """The logits after ``prefix`` (a pure function)."""
        seed = zlib.crc32(",".join(map(str, prefix)).encode())
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.vocab_size, generator=g) * self.scale
        return x + self.bias if self.bias is not None else x

    @property
    def length(self) -> int:
        """Number of tokens so far."""
        return len(self.tokens)

    def _run(self, new, last_only):
        self.calls += 1
        self.step_sizes.append(len(new))
        rows = []
        for t in new:
            self.tokens.append(int(t))
            rows.append(self.logits_for(self.tokens))
        out = torch.stack(rows)
        return out[-1:] if last_only else out

    def prefill(self, tokens, last_only=False):
        """Start over with ``tokens``."""
        self.tokens = []
        return self._run(tokens, last_only)

    def step(self, new_tokens, last_only=False):
        """Append tokens."""
        return self._run(new_tokens, last_only)

    def fork(self):
        """Independent copy."""
        m = FakeModel(self.vocab_size, self.bias, self.scale)
        m.tokens = list(self.tokens)
        return m

    def truncate(self, length):
        """Keep the first ``length`` tokens."""
        del self.tokens[length:]


class FakeBatchModel:
    """Implements ``guidewire.runtime.BatchModel`` with per-row :class:`FakeModel` logits."""

    def __init__(self, vocab_size: int, bias: torch.Tensor | None = None, scale: float = 3.0):
        self.vocab_size = vocab_size
        self.inner = FakeModel(vocab_size, bias, scale)
        self.rows: list[list[int]] = []
        self.calls = 0

    def prefill(self, rows):
        """One prompt per row."""
        self.calls += 1
        self.rows = [list(r) for r in rows]
        return torch.stack([self.inner.logits_for(r) for r in self.rows])

    def step(self, tokens):
        """One token per row."""
        self.calls += 1
        for r, t in zip(self.rows, tokens):
            r.append(int(t))
        return torch.stack([self.inner.logits_for(r) for r in self.rows])
