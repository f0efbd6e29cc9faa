"""Regexes for JSON numbers under ``minimum``/``maximum``/``exclusive*`` and ``multipleOf``.

Integer ranges are split by digit count and decomposed digit by digit (exact). Number
ranges with integer-valued bounds are exact over the plain decimal spellings
(``-?int(.frac)?``); exponent spellings are then not generated (see README, Limits).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ...core.errors import LimitExceededError, UnsatisfiableGrammarError
from ..regex import NFA, RegexFragment

INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
MAX_ENUMERATED_MULTIPLES = 2000
MAX_MODULUS = 100_000


def _same_len(a: str, b: str) -> str:
    """Regex for decimal strings of equal length between ``a`` and ``b`` (inclusive)."""
    if not a:
        return ""
    if len(a) == 1:
        return a if a == b else f"[{a}-{b}]"
    if a[0] == b[0]:
        return a[0] + _group(_same_len(a[1:], b[1:]))
    n = len(a) - 1
    parts = []
    if a[1:] == "0" * n:
        lo_first = a[0]
    else:
        parts.append(a[0] + _group(_same_len(a[1:], "9" * n)))
        lo_first = str(int(a[0]) + 1)
    if b[1:] == "9" * n:
        hi_first = b[0]
    else:
        hi_first = str(int(b[0]) - 1)
    if int(lo_first) <= int(hi_first):
        d = lo_first if lo_first == hi_first else f"[{lo_first}-{hi_first}]"
        parts.append(d + f"[0-9]{{{n}}}")
    if b[1:] != "9" * n:
        parts.append(b[0] + _group(_same_len("0" * n, b[1:])))
    return "|".join(parts) if len(parts) > 1 else parts[0]


def _group(r: str) -> str:
    return f"(?:{r})" if "|" in r else r


def natural_range(lo: int, hi: int | None) -> str:
    """Regex for canonical non-negative integers in ``[lo, hi]`` (``hi=None``: unbounded)."""
    if hi is not None and lo > hi:
        return ""
    parts = []
    length = len(str(lo))
    while True:
        top = 10 ** length - 1
        seg_lo = lo if length == len(str(lo)) else 10 ** (length - 1)
        if hi is not None and seg_lo > hi:
            break
        seg_hi = top if hi is None else min(top, hi)
        parts.append(_same_len(str(seg_lo), str(seg_hi)))
        if hi is not None and seg_hi == hi:
            break
        length += 1
        if hi is None:
            parts.append(f"[1-9][0-9]{{{length - 1},}}")
            break
    return "|".join(p for p in parts if p)


def integer_range(lo: int | None, hi: int | None) -> str:
    """Regex for canonical JSON integers in ``[lo, hi]`` (None = unbounded side)."""
    if lo is not None and hi is not None and lo > hi:
        raise UnsatisfiableGrammarError(f"no integer lies in [{lo}, {hi}]")
    parts = []
    if hi is None or hi >= 0:  # non-negative part
        r = natural_range(max(lo, 0) if lo is not None else 0, hi)
        if r:
            parts.append(_group(r))
    if lo is None or lo < 0:  # negative part: -y with y in [max(1,-hi), -lo]
        y_lo = max(1, -hi) if hi is not None else 1
        y_hi = -lo if lo is not None else None
        r = natural_range(y_lo, y_hi)
        if r:
            parts.append("-" + _group(r))
    return "|".join(parts)


def number_range(lo, hi, lo_excl: bool, hi_excl: bool) -> str:
    """Regex for plain decimal JSON numbers ``x`` with ``lo <(=) x <(=) hi`` (integer-valued bounds)."""
    for v in (lo, hi):
        if v is not None and Fraction(v).denominator != 1:
            raise ValueError("fractional bound")
    lo = None if lo is None else int(lo)
    hi = None if hi is None else int(hi)
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
        raise UnsatisfiableGrammarError(f"no number satisfies the bounds {lo}..{hi}")
    parts = []
    pos = _nonneg_decimal(lo, hi, lo_excl, hi_excl)
    if pos:
        parts.append(_group(pos))
    # negative numbers -y (y > 0):  lo <= -y  <=>  y <= -lo ;  -y <= hi  <=>  y >= -hi
    neg = _nonneg_decimal(None if hi is None else -hi, None if lo is None else -lo, hi_excl, lo_excl,
                          positive_only=True)
    if neg:
        parts.append("-" + _group(neg))
    return "|".join(parts)


_FRAC = r"(?:\.[0-9]+)?"
_NONZERO_FRAC = r"\.[0-9]*[1-9][0-9]*"
_ZERO_FRAC = r"(?:\.0+)?"


def _nonneg_decimal(lo, hi, lo_excl, hi_excl, positive_only: bool = False) -> str:
    """Decimals ``d >= 0`` (``> 0`` with ``positive_only``) with integer bounds on ``d``."""
    if lo is None or lo < 0:
        lo, lo_excl = 0, positive_only
    elif positive_only and lo == 0:
        lo_excl = True
    if hi is not None and (hi < lo or (hi == lo and (lo_excl or hi_excl))):
        return ""
    parts = []
    a = lo + 1 if lo_excl else lo       # integer parts taking any fraction
    b = None if hi is None else hi - 1
    if b is None or a <= b:
        r = natural_range(a, b)
        if r:
            parts.append(_group(r) + _FRAC)
    if lo_excl:  # lo itself with a non-zero fraction
        parts.append(str(lo) + _NONZERO_FRAC)
    if hi is not None and not hi_excl and (hi > lo or not lo_excl):
        parts.append(str(hi) + _ZERO_FRAC)
    return "|".join(parts)


def multiple_of_into(nfa: NFA, m: int, lo: int | None, hi: int | None) -> RegexFragment:
    """NFA of canonical integers divisible by ``m`` (bounded ranges are enumerated)."""
    if m <= 0:
        raise UnsatisfiableGrammarError(f"multipleOf must be positive, got {m}")
    from ..regex import compile_into

    if lo is not None and hi is not None:
        first = -((-lo) // m) * m
        count = (hi - first) // m + 1 if hi >= first else 0
        if count <= 0:
            raise UnsatisfiableGrammarError(f"no multiple of {m} lies in [{lo}, {hi}]")
        if count > MAX_ENUMERATED_MULTIPLES:
            raise LimitExceededError(
                f"multipleOf {m} within [{lo}, {hi}] has {count} values (limit {MAX_ENUMERATED_MULTIPLES})")
        values = "|".join(str(v) for v in range(first, hi + 1, m))
        return compile_into(nfa, values)
    if lo is not None or hi is not None:
        raise LimitExceededError("multipleOf with a one-sided bound is not expressible exactly here")
    if m > MAX_MODULUS:
        raise LimitExceededError(f"multipleOf {m} exceeds the modulus limit {MAX_MODULUS}")
    start, end = nfa.add_state(), nfa.add_state()
    sign = nfa.add_state()
    nfa.eps[start].append(sign)
    nfa.add_bytes(start, sign, ord("-"), ord("-"))
    zero = nfa.add_state()
    nfa.add_bytes(start, zero, ord("0"), ord("0"))
    nfa.eps[zero].append(end)
    res = [nfa.add_state() for _ in range(m)]
    for d in range(1, 10):
        nfa.add_bytes(sign, res[d % m], 0x30 + d, 0x30 + d)
    for r in range(m):
        for d in range(10):
            nfa.add_bytes(res[r], res[(10 * r + d) % m], 0x30 + d, 0x30 + d)
    nfa.eps[res[0]].append(end)
    return RegexFragment(start, end, False, False)


def decimal_places(multiple) -> int | None:
    """``k`` when ``multiple`` is ``10**-k`` (e.g. 0.01 -> 2), else None."""
    f = Fraction(str(multiple))
    if f.numerator != 1:
        return None
    k = round(math.log10(f.denominator))
    return k if 10 ** k == f.denominator else None
