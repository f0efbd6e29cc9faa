"""Number and integer rules of the schema-to-grammar builder: bounds, ``multipleOf`` (modular
automata or enumerated values) and excluded values, each spelled as ``jsonschema`` compares them."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from functools import partial

from ...core.errors import LimitExceededError
from . import numbers
from .emitbase import _rx_literal, _Sym


class NumberRules:
    """Mixin of :class:`~.emit.SchemaGrammarBuilder`: number and integer terminals."""

    def number(self, flat: dict, real: bool, pointer: str, exclude=()) -> _Sym | None:
        """Numbers (``real``) or integers within the bounds, ``multipleOf`` and exclusions of ``flat``.

        Bounds are compared as ``jsonschema`` does (Python int/float); spellings with a fraction
        keep to 15 significant digits, where float and decimal comparisons agree.
        """
        nonint = bool(flat.get("x-nonint"))
        if nonint and not real:
            return None
        lo, hi = flat.get("minimum"), flat.get("maximum")
        xlo, xhi = flat.get("exclusiveMinimum"), flat.get("exclusiveMaximum")
        lo_excl = xlo is not None and (lo is None or xlo >= lo)
        hi_excl = xhi is not None and (hi is None or xhi <= hi)
        lo = xlo if lo_excl else lo
        hi = xhi if hi_excl else hi
        mult = flat.get("multipleOf")
        notmult = sorted(set(flat.get("x-notmult", [])))
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
            return None
        if not real or (mult is not None and Fraction(str(mult)).denominator == 1 and not nonint):
            # integral values only (type integer, or a number with an integral multipleOf)
            return self._integers(lo, lo_excl, hi, hi_excl, mult, notmult, exclude, pointer, point_zero=real)
        if mult is not None:
            if nonint and Fraction(str(mult)).denominator == 1:
                return None  # no non-integral multiple of an integer
            return self._enumerated_multiples(lo, lo_excl, hi, hi_excl, mult, exclude, nonint, pointer)
        if lo is None and hi is None and not exclude and not nonint:
            return self.term(("num", numbers.NUMBER), "NUMBER", pattern=numbers.NUMBER)
        pat = numbers.decimal_range(lo, lo_excl, hi, hi_excl, nonint=nonint, exclude=exclude)
        exp = numbers.exponent_spellings(lo, lo_excl, hi, hi_excl, nonint=nonint, exclude=exclude)
        if exp:
            pat = exp + ("|" + pat if pat else "")
        if pat is None:
            return None
        return self.term(("num", pat), "NUMBER", pattern=pat)

    def _integers(self, lo, lo_excl, hi, hi_excl, mult, notmult, exclude, pointer, point_zero: bool):
        """Canonical integers in the bounds (also spelled ``n.0`` for numbers where that is safe)."""
        ilo = None if lo is None else (math.floor(Fraction(lo)) + 1 if lo_excl else math.ceil(Fraction(lo)))
        ihi = None if hi is None else (math.ceil(Fraction(hi)) - 1 if hi_excl else math.floor(Fraction(hi)))
        if ilo is not None and ihi is not None and ilo > ihi:
            return None
        m = None
        check = None  # jsonschema's own multipleOf test, where the modulus is not an integer
        if mult is not None:
            fm = Fraction(str(mult))
            if fm.denominator == 1:
                m = int(fm) if int(fm) != 1 else None
            elif _dyadic(fm) and (ilo is None or abs(ilo) < 2 ** 50) and (ihi is None or abs(ihi) < 2 ** 50):
                m = fm.numerator if fm.numerator != 1 else None  # n / (p/2^k) is exact in floats
                if m is not None and (ilo is None or ihi is None):
                    self.fl.unsupported("multipleOf", pointer, f"multipleOf {mult} on unbounded integers")
                    m = None
            else:
                check = partial(_jsonschema_multiple, mult=mult)
        excluded = sorted({int(Fraction(v)) for v in exclude if Fraction(v).denominator == 1})
        excluded = [v for v in excluded if (ilo is None or v >= ilo) and (ihi is None or v <= ihi)]
        small = (ilo is not None and ihi is not None and ihi - ilo < numbers.MAX_ENUMERATED_MULTIPLES * max(1, m or 1))
        dot = (point_zero and (ilo is None or abs(ilo) < 10 ** 15) and (ihi is None or abs(ihi) < 10 ** 15)
               and all(abs(v) < 10 ** 15 for v in excluded))
        if check is not None:
            if not small:
                self.fl.unsupported("multipleOf", pointer, f"multipleOf {mult} on unbounded integers")
                pat = numbers.integer_range(ilo, ihi) if (ilo is not None or ihi is not None) else numbers.INTEGER
            else:
                first = ilo if m is None else -((-ilo) // m) * m
                step = m or 1
                vals = [n for n in range(first, ihi + 1, step)
                        if n not in excluded and all(n % k for k in notmult) and (check is None or check(n))]
                if len(vals) > numbers.MAX_ENUMERATED_MULTIPLES:
                    raise LimitExceededError(f"{len(vals)} admissible integers at {pointer} (limit "
                                             f"{numbers.MAX_ENUMERATED_MULTIPLES})")
                if not vals:
                    return None
                pat = "|".join(str(v) for v in vals)
        elif m is not None or notmult:
            modulus = m or 1
            for k in notmult:
                modulus = math.lcm(modulus, k)
            if modulus > numbers.MAX_MODULUS:
                self.fl.unsupported("multipleOf", pointer, f"modulus {modulus} too large")
                pat = numbers.integer_range(ilo, ihi) if (ilo is not None or ihi is not None) else numbers.INTEGER
                return self.term(("int", pat), "INT", pattern=pat)

            def accept(r, m=m, notmult=tuple(notmult)):
                return (m is None or r % m == 0) and all(r % k for k in notmult)

            pieces = []
            cur = ilo
            for v in excluded + [None]:
                top = ihi if v is None else v - 1
                if cur is None or top is None or cur <= top:
                    pieces.append((cur, top))
                cur = None if v is None else v + 1
            # "n.0" is read as a float: only where n has at most 15 digits is that exact
            clip = point_zero and all(abs(v) < 10 ** 15 for v in excluded)
            big = 10 ** 15 - 1
            key = ("int%", modulus, m, tuple(notmult), tuple(pieces), clip)

            def build(nfa, pieces=tuple(pieces), modulus=modulus, accept=accept, clip=clip):
                from ..regex import RegexFragment

                s0, e0 = nfa.add_state(), nfa.add_state()
                for a, b in pieces:
                    numbers.modular_range_into(nfa, modulus, a, b, accept, start=s0, end=e0)
                if clip:
                    s1, e1 = nfa.add_state(), nfa.add_state()
                    for a, b in pieces:
                        a, b = max(a if a is not None else -big, -big), min(b if b is not None else big, big)
                        if a <= b:
                            numbers.modular_range_into(nfa, modulus, a, b, accept, start=s1, end=e1)
                    dotted = _with_point_zero(nfa, RegexFragment(s1, e1, False, False), True)
                    nfa.eps[s0].append(dotted.start)
                    nfa.eps[dotted.end].append(e0)
                return RegexFragment(s0, e0, False, False)

            return self.term(key, "INT", builder=build)
        else:
            pieces = []
            cur = ilo
            for v in excluded + [None]:
                top = ihi if v is None else v - 1
                if cur is None or top is None or cur <= top:
                    pieces.append(numbers.integer_range(cur, top) if (cur is not None or top is not None)
                                  else numbers.INTEGER)
                cur = None if v is None else v + 1
            if not pieces:
                return None
            pat = "|".join(f"(?:{p})" for p in pieces) if len(pieces) > 1 else pieces[0]
        if dot:
            pat = f"(?:{pat})(?:\\.0+)?"
        return self.term(("int", pat), "INT", pattern=pat)

    def _enumerated_multiples(self, lo, lo_excl, hi, hi_excl, mult, exclude, nonint, pointer):
        """Numbers with a fractional ``multipleOf``: the admissible values of a bounded range,
        each checked with ``jsonschema``'s own float arithmetic."""
        fm = Fraction(str(mult))
        if lo is None or hi is None:
            self.fl.unsupported("multipleOf", pointer, f"multipleOf {mult} on an unbounded number")
            return self.number({k: v for k, v in {"minimum": lo, "maximum": hi}.items() if v is not None}
                               | ({"x-nonint": True} if nonint else {}), True, pointer, exclude)
        a, b = numbers.exact_decimal(lo), numbers.exact_decimal(hi)
        k0 = math.ceil(a / fm)
        k1 = math.floor(b / fm)
        if k1 - k0 + 1 > numbers.MAX_ENUMERATED_MULTIPLES:
            raise LimitExceededError(f"multipleOf {mult} in [{lo}, {hi}] has {k1 - k0 + 1} values "
                                     f"(limit {numbers.MAX_ENUMERATED_MULTIPLES})")
        excl = {numbers.exact_decimal(v) for v in exclude}
        alts = []
        for k in range(k0, k1 + 1):
            v = k * fm
            if (v == a and lo_excl) or (v == b and hi_excl) or v in excl:
                continue
            if nonint and v.denominator == 1:
                continue
            spelled = _decimal_spelling(v)
            if spelled is None or not _jsonschema_multiple(json.loads(spelled), mult):
                continue
            if v.denominator == 1:
                if abs(v) < 10 ** 15 and _jsonschema_multiple(float(v), mult):
                    alts.append(_rx_literal(spelled) + r"(?:\.0+)?")
                else:
                    alts.append(_rx_literal(spelled))
            else:
                alts.append(_rx_literal(spelled) + "0*")
        if not alts:
            return None
        pat = "|".join(alts)
        return self.term(("num", pat), "NUMBER", pattern=pat)


