"""``not`` as a disjunction of positive flat schemas, and disjointness of flat schemas.

A value fails a flat schema (a conjunction) iff its JSON type is not allowed, or it breaks one
of the keywords that apply to its type. :func:`negate_flat` lists one positive flat schema per
such way to fail (``{"type": ["string"], "maxLength": 2}`` for a failed ``minLength: 3``...),
restricted to the *kinds* of value the context still allows. Kinds split numbers into
integral (``int``) and non-integral (``frac``) values. A keyword whose failure is not
expressible (``patternProperties``, ``uniqueItems``...) makes the negation inexpressible, but
only when a value of its kind can reach it.

Internal flat keys used by the negations (see :mod:`.emit` for how they are compiled):
``x-forbid`` (keys that must be absent), ``x-exclude`` (excluded strings), ``x-notenum``
(excluded values of any type), ``x-antipatterns`` (patterns the string must not match),
``x-nonint`` (numbers must not be integral), ``x-notmult`` (integers not multiples of).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

from ..jsonstring import RELAXED
from .flatten import ANNOTATIONS, merge

KINDS = frozenset({"null", "boolean", "object", "array", "string", "int", "frac"})
NUM = frozenset({"int", "frac"})
MAX_NEGATION_DEPTH = 12
MAX_COUNTED_NAMES = 3


def kinds_of(flat) -> frozenset:
    """The kinds of value a flat schema's ``type`` (and ``x-nonint``) admit."""
    if flat is False:
        return frozenset()
    types = flat.get("type")
    if not types:
        ks = set(KINDS)
    else:
        ks = set()
        for t in types:
            if t == "integer":
                ks.add("int")
            elif t == "number":
                ks |= NUM
            else:
                ks.add(t)
    if flat.get("x-nonint"):
        ks.discard("int")
    return frozenset(ks)


def effective_kinds(fl, flat, depth: int = 0) -> frozenset:
    """Kinds a flat schema can admit, also reading its ``enum`` and ``anyOf``/``oneOf`` branches."""
    ks = kinds_of(flat)
    if not ks:
        return ks
    if "enum" in flat:
        ks = ks & {value_kind(v) for v in flat["enum"]}
    if fl is not None and depth < 3:
        for _kind, branches in flat.get("x-any", []):
            union = set()
            for b, p in branches:
                try:
                    union |= effective_kinds(fl, fl.flatten(b, p), depth + 1)
                except Exception:  # noqa: BLE001 - unreadable branch: assume anything
                    union = set(KINDS)
                if union >= ks:
                    break
            ks = ks & union
    return frozenset(ks)


def kinds_flat(ks) -> dict:
    """A flat schema admitting exactly the values of the kinds ``ks``."""
    types = sorted(k for k in ks if k not in NUM)
    out: dict = {"x-raw": []}
    if "int" in ks and "frac" in ks:
        types.append("number")
    elif "int" in ks:
        types.append("integer")
    elif "frac" in ks:
        types.append("number")
        out["x-nonint"] = True
    out["type"] = sorted(types)
    return out


def trivial(node) -> bool:
    """True for schemas that admit every value (``true``, ``{}``, annotations only)."""
    if node is True:
        return True
    return isinstance(node, dict) and all(k in ANNOTATIONS or k.startswith("x-") for k in node)


