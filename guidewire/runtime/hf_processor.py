"""A batch-aware ``transformers`` LogitsProcessor that enforces guidewire constraints in ``generate``."""

from __future__ import annotations

from typing import Callable

import torch

from ..core.bitmask import allocate_token_bitmask, ids_to_bitmask
from .errors import ConstraintViolationError, DeadEndError
from .masking import apply_bitmask_

try:  # a real subclass when transformers is importable, so generate() accepts it in any list
    from transformers import LogitsProcessor as _Base
except ImportError:  # pragma: no cover
    _Base = object


class GuidewireLogitsProcessor(_Base):
    """Masks ``model.generate`` scores so every row follows its own constraint.

    ``constraint``: anything with a ``matcher()`` method (a compiled grammar) or a zero-argument
    factory returning a fresh :class:`~guidewire.core.Constraint`. One instance can serve many
    ``generate`` calls: a call whose ``input_ids`` are not the previous call's plus one token
    starts a new generation (fresh matchers, prompt length taken from ``input_ids``). Each row's
    matcher is re-synchronised with the row's generated tokens on every call, so beams that are
    reordered or rows of any batch size are handled. Rows whose constraint has finished (EOS
    consumed) may only produce EOS/pad; a row whose constraint allows nothing raises
    :class:`~guidewire.runtime.errors.DeadEndError`.
    """

    def __init__(self, constraint, vocab=None, *, pad_token_id: int | None = None):
        if hasattr(constraint, "matcher"):
            self._factory: Callable = constraint.matcher
            vocab = vocab if vocab is not None else getattr(constraint, "vocab", None)
        elif callable(constraint):
            self._factory = constraint
        else:
            raise TypeError("constraint must be a compiled grammar or a zero-argument factory")
        if vocab is None:
            raise ValueError("pass vocab= (the Vocab the constraint was compiled for)")
        self.vocab = vocab
        finish = sorted(vocab.eos_ids | ({int(pad_token_id)} if pad_token_id is not None else set()))
        self._finished_row = ids_to_bitmask(finish, vocab.vocab_size)
        self._prompt_len: int | None = None
        self._last_len: int | None = None
        self._rows: list = []
        self._seen: list[list[int]] = []

    def reset(self) -> None:
        """Forget the current generation (the next call starts a new one)."""
        self._prompt_len = self._last_len = None
        self._rows, self._seen = [], []

    def _sync(self, r: int, generated: list[int]) -> None:
        seen = self._seen[r]
        if len(generated) == len(seen) + 1 and generated[:-1] == seen:
            todo = generated[-1:]
        else:  # new row, reordered beam or anything unexpected: replay from scratch
            self._rows[r] = self._factory()
            self._seen[r] = seen = []
            todo = generated
        m = self._rows[r]
        for t in todo:
            if m.is_terminated():
                break  # tokens after EOS are padding
            if not m.advance(int(t)):
                raise ConstraintViolationError(
                    f"row {r}: token {int(t)} is not allowed by the constraint "
                    "(another processor or a forced token overrode the mask)")
        seen.extend(todo)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Mask ``scores`` (batch, V) in place for the tokens after ``input_ids``."""
        batch, length = input_ids.shape
        if (self._prompt_len is None or self._last_len is None or length != self._last_len + 1
                or batch != len(self._rows)):
            self._prompt_len = length
            self._rows = [self._factory() for _ in range(batch)]
            self._seen = [[] for _ in range(batch)]
        self._last_len = length
        ids = input_ids[:, self._prompt_len:].tolist() if length > self._prompt_len else [[]] * batch
        bitmask = allocate_token_bitmask(batch, self.vocab.vocab_size)
        for r in range(batch):
            if ids[r] or self._seen[r]:
                self._sync(r, ids[r])
            m = self._rows[r]
            if m.is_terminated():
                bitmask[r] = self._finished_row
            else:
                m.fill_bitmask(bitmask, r)
                if not bitmask[r].any():
                    err = getattr(m, "error", None)
                    raise DeadEndError(f"row {r}: the constraint allows no token" + (f": {err}" if err else ""))
        return apply_bitmask_(scores, torch.from_numpy(bitmask))
