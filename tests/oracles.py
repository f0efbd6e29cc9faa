"""Independent slow oracles for exactness tests.

Regex viability uses the ``regex`` package's ``fullmatch(..., partial=True)`` on decoded
text; a trailing incomplete UTF-8 sequence is viable iff some character it can start is.
CFG viability: see ``tests/cfg_oracle.py`` (a character-level Earley recogniser over random
grammars, written without the engine).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import regex


def split_utf8(data: bytes) -> tuple[str, tuple[int, int] | None] | None:
    """Decode ``data``; returns (text, codepoint range of the trailing partial char) or None if invalid."""
    for cut in range(0, min(4, len(data)) + 1):
        head, tail = data[: len(data) - cut], data[len(data) - cut:]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not tail:
            return text, None
        rng = partial_range(tail)
        if rng is None:
            return None
        return text, rng
    return None


def partial_range(tail: bytes) -> tuple[int, int] | None:
    """Codepoints whose UTF-8 encoding starts with ``tail`` (an incomplete sequence)."""
    lead = tail[0]
    if 0xC2 <= lead <= 0xDF:
        n = 2
    elif 0xE0 <= lead <= 0xEF:
        n = 3
    elif 0xF0 <= lead <= 0xF4:
        n = 4
    else:
        return None
    if len(tail) >= n or any(not 0x80 <= b <= 0xBF for b in tail[1:]):
        return None
    lo = tail + b"\x80" * (n - len(tail))
    hi = tail + b"\xbf" * (n - len(tail))
    try:
        a = lo.decode("utf-8")
    except UnicodeDecodeError:
        a = None
    try:
        b = hi.decode("utf-8")
    except UnicodeDecodeError:
        b = None
    # invalid ends (overlongs, surrogates, > U+10FFFF): scan the valid completions
    lo_cp = ord(a) if a else None
    hi_cp = ord(b) if b else None
    if lo_cp is None or hi_cp is None:
        valid = [c for c in _range_candidates(tail, n)]
        if not valid:
            return None
        return min(valid), max(valid)
    return lo_cp, hi_cp


def _range_candidates(tail: bytes, n: int):
    import itertools

    rest = n - len(tail)
    for combo in itertools.product(range(0x80, 0xC0), repeat=rest):
        try:
            yield ord((tail + bytes(combo)).decode("utf-8"))
        except UnicodeDecodeError:
            continue


class RegexOracle:
    """Slow exact reference for ``compile_regex`` masks."""

    def __init__(self, pattern: str, flags: int = 0):
        self.rx = regex.compile(pattern, flags)

    def viable_text(self, text: str) -> bool:
        """Whether ``text`` is a prefix of some full match."""
        return self.rx.fullmatch(text, partial=True) is not None

    def complete_text(self, text: str) -> bool:
        """Whether ``text`` is a full match."""
        return self.rx.fullmatch(text) is not None

    def viable(self, data: bytes) -> bool:
        """Whether ``data`` (UTF-8, maybe ending mid-character) is a prefix of a full match."""
        split = split_utf8(data)
        if split is None:
            return False
        text, rng = split
        if not self.viable_text(text):
            return False
        if rng is None:
            return True
        for c in range(rng[0], rng[1] + 1):
            if 0xD800 <= c <= 0xDFFF:
                continue
            if self.viable_text(text + chr(c)):
                return True
        return False

    def complete(self, data: bytes) -> bool:
        """Whether ``data`` decodes to a full match."""
        try:
            return self.complete_text(data.decode("utf-8"))
        except UnicodeDecodeError:
            return False


def reference_mask(vocab, prefix: bytes, viable) -> np.ndarray:
    """Boolean allowed-array over the vocabulary by asking ``viable(prefix + token)`` per token."""
    allowed = np.zeros(vocab.vocab_size, dtype=bool)
    cache: dict[bytes, bool] = {}
    for tid in vocab.normal_ids.tolist():
        data = prefix + vocab.token_bytes[tid]
        v = cache.get(data)
        if v is None:
            v = cache[data] = viable(data)
        allowed[tid] = v
    return allowed