class Inexpressible(Exception):
    """The negation needs a keyword whose failure cannot be compiled exactly."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def negate_flat(fl, flat, where: str, ctx, disjoint=None, base=None, validator=None) -> list[dict]:
    """Flat schemas whose union is exactly the values of kinds ``ctx`` that fail ``flat``.

    ``fl`` is the :class:`~.flatten.Flattener` (to flatten nested ``not`` operands);
    ``disjoint(a, b)`` proves two flats share no value (for ``not oneOf``). ``base`` is the
    flat schema the result will be conjoined with: when it admits only a fixed set of keys,
    failing ``additionalProperties``/``patternProperties``/``propertyNames`` becomes "one of
    those keys is present with a failing value". Raises :class:`Inexpressible` when a needed
    failure cannot be expressed.
    """
    closed = _closed_names(base)

    def neg(sub):
        return fl.synthetic("not", sub)

    if flat is False:
        return [kinds_flat(ctx)] if ctx else []
    kinds = kinds_of(flat)
    inside = kinds & ctx
    alts: list[dict] = []
    outside = (KINDS - kinds) & ctx
    if outside:
        alts.append(kinds_flat(outside))
    if not inside:
        return alts

    def add(ks, extra: dict) -> None:
        ks = ks & inside
        if ks:
            f = kinds_flat(ks)
            f.update(extra)
            alts.append(f)

    def bad(ks, why: str) -> None:
        if ks & inside:
            raise Inexpressible(why)

    obj, arr, string = frozenset({"object"}), frozenset({"array"}), frozenset({"string"})
    for key, value in flat.items():
        if key in ("x-raw", "type", "x-nonint", "minContains", "maxContains"):
            continue
        if key == "enum":
            add(inside, {"x-notenum": [(list(value), where)]})
        elif key == "x-notenum":
            for values, _w in value:
                add(inside, {"enum": list(values)})
        elif key == "minLength":
            if value > 0:
                add(string, {"maxLength": value - 1})
        elif key == "maxLength":
            add(string, {"minLength": value + 1})
        elif key == "x-patterns":
            for p in value:
                # a relaxed (superset) pattern has no exact complement: any string may fail it
                add(string, {} if p[0].startswith(RELAXED) else {"x-antipatterns": [p]})
        elif key == "x-antipatterns":
            for p in value:
                add(string, {"x-patterns": [p]})
        elif key == "x-exclude":
            add(string, {"enum": list(value)})
        elif key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            flip = {"minimum": "exclusiveMaximum", "exclusiveMinimum": "maximum",
                    "maximum": "exclusiveMinimum", "exclusiveMaximum": "minimum"}[key]
            add(NUM, {flip: value})
        elif key == "multipleOf":
            fm = Fraction(str(value))
            if fm.denominator == 1:
                if int(fm) != 1:
                    add(frozenset({"int"}), {"x-notmult": [int(fm)]})
                add(frozenset({"frac"}), {})
            else:
                bad(NUM, f"not multipleOf {value}")
        elif key == "x-notmult":
            for m in value:
                add(frozenset({"int"}), {"multipleOf": m})
        elif key == "required":
            for name in value:
                add(obj, {"x-forbid": [name]})
        elif key == "x-forbid":
            for name in value:
                add(obj, {"required": [name]})
        elif key == "minProperties":
            if value > 0:
                add(obj, {"maxProperties": value - 1})
        elif key == "maxProperties":
            add(obj, {"minProperties": value + 1})
        elif key == "properties":
            for name, sub in value.items():
                if trivial(sub):
                    continue
                add(obj, {"required": [name], "properties": {name: neg(sub)}})
        elif key == "patternProperties":
            if all(trivial(s) for s in value.values()):
                continue
            if closed is None:  # some key matching a pattern has a failing value
                for pat, sub in value.items():
                    if not trivial(sub):
                        add(obj, {"x-exists": [(((pat, True),), (), neg(sub), where)]})
                continue
            for pat, sub in value.items():
                if trivial(sub):
                    continue
                for name in closed:
                    if _search(pat, name):
                        add(obj, {"required": [name], "properties": {name: neg(sub)}})
        elif key == "additionalProperties":
            if trivial(value):
                continue
            named = flat.get("properties", {})
            if closed is None:
                if value is False and not flat.get("patternProperties") and len(named) <= MAX_COUNTED_NAMES:
                    # some key outside N = named: for each T = the keys of N present, more than |T| keys
                    names = list(named)
                    for mask in range(1 << len(names)):
                        t = [n for i, n in enumerate(names) if mask >> i & 1]
                        add(obj, {"required": t, "x-forbid": [n for n in names if n not in t],
                                  "minProperties": len(t) + 1})
                    continue
                # some key that no property names and no pattern matches has a failing value
                pats = tuple((p, True, True) for p in flat.get("patternProperties", {}))
                add(obj, {"x-exists": [(pats, tuple(named), True if value is False else neg(value), where)]})
                continue
            pats = list(flat.get("patternProperties", {}))
            for name in closed:
                if name in named or any(_search(p, name) for p in pats):
                    continue
                add(obj, {"required": [name]} if value is False else
                    {"required": [name], "properties": {name: neg(value)}})
        elif key == "propertyNames":
            if trivial(value):
                continue
            if closed is None or validator is None:  # some key fails propertyNames
                for alt in negate_flat(fl, fl.flatten(value, where), where, frozenset({"string"}), disjoint, None,
                                       validator):
                    add(obj, {"x-exists": [(_key_patterns(alt), (), True, where)]})
                continue
            for name in closed:
                if not validator(value, name):
                    add(obj, {"required": [name]})
        elif key == "x-depreq":
            for trigger, deps in value:
                for d in deps:
                    add(obj, {"required": [trigger], "x-forbid": [d]})
        elif key == "items":
            if trivial(value):
                continue
            if flat.get("prefixItems"):
                bad(arr, "not items after prefixItems")
            else:
                add(arr, {"contains": neg(value)})
        elif key == "prefixItems":
            for i, sub in enumerate(value):
                if not trivial(sub):
                    add(arr, {"minItems": i + 1, "prefixItems": [True] * i + [neg(sub)]})
        elif key == "minItems":
            if value > 0:
                add(arr, {"maxItems": value - 1})
        elif key == "maxItems":
            add(arr, {"minItems": value + 1})
        elif key == "contains":
            if flat.get("minContains", 1) != 1 or "maxContains" in flat:
                bad(arr, "not minContains/maxContains")
            elif value is False:
                add(arr, {})
            else:
                add(arr, {"items": neg(value)})
        elif key == "uniqueItems":
            if value:
                bad(arr, "not uniqueItems")
        elif key == "x-any":
            for kind, branches in value:
                rel = []
                for b, p in branches:
                    f = fl.flatten(b, p)
                    if f is not False and effective_kinds(fl, f) & inside:
                        rel.append((f, b, p))
                if not rel:  # no branch admits these kinds: the group fails for all of them
                    add(inside, {})
                    continue
                if kind == "oneOf" and len(rel) > 1:
                    # fails oneOf: no branch holds, or two branches that may overlap both hold
                    core = {k: v for k, v in flat.items() if k not in ("x-any", "x-not", "x-raw")}
                    if isinstance(base, dict):
                        core = merge(core, {k: v for k, v in base.items() if k not in ("x-any", "x-not")}, where)
                    ctxs = [merge(core, f, p) if core is not False else False for f, _b, p in rel]
                    for i in range(len(rel)):
                        for j in range(i + 1, len(rel)):
                            both = overlap_kinds(ctxs[i], ctxs[j], rel[i][0].get("x-raw"), rel[j][0].get("x-raw"),
                                                 validator, fl) & inside
                            if both:
                                pair = merge(rel[i][0], rel[j][0], where)
                                if pair is not False:
                                    g = merge(kinds_flat(both), pair, where)
                                    if g is not False:
                                        alts.append(g)
                add(inside, {"x-not": [(b, p) for _f, b, p in rel]})
        elif key == "x-not":
            for entry in value:
                operand, w = entry[0], entry[1]
                f = fl.flatten(operand, w)
                if f is False:
                    continue
                g = merge(kinds_flat(inside), f, w)
                if g is not False:
                    alts.append(g)
        else:
            bad(inside, f"not {key}")
    return alts


_KEY_KEYS = frozenset({"x-raw", "type", "x-patterns", "x-antipatterns", "x-exclude", "x-notenum", "enum", "minLength",
                       "maxLength"})


def _key_patterns(flat) -> tuple:
    """A string flat schema as key pattern entries ``(pattern, search[, negated])``."""
    if set(flat) - _KEY_KEYS:
        raise Inexpressible("not propertyNames with " + ", ".join(sorted(set(flat) - _KEY_KEYS)))
    pats = list(flat.get("x-patterns", []))
    pats += [(p, s, True) for p, s in flat.get("x-antipatterns", [])]
    for values, _w in flat.get("x-notenum", []):
        pats += [(re.escape(v), False, True) for v in values if isinstance(v, str)]
    pats += [(re.escape(v), False, True) for v in flat.get("x-exclude", [])]
    if "enum" in flat:
        names = [v for v in flat["enum"] if isinstance(v, str)]
        pats.append(("(?:" + "|".join(re.escape(v) for v in names) + ")" if names else "[^\\s\\S]", False))
    lo, hi = flat.get("minLength", 0), flat.get("maxLength")
    if lo or hi is not None:
        pats.append((f"[\\s\\S]{{{lo},{'' if hi is None else hi}}}", False))
    return tuple(pats)


def _closed_names(base):
    """The only keys an object of ``base`` may have, or None when other keys are possible."""
    if not isinstance(base, dict) or base.get("additionalProperties") is not False or base.get("patternProperties"):
        return None
    forbid = set(base.get("x-forbid", []))
    return [n for n, s in base.get("properties", {}).items() if s is not False and n not in forbid]


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def json_key(v) -> str:
    """A canonical text for a JSON value (1 and 1.0 agree, true and 1 differ)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return "n" + str(Fraction(v))
    if isinstance(v, list):
        return "[" + ",".join(json_key(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + json_key(x) for k, x in sorted(v.items())) + "}"
    return repr(v)


def value_kind(v) -> str:
    """The kind of a JSON value (see :data:`KINDS`)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "int" if v.is_integer() else "frac"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


MAX_DISJOINT_DEPTH = 3


def _num_interval(flat):
    lo, hi = flat.get("minimum"), flat.get("maximum")
    xlo, xhi = flat.get("exclusiveMinimum"), flat.get("exclusiveMaximum")
    lo_x = xlo is not None and (lo is None or xlo >= lo)
    hi_x = xhi is not None and (hi is None or xhi <= hi)
    return (xlo if lo_x else lo), lo_x, (xhi if hi_x else hi), hi_x


def _ranges_apart(lo1, lx1, hi1, hx1, lo2, lx2, hi2, hx2) -> bool:
    """The two ranges share no point."""
    def below(hi, hx, lo, lx):  # every point of range 1 (upper hi) lies below range 2 (lower lo)
        if hi is None or lo is None:
            return False
        return hi < lo or (hi == lo and (hx or lx))
    return below(hi1, hx1, lo2, lx2) or below(hi2, hx2, lo1, lx1)


def flats_disjoint(a, b, raw_a=None, raw_b=None, validator=None, fl=None, depth: int = 0) -> bool:
    """True only if no JSON value satisfies both flat schemas (a sound, incomplete test)."""
    return not overlap_kinds(a, b, raw_a, raw_b, validator, fl, depth)


def overlap_kinds(a, b, raw_a=None, raw_b=None, validator=None, fl=None, depth: int = 0) -> frozenset:
    """The kinds of value that may satisfy both flat schemas (empty: provably disjoint).

    ``raw_a``/``raw_b`` are the source schemas of each side alone; with ``validator`` an
    ``enum`` side overlaps the other only in the kinds of its values that pass the other's
    sources.
    """
    if a is False or b is False:
        return frozenset()
    common = effective_kinds(fl, a) & effective_kinds(fl, b)
    for x, y, ry in ((a, b, raw_b), (b, a, raw_a)):
        if not common:
            return common
        if "enum" in x:
            vals = [v for v in x["enum"] if value_kind(v) in common]
            if validator is not None and ry is not None:
                vals = [v for v in vals if all(validator(r, v) for r in ry)]
            if "enum" in y:
                keys = {json_key(w) for w in y["enum"]}
                vals = [v for v in vals if json_key(v) in keys]
            common = common & {value_kind(v) for v in vals}
    return frozenset(k for k in common if not _kind_disjoint(k, a, b, validator, fl, depth))


def _kind_disjoint(kind: str, a: dict, b: dict, validator, fl, depth: int) -> bool:
    if kind == "string":
        if ("maxLength" in a and a["maxLength"] < b.get("minLength", 0)) or (
                "maxLength" in b and b["maxLength"] < a.get("minLength", 0)):
            return True
        return any(_patterns_apart(pa, pb, sa, sb) for pa, sa in a.get("x-patterns", [])
                   for pb, sb in b.get("x-patterns", []))
    if kind in NUM:
        return _ranges_apart(*_num_interval(a), *_num_interval(b))
    if kind == "array":
        if ("maxItems" in a and a["maxItems"] < b.get("minItems", 0)) or (
                "maxItems" in b and b["maxItems"] < a.get("minItems", 0)):
            return True
        if depth < MAX_DISJOINT_DEPTH and fl is not None and a.get("minItems", 0) >= 1 and b.get("minItems", 0) >= 1:
            sa = (a.get("prefixItems") or [a.get("items", True)])[0]
            sb = (b.get("prefixItems") or [b.get("items", True)])[0]
            if _sub_disjoint(sa, sb, validator, fl, depth):
                return True
        return False
    if kind == "object":
        if ("maxProperties" in a and a["maxProperties"] < b.get("minProperties", 0)) or (
                "maxProperties" in b and b["maxProperties"] < a.get("minProperties", 0)):
            return True
        ra, rb = set(a.get("required", [])), set(b.get("required", []))
        for x, y, rx in ((a, b, ra), (b, a, rb)):
            if set(y.get("x-forbid", [])) & rx:
                return True
            props = y.get("properties", {})
            if any(props.get(n) is False for n in rx):
                return True
            if y.get("additionalProperties") is False:
                pats = list(y.get("patternProperties", {}))
                if any(n not in props and not any(_search(p, n) for p in pats) for n in rx):
                    return True
        if _keys_apart(a, b):
            return True
        if depth < MAX_DISJOINT_DEPTH and fl is not None:
            pa, pb = a.get("properties", {}), b.get("properties", {})
            for name in ra & rb:
                if name in pa and name in pb and _sub_disjoint(pa[name], pb[name], validator, fl, depth):
                    return True
        return False
    return False


def _keys_apart(a: dict, b: dict) -> bool:
    """Both sides are closed objects with at least one key, and no key is allowed by both."""
    for x in (a, b):
        if x.get("additionalProperties") is not False:
            return False
        if not x.get("required") and x.get("minProperties", 0) < 1:
            return False

    def allowed_by(y, name):
        sub = y.get("properties", {}).get(name)
        if sub is not None:
            return sub is not False
        return any(_search(p, name) for p in y.get("patternProperties", {}))

    for x, y in ((a, b), (b, a)):
        if any(s is not False and allowed_by(y, n) for n, s in x.get("properties", {}).items()):
            return False
    for pa in a.get("patternProperties", {}):
        for pb in b.get("patternProperties", {}):
            if not _patterns_apart(pa, pb):
                return False
    return True


def _patterns_apart(pa: str, pb: str, search_a: bool = True, search_b: bool = True) -> bool:
    """No string matches both patterns; False when unsure."""
    key = (pa, pb, search_a, search_b)
    hit = _APART.get(key)
    if hit is None:
        hit = _APART[key] = _patterns_apart_uncached(pa, pb, search_a, search_b)
        if len(_APART) > 4096:
            _APART.clear()
    return hit


_APART: dict = {}


def _patterns_apart_uncached(pa: str, pb: str, search_a: bool, search_b: bool) -> bool:
    from ..jsonstring import pattern_automaton
    from .product import intersect

    try:
        nfa, start, end = intersect(pattern_automaton(pa, search=search_a), pattern_automaton(pb, search=search_b))
    except Exception:  # noqa: BLE001 - unsupported syntax or too large: assume they meet
        return False
    seen, stack = {start}, [start]
    while stack:
        q = stack.pop()
        if q == end:
            return False
        for t in nfa.eps[q]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
        for _iv, t in nfa.edges[q]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return True


def _sub_disjoint(sa, sb, validator, fl, depth: int) -> bool:
    if trivial(sa) or trivial(sb):
        return False
    try:
        fa, fb = fl.flatten(sa, "#"), fl.flatten(sb, "#")
    except Exception:  # noqa: BLE001 - a subschema we cannot read: assume overlap
        return False
    if fa is False or fb is False:
        return True
    if fa.get("x-any") or fb.get("x-any"):
        # disjoint from every branch of an anyOf
        for x, y in ((fa, fb), (fb, fa)):
            if x.get("x-any") and not y.get("x-any") and len(x["x-any"]) == 1:
                base = {k: v for k, v in x.items() if k != "x-any"}
                branches = x["x-any"][0][1]
                ok = True
                for br, p in branches:
                    try:
                        fbr = fl.flatten(br, p)
                    except Exception:  # noqa: BLE001
                        return False
                    m = merge(base, fbr, p) if fbr is not False else False
                    if m is not False and not flats_disjoint(m, y, None, y.get("x-raw"), validator, fl, depth + 1):
                        ok = False
                        break
                if ok:
                    return True
        return False
    return flats_disjoint(fa, fb, fa.get("x-raw"), fb.get("x-raw"), validator, fl, depth + 1)
