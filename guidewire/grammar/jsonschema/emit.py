"""Flat schemas -> BNF rules and terminals for the Earley/lexer engine.

Every JSON token is one terminal with its surrounding whitespace folded in (``{``, ``,``,
``:`` carry a bounded whitespace run), so whitespace can never run away. String
lexemes are built by :mod:`..jsonstring` from the decoded-string constraints. Object
keys of an object that admits extra properties form a terminal *family*: a key read as
a named property (priority 2) is never also read as a pattern key (1) or an extra key (0).
"""

from __future__ import annotations

import json

from ...core.errors import LimitExceededError, UnsupportedFeatureError
from ..frontend import TerminalSpec, assemble
from ..jsonstring import (any_string_automaton, excluding_automaton, json_counted_into, json_string_into,
                          literal_automaton, pattern_automaton)
from ..regex import RegexFragment, literal_into
from .complement import complement_automaton
from .emitarrays import ArrayRules
from .emitbase import ALL_TYPES, _internal_ok, _rx_literal, _Sym
from .emitnumbers import NumberRules
from .emitobjects import ObjectRules
from .flatten import Flattener, merge
from .minimize import smaller_automaton
from .negate import (MAX_NEGATION_DEPTH, Inexpressible, flats_disjoint, kinds_flat, kinds_of, negate_flat,
                     overlap_kinds, value_kind)
from .product import intersect_all

SEALED_JSON_STRINGS = 0   # the sealed class of string and key terminals: every word is one JSON string
MAX_ANY_COMBINATIONS = 256


class SchemaGrammarBuilder(NumberRules, ArrayRules, ObjectRules):
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




def _memo_key(node):
    """Identity of a subschema for memoisation; ``{"allOf": [...]}`` wrappers (made afresh by
    merges) are keyed by their parts, so recursive schemas still close."""
    if isinstance(node, dict):
        if len(node) == 1 and isinstance(node.get("allOf"), list):
            return ("allOf",) + tuple(_memo_key(p) for p in node["allOf"])
        return id(node)
    return repr(node)






def _string_key(patterns, min_len: int, max_len, exclude) -> tuple:
    """The (cross-compile) terminal key of a JSON string lexeme: :meth:`SchemaGrammarBuilder.string_term`
    and :meth:`~SchemaGrammarBuilder.string_const` build one terminal for equal keys."""
    return ("s", tuple(patterns), min_len, max_len, tuple(sorted(exclude)) if exclude else None)








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




