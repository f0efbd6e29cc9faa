"""Incremental detokenisation: token ids -> text deltas that never split a UTF-8 character."""

from __future__ import annotations

import codecs
from typing import Iterable


class TextDeltaDecoder:
    """Turns token ids into text deltas over a vocabulary's raw token bytes.

    Bytes of a multi-byte character split across tokens are held back until the character is
    complete; invalid byte sequences become U+FFFD. ``flush()`` releases a trailing partial
    character (as U+FFFD) at the end of generation.
    """

    def __init__(self, vocab):
        self._bytes = vocab.token_bytes
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_ids: Iterable[int]) -> str:
        """Text completed by these tokens (possibly empty)."""
        tb = self._bytes
        n = len(tb)
        data = b"".join(tb[t] for t in token_ids if 0 <= t < n)
        return self._dec.decode(data) if data else ""

    def flush(self) -> str:
        """Whatever is still buffered, decoded with replacement characters."""
        return self._dec.decode(b"", final=True)


def decode_text(vocab, token_ids: Iterable[int]) -> str:
    """The text of ``token_ids`` (raw token bytes decoded as UTF-8 with replacement)."""
    return vocab.decode(list(token_ids)).decode("utf-8", errors="replace")


def held_stop_prefix(text: str, stops) -> int:
    """Length of the longest tail of ``text`` that is a proper prefix of one of ``stops``: the text
    a stream must hold back because a later delta could complete a stop string there."""
    keep = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), keep, -1):
            if text.endswith(s[:k]):
                keep = k
                break
    return keep

