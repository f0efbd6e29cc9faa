"""Text-level copying: continue the output with the text that followed the same text earlier.

Prompt lookup at the token level misses copies whose tokenization differs between the source and
the output (``" Mateo"`` in a paragraph vs ``"Mateo`` inside a JSON string). This drafter matches
*bytes*: it finds the longest suffix of the history text (at least ``min_match`` bytes, at most
``max_match``) that occurred earlier -- the latest occurrence, by binary search on the match
length (a suffix that occurred earlier implies every shorter one did) -- takes the ``max_bytes``
that followed it (matches inside the output itself are tried first, from 2 bytes, since an
output's layout and separators repeat), and splits them canonically after the emitted tail
(:class:`~.canonical.CanonicalSplitter`), withholding the last ``backoff`` tokens (the boundary
token may merge with what comes next). When no suffix of ``min_match`` bytes recurs, a value just
being started (the partial word after the last quote or space, ``"M``) is matched at the latest
earlier word start (``Mateo`` in the paragraph). The draft is cut at the first token the constraint rejects.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..drafting import Draft
from ._common import DrafterBase, cut_at_stop, stop_ids, validate_cut
from .canonical import CanonicalSplitter, complete_utf8, encoder

SEPARATOR = b"\x00"  # stands for special tokens: no match crosses one


class TextCopyDrafter(DrafterBase):
    """Copies text that followed the longest earlier occurrence of the history's byte suffix.

    Args:
        tokenizer_or_encode: a Hugging Face tokenizer or an ``encode(str) -> list[int]`` callable.
        vocab: the model's :class:`~guidewire.core.Vocab`.
        min_match, max_match: bounds on the matched suffix length in bytes.
        max_bytes: bytes copied after the match.
        backoff: tokens withheld at the end of a draft.
    """

    name = "copy"
    supports_prefix = True
    deterministic = True

    def __init__(self, tokenizer_or_encode, vocab, *, min_match: int = 3, max_match: int = 64,
                 max_bytes: int = 96, backoff: int = 1):
        super().__init__()
        if not 1 <= min_match <= max_match:
            raise ValueError("need 1 <= min_match <= max_match")
        self.vocab = vocab
        self.encode = encoder(tokenizer_or_encode)
        if self.encode is None:
            raise ValueError("the copy drafter needs a tokenizer")
        self.splitter = CanonicalSplitter(self.encode, vocab)
        self.min_match, self.max_match = int(min_match), int(max_match)
        self.max_bytes, self.backoff = int(max_bytes), int(backoff)
        self.stop = stop_ids(vocab)
        self.text = bytearray()
        self.prompt_bytes = 0

    def _spell(self, tokens: Sequence[int]) -> bytes:
        tb, stop = self.vocab.token_bytes, self.stop
        return b"".join(SEPARATOR if (t in stop or not 0 <= t < len(tb) or not tb[t]) else tb[t]
                        for t in (int(x) for x in tokens))

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start over with the prompt's text."""
        self.text = bytearray(self._spell(prompt_ids))
        self.prompt_bytes = len(self.text)
        self.splitter.begin(prompt_ids)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append accepted tokens' text."""
        self.text += self._spell(tokens)
        self.splitter.extend(tokens)

    def match(self, text: bytes, start: int = 0, min_match: int | None = None) -> tuple[int, int]:
        """``(length, end)``: the longest suffix of ``text`` (within the bounds) that also ends at
        an earlier position ``end`` (the latest such) at or after ``start``; ``(0, -1)`` if none."""
        n = len(text)
        lo, hi = self.min_match if min_match is None else min_match, min(self.max_match, n - 1 - start)
        best = (0, -1)
        while lo <= hi:
            mid = (lo + hi) // 2
            suffix = text[n - mid:]
            if SEPARATOR in suffix:
                hi = mid - 1
                continue
            pos = text.rfind(suffix, start, n - 1)
            if pos < 0:
                hi = mid - 1
            else:
                best = (mid, pos + mid)
                lo = mid + 1
        return best

    def word_match(self, text: bytes) -> int:
        """Fallback for a short suffix: the partial word after the last quote or space (a value
        being started, e.g. ``"M``) matched at the latest earlier word start; its end or -1."""
        cut = max(text.rfind(b'"'), text.rfind(b" "), text.rfind(SEPARATOR))
        word = text[cut + 1:]
        if not 1 <= len(word) < self.min_match or cut < 0:
            return -1
        hit = -1
        for m in re.finditer(rb"(?<![0-9A-Za-z_\x80-\xff])" + re.escape(word), text, 0):
            if m.end() < len(text):
                hit = m.end()
        return hit

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """The canonical tokens of the copied text, cut where the constraint rejects."""
        self.calls += 1
        if max_tokens <= 0:
            return self._emit([])
        text = bytes(self.text) + (self._spell(prefix) if prefix else b"")
        # the output's own text first (its layout and separators repeat), then the whole history
        length, end = self.match(text, self.prompt_bytes, min_match=2)
        if not length:
            length, end = self.match(text)
        if not length:
            end = self.word_match(text)
            if end < 0:
                return self._emit([])
        follow = text[end:end + self.max_bytes].split(SEPARATOR, 1)[0]
        follow = complete_utf8(follow)
        tail = self.splitter.push(list(self.splitter.tail), prefix) if prefix else None
        tokens = self.splitter.split(follow, tail)
        if self.backoff:
            tokens = tokens[:-self.backoff]
        tokens = cut_at_stop(tokens[:max_tokens], self.stop)
        tokens = validate_cut(constraint, tokens, prefix) if constraint is not None else tokens
        return self._emit(tokens)
