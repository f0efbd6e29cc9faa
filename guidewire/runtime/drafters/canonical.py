"""Canonical token splits of text a drafter proposes: the split the model's tokenizer produces.

A draft that spells the right text in an unusual split is usually rejected by the model, so
text-level drafters (grammar fast-forward, text copying) re-encode their text together with the
last few emitted tokens (the *tail*) and keep the encoding only when it re-produces the tail: then
the boundary between emitted and drafted text is where the tokenizer would put it.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ._common import stop_ids


def complete_utf8(data: bytes) -> bytes:
    """The longest prefix of ``data`` that is valid UTF-8 (an incomplete last character is cut)."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError as exc:
        return data[:exc.start]


def encoder(tokenizer_or_encode) -> Callable[[str], list[int]] | None:
    """An ``encode(str) -> list[int]`` from a HF tokenizer, a callable or ``None``."""
    obj = tokenizer_or_encode
    if obj is None:
        return None
    if hasattr(obj, "encode") and hasattr(obj, "convert_ids_to_tokens"):  # a HF tokenizer
        return lambda text: list(obj.encode(text, add_special_tokens=False))
    if callable(obj):
        return lambda text: [int(t) for t in obj(text)]
    if hasattr(obj, "encode"):
        return lambda text: [int(t) for t in obj.encode(text)]
    raise TypeError(f"expected a tokenizer or an encode(str) -> list[int] callable, got {type(obj).__name__}")


class CanonicalSplitter:
    """Keeps the tail of the token history and splits new text canonically after it.

    Args:
        encode: ``encode(str) -> list[int]`` without special tokens (see :func:`encoder`).
        vocab: the model's :class:`~guidewire.core.Vocab` (token bytes, stop ids).
        tail_tokens: emitted tokens re-encoded with the new text to find the boundary split.
        resync: when even a one-token tail merges with the new text (the canonical split crosses
            the boundary), still split the text after the crossing (the bytes up to the first
            canonical boundary are spelled on their own).
    """

    def __init__(self, encode: Callable[[str], list[int]] | None, vocab, *, tail_tokens: int = 3,
                 resync: bool = True):
        if tail_tokens < 0:
            raise ValueError("tail_tokens must be >= 0")
        self.encode = encode
        self.vocab = vocab
        self.tail_tokens = int(tail_tokens)
        self.resync = bool(resync)
        self.stop = stop_ids(vocab)
        self.tail: list[int] = []

    def push(self, tail: list[int], tokens: Sequence[int]) -> list[int]:
        """``tail`` followed by ``tokens``, cut to the last ``tail_tokens`` (a stop id resets it)."""
        tb, stop = self.vocab.token_bytes, self.stop
        for t in tokens:
            t = int(t)
            if t in stop or t < 0 or t >= len(tb) or not tb[t]:
                tail = []
            else:
                tail.append(t)
        return tail[-self.tail_tokens:] if self.tail_tokens else []

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start over; only the prompt's last few tokens are kept."""
        self.tail = self.push([], list(prompt_ids)[-max(self.tail_tokens, 1) * 4:])

    def extend(self, tokens: Sequence[int]) -> None:
        """Append accepted tokens."""
        self.tail = self.push(self.tail, tokens)

    def spell(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens``."""
        tb = self.vocab.token_bytes
        return b"".join(tb[t] if 0 <= t < len(tb) else b"\0\0\0" for t in tokens)

    def encode_bytes(self, data: bytes) -> list[int] | None:
        """The tokenizer's encoding of ``data``, or ``None`` if it does not spell ``data`` exactly."""
        if self.encode is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        enc = self.encode(text)
        return enc if self.spell(enc) == data else None

    def split(self, data: bytes, tail: Sequence[int] | None = None) -> list[int]:
        """Tokens spelling ``data`` the way the tokenizer would split it after ``tail`` (default:
        the tracked tail); ``[]`` when no canonical split can be found."""
        if not data or self.encode is None:
            return []
        tail = list(self.tail if tail is None else tail)
        for k in range(len(tail), 0, -1):
            head = tail[-k:]
            hb = self.spell(head)
            enc = self.encode_bytes(hb + data)
            if enc is not None and enc[:k] == head:
                return enc[k:]
        if not tail:
            return self.encode_bytes(data) or []
        if not self.resync:
            return []
        hb = self.spell(tail[-1:])
        enc = self.encode_bytes(hb + data)
        if enc is None:
            return []
        tb, full = self.vocab.token_bytes, hb + data
        pos = j = 0
        while j < len(enc) and pos < len(hb):  # first token boundary at or after the tail's end
            pos += len(tb[enc[j]])
            j += 1
        gap = full[len(hb):pos]
        gap_tokens = self.encode_bytes(gap) if gap else []
        return [] if gap_tokens is None else gap_tokens + enc[j:]
