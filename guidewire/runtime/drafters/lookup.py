"""Prompt-lookup decoding: copy what followed the latest earlier occurrence of the suffix n-gram.

The history's n-grams (``min_ngram..max_ngram`` tokens) are indexed incrementally: when token
``i`` is appended, every n-gram ending at ``i - 1`` maps to ``i``, the position of the token that
followed it (later occurrences overwrite earlier ones). The suffix n-gram of the history itself is
therefore not indexed until something follows it, so a lookup finds the most recent *earlier*
occurrence. Per call the work is ``O(max_ngram**2 + draft length)``, independent of the history.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..drafting import Draft
from ._common import DrafterBase, copy_ahead, cut_at_stop, stop_ids, validate_cut


class PromptLookupDrafter(DrafterBase):
    """Drafts by n-gram lookup in the prompt and output so far.

    Args:
        max_ngram / min_ngram: suffix n-gram sizes tried, longest first.
        max_draft: most tokens per draft.
        vocab / eos_ids: ids never proposed (EOS and special ids of ``vocab``, plus ``eos_ids``);
            a draft stops before the first of them.
    """

    name = "lookup"
    supports_prefix = True

    def __init__(self, max_ngram: int = 4, min_ngram: int = 1, max_draft: int = 8, *, vocab=None,
                 eos_ids: Iterable[int] | None = None):
        super().__init__()
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        if max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {max_draft}")
        self.max_ngram, self.min_ngram, self.max_draft = int(max_ngram), int(min_ngram), int(max_draft)
        self.stop = stop_ids(vocab, eos_ids)
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}

    @property
    def history(self) -> list[int]:
        """A copy of the token history."""
        return list(self._tokens)

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start over with ``prompt_ids``."""
        self._tokens = []
        self._index = {}
        self.extend(prompt_ids)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append tokens, indexing the n-grams they complete."""
        h, index = self._tokens, self._index
        lo, hi = self.min_ngram, self.max_ngram
        for t in tokens:
            i = len(h)
            for n in range(lo, min(hi, i) + 1):
                index[tuple(h[i - n:i])] = i
            h.append(int(t))

    def find(self, prefix: Sequence[int] = ()) -> tuple[int, int] | None:
        """``(n, start)`` for the longest suffix n-gram of history + ``prefix`` that occurred
        earlier, ``start`` being the position that followed its latest earlier occurrence; None if
        no suffix n-gram of at least ``min_ngram`` tokens occurred before."""
        h = self._tokens
        size = len(h)
        prefix = [int(t) for t in prefix]
        end = size + len(prefix)

        def get(i: int) -> int:
            return h[i] if i < size else prefix[i - size]

        lo, hi = self.min_ngram, self.max_ngram
        local: dict[tuple[int, ...], int] = {}
        for i in range(size, end):  # n-grams completed inside the hypothetical prefix
            for n in range(lo, min(hi, i) + 1):
                local[tuple(get(j) for j in range(i - n, i))] = i
        for n in range(min(hi, end - 1), lo - 1, -1):
            key = tuple(get(j) for j in range(end - n, end))
            start = local.get(key)
            if start is None:
                start = self._index.get(key)
            if start is not None:
                return n, start
        return None

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """Copy the tokens after the latest earlier occurrence of the longest suffix n-gram."""
        self.calls += 1
        k = min(int(max_tokens), self.max_draft)
        found = self.find(prefix) if k > 0 else None
        if found is None:
            return self._emit([])
        h, size = self._tokens, len(self._tokens)

        def get(i: int) -> int:
            return h[i] if i < size else int(prefix[i - size])

        tokens = copy_ahead(get, found[1], size + len(prefix), k)
        tokens = validate_cut(constraint, cut_at_stop(tokens, self.stop), prefix)
        return self._emit(tokens)
