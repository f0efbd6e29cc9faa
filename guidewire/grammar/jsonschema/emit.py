"""Flat schemas -> BNF rules and terminals for the Earley/lexer engine.

Every JSON token is one terminal with its surrounding whitespace folded in (``{``, ``,``,
``:`` carry a bounded whitespace run), so whitespace can never run away. String
lexemes are built by :mod:`..jsonstring` from the decoded-string constraints. Object
keys of an object that admits extra properties form a terminal *family*: a key read as
a named property (priority 2) is never also read as a pattern key (1) or an extra key (0).
"""

from __future__ import annotations

import itertools
import json
import re
from fractions import Fraction

from ...core.errors import LimitExceededError, UnsatisfiableGrammarError, UnsupportedFeatureError
from ..frontend import TerminalSpec, assemble
from ..jsonstring import (any_string_automaton, excluding_automaton, json_string_into, literal_automaton,
                          pattern_automaton)
from . import numbers
from .flatten import Flattener, merge
from .product import intersect_all

ALL_TYPES = ("null", "boolean", "object", "array", "number", "string")
MAX_COUNTED = 2000
MAX_ANY_COMBINATIONS = 256


class _Sym:
    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int):
        self.kind, self.index = kind, index


class SchemaGrammarBuilder:
    """Accumulates terminals and rules while walking a schema; :meth:`build` compiles them."""

    def __init__(self, flattener: Flattener, root_validator, options):
        self.fl = flattener
        self.validator = root_validator
        self.opt = options
        self.terms: list[TerminalSpec] = []
        self.term_keys: dict = {}
        self.rules: list[tuple[_Sym, tuple[_Sym, ...]]] = []
        self.nts: list[str] = []
        self.memo: dict = {}
        self.families = 0
        self._any_value = None

    # -- symbols -------------------------------------------------------------------------------
    def term(self, key, name: str, *, pattern: str | None = None, builder=None, family: int = -1,
             priority: int = 0) -> _Sym:
        """Intern a terminal by ``key``."""
        full = (key, family, priority)
        idx = self.term_keys.get(full)
        if idx is None:
            idx = self.term_keys[full] = len(self.terms)
            self.terms.append(TerminalSpec(f"{name}_{idx}", pattern or "", family=family, priority=priority,
                                           builder=builder))
        return _Sym("t", idx)

    def nt(self, name: str) -> _Sym:
        """A fresh nonterminal."""
        self.nts.append(name)
        return _Sym("n", len(self.nts) - 1)

    def rule(self, lhs: _Sym, *rhs: _Sym) -> None:
        """Add ``lhs -> rhs``."""
        self.rules.append((lhs, tuple(rhs)))

    def punct(self, name: str, text: str, *, before: bool = False, after: bool = False) -> _Sym:
        """A punctuation terminal with the configured whitespace around it."""
        o = self.opt
        if o.separators is not None or o.whitespace == "compact":
            seps = o.separators or (",", ":")
            lit = {",": seps[0], ":": seps[1]}.get(text, text)
            return self.term(("p", lit), name, pattern=_rx_literal(lit))
        ws = f"[ \\t\\n\\r]{{0,{o.max_whitespace}}}"
        pat = (ws if before else "") + _rx_literal(text) + (ws if after else "")
        return self.term(("p", pat), name, pattern=pat)

    def lit(self, text: str) -> _Sym:
        """An exact token such as ``true``."""
        return self.term(("l", text), text.upper() if text.isalpha() else "LIT", pattern=_rx_literal(text))

    def string_term(self, patterns, min_len: int, max_len, *, family: int = -1, priority: int = 0,
                    exclude=None, name: str = "STRING") -> _Sym:
        """A JSON string lexeme whose decoded value satisfies all constraints."""
        key = ("s", tuple(patterns), min_len, max_len, tuple(sorted(exclude)) if exclude else None)

        def build(nfa):
            autos = [pattern_automaton(p, search=search) for p, search in patterns]
            if exclude:
                autos.append(excluding_automaton(exclude))
            auto = intersect_all(autos) if autos else any_string_automaton()
            return json_string_into(nfa, auto, min_len=min_len, max_len=max_len)

        return self.term(key, name, builder=build, family=family, priority=priority)

    def key_term(self, name: str, family: int, priority: int) -> _Sym:
        """The quoted key ``name`` (any JSON spelling of it)."""
        def build(nfa):
            return json_string_into(nfa, literal_automaton(name))

        return self.term(("k", name), "KEY", builder=build, family=family, priority=priority)

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
        key = (id(node), d) if isinstance(node, dict) else (repr(node), d)
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

    def alternatives(self, flat, pointer: str, depth: int) -> list[_Sym]:
        """Symbols for each way a value of ``flat`` can be written."""
        if flat is False:
            return []
        groups = flat.get("x-any")
        if groups:
            base = {k: v for k, v in flat.items() if k != "x-any"}
            choices = []
            for kind, branches in groups:
                flats = [(self.fl.flatten(b, p), p) for b, p in branches]
                if kind == "oneOf":
                    _check_disjoint([f for f, _ in flats], pointer, self.fl)
                choices.append(flats)
            combos = 1
            for c in choices:
                combos *= len(c)
            if combos > MAX_ANY_COMBINATIONS:
                raise LimitExceededError(f"anyOf/oneOf combinations at {pointer} exceed {MAX_ANY_COMBINATIONS}")
            out: list[_Sym] = []
            for combo in itertools.product(*choices):
                merged = base
                for f, p in combo:
                    merged = merge(merged, f, p)
                    if merged is False:
                        break
                if merged is False:
                    continue
                sub = self.nt(f"alt{len(self.nts)}")
                alts = self.alternatives(merged, pointer, depth)
                for a in alts:
                    self.rule(sub, a)
                if alts:
                    out.append(sub)
            return out
        return self.typed(flat, pointer, depth)

    def typed(self, flat: dict, pointer: str, depth: int) -> list[_Sym]:
        """Alternatives per JSON type allowed by ``flat``."""
        types = set(flat.get("type") or ALL_TYPES)
        if "number" in types:
            types.discard("integer")
        for neg, where in flat.get("x-not", []):
            types = self._apply_not(types, neg, where, flat)
        if "enum" in flat:
            return self.enum(flat, types, pointer, depth)
        out: list[_Sym] = []
        if "null" in types:
            out.append(self.lit("null"))
        if "boolean" in types:
            out += [self.lit("true"), self.lit("false")]
        if "integer" in types or "number" in types:
            s = self.number(flat, "number" in types, pointer)
            if s is not None:
                out.append(s)
        if "string" in types:
            s = self.string(flat, pointer)
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

    def _apply_not(self, types: set, neg, where: str, flat: dict) -> set:
        if neg is False:
            return types
        if neg is True or neg == {}:
            return set()
        if isinstance(neg, dict):
            keys = set(neg) - {"description", "title", "$comment"}
            if keys == {"type"}:
                ban = {neg["type"]} if isinstance(neg["type"], str) else set(neg["type"])
                if "number" in ban:
                    ban.add("integer")
                if "integer" in ban and "number" in types:
                    self.fl.unsupported("not", where, "excluding integers from numbers")
                    return types
                return types - ban
            if keys <= {"enum", "const", "type"} and not (keys == {"type"}):
                values = neg.get("enum", []) + ([neg["const"]] if "const" in neg else [])
                if all(isinstance(v, str) for v in values) and types <= {"string"} and "type" not in keys:
                    flat.setdefault("x-exclude", []).extend(values)
                    return types
            if keys == {"required"} and isinstance(neg.get("required"), list):
                flat.setdefault("x-forbid", []).extend(neg["required"])
                return types
        self.fl.unsupported("not", where)
        return types

    # -- scalars ----------------------------------------------------------------------------------
    def enum(self, flat: dict, types: set, pointer: str, depth: int) -> list[_Sym]:
        values = []
        for v in flat["enum"]:
            if _type_of(v) not in types and not (_type_of(v) == "integer" and "number" in types):
                continue
            if self.validator is not None and not all(self.validator(raw, v) for raw in flat.get("x-raw", [])):
                continue
            values.append(v)
        return [self.const(v, depth) for v in _dedupe(values)]

    def const(self, v, depth: int) -> _Sym:
        """Symbol for exactly the value ``v`` (strings in any JSON spelling)."""
        if isinstance(v, str):
            return self.string_term([("^" + _rx_literal(v) + "$", True)], 0, None, name="CONST")
        if v is None or isinstance(v, bool) or isinstance(v, (int, float)):
            text = json.dumps(v)
            if isinstance(v, float) and v == int(v) and abs(v) < 1e16:
                return self.term(("l", text), "NUM", pattern=_rx_literal(str(int(v))) + r"(?:\.0+)?")
            if isinstance(v, int) and not isinstance(v, bool):
                return self.term(("l", text), "NUM", pattern=_rx_literal(text) + r"(?:\.0+)?")
            return self.lit(text)
        sym = self.nt("const")
        if isinstance(v, list):
            if not v:
                self.rule(sym, self.punct("LBRACK", "[", after=True), self.punct("RBRACK", "]", before=True))
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

    def number(self, flat: dict, real: bool, pointer: str) -> _Sym | None:
        lo, hi = flat.get("minimum"), flat.get("maximum")
        xlo, xhi = flat.get("exclusiveMinimum"), flat.get("exclusiveMaximum")
        lo_excl = xlo is not None and (lo is None or xlo >= lo)
        hi_excl = xhi is not None and (hi is None or xhi <= hi)
        lo = xlo if lo_excl else lo
        hi = xhi if hi_excl else hi
        mult = flat.get("multipleOf")
        if not real:
            ilo = None if lo is None else (int(Fraction(lo)) + 1 if lo_excl and Fraction(lo).denominator == 1
                                           else -(-Fraction(lo) // 1) if not lo_excl else int(Fraction(lo) // 1) + 1)
            ihi = None if hi is None else (int(Fraction(hi)) - 1 if hi_excl and Fraction(hi).denominator == 1
                                           else int(Fraction(hi) // 1) if not hi_excl else -(-Fraction(hi) // 1) - 1)
            ilo = None if ilo is None else int(ilo)
            ihi = None if ihi is None else int(ihi)
            if ilo is not None and ihi is not None and ilo > ihi:
                return None
            if mult is not None:
                fm = Fraction(str(mult))
                if fm.denominator != 1:
                    if (1 / fm).denominator == 1:
                        mult = None  # every integer is a multiple of 1/n
                    else:
                        self.fl.unsupported("multipleOf", pointer, f"non-integer {mult} on integers")
                        mult = None
                if mult is not None and int(fm) != 1:
                    m = int(fm)
                    return self.term(("int*", m, ilo, ihi), "INT",
                                     builder=lambda nfa: numbers.multiple_of_into(nfa, m, ilo, ihi))
            pat = numbers.integer_range(ilo, ihi) if (ilo is not None or ihi is not None) else numbers.INTEGER
            return self.term(("int", pat), "INT", pattern=pat)
        if mult is not None:
            k = numbers.decimal_places(mult)
            fm = Fraction(str(mult))
            if lo is not None or hi is not None:
                self.fl.unsupported("multipleOf", pointer, "multipleOf together with bounds on a number")
            elif fm.denominator == 1:
                pat = r"-?(?:0|[1-9][0-9]*)(?:\.0+)?"
                if int(fm) != 1:
                    self.fl.unsupported("multipleOf", pointer, f"multipleOf {mult} on a non-integer type")
                return self.term(("num", pat), "NUMBER", pattern=pat)
            elif k is not None:
                pat = rf"-?(?:0|[1-9][0-9]*)(?:\.[0-9]{{1,{k}}}0*)?"
                return self.term(("num", pat), "NUMBER", pattern=pat)
            else:
                self.fl.unsupported("multipleOf", pointer, f"multipleOf {mult}")
        if lo is None and hi is None:
            return self.term(("num", numbers.NUMBER), "NUMBER", pattern=numbers.NUMBER)
        try:
            pat = numbers.number_range(lo, hi, lo_excl, hi_excl)
        except ValueError:
            self.fl.unsupported("minimum/maximum", pointer, f"fractional bound {lo if lo is not None else hi}")
            pat = numbers.NUMBER
        except UnsatisfiableGrammarError:
            return None
        return self.term(("num", pat), "NUMBER", pattern=pat)

    def string(self, flat: dict, pointer: str) -> _Sym | None:
        lo, hi = flat.get("minLength", 0), flat.get("maxLength")
        if hi is not None and lo > hi:
            return None
        if hi is not None and hi > self.opt.max_string_length:
            raise LimitExceededError(f"maxLength {hi} at {pointer} exceeds the limit {self.opt.max_string_length}")
        if lo > self.opt.max_string_length:
            raise LimitExceededError(f"minLength {lo} at {pointer} exceeds the limit {self.opt.max_string_length}")
        return self.string_term(flat.get("x-patterns", []), lo, hi, exclude=flat.get("x-exclude"))

    # -- containers ---------------------------------------------------------------------------------
    def array(self, flat: dict, pointer: str, depth: int) -> _Sym | None:
        prefix = flat.get("prefixItems", [])
        rest = flat.get("items", True)
        lo, hi = flat.get("minItems", 0), flat.get("maxItems")
        if hi is not None and lo > hi:
            return None
        if flat.get("uniqueItems") and not (hi is not None and hi <= 1):
            self.fl.unsupported("uniqueItems", pointer)
        contains = flat.get("contains")
        if any(k in flat for k in ("minContains", "maxContains")):
            if flat.get("minContains", 1) != 1 or "maxContains" in flat:
                self.fl.unsupported("minContains/maxContains", pointer)
        item_syms = [self.value(p, f"{pointer}/prefixItems/{i}", depth + 1) for i, p in enumerate(prefix)]
        rest_sym = self.value(rest, f"{pointer}/items", depth + 1) if rest is not False else None
        if hi is None and rest_sym is None:
            hi = len(prefix)
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

    def object(self, flat: dict, pointer: str, depth: int) -> _Sym | None:
        props = dict(flat.get("properties", {}))
        required = list(flat.get("required", []))
        forbid = set(flat.get("x-forbid", []))
        pattern_props = flat.get("patternProperties", {})
        additional = flat.get("additionalProperties", False if self.opt.strict_openai else True)
        names_schema = flat.get("propertyNames")
        lo, hi = flat.get("minProperties", 0), flat.get("maxProperties")
        if self.opt.strict_openai:
            required = list(dict.fromkeys(required + list(props)))
        if hi is not None and lo > hi:
            return None
        name_check = self._name_checker(names_schema, pointer)
        for name in required:  # required names not listed in properties
            if name not in props:
                matching = [p for p in pattern_props if _safe_search(p, name)]
                if matching:
                    props[name] = {"allOf": [pattern_props[p] for p in matching]}
                elif additional is False:
                    return None
                else:
                    props[name] = additional
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
            members.append((name, v, name in required))
        if len(pattern_props) > 1:
            schemas = list(pattern_props.values())
            if any(json.dumps(s, sort_keys=True) != json.dumps(schemas[0], sort_keys=True) for s in schemas[1:]):
                self.fl.unsupported("patternProperties", pointer, "several patterns whose keys may overlap")
        extras = []  # (key symbol, value symbol)
        has_extra = bool(pattern_props) or additional is not False
        family = -1
        if has_extra:
            family = self.families
            self.families += 1
        key_patterns = self._name_patterns(names_schema)
        for p, sub in pattern_props.items():
            v = self.value(sub, f"{pointer}/patternProperties/{p}", d)
            if v is not None:
                k = self.string_term(key_patterns + [(p, True)], *self._name_len(names_schema), family=family,
                                     priority=1, exclude=sorted(forbid) or None, name="PKEY")
                extras.append((k, v))
        if additional is not False:
            v = self.value(additional, f"{pointer}/additionalProperties", d)
            if v is not None:
                k = self.string_term(key_patterns, *self._name_len(names_schema), family=family, priority=0,
                                     exclude=sorted(forbid) or None, name="XKEY")
                extras.append((k, v))
        colon = self.punct("COLON", ":", before=True, after=True)
        member_syms = []
        for name, v, req in members:
            m = self.nt(f"m_{name[:20]}")
            self.rule(m, self.key_term(name, family, 2), colon, v)
            member_syms.append((m, req))
        extra_syms = []
        for k, v in extras:
            m = self.nt("extra")
            self.rule(m, k, colon, v)
            extra_syms.append(m)
        n = len(member_syms)
        n_required = sum(1 for _, r in member_syms if r)
        if hi is not None and n_required > hi:
            return None
        cap = hi if hi is not None else lo
        if cap > MAX_COUNTED:
            raise LimitExceededError(f"min/maxProperties {cap} at {pointer} exceed the limit {MAX_COUNTED}")
        comma = self.punct_comma(d)
        all_opt_from = [all(not r for _, r in member_syms[i:]) for i in range(n + 1)]
        if self.opt.any_order:
            return self._object_any_order(member_syms, extra_syms, lo, hi, depth, pointer)

        def S_key(i: int, k: int, first: bool):
            return (i, k if hi is not None else min(k, lo), first)

        def S_rules(key, sym, get):
            i, k, first = key
            lead = () if first else (comma,)
            if not first and all_opt_from[i] and k >= lo:
                self.rule(sym)
            can_add = hi is None or k < hi
            if i < n:
                m, req = member_syms[i]
                if can_add:
                    self.rule(sym, *lead, m, get(S_key(i + 1, k + 1, False)))
                if not req:
                    self.rule(sym, get(S_key(i + 1, k, first)))
            if can_add:
                for e in extra_syms:
                    self.rule(sym, *lead, e, get(S_key(i, k + 1, False)))

        S0 = self.state_machine("obj", S_key(0, 0, True), S_rules)
        obj = self.nt("object")
        self.rule(obj, self.punct_open("{", d), S0, self.punct_close("}", depth))
        if n_required == 0 and lo == 0:
            self.rule(obj, *self.empty("{", "}"))
        return obj

    def _object_any_order(self, member_syms, extra_syms, lo, hi, depth, pointer) -> _Sym:
        n = len(member_syms)
        if n > 12:
            raise LimitExceededError(f"any_order objects are limited to 12 named properties (at {pointer})")
        d = depth + 1
        comma = self.punct_comma(d)
        states: dict = {}
        required_mask = sum(1 << i for i, (_, r) in enumerate(member_syms) if r)

        def S(used: int, k: int, first: bool) -> _Sym:
            kk = k if hi is not None else min(k, lo)
            key = (used, kk, first)
            if key in states:
                return states[key]
            sym = states[key] = self.nt("obj")
            lead = () if first else (comma,)
            if not first and (used & required_mask) == required_mask and kk >= lo:
                self.rule(sym)
            if hi is None or k < hi:
                for i, (m, _r) in enumerate(member_syms):
                    if not used >> i & 1:
                        self.rule(sym, *lead, m, S(used | 1 << i, k + 1, False))
                for e in extra_syms:
                    self.rule(sym, *lead, e, S(used, k + 1, False))
            return sym

        obj = self.nt("object")
        self.rule(obj, self.punct_open("{", d), S(0, 0, True), self.punct_close("}", depth))
        if required_mask == 0 and lo == 0:
            self.rule(obj, *self.empty("{", "}"))
        return obj

    def _name_checker(self, names_schema, pointer):
        if names_schema is None or names_schema is True:
            return lambda name: True
        if self.validator is None:
            return lambda name: True
        return lambda name: self.validator(names_schema, name)

    def _name_patterns(self, names_schema):
        if names_schema is None or names_schema is True:
            return []
        flat = self.fl.flatten(names_schema, "#/propertyNames")
        if flat is False:
            return [("(?!)", False)]
        extra = set(flat) - {"x-raw", "type", "x-patterns", "minLength", "maxLength"}
        if extra:
            self.fl.unsupported("propertyNames", "#/propertyNames", f"keywords {sorted(extra)}")
        return list(flat.get("x-patterns", []))

    def _name_len(self, names_schema):
        if not isinstance(names_schema, dict):
            return 0, None
        flat = self.fl.flatten(names_schema, "#/propertyNames")
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
        return self.punct("OPEN", o, after=True), self.punct("CLOSE", c, before=True)

    # -- assembly ---------------------------------------------------------------------------------------
    def build(self, root_sym: _Sym, vocab, source: str):
        """Compile the accumulated grammar against ``vocab``."""
        start = self.nt("start")
        o = self.opt
        if o.whitespace == "flexible" and o.separators is None and o.indent is None:
            ws = self.term(("ws",), "WS", pattern=f"[ \\t\\n\\r]{{1,{o.max_whitespace}}}")
            lead = self.nt("lead")
            self.rule(lead)
            self.rule(lead, ws)
            self.rule(start, lead, root_sym)  # no trailing run: EOS follows the value at once
        else:
            self.rule(start, root_sym)
        n_terms = len(self.terms)

        def conv(s: _Sym) -> int:
            return s.index if s.kind == "t" else n_terms + s.index

        rules = [(conv(lhs), tuple(conv(s) for s in rhs)) for lhs, rhs in self.rules]
        return assemble(self.terms, rules, conv(start), self.nts, vocab, source=source)


def _check_disjoint(flats, pointer: str, fl: Flattener) -> None:
    """oneOf is enforced as anyOf when its branches provably share no instance."""
    for a, b in itertools.combinations(flats, 2):
        if a is False or b is False or _disjoint(a, b):
            continue
        fl.unsupported("oneOf", pointer, "branches may overlap (exactly-one cannot be enforced)")
        return


def _disjoint(a: dict, b: dict) -> bool:
    ta = set(a.get("type") or ALL_TYPES + ("integer",))
    tb = set(b.get("type") or ALL_TYPES + ("integer",))
    if "number" in ta:
        ta.add("integer")
    if "number" in tb:
        tb.add("integer")
    if not ta & tb:
        return True
    if "enum" in a and "enum" in b:
        if not any(json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) for x in a["enum"] for y in b["enum"]):
            return True
    for x, y in ((a, b), (b, a)):
        if "enum" in x and "type" in y and all(_type_of(v) not in tb and not (_type_of(v) == "integer" and
                                                                              "number" in tb)
                                               for v in x["enum"]) and x is a:
            return True
    pa, pb = a.get("properties", {}), b.get("properties", {})
    ra, rb = set(a.get("required", [])), set(b.get("required", []))
    only_obj = ta & tb <= {"object"}
    if only_obj:
        for name in ra & rb:
            sa, sb = pa.get(name), pb.get(name)
            if isinstance(sa, dict) and isinstance(sb, dict):
                ea = sa.get("enum", [sa["const"]] if "const" in sa else None)
                eb = sb.get("enum", [sb["const"]] if "const" in sb else None)
                if ea is not None and eb is not None and not any(
                        json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) for x in ea for y in eb):
                    return True
        for x, y, rx in ((a, b, ra), (b, a, rb)):  # x requires a key that closed y forbids
            if y.get("additionalProperties") is False and not y.get("patternProperties"):
                if any(name not in y.get("properties", {}) for name in rx):
                    return True
    return False


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
