"""Flat schemas -> BNF rules and terminals for the Earley/lexer engine.

Every JSON token is one terminal with its surrounding whitespace folded in (``{``, ``,``,
``:`` carry a bounded whitespace run), so whitespace can never run away. String
lexemes are built by :mod:`..jsonstring` from the decoded-string constraints. Object
keys of an object that admits extra properties form a terminal *family*: a key read as
a named property (priority 2) is never also read as a pattern key (1) or an extra key (0).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from functools import partial

from ...core.errors import LimitExceededError, UnsupportedFeatureError
from ..frontend import TerminalSpec, assemble
from ..jsonstring import (any_string_automaton, excluding_automaton, json_counted_into, json_string_into,
                          literal_automaton, pattern_automaton)
from ..regex import RegexFragment, literal_into
from . import numbers
from .complement import complement_automaton, pattern_matches
from .flatten import Flattener, merge
from .minimize import smaller_automaton
from .negate import (MAX_NEGATION_DEPTH, Inexpressible, _patterns_apart, flats_disjoint, json_key, kinds_flat,
                     kinds_of, negate_flat, overlap_kinds, value_kind)
from .product import intersect_all

ALL_TYPES = ("null", "boolean", "object", "array", "number", "string")
MAX_COUNTED = 2000
SEALED_JSON_STRINGS = 0   # the sealed class of string and key terminals: every word is one JSON string
MAX_ANY_COMBINATIONS = 256
MAX_UNIQUE_STATES = 4096
MAX_KEY_PATTERNS = 16
MAX_KEY_CLASSES = 64
MAX_EXISTS = 3
_NAME_KEYS = frozenset({"x-raw", "type", "x-patterns", "x-antipatterns", "x-exclude", "x-notenum", "enum", "minLength",
                        "maxLength"})


class _Sym:
    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int):
        self.kind, self.index = kind, index


class SchemaGrammarBuilder:
    """Accumulates terminals and rules while walking a schema; :meth:`build` compiles them."""

    def __init__(self, flattener: Flattener, root_validator, options, token_depth: int | None = None):
        self.fl = flattener
        # the vocabulary's longest token in bytes: long length counters are elided for it (None: built whole)
        self.token_depth = token_depth
        self.validator = root_validator
        self.opt = options
        self.terms: list[TerminalSpec] = []
        self.term_keys: dict = {}
        self.rules: list[tuple[_Sym, tuple[_Sym, ...]]] = []
        self.nts: list[str] = []
        self.memo: dict = {}
        self._puncts: dict = {}
        self.families = 0
        self._any_value = None

    # -- symbols -------------------------------------------------------------------------------
    def term(self, key, name: str, *, pattern: str | None = None, builder=None, family: int = -1,
             priority: int = 0, origin: str = "", sealed: int = -1) -> _Sym:
        """Intern a terminal by ``key`` (``origin``: the JSON pointer it is built for, for errors;
        ``sealed``: its class of prefix-free words, see :mod:`~guidewire.grammar.projection`)."""
        full = (key, family, priority)
        idx = self.term_keys.get(full)
        if idx is None:
            idx = self.term_keys[full] = len(self.terms)
            self.terms.append(TerminalSpec(f"{name}_{idx}", pattern or "", family=family, priority=priority,
                                           builder=builder, key=key if builder is not None else None,
                                           origin=origin, sealed=sealed))
        return _Sym("t", idx)

    def nt(self, name: str) -> _Sym:
        """A fresh nonterminal."""
        self.nts.append(name)
        return _Sym("n", len(self.nts) - 1)

    def rule(self, lhs: _Sym, *rhs: _Sym) -> None:
        """Add ``lhs -> rhs``."""
        self.rules.append((lhs, tuple(rhs)))

    def punct(self, name: str, text: str, *, before: bool = False, after: bool = False) -> _Sym:
        """A punctuation symbol with the configured whitespace around it.

        Flexible whitespace is its own lexeme (``WS``, at most ``max_whitespace`` characters)
        in optional grammar slots, not part of the punctuation lexeme: one whitespace chain in
        the lexer DFA instead of one per punctuation character. Every gap between two
        non-whitespace lexemes has at most one slot, so no run exceeds the bound.
        """
        o = self.opt
        if o.separators is not None or o.whitespace == "compact":
            seps = o.separators or (",", ":")
            lit = {",": seps[0], ":": seps[1]}.get(text, text)
            return self.term(("p", lit), name, pattern=_rx_literal(lit))
        lit = self.term(("p", text), name, pattern=_rx_literal(text))
        if not (before or after):
            return lit
        key = ("punct", text, before, after)
        sym = self._puncts.get(key)
        if sym is None:
            sym = self._puncts[key] = self.nt(name.lower())
            ows = self.optional_ws()
            self.rule(sym, *((ows,) if before else ()), lit, *((ows,) if after else ()))
        return sym

    def ws_term(self) -> _Sym:
        """The whitespace lexeme: 1 to ``max_whitespace`` JSON whitespace characters."""
        return self.term(("ws",), "WS", pattern=f"[ \\t\\n\\r]{{1,{self.opt.max_whitespace}}}")

    def optional_ws(self) -> _Sym:
        """``OWS -> <empty> | WS``."""
        sym = self._puncts.get("ows")
        if sym is None:
            sym = self._puncts["ows"] = self.nt("ows")
            self.rule(sym)
            self.rule(sym, self.ws_term())
        return sym

    def lit(self, text: str) -> _Sym:
        """An exact token such as ``true``."""
        return self.term(("l", text), text.upper() if text.isalpha() else "LIT", pattern=_rx_literal(text))

    def string_term(self, patterns, min_len: int, max_len, *, family: int = -1, priority: int = 0,
                    exclude=None, name: str = "STRING", pointer: str | None = None) -> _Sym:
        """A JSON string lexeme whose decoded value satisfies all constraints.

        Length bounds unroll one automaton copy per counted character; when that exceeds the
        automaton limits, strict mode raises :class:`LimitExceededError` naming ``pointer``, and
        lenient mode builds the string without the length bounds and records it in ``notes``.
        """
        counted = min_len > 0 or max_len is not None
        # the outcome of a bounded build depends on the mode: part of the (cross-compile) key
        key = _string_key(patterns, min_len, max_len, exclude) + ((self.fl.strict, self.token_depth) if counted else ())
        fl, depth = self.fl, self.token_depth

        def build(nfa):
            autos = [pattern_automaton(p[0], search=p[1]) if len(p) == 2 else
                     complement_automaton(pattern_automaton(p[0], search=p[1])) for p in patterns]
            if exclude:
                autos.append(excluding_automaton(exclude))
            # minimal DFA (where its spelling grows little, by a few intervals when counted): every
            # position after a search pattern has matched is one lexer state (a counted ``[a-z]``
            # search, 3 intervals as an NFA and 4 as a DFA, is then a product of a count and
            # "matched yet", which a token table answers by two slice chains)
            auto = (smaller_automaton(intersect_all(autos), growth=1.25 if counted else 2.0, slack=8 if counted else 256)
                    if autos else any_string_automaton())
            if not counted:
                return json_string_into(nfa, auto)
            mark = len(nfa)
            try:
                return json_counted_into(nfa, auto, min_len=min_len, max_len=max_len, depth=depth)
            except LimitExceededError as exc:
                where = pointer or "#"
                bounds = f"minLength {min_len}/maxLength {max_len}" if max_len is not None else f"minLength {min_len}"
                if fl.strict:
                    raise LimitExceededError(
                        f"{bounds} at {where}: {exc} (each counted character is one more copy of the "
                        f"string automaton); lower the bound, or compile with lenient=True to leave it to "
                        f"the output check") from None
                nfa.truncate(mark)  # drop the partial build: the states it took are free again
                fl.notes.append(f"{bounds} at {where} is not enforced by the mask ({exc}); a value of "
                                f"another length is only caught by validating the output")
                return json_string_into(nfa, auto)

        return self.term(key, name, builder=build, family=family, priority=priority, origin=pointer or "",
                         sealed=SEALED_JSON_STRINGS)

    def string_const(self, text: str) -> _Sym:
        """The JSON string whose decoded value is exactly ``text``, in every JSON spelling: the
        language of :meth:`string_term` on ``^text$`` (and the same terminal key), built as a chain
        of characters: no regex, no product, no minimisation (a chain is minimal). An enum of
        thousands of strings paid ~0.8 ms a value for those."""
        def build(nfa):
            return json_string_into(nfa, literal_automaton(text))

        key = _string_key([("^" + _rx_literal(text) + "$", True)], 0, None, None)
        return self.term(key, "CONST", builder=build, sealed=SEALED_JSON_STRINGS)

    def key_term(self, name: str, family: int, priority: int) -> _Sym:
        """The quoted key ``name`` in its ``json.dumps`` spellings (``\\uXXXX`` or raw UTF-8 for
        non-ASCII characters). Other escape spellings of a named key are rejected: never accepted
        as an unnamed key either, since the unnamed-key lexeme excludes the decoded names."""
        def build(nfa):
            spellings = dict.fromkeys((json.dumps(name), json.dumps(name, ensure_ascii=False)))
            start, end = nfa.add_state(), nfa.add_state()
            for text in spellings:
                frag = literal_into(nfa, text)
                nfa.eps[start].append(frag.start)
                nfa.eps[frag.end].append(end)
            return RegexFragment(start, end, False, False)

        return self.term(("k", name), "KEY", builder=build, family=family, priority=priority,
                         sealed=SEALED_JSON_STRINGS)

    # -- values ---------------------------------------------------------------------------------
    def any_value(self) -> _Sym:
        """Any JSON value."""
        if self._any_value is None:
            self._any_value = self.value(True, "#any", 0)
        return self._any_value

    def value(self, node, pointer: str, depth: int) -> _Sym | None:
        """Nonterminal for the values of ``node`` (None if it admits none)."""
        if depth > self.opt.max_depth:
            raise LimitExceededError(f"schema nesting deeper than {self.opt.max_depth} at {pointer}")
        d = depth if self.opt.indent is not None else 0
        key = (_memo_key(node), d)
        if key in self.memo:
            return self.memo[key][0]
        sym = self.nt(f"v{len(self.nts)}")
        self.memo[key] = (sym, node)  # keep node alive: id() stays unique
        flat = self.fl.flatten(node, pointer)
        alts = self.alternatives(flat, pointer, depth)
        if not alts:
            self.memo[key] = (None, node)
            return None
        for a in alts:
            self.rule(sym, a)
        return sym

    def alternatives(self, flat, pointer: str, depth: int, nneg: int = 0) -> list[_Sym]:
        """Symbols for each way a value of ``flat`` can be written.

        ``anyOf``/``oneOf`` groups are expanded first (each combination merged into the rest);
        then each ``not`` becomes the disjunction of its positive failures (:mod:`.negate`),
        computed for the kinds of value the rest still allows.
        """
        if flat is False:
            return []
        groups = flat.get("x-any")
        nots = flat.get("x-not")
        if not groups and not nots:
            return self.typed(flat, pointer, depth)
        if groups:
            base = {k: v for k, v in flat.items() if k != "x-any"}
            choices = []
            for kind, branches in groups:
                flats = [(self.fl.flatten(b, p), p, b) for b, p in branches]
                if kind == "oneOf" and len(flats) > 1:
                    flats = self._one_of(base, flats, pointer)
                choices.append([(f, p) for f, p, _ in flats])
        else:
            if nneg > MAX_NEGATION_DEPTH:
                raise LimitExceededError(f"'not' nested deeper than {MAX_NEGATION_DEPTH} at {pointer}")
            base = {k: v for k, v in flat.items() if k != "x-not"}
            ctx = kinds_of(base)
            if "enum" in base:
                ctx = ctx & {value_kind(v) for v in base["enum"]}
            choices = []
            for entry in nots:
                neg, where = entry[0], entry[1]
                keyword = entry[2] if len(entry) > 2 else "not"
                limit = entry[3] if len(entry) > 3 else None  # kinds where the operand can matter
                alts = self._negation(neg, where, ctx if limit is None else ctx & limit, keyword, base)
                if alts is not None:
                    if limit is not None and ctx - limit:
                        alts = alts + [kinds_flat(ctx - limit)]
                    choices.append([(a, where) for a in alts])
            nneg += 1
        return self._expand(base, choices, pointer, depth, nneg)

    def _expand(self, base: dict, choices, pointer: str, depth: int, nneg: int) -> list[_Sym]:
        """Merge one alternative of every choice into ``base``, dropping empty conjunctions as early
        as possible (the limit counts the surviving ones)."""
        partials = [base]
        for choice in sorted(choices, key=len):
            nxt = []
            for part in partials:
                for f, p in choice:
                    merged = merge(part, f, p)
                    if merged is not False:
                        nxt.append(merged)
            if len(nxt) > MAX_ANY_COMBINATIONS:
                raise LimitExceededError(f"anyOf/oneOf/not combinations at {pointer} exceed {MAX_ANY_COMBINATIONS}")
            partials = nxt
            if not partials:
                return []
        out: list[_Sym] = []
        for merged in partials:
            alts = self.alternatives(merged, pointer, depth, nneg)
            if len(alts) == 1:
                out.append(alts[0])
            elif alts:
                sub = self.nt(f"alt{len(self.nts)}")
                for a in alts:
                    self.rule(sub, a)
                out.append(sub)
        return out

    def _negation(self, neg, where: str, ctx, keyword: str, base=None):
        """Positive flats for ``not neg`` within kinds ``ctx``; None when not enforced (lenient)."""
        try:
            flat = self.fl.flatten(neg, where)
            return negate_flat(self.fl, flat, where, ctx, disjoint=self._disjoint, base=base,
                               validator=self.validator)
        except Inexpressible as exc:
            self.fl.unsupported(keyword, where, exc.why)
            return None

    def _one_of(self, base: dict, flats, pointer: str):
        """Exactly one branch: branch i also fails every branch j that may overlap it."""
        core = {k: v for k, v in base.items() if k not in ("x-not", "x-any")}
        ctx = [merge(core, f, p) if f is not False else False for f, p, _ in flats]
        out = []
        for i, (fi, pi, bi) in enumerate(flats):
            if ctx[i] is False:
                continue
            negs = []
            for j, (fj, pj, bj) in enumerate(flats):
                if j == i or ctx[j] is False:
                    continue
                kinds = overlap_kinds(ctx[i], ctx[j], fi.get("x-raw"), fj.get("x-raw"), self.validator, self.fl)
                if not kinds:
                    continue
                negs.append((bj, pj, "oneOf", kinds))
            if negs:
                fi = merge(fi, {"x-raw": [], "x-not": negs}, pi)
            out.append((fi, pi, bi))
        return out

    def _disjoint(self, a, b, raw_a=None, raw_b=None) -> bool:
        return flats_disjoint(a, b, raw_a, raw_b, self.validator, self.fl)

    def typed(self, flat: dict, pointer: str, depth: int) -> list[_Sym]:
        """Alternatives per JSON type allowed by ``flat``."""
        types = set(flat.get("type") or ALL_TYPES)
        if "number" in types:
            types.discard("integer")
        if "enum" in flat:
            return self.enum(flat, types, pointer, depth)
        excluded = []
        for values, where in flat.get("x-notenum", []):
            excluded += values
            for v in values:
                kind = value_kind(v)
                if kind in ("object", "array") and kind in types:
                    self.fl.unsupported("not", where, f"excluding the {kind} value {json.dumps(v)[:60]}")
        strings = [v for v in excluded if isinstance(v, str)]
        numbers_out = [v for v in excluded if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out: list[_Sym] = []
        if "null" in types and not any(v is None for v in excluded):
            out.append(self.lit("null"))
        if "boolean" in types:
            for b in (True, False):
                if not any(v is b for v in excluded):
                    out.append(self.lit("true" if b else "false"))
        if "integer" in types or "number" in types:
            s = self.number(flat, "number" in types, pointer, numbers_out)
            if s is not None:
                out.append(s)
        if "string" in types:
            s = self.string(flat, pointer, strings)
            if s is not None:
                out.append(s)
        if "array" in types:
            s = self.array(flat, pointer, depth)
            if s is not None:
                out.append(s)
        if "object" in types:
            s = self.object(flat, pointer, depth)
            if s is not None:
                out.append(s)
        return out

    # -- scalars ----------------------------------------------------------------------------------
    def enum(self, flat: dict, types: set, pointer: str, depth: int) -> list[_Sym]:
        values = []
        for v in flat["enum"]:
            if _type_of(v) not in types and not (_type_of(v) == "integer" and "number" in types):
                continue
            if self.validator is not None and not all(self.validator(raw, v) for raw in flat.get("x-raw", [])):
                continue
            if not _internal_ok(flat, v):
                continue
            values.append(v)
        return [self.const(v, depth) for v in _dedupe(values)]

    def const(self, v, depth: int) -> _Sym:
        """Symbol for exactly the value ``v`` (strings in any JSON spelling)."""
        if isinstance(v, str):
            return self.string_const(v)
        if v is None or isinstance(v, bool) or isinstance(v, (int, float)):
            text = json.dumps(v)
            if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
                return self.term(("l", text), "NUM", pattern=_rx_literal(str(int(v))) + r"(?:\.0+)?")
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10 ** 15:
                return self.term(("l", text), "NUM", pattern=_rx_literal(text) + r"(?:\.0+)?")
            return self.lit(text)
        sym = self.nt("const")
        if isinstance(v, list):
            if not v:
                self.rule(sym, self.punct("LBRACK", "["), self.punct("RBRACK", "]", before=True))
                return sym
            seq = [self.punct("LBRACK", "[", after=True)]
            for i, item in enumerate(v):
                if i:
                    seq.append(self.punct("COMMA", ",", before=True, after=True))
                seq.append(self.const(item, depth + 1))
            seq.append(self.punct("RBRACK", "]", before=True))
            self.rule(sym, *seq)
            return sym
        if isinstance(v, dict):
            seq = [self.punct("LBRACE", "{", after=True)]
            for i, (k, item) in enumerate(v.items()):
                if i:
                    seq.append(self.punct("COMMA", ",", before=True, after=True))
                seq += [self.key_term(k, -1, 0), self.punct("COLON", ":", before=True, after=True),
                        self.const(item, depth + 1)]
            seq.append(self.punct("RBRACE", "}", before=True))
            self.rule(sym, *seq)
            return sym
        raise UnsupportedFeatureError(f"enum/const value {v!r} is not JSON")

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

    def string(self, flat: dict, pointer: str, exclude=()) -> _Sym | None:
        lo, hi = flat.get("minLength", 0), flat.get("maxLength")
        if hi is not None and lo > hi:
            return None
        if lo > self.opt.max_string_length:     # a long maxLength is elided instead (see json_counted_into)
            if self.fl.strict:
                raise LimitExceededError(f"minLength {lo} at {pointer} exceeds the limit "
                                         f"{self.opt.max_string_length} (max_string_length=; or compile with "
                                         f"lenient=True to leave it to the output check)")
            self.fl.notes.append(f"minLength {lo} at {pointer} is not enforced by the mask (above "
                                 f"max_string_length={self.opt.max_string_length}); a value of another length "
                                 f"is only caught by validating the output")
            lo = 0
        patterns = list(flat.get("x-patterns", [])) + [(p, search, True) for p, search in flat.get("x-antipatterns", [])]
        excluded = sorted(set(flat.get("x-exclude", [])) | set(exclude)) or None
        if hi is None and not patterns and self.opt.default_max_length is not None:  # generation mode
            hi = max(self.opt.default_max_length, lo)
        return self.string_term(patterns, lo, hi, exclude=excluded, pointer=pointer)

    # -- containers ---------------------------------------------------------------------------------
    def array(self, flat: dict, pointer: str, depth: int) -> _Sym | None:
        prefix = flat.get("prefixItems", [])
        rest = flat.get("items", False if prefix and not self.opt.extra_properties else True)
        lo, hi = flat.get("minItems", 0), flat.get("maxItems")
        if hi is not None and lo > hi:
            return None
        if flat.get("uniqueItems") and not (hi is not None and hi <= 1):
            sym = self._unique_array(flat, pointer, depth)
            if sym is not False:
                return sym
        contains = flat.get("contains")
        if any(k in flat for k in ("minContains", "maxContains")):
            if flat.get("minContains", 1) != 1 or "maxContains" in flat:
                self.fl.unsupported("minContains/maxContains", pointer)
        item_syms = [self.value(p, f"{pointer}/prefixItems/{i}", depth + 1) for i, p in enumerate(prefix)]
        rest_sym = self.value(rest, f"{pointer}/items", depth + 1) if rest is not False else None
        if hi is None and rest_sym is None:
            hi = len(prefix)
        if hi is None and self.opt.default_max_items is not None:  # generation mode: a subset
            hi = max(self.opt.default_max_items, lo, len(prefix))
        top = max(len(prefix), lo)
        if hi is not None and hi > MAX_COUNTED:
            raise LimitExceededError(f"maxItems {hi} at {pointer} exceeds the limit {MAX_COUNTED}")
        if top > MAX_COUNTED:
            raise LimitExceededError(f"minItems {lo} at {pointer} exceeds the limit {MAX_COUNTED}")

        def item(j):
            return item_syms[j] if j < len(prefix) else rest_sym

        citem = {}
        if contains is not None:
            def contains_item(j):
                if j not in citem:
                    base = prefix[j] if j < len(prefix) else rest
                    node = {"allOf": [base, contains]} if base is not True else contains
                    citem[j] = self.value(node, f"{pointer}/contains", depth + 1)
                return citem[j]
        d = depth + 1
        comma = self.punct_comma(d)
        def A_key(j: int, found: bool, first: bool):
            return (j if hi is not None else min(j, top), found, first)

        def A_rules(key, sym, get):
            j, found, first = key
            if not first and j >= lo and (found or contains is None):
                self.rule(sym)
            if hi is None or j < hi:
                it = item(j if j < len(prefix) else len(prefix))
                lead = () if first else (comma,)
                if it is not None:
                    self.rule(sym, *lead, it, get(A_key(j + 1, found, False)))
                if contains is not None:
                    c = contains_item(j if j < len(prefix) else len(prefix))
                    if c is not None:
                        self.rule(sym, *lead, c, get(A_key(j + 1, True, False)))

        A0 = self.state_machine("arr", A_key(0, False, True), A_rules)
        arr = self.nt("array")
        open_, close = self.punct_open("[", d), self.punct_close("]", depth)
        self.rule(arr, open_, A0, close)
        if lo == 0 and contains is None:
            self.rule(arr, *self.empty("[", "]"))
        return arr

    def _finite_values(self, node, pointer: str):
        """Every value ``node`` admits when that is a short finite list (checked by jsonschema), else None."""
        if self.validator is None:
            return None
        flat = self.fl.flatten(node, pointer)
        if flat is False:
            return []
        if "enum" in flat:
            cands = flat["enum"]
        elif set(flat.get("type") or ALL_TYPES) <= {"null", "boolean"}:
            cands = [None, True, False]
        else:
            return None
        out, seen = [], set()
        for v in cands:
            k = json_key(v)
            if k not in seen and self.validator(node, v) and (flat is not None and _internal_ok(flat, v)):
                seen.add(k)
                out.append(v)
        return out

    def _unique_array(self, flat: dict, pointer: str, depth: int):
        """``uniqueItems`` over a finite item domain: a state machine over the values used so far.

        Returns False (after reporting it) when the item domain is not a short finite list.
        """
        rest = flat.get("items", True)
        lo, hi = flat.get("minItems", 0), flat.get("maxItems")
        why = None
        if flat.get("prefixItems") or "contains" in flat:
            why = "uniqueItems with prefixItems/contains"
        values = None if why else self._finite_values(rest, f"{pointer}/items")
        if values is None:
            self.fl.unsupported("uniqueItems", pointer, why or "items are not a short list of values")
            return False
        n = len(values)
        top = n if hi is None else min(hi, n)
        if lo > top:
            return None
        states = sum(math.comb(n, k) for k in range(top + 1))
        if states > MAX_UNIQUE_STATES:
            self.fl.unsupported("uniqueItems", pointer, f"{n} distinct item values ({states} states)")
            return False
        d = depth + 1
        syms = [self.const(v, d) for v in values]
        comma = self.punct_comma(d)

        def U_rules(key, sym, get):
            used, first = key
            count = bin(used).count("1")
            if not first and count >= lo:
                self.rule(sym)
            if count < top:
                lead = () if first else (comma,)
                for i, vs in enumerate(syms):
                    if not used >> i & 1:
                        self.rule(sym, *lead, vs, get((used | 1 << i, False)))

        U0 = self.state_machine("uniq", (0, True), U_rules)
        arr = self.nt("array")
        self.rule(arr, self.punct_open("[", d), U0, self.punct_close("]", depth))
        if lo == 0:
            self.rule(arr, *self.empty("[", "]"))
        return arr

    def object(self, flat: dict, pointer: str, depth: int) -> _Sym | None:
        """Object values of ``flat``; under ``extra_properties=False`` unnamed keys are not generated
        unless the schema needs them (``minProperties`` beyond the named ones)."""
        named = set(flat.get("properties", {})) | set(flat.get("required", []))
        enough = flat.get("patternProperties") or flat.get("minProperties", 0) <= len(named)
        if (not self.opt.extra_properties and not self.opt.strict_openai and enough
                and "additionalProperties" not in flat):
            sym = self._object(flat, pointer, depth, closed=True)
            if sym is not None:
                return sym
        return self._object(flat, pointer, depth, closed=self.opt.strict_openai)

    def _object(self, flat: dict, pointer: str, depth: int, closed: bool) -> _Sym | None:
        props = dict(flat.get("properties", {}))
        required = list(flat.get("required", []))
        forbid = set(flat.get("x-forbid", []))
        pattern_props = flat.get("patternProperties", {})
        implicit = "additionalProperties" not in flat and closed and not self.opt.strict_openai
        additional = flat.get("additionalProperties", False if closed else True)
        names_schema = flat.get("propertyNames")
        lo, hi = flat.get("minProperties", 0), flat.get("maxProperties")
        if self.opt.strict_openai:
            required = list(dict.fromkeys(required + list(props)))
        if hi is not None and lo > hi:
            return None
        name_check = self._name_checker(names_schema, pointer)
        sides = flat.get("x-sides")
        if sides is None:
            sides = [] if additional is True or additional == {} else [(tuple(pattern_props), additional)]

        def unnamed(name):
            """Schema of a key no property names (patternProperties apart): the sides' additionals."""
            matched = {p for p in pattern_props if _safe_search(p, name)}
            aps = [ap for pats, ap in sides if not set(pats) & matched]
            if any(ap is False for ap in aps):
                return False
            aps = [ap for ap in aps if ap is not True and ap != {}]
            return True if not aps else aps[0] if len(aps) == 1 else {"allOf": aps}

        depreq = [(t, list(deps)) for t, deps in flat.get("x-depreq", [])]
        dep_names = [n for t, deps in depreq for n in [t] + deps]
        for name in list(dict.fromkeys(required + dep_names)):  # named keys not listed in properties
            if name not in props:
                if name not in required and (name in forbid or unnamed(name) is False):
                    continue  # a dependency key that cannot appear
                sub = True if implicit and flat.get("x-sides") is None else unnamed(name)
                if sub is False:
                    return None
                props[name] = sub
        d = depth + 1
        members = []  # (key symbol, value symbol, required)
        for name, sub in props.items():
            if name in forbid:
                if name in required:
                    return None
                continue
            if not name_check(name):
                if name in required:
                    return None
                continue
            matching = [p for p in pattern_props if _safe_search(p, name)]
            node = {"allOf": [sub] + [pattern_props[p] for p in matching]} if matching else sub
            v = self.value(node, f"{pointer}/properties/{name}", d)
            if v is None:
                if name in required:
                    return None
                forbid.add(name)  # a named property that admits no value is not an extra key either
                continue
            members.append((name, v, name in required, node))
        if depreq:
            members, forbid = self._dependency_closure(members, depreq, forbid)
            if members is None:
                return None
        schemas = list(pattern_props.values())
        simple = "x-sides" not in flat and (len(pattern_props) <= 1 or all(
            json.dumps(x, sort_keys=True) == json.dumps(schemas[0], sort_keys=True) for x in schemas[1:]))
        classes = None
        if not simple:
            classes = _key_classes(list(pattern_props))
            if classes is None:
                self.fl.unsupported("patternProperties", pointer, "too many patterns whose keys may overlap")
                simple = True
        extras = []  # (key patterns, priority, value node, value symbol, terminal name)
        has_extra = bool(pattern_props) or additional is not False
        family = -1
        if has_extra:
            family = self.families
            self.families += 1
        key_patterns = self._name_patterns(names_schema, f"{pointer}/propertyNames")
        name_len = self._name_len(names_schema, f"{pointer}/propertyNames")
        excl = sorted(forbid) or None
        named_priority = 2
        blocked = []  # (key patterns, priority): key classes whose value schema admits nothing
        if simple:
            for p, sub in pattern_props.items():
                v = self.value(sub, f"{pointer}/patternProperties/{p}", d)
                if v is not None:
                    extras.append((key_patterns + [(p, True)], 1, sub, v, "PKEY"))
                elif additional is not False:
                    blocked.append((key_patterns + [(p, True)], 1))
            if additional is not False:
                v = self.value(additional, f"{pointer}/additionalProperties", d)
                if v is not None:
                    extras.append((key_patterns, 0, additional, v, "XKEY"))
        else:
            # key classes: the set M of patterns a key matches; the lexer family reads a key as the
            # class of highest priority |M| among those whose patterns all match, i.e. exactly M
            named_priority = len(pattern_props) + 1
            for combo in classes:
                size = len(combo)
                aps = [ap for ps, ap in sides if not set(ps) & set(combo)]
                if any(ap is False for ap in aps):
                    continue
                parts = [pattern_props[p] for p in combo] + [ap for ap in aps if ap is not True and ap != {}]
                node = True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
                v = self.value(node, f"{pointer}/patternProperties", d)
                if v is not None:
                    extras.append((key_patterns + [(p, True) for p in combo], size, node, v,
                                   "PKEY" if combo else "XKEY"))
                elif combo:
                    blocked.append((key_patterns + [(p, True) for p in combo], size))
        # "some key of a language has a value of a schema" (a failed patternProperties, ...): a key in
        # the languages of the conditions in a set M also comes as a variant of priority rank M (the
        # highest-ranked variant whose languages all contain the key is the exact one), its value split
        # by each condition's schema; the object must record every condition
        exists = list(flat.get("x-exists", []))
        if len(exists) > MAX_EXISTS:
            self.fl.unsupported("not", exists[MAX_EXISTS][3], f"more than {MAX_EXISTS} kinds of key that must "
                                "be present")
            exists = []
        scale = 1 << len(exists)
        need = scale - 1
        colon = self.punct("COLON", ":", before=True, after=True)

        def variants(node, where, mask):
            """(value symbol, record mask) pairs: ``node`` split by the value schema of each condition in mask."""
            out = [(node, 0)]
            for j, (_pats, _excl, val, _w) in enumerate(exists):
                if not mask >> j & 1:
                    continue
                nxt = []
                for nd, rec in out:
                    nxt.append((nd if val is True else self.fl.synthetic("allOf", nd, val), rec | 1 << j))
                    if val is not True:
                        nxt.append((self.fl.synthetic("allOf", nd, self.fl.synthetic("not", val)), rec))
                out = nxt
            res = []
            for nd, rec in out:
                sym = self.value(nd, where, d)
                if sym is not None:
                    res.append((sym, rec))
            return res

        def membership(name) -> int:
            return sum(1 << j for j, (pats, excl_j, _v, _w) in enumerate(exists)
                       if name not in excl_j and all(pattern_matches(p, name) for p in pats))

        member_syms = []  # ([(member symbol, record mask)], required)
        for name, v, req, node in members:
            # outside a family a key must not outrank the string terminals (same text as a value)
            key = self.key_term(name, family, named_priority * scale if family >= 0 else 0)
            mask = membership(name) if exists else 0
            vs = variants(node, f"{pointer}/properties/{name}", mask) if mask else [(v, 0)]
            alts = []
            for val, rec in vs:
                m = self.nt(f"m_{name[:20]}")
                self.rule(m, key, colon, val)
                alts.append((m, rec))
            if not alts and req:
                return None
            member_syms.append((alts, req))
        extra_syms = []  # (symbol, record mask)
        for pats, prio, node, v, kname in extras:
            for mask in range(scale):
                chosen = [exists[j] for j in range(len(exists)) if mask >> j & 1]
                k = self.string_term(list(pats) + [p for c in chosen for p in c[0]], *name_len, family=family,
                                     priority=prio * scale + mask,
                                     exclude=sorted(forbid.union(*[c[1] for c in chosen])) or None, name=kname)
                for val, rec in (variants(node, f"{pointer}/patternProperties", mask) if mask else [(v, 0)]):
                    m = self.nt("extra")
                    self.rule(m, k, colon, val)
                    extra_syms.append((m, rec))
        for pats, prio in blocked:
            # a key of this class must not be read as a lower class (a smaller pattern set or an extra
            # key): its terminal outranks them in the family and leads to a symbol with no rules, so
            # the parser expects it nowhere and the key is rejected
            k = self.string_term(list(pats), *name_len, family=family, priority=prio * scale + need,
                                 exclude=excl, name="NOKEY")
            self.rule(self.nt("blocked"), k, colon, self.nt("never"))
        n = len(member_syms)
        n_required = sum(1 for _, r in member_syms if r)
        if hi is not None and n_required > hi:
            return None
        cap = hi if hi is not None else lo
        if cap > MAX_COUNTED:
            raise LimitExceededError(f"min/maxProperties {cap} at {pointer} exceed the limit {MAX_COUNTED}")
        comma = self.punct_comma(d)
        all_opt_from = [all(not r for _, r in member_syms[i:]) for i in range(n + 1)]
        index = {mem[0]: i for i, mem in enumerate(members)}
        deps_of = {}
        for t, deps in depreq:
            if t in index:
                deps_of.setdefault(index[t], set()).update(index[x] for x in deps)
        if self.opt.any_order:
            return self._object_any_order(member_syms, extra_syms, lo, hi, depth, pointer, deps_of, need)
        # dependentRequired along schema order: which taken keys still matter at position i
        relevant = [set() for _ in range(n + 1)]
        owed_after = [set() for _ in range(n + 1)]  # triggers whose deps at >= i are still owed
        for t, ds in deps_of.items():
            for x in ds:
                a, b = (x, t) if x < t else (t, x)
                for i in range(a + 1, b + 1):
                    relevant[i].add(a)
                if x > t:
                    for i in range(t + 1, x + 1):
                        owed_after[i].add(t)
        needed_by = {}  # dep index -> triggers listing it that come earlier
        for t, ds in deps_of.items():
            for x in ds:
                if x > t:
                    needed_by.setdefault(x, set()).add(t)

        def S_key(i: int, k: int, first: bool, mask=frozenset(), found: int = 0):
            return (i, k if hi is not None else min(k, lo), first, mask & relevant[i] if mask else mask, found)

        # One derivation per object. A state S(key) (next named property at index >= i) reads an
        # extra key and stays at i, or a comma and then T(key), which skips optional properties
        # one by one to the one it reads. Reading extras at every skip level (the obvious grammar)
        # is ambiguous: after each extra key an Earley set held every level's completion, so a set's
        # core grew by ~2n items per extra key written (20k items after 45 of them beside eslint's
        # 230 rules). An extra key read at i leaves every later level open, so the language is the same.
        def skippable(key) -> bool:
            i, _k, _first, mask, _found = key
            return i < n and not member_syms[i][1] and not (mask and needed_by.get(i, set()) & mask)

        def skip(key):
            i, k, first, mask, found = key
            return S_key(i + 1, k, first, mask, found)

        def takeable(key) -> bool:
            i, _k, _first, mask, _found = key
            return i < n and bool(member_syms[i][0]) and all(x in mask for x in deps_of.get(i, ()) if x < i)

        def ends(key) -> bool:
            i, k, first, mask, found = key
            owing = any(t in mask and any(x >= i for x in deps_of[t]) for t in owed_after[i]) if mask else False
            return not first and all_opt_from[i] and k >= lo and not owing and found == need

        reads: dict = {}

        def reads_named(key) -> bool:
            """Whether a named property can be read from key, at once or after skipping optional
            ones (memoised: linear in the properties overall, not per state)."""
            path = []
            while True:
                got = reads.get(key)
                if got is not None:
                    break
                if takeable(key):
                    got = True
                    break
                path.append(key)
                if not skippable(key):
                    got = False
                    break
                key = skip(key)
            for p in path:
                reads[p] = got
            return got

        def S_rules(key, sym, get):
            kind, key = key[0], key[1:]
            i, k, first, mask, found = key
            can_add = hi is None or k < hi
            if kind == "T":   # a comma is read: skip to the named property read next
                if takeable(key):
                    nmask = mask | {i} if deps_of or needed_by else mask
                    for m, rec in member_syms[i][0]:
                        self.rule(sym, m, get(("S",) + S_key(i + 1, k + 1, False, nmask, found | rec)))
                if skippable(key) and reads_named(skip(key)):
                    self.rule(sym, get(("T",) + skip(key)))
                return
            lead = () if first else (comma,)
            if ends(key):   # no ending after skips: skipping keeps the count and what is found, and
                self.rule(sym)   # a dependency still owed cannot be skipped, so a later end ends here too
            if can_add and reads_named(key):
                self.rule(sym, *lead, get(("T",) + key))
            if can_add:
                for e, rec in extra_syms:
                    self.rule(sym, *lead, e, get(("S",) + S_key(i, k + 1, False, mask, found | rec)))

        S0 = self.state_machine("obj", ("S",) + S_key(0, 0, True), S_rules)
        obj = self.nt("object")
        self.rule(obj, self.punct_open("{", d), S0, self.punct_close("}", depth))
        if n_required == 0 and lo == 0 and not need:
            self.rule(obj, *self.empty("{", "}"))
        return obj

    def _dependency_closure(self, members, depreq, forbid):
        """Drop triggers whose dependencies can never appear (repeatedly); None if a required one must go."""
        members = list(members)
        forbid = set(forbid)
        while True:
            present = {mem[0] for mem in members}
            drop = {t for t, deps in depreq if t in present and any(x not in present for x in deps)}
            if not drop:
                return members, forbid
            if any(mem[2] for mem in members if mem[0] in drop):
                return None, forbid
            members = [mem for mem in members if mem[0] not in drop]
            forbid |= drop

    def _object_any_order(self, member_syms, extra_syms, lo, hi, depth, pointer, deps_of=None,
                          need: int = 0) -> _Sym:
        n = len(member_syms)
        if n > 12:
            raise LimitExceededError(f"any_order objects are limited to 12 named properties (at {pointer})")
        d = depth + 1
        comma = self.punct_comma(d)
        states: dict = {}
        required_mask = sum(1 << i for i, (_, r) in enumerate(member_syms) if r)

        def S(used: int, k: int, first: bool, found: int) -> _Sym:
            kk = k if hi is not None else min(k, lo)
            key = (used, kk, first, found)
            if key in states:
                return states[key]
            sym = states[key] = self.nt("obj")
            lead = () if first else (comma,)
            if not first and found == need and (used & required_mask) == required_mask and kk >= lo and all(
                    not used >> t & 1 or all(used >> x & 1 for x in ds) for t, ds in (deps_of or {}).items()):
                self.rule(sym)
            if hi is None or k < hi:
                for i, (alts, _r) in enumerate(member_syms):
                    if not used >> i & 1:
                        for m, rec in alts:
                            self.rule(sym, *lead, m, S(used | 1 << i, k + 1, False, found | rec))
                for e, rec in extra_syms:
                    self.rule(sym, *lead, e, S(used, k + 1, False, found | rec))
            return sym

        obj = self.nt("object")
        self.rule(obj, self.punct_open("{", d), S(0, 0, True, 0), self.punct_close("}", depth))
        if required_mask == 0 and lo == 0 and not need:
            self.rule(obj, *self.empty("{", "}"))
        return obj

    def _name_checker(self, names_schema, pointer):
        if names_schema is None or names_schema is True:
            return lambda name: True
        if self.validator is None:
            return lambda name: True
        return lambda name: self.validator(names_schema, name)

    def _name_patterns(self, names_schema, where: str):
        if names_schema is None or names_schema is True:
            return []
        flat = self.fl.flatten(names_schema, where)
        nothing = [("[^\\s\\S]", False)]
        if flat is False:
            return nothing
        for entry in flat.get("x-not", []):  # a negation that is one plain string condition
            alts = self._negation(entry[0], entry[1], frozenset({"string"}), "propertyNames")
            if alts is None:
                continue
            if not alts:
                return nothing
            if len(alts) == 1 and set(alts[0]) <= _NAME_KEYS:
                flat = merge({k: v for k, v in flat.items() if k != "x-not"} | {"x-not": [
                    e for e in flat["x-not"] if e is not entry]}, alts[0], where)
                if flat is False:
                    return nothing
            else:
                self.fl.unsupported("propertyNames", where, "a negation with several cases")
        extra = set(flat) - _NAME_KEYS - {"x-not"}
        if flat.get("x-not"):
            extra.add("not")
        if extra:
            self.fl.unsupported("propertyNames", where, f"keywords {sorted(extra)}")
        pats = list(flat.get("x-patterns", []))
        pats += [(p, search, True) for p, search in flat.get("x-antipatterns", [])]
        for values, _w in flat.get("x-notenum", []):
            pats += [(re.escape(v), False, True) for v in values if isinstance(v, str)]
        pats += [(re.escape(v), False, True) for v in flat.get("x-exclude", [])]
        if "enum" in flat:
            names = [v for v in flat["enum"] if isinstance(v, str)
                     and (self.validator is None or self.validator(names_schema, v))]
            if not names:
                return nothing
            pats.append(("(?:" + "|".join(re.escape(v) for v in names) + ")", False))
        return pats

    def _name_len(self, names_schema, where: str):
        if not isinstance(names_schema, dict):
            return 0, None
        flat = self.fl.flatten(names_schema, where)
        if not flat:
            return 0, None
        return flat.get("minLength", 0), flat.get("maxLength")

    def state_machine(self, name: str, first_key, make_rules) -> _Sym:
        """Nonterminals for a finite family of states, built with a worklist (no recursion).

        ``make_rules(key, sym, get)`` adds the rules of state ``key``; ``get(key2)`` names another.
        """
        syms: dict = {}
        work: list = []

        def get(key):
            sym = syms.get(key)
            if sym is None:
                sym = syms[key] = self.nt(name)
                work.append(key)
            return sym

        root = get(first_key)
        while work:
            key = work.pop()
            make_rules(key, syms[key], get)
        return root

    # -- layout -------------------------------------------------------------------------------------
    def punct_open(self, ch: str, inner_depth: int) -> _Sym:
        if self.opt.indent is not None:
            text = ch + "\n" + " " * (self.opt.indent * inner_depth)
            return self.term(("p", text), "OPEN", pattern=_rx_literal(text))
        return self.punct("OPEN", ch, after=True)

    def punct_close(self, ch: str, depth: int) -> _Sym:
        if self.opt.indent is not None:
            text = "\n" + " " * (self.opt.indent * depth) + ch
            return self.term(("p", text), "CLOSE", pattern=_rx_literal(text))
        return self.punct("CLOSE", ch, before=True)

    def punct_comma(self, inner_depth: int) -> _Sym:
        if self.opt.indent is not None:
            text = ",\n" + " " * (self.opt.indent * inner_depth)
            return self.term(("p", text), "COMMA", pattern=_rx_literal(text))
        return self.punct("COMMA", ",", before=True, after=True)

    def empty(self, o: str, c: str) -> tuple[_Sym, ...]:
        if self.opt.indent is not None:
            return (self.term(("p", o + c), "EMPTY", pattern=_rx_literal(o + c)),)
        return self.punct("OPEN", o), self.punct("CLOSE", c, before=True)  # one whitespace slot

    # -- assembly ---------------------------------------------------------------------------------------
    def build(self, root_sym: _Sym, vocab, source: str):
        """Compile the accumulated grammar against ``vocab``."""
        start = self.nt("start")
        o = self.opt
        if o.whitespace == "flexible" and o.separators is None and o.indent is None:
            self.rule(start, self.optional_ws(), root_sym)  # no trailing run: EOS follows the value at once
        else:
            self.rule(start, root_sym)
        n_terms = len(self.terms)

        def conv(s: _Sym) -> int:
            return s.index if s.kind == "t" else n_terms + s.index

        rules = [(conv(lhs), tuple(conv(s) for s in rhs)) for lhs, rhs in self.rules]
        return assemble(self.terms, rules, conv(start), self.nts, vocab, source=source)


