"""Object rules of the schema-to-grammar builder: named, pattern and extra keys (a key terminal
family), ``required``, property counts, dependencies and ``propertyNames``."""

from __future__ import annotations

import json
import re

from ...core.errors import LimitExceededError
from .complement import pattern_matches
from .emitbase import MAX_COUNTED, _safe_search, _Sym
from .flatten import merge
from .negate import _patterns_apart

MAX_KEY_PATTERNS = 16
MAX_KEY_CLASSES = 64
MAX_EXISTS = 3
_NAME_KEYS = frozenset({"x-raw", "type", "x-patterns", "x-antipatterns", "x-exclude", "x-notenum", "enum", "minLength",
                        "maxLength"})


class ObjectRules:
    """Mixin of :class:`~.emit.SchemaGrammarBuilder`: object values."""

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
