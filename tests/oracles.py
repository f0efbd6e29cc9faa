"""Independent slow oracles for exactness tests.

Regex viability uses the ``regex`` package's ``fullmatch(..., partial=True)`` on decoded
text; a trailing incomplete UTF-8 sequence is viable iff some character it can start is.
``regex`` only supplies the structure and the partial matching: every character node (``\\w``,
``[^a-z]``, a literal under IGNORECASE...) is first replaced by the explicit set of codepoints
that Python ``re`` itself matches with it, found by running ``re`` over every codepoint, because
``re`` (what ``jsonschema`` uses) and ``regex`` disagree on thousands of codepoints.
CFG viability: see ``tests/cfg_oracle.py`` (a character-level Earley recogniser over random
grammars, written without the engine).
"""

from __future__ import annotations

from functools import lru_cache

import re
from re import _compiler
from re import _constants as C
from re import _parser

import numpy as np
import regex

_CHAR_OPS = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY)
_AT = {C.AT_BEGINNING: "^", C.AT_END: "$", C.AT_BEGINNING_STRING: r"\A", C.AT_END_STRING: r"\Z",
       C.AT_BOUNDARY: r"\b", C.AT_NON_BOUNDARY: r"\B"}


@lru_cache(maxsize=None)
def _every_char() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


_CLASSES: dict = {}  # (op, repr(av), flags) -> class text; test-process memo


def _re_class(op, av, flags: int) -> str:
    """A ``regex`` class listing every codepoint Python ``re`` matches with the node ``(op, av)``."""
    key = (op, repr(av), flags & (re.IGNORECASE | re.DOTALL | re.ASCII))
    if key not in _CLASSES:
        _CLASSES[key] = _brute_class(op, av, flags)
    return _CLASSES[key]


def _brute_class(op, av, flags: int) -> str:
    mode = flags & (re.IGNORECASE | re.DOTALL | re.ASCII)
    mode |= 0 if mode & re.ASCII else re.UNICODE
    state = _parser.State()
    node = [(C.MAX_REPEAT, (1, C.MAXREPEAT, _parser.SubPattern(state, [(op, av)])))]
    rx = _compiler.compile(_parser.SubPattern(state, node), mode)
    ranges = []
    text = _every_char()
    for m in rx.finditer(text):
        for ch in m.group(0):  # runs may straddle the surrogate gap: merge by codepoint
            c = ord(ch)
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    if not ranges:
        return "(?!)"
    return "[" + "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]"


def re_semantics(pattern: str, flags: int = 0) -> str:
    """``pattern`` rewritten for the ``regex`` package with Python ``re``'s character semantics."""
    tree = _parser.parse(pattern, flags)
    return _serialize(list(tree), tree.state.flags | flags)


def _serialize(items, flags: int) -> str:
    out = []
    for op, av in items:
        if op in _CHAR_OPS:
            out.append(_re_class(op, av, flags))
        elif op is C.SUBPATTERN:
            group, add, rm, sub = av
            inner = _serialize(list(sub), (flags | add) & ~rm)
            out.append(f"({inner})" if group is not None else f"(?:{inner})")
        elif op is C.BRANCH:
            out.append("(?:" + "|".join(_serialize(list(alt), flags) for alt in av[1]) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            rng = f"{{{lo},}}" if hi is C.MAXREPEAT or hi == C.MAXREPEAT else f"{{{lo},{hi}}}"
            suffix = {C.MAX_REPEAT: "", C.MIN_REPEAT: "?", C.POSSESSIVE_REPEAT: "+"}[op]
            out.append(f"(?:{_serialize(list(sub), flags)}){rng}{suffix}")
        elif op is C.AT:
            out.append(_AT[av])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            direction, sub = av
            kind = ("=" if op is C.ASSERT else "!") if direction == 1 else ("<=" if op is C.ASSERT else "<!")
            out.append(f"(?{kind}{_serialize(list(sub), flags)})")
        elif op is C.ATOMIC_GROUP:
            out.append(f"(?>{_serialize(list(av), flags)})")
        elif op is C.GROUPREF:
            out.append(f"(?:\\g<{av}>)")
        else:
            raise ValueError(f"the oracle cannot rewrite {op}")
    return "".join(out)


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
        self.rx = regex.compile(re_semantics(pattern, flags), flags & re.MULTILINE)

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
