"""Unicode character sets as sorted disjoint codepoint intervals, and their UTF-8 byte paths.

Character classes (``\\d``, ``\\w``, ``\\s``) follow the ``regex`` package's Unicode
definitions, computed once over all codepoints; with the ASCII flag they are ASCII-only.
"""

from __future__ import annotations

from functools import lru_cache

MAX_CP = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Intervals = tuple[tuple[int, int], ...]


def normalize(ranges) -> Intervals:
    """Sort and merge intervals; drop UTF-16 surrogates (not encodable in UTF-8)."""
    rs = sorted((max(0, a), min(MAX_CP, b)) for a, b in ranges if a <= b)
    out: list[list[int]] = []
    for a, b in rs:
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    res = []
    for a, b in out:  # cut surrogates
        if b < SURROGATES[0] or a > SURROGATES[1]:
            res.append((a, b))
        else:
            if a < SURROGATES[0]:
                res.append((a, SURROGATES[0] - 1))
            if b > SURROGATES[1]:
                res.append((SURROGATES[1] + 1, b))
    return tuple(res)


def complement(iv: Intervals) -> Intervals:
    """All Unicode scalar values not in ``iv``."""
    out = []
    prev = 0
    for a, b in iv:
        if a > prev:
            out.append((prev, a - 1))
        prev = b + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return normalize(out)


def union(*ivs: Intervals) -> Intervals:
    """Union of interval sets."""
    return normalize([r for iv in ivs for r in iv])


@lru_cache(maxsize=None)
def _all_chars() -> str:
    return "".join(chr(c) for c in range(MAX_CP + 1) if not SURROGATES[0] <= c <= SURROGATES[1])


@lru_cache(maxsize=None)
def category(name: str, ascii_only: bool) -> Intervals:
    """Intervals of ``\\d``, ``\\w`` or ``\\s`` (name ``digit``, ``word``, ``space``)."""
    import regex

    pat = {"digit": r"\d+", "word": r"\w+", "space": r"\s+"}[name]
    if ascii_only:
        text = "".join(chr(c) for c in range(128))
        return normalize((m.start(), m.end() - 1) for m in regex.finditer(pat, text, flags=regex.ASCII))
    text = _all_chars()
    out = []
    for m in regex.finditer(pat, text):
        a = ord(text[m.start()])
        b = ord(text[m.end() - 1])
        if b - a == m.end() - 1 - m.start():
            out.append((a, b))
        else:  # the run straddles the surrogate gap
            for ch in m.group(0):
                out.append((ord(ch), ord(ch)))
    return normalize(out)


def case_fold(iv: Intervals, limit: int = 200_000) -> Intervals:
    """Close a set under simple case mapping (lower/upper/casefold of single characters)."""
    extra = []
    total = sum(b - a + 1 for a, b in iv)
    if total > limit:  # huge classes: cased letters are already mostly inside
        return iv
    for a, b in iv:
        for c in range(a, b + 1):
            ch = chr(c)
            for v in (ch.lower(), ch.upper(), ch.casefold(), ch.title()):
                if len(v) == 1 and v != ch:
                    extra.append((ord(v), ord(v)))
    return union(iv, tuple(extra)) if extra else iv


def _encode(c: int) -> bytes:
    return chr(c).encode("utf-8")


_LEN_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CP))


def utf8_sequences(iv: Intervals) -> list[list[tuple[int, int]]]:
    """Split codepoint intervals into sequences of byte ranges that encode exactly them."""
    out: list[list[tuple[int, int]]] = []

    def split(a: int, b: int, n: int) -> None:
        for i in range(1, n):
            m = (1 << (6 * i)) - 1
            if (a & ~m) != (b & ~m):
                if a & m:
                    split(a, a | m, n)
                    split((a | m) + 1, b, n)
                    return
                if (b & m) != m:
                    split(a, (b & ~m) - 1, n)
                    split(b & ~m, b, n)
                    return
        ea, eb = _encode(a), _encode(b)
        out.append(list(zip(ea, eb)))

    for a, b in iv:
        for n, (lo, hi) in enumerate(_LEN_BOUNDS, start=1):
            x, y = max(a, lo), min(b, hi)
            if x <= y:
                split(x, y, n)
    return out
