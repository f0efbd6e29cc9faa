"""Token healing for prefix-only completion prompts.

A cursor usually sits inside what the model would write as one token (``"    "`` before the
indented statement, ``"os.pa"`` before ``"th"``): a prompt that ends with that partial token puts
the model where it was rarely trained. Healing removes the prompt's last token and makes the
completion start by re-spelling its bytes ``R``: a token is allowed while ``R`` is not yet
consumed iff its bytes start with what is left of ``R``, or are a non-empty prefix of it (then
the rest is healed by the next tokens). Once ``R`` is consumed everything is allowed. The masks
are computed with numpy over the vocabulary's byte matrix (once per remaining suffix of ``R``,
at most ``len(R)`` of them), not per token in Python.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.bitmask import fill_row, ids_to_bitmask
from ..monitors.base import validate_on_fork


def healable_tail(vocab, prompt_ids: Sequence[int], prefix: str) -> bytes:
    """The bytes of the prompt's last token when healing applies (the prefix ends with them, they
    are whole UTF-8 and not all of the prefix), else ``b""``."""
    if len(prompt_ids) < 2:
        return b""
    last = int(prompt_ids[-1])
    if last in vocab.special_ids or last >= len(vocab.token_bytes):
        return b""
    tail = vocab.token_bytes[last]
    data = prefix.encode("utf-8")
    if not tail or len(tail) >= len(data) or not data.endswith(tail):
        return b""
    try:
        tail.decode("utf-8")
        data[:len(data) - len(tail)].decode("utf-8")
    except UnicodeDecodeError:
        return b""
    return tail


class TokenHealing:
    """A ``Constraint`` that makes the output start with ``tail`` (bytes), then allows anything."""

    def __init__(self, vocab, tail: bytes, *, _masks=None):
        self.vocab = vocab
        self.tail = bytes(tail)
        self._done: list[int] = []          # bytes of the tail consumed after each advanced token
        self._masks: dict[int, np.ndarray] = _masks if _masks is not None else {}
        self._all = np.full(ids_to_bitmask([], vocab.vocab_size).shape, -1, dtype=np.int32)

    @property
    def consumed(self) -> int:
        """How many bytes of the tail are re-spelled so far."""
        return self._done[-1] if self._done else 0

    def _mask_for(self, k: int) -> np.ndarray:
        m = self._masks.get(k)
        if m is None:
            rest = np.frombuffer(self.tail[k:], dtype=np.uint8)
            ids, lens, mat = self.vocab.token_matrix()
            r = min(len(rest), mat.shape[1])
            eq = mat[:, :r] == rest[:r]
            beyond = np.arange(r)[None, :] >= lens[:, None]        # past the token's end: no constraint
            ok = np.all(eq | beyond, axis=1) & (lens > 0)
            m = self._masks[k] = ids_to_bitmask(ids[ok], self.vocab.vocab_size)
        return m

    def current_mask(self) -> np.ndarray:
        """The current bitmask row (1-D int32)."""
        k = self.consumed
        return self._all if k >= len(self.tail) else self._mask_for(k)

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed tokens into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask())

    def advance(self, token_id: int) -> bool:
        """Consume a token; False (no change) if it does not continue the tail."""
        k = self.consumed
        t = int(token_id)
        if k >= len(self.tail):
            self._done.append(k)
            return True
        if t in self.vocab.eos_ids or t >= len(self.vocab.token_bytes):
            return False
        b = self.vocab.token_bytes[t]
        rest = self.tail[k:]
        if not b or not (b.startswith(rest) or rest.startswith(b)):
            return False
        self._done.append(min(len(self.tail), k + len(b)))
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix of ``tokens``; no state change."""
        return validate_on_fork(self, tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens."""
        if n < 0 or n > len(self._done):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._done)} consumed")
        if n:
            del self._done[-n:]

    def is_accepting(self) -> bool:
        """Whether the tail is re-spelled (then the output may end)."""
        return self.consumed >= len(self.tail)

    def is_terminated(self) -> bool:
        """Never: after the tail anything may follow."""
        return False

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """None: healing leaves the tokenization of the tail to the model."""
        return []

    def fork(self) -> "TokenHealing":
        """An independent copy (the mask cache is shared)."""
        h = TokenHealing(self.vocab, self.tail, _masks=self._masks)
        h._done = list(self._done)
        return h
