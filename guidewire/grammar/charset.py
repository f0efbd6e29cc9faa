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


def is_normal(iv) -> bool:
    """Whether ``iv`` is as :func:`normalize` leaves it: sorted, disjoint, not adjacent, within the
    code points and clear of the surrogates."""
    prev = -2
    for a, b in iv:
        if a <= prev + 1 or b < a or (a <= SURROGATES[1] and b >= SURROGATES[0]):
            return False
        prev = b
    return prev <= MAX_CP


def intersect(x: Intervals, y: Intervals) -> Intervals:
    """The code points in both ``x`` and ``y``: one merge pass where both are normal
    (:func:`is_normal`; the result then is too), else :func:`intersect_reference`."""
    if not (is_normal(x) and is_normal(y)):
        return intersect_reference(x, y)
    out = []
    i = j = 0
    nx, ny = len(x), len(y)
    while i < nx and j < ny:
        a, b = x[i]
        c, d = y[j]
        lo = a if a > c else c
        hi = b if b < d else d
        if lo <= hi:
            out.append((lo, hi))
        if b < d:
            i += 1
        else:
            j += 1
    return tuple(out)


def intersect_reference(x, y) -> Intervals:
    """:func:`intersect` for any interval lists: every pair, then :func:`normalize` (the reference)."""
    out = []
    for a, b in x:
        for c, d in y:
            lo, hi = max(a, c), min(b, d)
            if lo <= hi:
                out.append((lo, hi))
    return normalize(out)


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
    """Every Unicode scalar value, in order (about 4.4 MB; built once)."""
    return "".join(map(chr, range(SURROGATES[0]))) + "".join(map(chr, range(SURROGATES[1] + 1, MAX_CP + 1)))


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
    # planes 2-16 hold no cased character (ideographs, tags, private use); the test
    # test_character_classes_are_pythons_re_on_every_codepoint checks every codepoint against re
    for at in range(0, 0x20000, 256):
        if SURROGATES[0] <= at <= SURROGATES[1]:
            continue
        block = "".join(map(chr, range(at, at + 256)))
        if block.lower() == block and block.upper() == block and block.casefold() == block:
            continue  # no cased character here (checked at C speed)
        for ch in block:
            c = ord(ch)
            lo = _sre.unicode_tolower(c)
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


@lru_cache(maxsize=4096)  # mostly single letters of case-insensitive literals: a few hundred KB at most
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


_LEN_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CP))


#: an acyclic byte automaton to copy between two states: ``nodes[i]`` lists edges ``(lo, hi, child)``
#: reading one byte in ``lo..hi``; ``child == -1`` is the target, node 0 is the source itself
Template = tuple[tuple[tuple[int, int, int], ...], ...]


def digit_dag(parts, radix: int, digit_bytes, separators=None) -> Template:
    """The minimal acyclic automaton spelling numbers as fixed-width digit strings.

    ``parts`` lists ``(top, width, intervals)``: numbers in ``intervals`` (within ``[0, radix**width)``)
    are spelled by the byte ranges ``top(d)`` for their leading digit ``d``, then ``width - 1``
    digits through ``digit_bytes(lo, hi) -> [(byte_lo, byte_hi)]``. Nodes with the same remaining
    digit language are shared, so a large class costs a few states per digit position rather than
    one path per interval. ``separators`` maps a remaining width to bytes read before those digits.
    """
    nodes: list = [None]
    memo: dict = {}

    def groups(sub, size):
        out: dict = {}
        for a, b in sub:
            for d in range(a // size, b // size + 1):
                out.setdefault(d, []).append((max(a, d * size) - d * size, min(b, d * size + size - 1) - d * size))
        return out

    def merged(pairs):
        edges = []
        for d, child in sorted(pairs):
            if edges and edges[-1][1] == d - 1 and edges[-1][2] == child:
                edges[-1][1] = d
            else:
                edges.append([d, d, child])
        return edges

    def build(sub, k):
        if k == 0:
            return -1
        key = (sub, k)
        hit = memo.get(key)
        if hit is not None:
            return hit
        size = radix ** (k - 1)
        pairs = [(d, build(tuple(part), k - 1)) for d, part in groups(sub, size).items()]
        idx = len(nodes)
        nodes.append(tuple((x, y, c) for lo, hi, c in merged(pairs) for x, y in digit_bytes(lo, hi)))
        if separators and k in separators:  # bytes to read before these digits
            for byte in reversed(separators[k]):
                nodes.append(((byte, byte, idx),))
                idx = len(nodes) - 1
        memo[key] = idx
        return idx

    root = []
    try:
        for top, width, iv in parts:
            size = radix ** (width - 1)
            pairs = [(d, build(tuple(part), width - 1)) for d, part in groups(iv, size).items()]
            root += [(x, y, c) for lo, hi, c in merged(pairs) for x, y in top(lo, hi)]
    finally:
        build = None  # noqa: F841 -- the recursive closure refers to itself: break that cycle (GC-free)
    nodes[0] = tuple(root)
    return tuple(nodes)


_UTF8_LEADS = {2: 0xC0, 3: 0xE0, 4: 0xF0}


def utf8_template(iv: Intervals) -> Template:
    """The UTF-8 encodings of ``iv`` as a minimal acyclic byte automaton (see :func:`digit_dag`)."""
    parts = []
    ascii_part = [(a, min(b, 0x7F)) for a, b in iv if a <= 0x7F]
    for n in (2, 3, 4):
        lo, hi = _LEN_BOUNDS[n - 1]
        sub = tuple((max(a, lo), min(b, hi)) for a, b in iv if a <= hi and b >= lo)
        if sub:
            lead = _UTF8_LEADS[n]
            parts.append((lambda x, y, lead=lead: [(lead + x, lead + y)], n, sub))
    nodes = digit_dag(parts, 64, lambda x, y: [(0x80 + x, 0x80 + y)])
    root = tuple((a, b, -1) for a, b in ascii_part) + nodes[0]
    return (root,) + nodes[1:]
