"""Unicode character sets as sorted disjoint codepoint intervals, and their UTF-8 byte paths.

Character classes (``\\d``, ``\\w``, ``\\s``) and IGNORECASE follow Python ``re`` exactly (the
semantics ``jsonschema`` validates ``pattern`` with), computed by running ``re`` itself over the
codepoints once; with the ASCII flag they are ASCII-only.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from functools import lru_cache

import _sre

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


def _runs(rx, text: str) -> Intervals:
    """Intervals of the characters of ``text`` (ascending codepoints) that ``rx`` matches one by one."""
    out = []
    for m in rx.finditer(text):
        a = ord(text[m.start()])
        b = ord(text[m.end() - 1])
        if b - a == m.end() - 1 - m.start():
            out.append((a, b))
        else:  # the run straddles the surrogate gap
            out.extend((ord(ch), ord(ch)) for ch in m.group(0))
    return normalize(out)


@lru_cache(maxsize=None)
def category(name: str, ascii_only: bool) -> Intervals:
    """Intervals of ``\\d``, ``\\w`` or ``\\s`` (name ``digit``, ``word``, ``space``) exactly as
    Python's ``re`` defines them (the validator JSON Schema instances are checked with), found by
    running ``re`` over every codepoint once."""
    pat = {"digit": r"\d+", "word": r"\w+", "space": r"\s+"}[name]
    if ascii_only:
        return _runs(re.compile(pat, re.ASCII), "".join(chr(c) for c in range(128)))
    return _runs(re.compile(pat), _all_chars())


@lru_cache(maxsize=None)
def _case_sensitive() -> tuple[int, ...]:
    """Codepoints whose match can depend on ``re.IGNORECASE``: every cased character, every simple
    lower/upper/case-fold/title image of one, and ``re``'s extra case equivalences. A character
    outside this set matches a class under IGNORECASE iff it matches without it."""
    from re import _casefix

    out = set()
    for c in range(MAX_CP + 1):
        if SURROGATES[0] <= c <= SURROGATES[1]:
            continue
        lo = _sre.unicode_tolower(c)
        ch = chr(c)
        if lo != c or _sre.unicode_iscased(c):
            out.add(c)
            out.add(lo)
            for v in (ch.lower(), ch.upper(), ch.casefold(), ch.title()):
                if len(v) == 1:
                    out.add(ord(v))
    for k, vs in _casefix._EXTRA_CASES.items():
        out.add(k)
        out.update(vs)
    return tuple(sorted(c for c in out if not SURROGATES[0] <= c <= SURROGATES[1]))


def ignorecase_closure(base: Intervals, matches) -> Intervals:
    """The set a class matches under ``re.IGNORECASE``: ``base`` (its case-sensitive set) outside the
    case-sensitive codepoints, and there whatever ``matches(char)`` (the compiled ``re`` class) says."""
    inside = [(c, c) for c in _case_sensitive() if matches(chr(c))]
    return _replace_points(base, _case_sensitive(), inside)


def _replace_points(base: Intervals, points: tuple[int, ...], keep) -> Intervals:
    """``base`` minus ``points``, plus the intervals ``keep`` (a subset of ``points``)."""
    out = []
    i = 0
    for a, b in base:
        lo = bisect_left(points, a, i)
        hi = bisect_right(points, b, lo)
        cur = a
        for p in points[lo:hi]:
            if p > cur:
                out.append((cur, p - 1))
            cur = p + 1
        if cur <= b:
            out.append((cur, b))
        i = hi
    return union(tuple(out), tuple(keep))


def case_fold(iv: Intervals) -> Intervals:
    """Close literal characters under Python ``re``'s IGNORECASE matching: every character that
    ``re`` matches case-insensitively against some member of ``iv``."""
    from re import _compiler, _constants as C, _parser

    if not iv:
        return iv
    state = _parser.State()
    items = [(C.RANGE, (a, b)) if a != b else (C.LITERAL, a) for a, b in iv]
    rx = _compiler.compile(_parser.SubPattern(state, [(C.IN, items)]), re.IGNORECASE | re.UNICODE)
    return ignorecase_closure(iv, lambda ch: rx.fullmatch(ch) is not None)


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
