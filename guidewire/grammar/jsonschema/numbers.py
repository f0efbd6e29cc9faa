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
    return residue_into(nfa, m, accept_zero=True)


def decimal_places(multiple) -> int | None:
    """``k`` when ``multiple`` is ``10**-k`` (e.g. 0.01 -> 2), else None."""
    f = Fraction(str(multiple))
    if f.numerator != 1:
        return None
    k = round(math.log10(f.denominator))
    return k if 10 ** k == f.denominator else None


# -- plain decimal numbers with rational bounds, exclusions and "not an integer" -----------------
#: digits a spelling with a fraction may have (integer part without a leading 0, plus the fraction):
#: up to 15 significant digits every decimal converts to a distinct double and ordering against a
#: bound is kept, so ``jsonschema``'s float comparisons agree with exact decimal ones.
MAX_SIGNIFICANT = 15
MAX_EXCLUDED_NUMBERS = 256


def exact_decimal(value) -> Fraction:
    """The decimal value of a schema number as written (``0.1`` -> 1/10, not the double)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(repr(float(value)))


def _split_decimal(x: Fraction) -> tuple[int, str]:
    """``x >= 0`` as (integer part, fraction digits without trailing zeros); x must be a finite decimal."""
    ip = x.numerator // x.denominator
    rest = x - ip
    digits = []
    while rest:
        rest *= 10
        d = rest.numerator // rest.denominator
        digits.append(str(d))
        rest -= d
        if len(digits) > 400:
            raise ValueError("not a finite decimal")
    return ip, "".join(digits)


def _frac_digits(a: str, lo_incl: bool, b: str | None, hi_incl: bool, budget: int | None,
                 nonempty: bool) -> str | None:
    """Regex of digit strings F (at most ``budget`` digits, None: any number; non-empty if asked)
    with ``0.a <(=) 0.F <(=) 0.b`` (``b=None``: no upper bound). None when no string qualifies."""
    least = 1 if nonempty else 0
    if budget is not None and budget < least:
        return None
    tail = "*" if budget is None else f"{{0,{budget - 1}}}"
    if b is None and a == "" and lo_incl:  # unconstrained
        if budget is None:
            return "[0-9]+" if nonempty else "[0-9]*"
        return f"[0-9]{{{least},{budget}}}" if budget else ""
    if budget is None and b is None and a == "" and not lo_incl:  # a non-zero digit somewhere
        return "0*[1-9][0-9]*"
    if budget is None and b == "" and (a != "" or not lo_incl):
        return None  # 0 < F <= 0
    if budget is None and b == "" and a == "":  # F == 0
        return ("0+" if nonempty else "0*") if hi_incl else None
    alts: list[str] = []
    empty_ok = (a == "" and lo_incl) and (b is None or b != "" or hi_incl)
    if budget is None or budget > 0:
        a0 = int(a[0]) if a else 0
        top = 9 if b is None else (int(b[0]) if b else 0)
        free: list[int] = []
        for d in range(a0, top + 1):
            lower_tight = d == a0 and not (a == "" and lo_incl)
            upper_tight = b is not None and d == top
            if not lower_tight and not upper_tight:
                free.append(d)
                continue
            ta, tl = (a[1:], lo_incl) if lower_tight else ("", True)
            tb, th = (b[1:], hi_incl) if upper_tight else (None, True)
            rest = _frac_digits(ta, tl, tb, th, None if budget is None else budget - 1, False)
            if rest is not None:
                alts.append(str(d) + rest)
        if free:
            cls = str(free[0]) if len(free) == 1 else f"[{free[0]}-{free[-1]}]"
            alts.append(cls + ("" if budget == 1 else "[0-9]" + tail))
    if not alts:
        return "" if (empty_ok and not nonempty) else None
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    if empty_ok and not nonempty:
        return f"(?:{body})?"
    return body


def _nonneg_decimals(lo: Fraction | None, lo_excl: bool, hi: Fraction | None, hi_excl: bool,
                     nonint: bool) -> list[str]:
    """Spellings ``I`` and ``I.F`` of decimals x >= 0 with lo <(=) x <(=) hi (lo >= 0 or None).

    Fractions are unlimited except next to an exclusive bound (and above 10**15), where a long
    fraction could round onto the bound: there at most :data:`MAX_SIGNIFICANT` digits.
    """
    if lo is None:
        lo, lo_excl = Fraction(0), False
    if hi is not None and (hi < lo or (hi == lo and (lo_excl or hi_excl))):
        return []
    parts: list[str] = []
    if not nonint:  # integer spellings
        ilo = math.floor(lo) + 1 if (lo_excl or lo.denominator != 1) else int(lo)
        if hi is None:
            ihi = None
        else:
            ihi = math.ceil(hi) - 1 if (hi_excl or hi.denominator != 1) else int(hi)
        if ihi is None or ilo <= ihi:
            r = natural_range(ilo, ihi)
            if r:
                parts.append(_group(r))
    c_int, c_frac = _split_decimal(lo)
    d_int, d_frac = _split_decimal(hi) if hi is not None else (None, None)

    def budget(i: int) -> int | None:
        near = (nonint or (lo_excl and i == c_int) or (hi_excl and d_int is not None and i >= d_int - 1)
                or (hi_excl and i >= 2 ** 52))
        return MAX_SIGNIFICANT - (len(str(i)) if i > 0 else 0) if near else None

    def frac(a, al, b, bl, i):
        bud = budget(i)
        if bud is not None and bud <= 0:
            return None
        if nonint and a == "":
            al = False
        return _frac_digits(a, al, b, bl, bud, True)

    if d_int is not None and c_int == d_int:
        f = frac(c_frac, not lo_excl, d_frac, not hi_excl, c_int)
        if f is not None:
            parts.append(f"{c_int}\\.{f}")
        return parts
    f = frac(c_frac, not lo_excl, None, True, c_int)
    if f is not None:
        parts.append(f"{c_int}\\.{f}")
    # integer parts strictly between: any fraction, except next to an exclusive upper bound (where a
    # long fraction could round onto it) and for non-integers (every integer is "excluded")
    first = c_int + 1
    last = None if d_int is None else d_int - 1
    if not nonint:
        near = None
        top = last
        if hi_excl and last is not None:
            near, top = last, min(last - 1, 2 ** 52)
        if top is None or first <= top:
            parts.append(_group(natural_range(first, top)) + "\\.[0-9]+")
        if near is not None and near >= first:
            fr = frac("", True, None, True, near)
            if fr is not None:
                parts.append(f"{near}\\.{fr}")
    else:
        top = 10 ** 15 - 1 if last is None else min(last, 10 ** 15 - 1)
        while first <= top:  # digit budgets by length
            seg = min(top, 10 ** len(str(first)) - 1)
            fr = frac("", True, None, True, first)
            if fr is not None:
                parts.append(_group(_same_len(str(first), str(seg))) + f"\\.{fr}")
            first = seg + 1
    if d_int is not None:
        f = frac("", True, d_frac, not hi_excl, d_int)
        if f is not None:
            parts.append(f"{d_int}\\.{f}")
    return parts


def decimal_range(lo, lo_excl: bool, hi, hi_excl: bool, *, nonint: bool = False, exclude=()) -> str | None:
    """Regex of plain decimal JSON numbers (``-?int(.frac)?``, no exponent) in the given bounds.

    Bounds are exact decimals (:func:`exact_decimal`); ``nonint`` keeps only non-integral
    values; ``exclude`` drops the listed values. Spellings with a fraction have at most
    :data:`MAX_SIGNIFICANT` digits. None when no number qualifies.
    """
    lo = None if lo is None else exact_decimal(lo)
    hi = None if hi is None else exact_decimal(hi)
    cuts = sorted({exact_decimal(v) for v in exclude})
    if len(cuts) > MAX_EXCLUDED_NUMBERS:
        raise LimitExceededError(f"more than {MAX_EXCLUDED_NUMBERS} excluded numbers")
    cuts = [c for c in cuts if (lo is None or c > lo or (c == lo and not lo_excl))
            and (hi is None or c < hi or (c == hi and not hi_excl))]
    pieces = []
    cur_lo, cur_excl = lo, lo_excl
    for c in cuts:
        pieces.append((cur_lo, cur_excl, c, True))
        cur_lo, cur_excl = c, True
    pieces.append((cur_lo, cur_excl, hi, hi_excl))
    parts: list[str] = []
    for a, ax, b, bx in pieces:
        if a is not None and b is not None and (a > b or (a == b and (ax or bx))):
            continue
        if b is None or b >= 0:  # x >= 0
            if a is None or a < 0:
                pa, pax = Fraction(0), False
            else:
                pa, pax = a, ax
            parts += _nonneg_decimals(pa, pax, b, bx, nonint)
        if a is None or a < 0:  # x = -y, y > 0
            if b is None or b >= 0:
                ya, yax = Fraction(0), True
            else:
                ya, yax = -b, bx
            yb, ybx = (None, False) if a is None else (-a, ax)
            neg = _nonneg_decimals(ya, yax, yb, ybx, nonint)
            if neg:
                parts.append("-" + _group("|".join(neg)))
    zero_in = ((lo is None or lo < 0 or (lo == 0 and not lo_excl)) and (hi is None or hi > 0 or (hi == 0 and not hi_excl))
               and not nonint and 0 not in cuts)
    if zero_in:
        parts.append(r"-0(?:\.0+)?")  # negative zero equals 0
    if not parts:
        return None
    return "|".join(_group(p) for p in parts)


#: exponent spellings ``json.dumps`` uses: tiny values (1e-299 <= |x| < 1e-4, never integral) and
#: huge ones (1e16 <= |x| < 1e300, always integral)
_TINY = r"[1-9](?:\.[0-9]+)?[eE]-0*(?:[5-9]|[1-9][0-9]|[12][0-9][0-9])"
_HUGE = r"[1-9](?:\.[0-9]+)?[eE]\+?0*(?:1[6-9]|[2-9][0-9]|[12][0-9][0-9])"
#: the bands with a margin: a band is used when its margin lies inside the bounds, so no rounding of
#: a long mantissa can reach a bound
_BANDS = ((Fraction(0), Fraction(2, 10 ** 4), _TINY, False), (Fraction(5 * 10 ** 15), Fraction(10 ** 301), _HUGE, True))


def exponent_spellings(lo, lo_excl: bool, hi, hi_excl: bool, *, nonint: bool = False, exclude=()) -> str | None:
    """Regex of the exponent spellings (tiny and huge magnitudes) whose whole band lies in the bounds."""
    lo = None if lo is None else exact_decimal(lo)
    hi = None if hi is None else exact_decimal(hi)
    cuts = [exact_decimal(v) for v in exclude]
    parts = []
    for a, b, rx, integral in _BANDS:
        if nonint and integral:
            continue
        for sign, (x, y) in (("", (a, b)), ("-", (-b, -a))):
            # (x, y): the band with its margin, open at 0 for the tiny band
            if lo is not None and lo > x:
                continue
            if hi is not None and hi < y:
                continue
            if any(x < c < y or (c == 0 and a != 0) for c in cuts if x <= c <= y):
                continue
            if b > 10 ** 300 and (hi is not None if sign == "" else lo is not None):
                continue  # huge values: only without a bound on their side
            parts.append(sign + rx)
    return "|".join(parts) if parts else None


def residue_into(nfa: NFA, m: int, accept_zero: bool) -> RegexFragment:
    """NFA of canonical integers whose residue mod ``m`` is zero (``accept_zero``) or non-zero."""
    if m > MAX_MODULUS:
        raise LimitExceededError(f"multipleOf {m} exceeds the modulus limit {MAX_MODULUS}")
    start, end = nfa.add_state(), nfa.add_state()
    sign = nfa.add_state()
    nfa.eps[start].append(sign)
    nfa.add_bytes(start, sign, ord("-"), ord("-"))
    if accept_zero:
        zero = nfa.add_state()
        nfa.add_bytes(start, zero, ord("0"), ord("0"))
        nfa.eps[zero].append(end)
    res = [nfa.add_state() for _ in range(m)]
    for d in range(1, 10):
        nfa.add_bytes(sign, res[d % m], 0x30 + d, 0x30 + d)
    for r in range(m):
        for d in range(10):
            nfa.add_bytes(res[r], res[(10 * r + d) % m], 0x30 + d, 0x30 + d)
        if (r == 0) == accept_zero:
            nfa.eps[res[r]].append(end)
    return RegexFragment(start, end, False, False)


def modular_range_into(nfa: NFA, m: int, lo: int | None, hi: int | None, zero_residue=True,
                       start: int | None = None, end: int | None = None) -> RegexFragment:
    """NFA of canonical integers in ``[lo, hi]`` (None: unbounded) whose residue mod ``m`` is zero
    (``zero_residue``; or a predicate on the residue): digit-by-digit products of the residue with
    the bound comparisons. ``start``/``end`` reuse states (unions of ranges)."""
    if m > MAX_MODULUS:
        raise LimitExceededError(f"multipleOf {m} exceeds the modulus limit {MAX_MODULUS}")
    start = nfa.add_state() if start is None else start
    end = nfa.add_state() if end is None else end

    def ok(r: int) -> bool:
        return zero_residue(r) if callable(zero_residue) else (r == 0) == zero_residue

    def naturals(src: int, a: int, b: int | None) -> None:
        """Edges from ``src`` spelling y in [a, b] (a >= 0) with an accepted residue, ending at ``end``."""
        if a == 0:
            if b is None or b >= 0:
                if ok(0):
                    z = nfa.add_state()
                    nfa.add_bytes(src, z, 0x30, 0x30)
                    nfa.eps[z].append(end)
            a = 1
        if b is not None and a > b:
            return
        la = len(str(a))
        lb = None if b is None else len(str(b))
        top_len = lb if lb is not None else la
        for length in range(la, top_len + 1):
            lo_s = str(max(a, 10 ** (length - 1)))
            hi_v = 10 ** length - 1 if b is None else min(b, 10 ** length - 1)
            if int(lo_s) > hi_v:
                continue
            hi_s = str(hi_v)
            states: dict = {}

            def st(pos, tl, th, r):
                key = (pos, tl, th, r)
                if key not in states:
                    states[key] = nfa.add_state()
                return states[key]

            work = [(0, True, True, 0)]
            states[work[0]] = src
            seen = {work[0]}
            while work:
                pos, tl, th, r = work.pop()
                s = states[(pos, tl, th, r)]
                if pos == length:
                    if ok(r):
                        nfa.eps[s].append(end)
                    continue
                dlo = int(lo_s[pos]) if tl else (1 if pos == 0 else 0)
                dhi = int(hi_s[pos]) if th else 9
                for d in range(dlo, dhi + 1):
                    key = (pos + 1, tl and d == dlo, th and d == dhi, (10 * r + d) % m)
                    t = st(*key)
                    nfa.add_bytes(s, t, 0x30 + d, 0x30 + d)
                    if key not in seen:
                        seen.add(key)
                        work.append(key)
        if b is None:  # every longer number: count digits up to top_len + 1, then loop
            n = top_len + 1
            cnt = [[nfa.add_state() for _ in range(m)] for _ in range(n + 1)]
            for d in range(1, 10):
                nfa.add_bytes(src, cnt[1][d % m], 0x30 + d, 0x30 + d)
            for k in range(1, n + 1):
                for r in range(m):
                    for d in range(10):
                        nfa.add_bytes(cnt[k][r], cnt[min(k + 1, n)][(10 * r + d) % m], 0x30 + d, 0x30 + d)
            for r in range(m):
                if ok(r):
                    nfa.eps[cnt[n][r]].append(end)

    # non-negative part
    if hi is None or hi >= 0:
        naturals(start, 0 if lo is None or lo < 0 else lo, hi)
    # negative part: -y, y in [max(1, -hi), -lo]
    if lo is None or lo < 0:
        minus = nfa.add_state()
        nfa.add_bytes(start, minus, ord("-"), ord("-"))
        naturals(minus, max(1, -hi) if hi is not None else 1, None if lo is None else -lo)
    return RegexFragment(start, end, False, False)