def _key_classes(pats: list):
    """The sets of patterns a key may match all at once (every pair may overlap), smallest first;
    None when there are too many."""
    n = len(pats)
    if n > MAX_KEY_PATTERNS:
        return None
    meet = [[i == j or not _patterns_apart(pats[i], pats[j]) for j in range(n)] for i in range(n)]
    out = [()]
    frontier = [()]
    while frontier:
        nxt = []
        for combo in frontier:
            start = combo[-1] + 1 if combo else 0
            for j in range(start, n):
                if all(meet[i][j] for i in combo):
                    nxt.append(combo + (j,))
        out += nxt
        if len(out) > MAX_KEY_CLASSES:
            return None
        frontier = nxt
    return [tuple(pats[i] for i in combo) for combo in out]


def _memo_key(node):
    """Identity of a subschema for memoisation; ``{"allOf": [...]}`` wrappers (made afresh by
    merges) are keyed by their parts, so recursive schemas still close."""
    if isinstance(node, dict):
        if len(node) == 1 and isinstance(node.get("allOf"), list):
            return ("allOf",) + tuple(_memo_key(p) for p in node["allOf"])
        return id(node)
    return repr(node)


def _internal_ok(flat: dict, v) -> bool:
    """``v`` meets the internal (negation-made) constraints of ``flat``."""
    if flat.get("x-nonint") and value_kind(v) == "int":
        return False
    if isinstance(v, dict):
        if any(k in v for k in flat.get("x-forbid", [])):
            return False
        if any(t in v and any(d not in v for d in deps) for t, deps in flat.get("x-depreq", [])):
            return False
    if isinstance(v, str):
        if v in flat.get("x-exclude", []):
            return False
        for p, search in flat.get("x-antipatterns", []):
            try:
                if (re.search(p, v) if search else re.fullmatch(p, v)) is not None:
                    return False
            except re.error:
                return False
    if value_kind(v) == "int" and not isinstance(v, bool):
        if any(int(v) % m == 0 for m in flat.get("x-notmult", [])):
            return False
    key = json_key(v)
    return not any(key == json_key(w) for values, _ in flat.get("x-notenum", []) for w in values)


def _dyadic(f: Fraction) -> bool:
    d = f.denominator
    return d & (d - 1) == 0


def _string_key(patterns, min_len: int, max_len, exclude) -> tuple:
    """The (cross-compile) terminal key of a JSON string lexeme: :meth:`SchemaGrammarBuilder.string_term`
    and :meth:`~SchemaGrammarBuilder.string_const` build one terminal for equal keys."""
    return ("s", tuple(patterns), min_len, max_len, tuple(sorted(exclude)) if exclude else None)


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


def _type_of(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v == int(v) else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _dedupe(values):
    seen, out = set(), []
    for v in values:
        k = json.dumps(v, sort_keys=True)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def _rx_literal(text: str) -> str:
    return re.escape(text)


def _safe_search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