def _dyadic(f: Fraction) -> bool:
    d = f.denominator
    return d & (d - 1) == 0


def _jsonschema_multiple(instance, mult) -> bool:
    """``jsonschema``'s multipleOf test (float division for a float ``mult``)."""
    if isinstance(mult, float):
        try:
            q = instance / mult
            return int(q) == q
        except OverflowError:
            return (Fraction(instance) / Fraction(mult)).denominator == 1
        except (ValueError, ZeroDivisionError):
            return False
    return not instance % mult


def _decimal_spelling(v: Fraction) -> str | None:
    """Plain decimal text of ``v`` (None if it does not terminate or needs over 15 digits)."""
    sign = "-" if v < 0 else ""
    v = abs(v)
    ip = v.numerator // v.denominator
    rest = v - ip
    digits = ""
    while rest:
        rest *= 10
        d = rest.numerator // rest.denominator
        digits += str(d)
        rest -= d
        if len(digits) > 15:
            return None
    if digits and len(str(ip).lstrip("0")) + len(digits) > 15:
        return None
    return sign + str(ip) + ("." + digits if digits else "")


def _with_point_zero(nfa, frag, dot: bool):
    """``frag`` optionally followed by ``.0+``."""
    if not dot:
        return frag
    from ..regex import RegexFragment

    mid, zeros, end = nfa.add_state(), nfa.add_state(), nfa.add_state()
    nfa.eps[frag.end].append(end)
    nfa.add_bytes(frag.end, mid, ord("."), ord("."))
    nfa.add_bytes(mid, zeros, ord("0"), ord("0"))
    nfa.add_bytes(zeros, zeros, ord("0"), ord("0"))
    nfa.eps[zeros].append(end)
    return RegexFragment(frag.start, end, frag.has_lazy, frag.nullable)
