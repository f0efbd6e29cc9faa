"""Normalise one subschema and fold ``$ref``/``allOf`` into a flat conjunction of constraints.

The flat form is a dict of the ordinary keywords (``type`` as a list, ``x-patterns`` for
``pattern``/``format``, numeric bounds as numbers, ``prefixItems``/``items`` split) plus
``x-any`` (``anyOf``/``oneOf`` groups still to expand), ``x-not`` and ``x-raw`` (the source
schemas, used to filter ``enum`` values with ``jsonschema`` itself).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from functools import lru_cache

from ...core.errors import LimitExceededError, RegexSyntaxError, UnsatisfiableGrammarError, UnsupportedFeatureError
from ..jsonstring import RELAXED, relaxed_constructs
from .formats import UNENFORCEABLE_FORMATS, format_regex
from .resolve import DRAFT4, LEGACY, SchemaError

TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
ANNOTATIONS = {
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "id", "deprecated",
    "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "$anchor",
    "$dynamicAnchor", "$vocabulary", "definitions", "$defs", "discriminator", "nullable_annotation",
    "example", "markdownDescription", "errorMessage", "deprecationMessage", "$recursiveAnchor",
}
HANDLED = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "contains", "minContains", "maxContains", "uniqueItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "anyOf", "oneOf", "allOf", "not", "$ref", "if", "then", "else", "dependencies",
    "dependentRequired", "dependentSchemas",
}
UNSUPPORTED = {
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
}
#: internal flat keys holding lists that a conjunction concatenates (see :mod:`.negate`)
_LISTS = ("x-patterns", "x-any", "x-not", "x-forbid", "x-exclude", "x-notenum", "x-antipatterns", "x-notmult",
          "x-depreq", "x-exists")
MAX_MERGE_DEPTH = 64
_NOT_OBJECT = {"type": ["null", "boolean", "number", "string", "array"]}


class Flattener:
    """Turns raw subschemas into flat constraint dicts (see module docstring)."""

    def __init__(self, resolver, draft: str, strict: bool, notes: list[str]):
        self.resolver = resolver
        self.draft = draft
        self.strict = strict
        self.notes = notes
        self._synthetic: dict = {}

    def synthetic(self, kind: str, *parts):
        """An interned synthetic schema (``{"not": s}``, ``{"allOf": [a, b]}``...) built around
        subschemas: the same parts give the same object, so memoisation by identity still closes
        recursive schemas."""
        key = (kind,) + tuple(id(p) if isinstance(p, (dict, list)) else repr(p) for p in parts)
        hit = self._synthetic.get(key)
        if hit is None:
            if kind == "not":
                node = {"not": parts[0]}
            elif kind == "allOf":
                node = {"allOf": list(parts)}
            elif kind == "required":
                node = {"required": list(parts)}
            else:  # pragma: no cover
                raise ValueError(kind)
            hit = self._synthetic[key] = (node, parts)  # keep the parts alive: ids stay unique
        return hit[0]

    def unsupported(self, keyword: str, pointer: str, why: str = "") -> None:
        """Raise in strict mode; in lenient mode record that ``keyword`` is not enforced."""
        msg = f"keyword {keyword!r} at {pointer or '#'} cannot be enforced exactly" + (f": {why}" if why else "")
        if self.strict:
            raise UnsupportedFeatureError(msg + " (compile with lenient=True to over-approximate)")
        self.notes.append(msg)

    def pattern(self, value: str, where: str) -> str | None:
        """``value`` as a pattern to build: itself when exact; in lenient mode the closest superset
        (marked :data:`~..jsonstring.RELAXED`) or None (no constraint) for a pattern Python ``re``
        cannot parse; in strict mode those raise, naming the keyword and ``where``."""
        try:
            what = _relaxed_constructs(value)
        except RegexSyntaxError as exc:
            if self.strict:
                raise RegexSyntaxError(f"{exc.args[0].split(': ', 1)[-1]} (keyword 'pattern' at {where}; "
                                       "compile with lenient=True to leave it unenforced)",
                                       exc.line, exc.column) from None
            self.notes.append(f"keyword 'pattern' at {where} is not enforced: Python re cannot parse it")
            return None
        if not what:
            return value
        self.unsupported("pattern", where, ", ".join(what) + " cannot be enforced by a finite automaton "
                         "(lenient: dropped, a superset of the strings is accepted)")
        return RELAXED + value

    def _pattern_properties(self, value: dict, where: str) -> dict:
        """``patternProperties`` with each key pattern checked: one no automaton can enforce raises
        in strict mode; in lenient mode keys of its relaxed (superset) pattern may take any value,
        which only widens the language."""
        out = {}
        for pat, sub in value.items():
            here = f"{where}/{pat.replace('~', '~0').replace('/', '~1')}"
            try:
                what = _relaxed_constructs(pat)
            except RegexSyntaxError as exc:
                raise RegexSyntaxError(f"{exc.args[0].split(': ', 1)[-1]} (keyword 'patternProperties' at {here})",
                                       exc.line, exc.column) from None
            if what:
                self.unsupported("patternProperties", here, ", ".join(what) + " cannot be enforced by a finite "
                                 "automaton (lenient: keys of the relaxed pattern may take any value)")
                out[RELAXED + pat] = True
            else:
                out[pat] = sub
        return out

    # ------------------------------------------------------------------------------------------
    def flatten(self, node, pointer: str, depth: int = 0):
        """Flat dict for ``node``, or ``False`` when it admits no value."""
        if depth > MAX_MERGE_DEPTH:
            raise UnsupportedFeatureError(f"$ref/allOf nesting deeper than {MAX_MERGE_DEPTH} at {pointer} "
                                          "(a reference cycle without an intervening value?)")
        if node is True or node == {}:
            return {"x-raw": [True]}
        if node is False:
            return False
        if not isinstance(node, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(node).__name__}", pointer)
        parts = []
        own = dict(node)
        ref = own.pop("$ref", None)
        if ref is not None:
            target, tptr = self.resolver.resolve(ref, pointer)
            if self.draft in (DRAFT4, LEGACY):
                own = {}  # draft-04..07: siblings of $ref are ignored
            parts.append(self.flatten(target, tptr, depth + 1))
        all_of = own.pop("allOf", None)
        if all_of is not None:
            if not isinstance(all_of, list) or not all_of:
                raise SchemaError("allOf must be a non-empty array", pointer)
            for i, sub in enumerate(all_of):
                parts.append(self.flatten(sub, f"{pointer}/allOf/{i}", depth + 1))
        flat = self.normalize(own, pointer, node)
        for p in parts:
            flat = merge(flat, p, pointer)
            if flat is False:
                return False
        return flat

    def normalize(self, node: dict, pointer: str, raw) -> dict | bool:
        """Check keyword values and rewrite them into the flat vocabulary."""
        out: dict = {"x-raw": [raw]}
        for key, value in node.items():
            if key in ANNOTATIONS or key.startswith("x-"):
                continue
            if key in UNSUPPORTED:
                self.unsupported(key, pointer)
                continue
            if key not in HANDLED:
                continue  # unknown vocabulary: not an assertion in JSON Schema
            self._keyword(out, key, value, node, pointer)
        if "if" in node:
            self._conditional(out, node, pointer)
        return out

    def _conditional(self, out: dict, node: dict, pointer: str) -> None:
        """``if``/``then``/``else`` as ``anyOf [if & then, not if & else]`` (disjoint branches)."""
        cond = node["if"]
        then, other = node.get("then", True), node.get("else", True)
        if then is True and other is True:
            return
        if cond is True or cond == {}:
            branches = [(then, f"{pointer}/then")]
        elif cond is False:
            branches = [(other, f"{pointer}/else")]
        else:
            branches = [(self.synthetic("allOf", cond, then), f"{pointer}/then"),
                        (self.synthetic("allOf", self.synthetic("not", cond), other), f"{pointer}/else")]
        out.setdefault("x-any", []).append(("anyOf", branches))

    def _dependencies(self, out: dict, value, pointer: str, key: str) -> None:
        if not isinstance(value, dict):
            raise SchemaError(f"{key} must be an object", f"{pointer}/{key}")
        for trigger, dep in value.items():
            where = f"{pointer}/{key}/{trigger}"
            if isinstance(dep, list) and key != "dependentSchemas":
                if not all(isinstance(d, str) for d in dep):
                    raise SchemaError("dependencies must list property names", where)
                deps = [d for d in dict.fromkeys(dep) if d != trigger]
                if deps:
                    out.setdefault("x-depreq", []).append((trigger, deps))
            elif isinstance(dep, (dict, bool)) and key != "dependentRequired":
                if dep is True or dep == {}:
                    continue
                if dep is False:
                    out.setdefault("x-forbid", []).append(trigger)
                    continue
                absent = self.synthetic("not", self.synthetic("required", trigger))
                present = self.synthetic("allOf", self.synthetic("required", trigger), dep)
                # a dependency constrains objects only: any other value passes
                out.setdefault("x-any", []).append(("anyOf", [(_NOT_OBJECT, where), (absent, where),
                                                              (present, where)]))
            else:
                raise SchemaError(f"bad {key} value for {trigger!r}", where)

    def _keyword(self, out: dict, key: str, value, node: dict, pointer: str) -> None:
        where = f"{pointer}/{key}"
        if key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names:
                raise SchemaError("type must be a string or a non-empty array", where)
            for t in names:
                if t not in TYPES:
                    raise SchemaError(f"unknown type {t!r}", where)
            out["type"] = sorted(set(names))
        elif key == "const":
            out["enum"] = [value]
        elif key == "enum":
            if not isinstance(value, list):
                raise SchemaError("enum must be an array", where)
            out["enum"] = list(value)
        elif key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                     "minContains", "maxContains"):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
                raise SchemaError(f"{key} must be a non-negative integer", where)
            out[key] = int(value)
        elif key in ("minimum", "maximum"):
            _number(value, where)
            excl = node.get("exclusive" + key[0].upper() + key[1:])
            if isinstance(excl, bool):  # draft-04
                out[("exclusiveMinimum" if key == "minimum" else "exclusiveMaximum") if excl else key] = value
            else:
                out[key] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(value, bool):
                return  # draft-04 boolean: handled together with minimum/maximum
            _number(value, where)
            out[key] = value
        elif key == "multipleOf":
            _number(value, where)
            if value <= 0:
                raise SchemaError("multipleOf must be greater than 0", where)
            out[key] = value
        elif key == "pattern":
            if not isinstance(value, str):
                raise SchemaError("pattern must be a string", where)
            pat = self.pattern(value, where)
            if pat is not None:
                out.setdefault("x-patterns", []).append((pat, True))
        elif key == "format":
            rx = format_regex(value) if isinstance(value, str) else None
            if value in UNENFORCEABLE_FORMATS:
                self.unsupported("format", where, f"format {value!r} is not a regular language")
            elif rx is None:
                self.notes.append(f"format {value!r} at {where} is an annotation (not enforced)")
            else:
                out.setdefault("x-patterns", []).append((rx, False))
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                if isinstance(value, bool):
                    return  # draft-03 style boolean: annotation here
                raise SchemaError("required must be an array of strings", where)
            out["required"] = list(dict.fromkeys(value))
        elif key == "properties" or key == "patternProperties":
            if not isinstance(value, dict):
                raise SchemaError(f"{key} must be an object", where)
            out[key] = dict(value) if key == "properties" else self._pattern_properties(value, where)
        elif key == "items":
            if isinstance(value, list):
                out["prefixItems"] = list(value)
                if "additionalItems" in node:
                    out["items"] = node["additionalItems"]
            else:
                out["items"] = value
        elif key == "additionalItems":
            if not isinstance(node.get("items"), list):
                return  # ignored unless items is a tuple
        elif key == "prefixItems":
            if not isinstance(value, list):
                raise SchemaError("prefixItems must be an array", where)
            out["prefixItems"] = list(value)
        elif key == "uniqueItems":
            if value is True:
                out["uniqueItems"] = True
        elif key in ("anyOf", "oneOf"):
            if not isinstance(value, list) or not value:
                raise SchemaError(f"{key} must be a non-empty array", where)
            out.setdefault("x-any", []).append((key, [(b, f"{where}/{i}") for i, b in enumerate(value)]))
        elif key == "not":
            out.setdefault("x-not", []).append((value, where))
        elif key in ("additionalProperties", "propertyNames", "contains"):
            out[key] = value
        elif key in ("dependencies", "dependentRequired", "dependentSchemas"):
            self._dependencies(out, value, pointer, key)


def _number(value, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise SchemaError("expected a number", where)


def _all_of(a, b):
    if a is True or a is None:
        return b
    if b is True or b is None:
        return a
    if a is False or b is False:
        return False
    if a == b:
        return a
    if _negates(a, b) or _negates(b, a):
        return False
    return {"allOf": [a, b]}


def _negates(a, b) -> bool:
    """``b`` is ``{"not": x}`` with ``x`` one of the conjuncts of ``a`` (so ``a`` and ``b`` never meet)."""
    if not (isinstance(b, dict) and len(b) == 1 and "not" in b):
        return False
    x = b["not"]
    parts = a["allOf"] if isinstance(a, dict) and len(a) == 1 and isinstance(a.get("allOf"), list) else [a]
    return any(p is x or p == x for p in parts)


def merge(a, b, pointer: str):
    """Conjunction of two flat dicts (``False`` if provably empty)."""
    if a is False or b is False:
        return False
    out = dict(a)
    out["x-raw"] = a.get("x-raw", []) + b.get("x-raw", [])
    for key, value in b.items():
        if key == "x-raw":
            continue
        if key not in out:
            out[key] = value
            continue
        cur = out[key]
        if key == "type":
            ta, tb = set(cur), set(value)
            both = ta & tb
            if "integer" in ta and "number" in tb or "number" in ta and "integer" in tb:
                both.add("integer")
            if not both:
                return False
            out[key] = sorted(both)
        elif key == "enum":
            out[key] = [v for v in cur if any(_json_eq(v, w) for w in value)]
            if not out[key]:
                return False
        elif key in ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum", "minContains"):
            out[key] = max(cur, value)
        elif key in ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum", "maxContains"):
            out[key] = min(cur, value)
        elif key == "multipleOf":
            fa, fb = Fraction(str(cur)), Fraction(str(value))
            if fa.denominator == 1 and fb.denominator == 1:
                out[key] = math.lcm(int(fa), int(fb))
            elif fa % fb == 0:
                out[key] = cur
            elif fb % fa == 0:
                out[key] = value
            else:
                raise UnsupportedFeatureError(f"keyword 'multipleOf' at {pointer}: cannot combine {cur} and {value}")
        elif key in _LISTS:
            out[key] = cur + value
        elif key == "x-nonint":
            out[key] = True
        elif key == "required":
            out[key] = list(dict.fromkeys(cur + value))
        elif key == "properties":
            props = dict(cur)
            for name, sub in value.items():
                props[name] = _all_of(props.get(name), sub)
            out[key] = props
        elif key == "patternProperties":
            pp = dict(cur)
            for pat, sub in value.items():
                pp[pat] = _all_of(pp.get(pat), sub)
            out[key] = pp
        elif key in ("additionalProperties", "items", "propertyNames", "contains"):
            out[key] = _all_of(cur, value)
        elif key == "uniqueItems":
            out[key] = cur or value
    if "prefixItems" in a or "prefixItems" in b:
        _merge_prefix(out, a, b)
    _close_objects(out, a, b, pointer)
    if out.get("type") == ["object"] and _no_object(out):
        return False
    return out


def _no_object(flat: dict) -> bool:
    """A required key is forbidden or admits no value."""
    required = flat.get("required", [])
    if not required:
        return False
    props = flat.get("properties", {})
    forbid = set(flat.get("x-forbid", []))
    return any(n in forbid or props.get(n) is False for n in required)


def _merge_prefix(out: dict, a: dict, b: dict) -> None:
    """Position i gets both sides' schema for i: their prefixItems[i], or else their items."""
    pa, pb = a.get("prefixItems", []), b.get("prefixItems", [])
    ia, ib = a.get("items"), b.get("items")
    n = max(len(pa), len(pb))
    out["prefixItems"] = [_all_of(pa[i] if i < len(pa) else ia, pb[i] if i < len(pb) else ib) for i in range(n)]


def _close_objects(out: dict, a: dict, b: dict, pointer: str) -> None:
    """Keys one side names (or matches by pattern) fall under the other side's additionalProperties
    unless the other side names them or matches them by one of its own patterns."""
    for this, other in ((a, b), (b, a)):
        ap = other.get("additionalProperties", True)
        if ap is True or ap == {}:
            continue
        other_props = other.get("properties", {})
        other_pp = other.get("patternProperties", {})
        for name in this.get("properties", {}):
            if name in other_props or any(_safe_search(p, name) for p in other_pp):
                continue
            out["properties"][name] = _all_of(out["properties"][name], ap)
    # keys no side names: each side's additionalProperties applies unless one of *its* patterns
    # matches; when the sides' patterns differ, keep them apart for the key classes in emit
    sides = _sides(a) + _sides(b)
    if sides and out.get("patternProperties") and (
            len(sides) > 1 or set(sides[0][0]) != set(out["patternProperties"])):
        out["x-sides"] = sides


def _sides(x: dict) -> list:
    """``(patterns, additionalProperties)`` of each conjoined object schema with a real restriction."""
    if "x-sides" in x:
        return list(x["x-sides"])
    ap = x.get("additionalProperties", True)
    if ap is True or ap == {}:
        return []
    return [(tuple(x.get("patternProperties", {})), ap)]


def _safe_search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def _json_eq(x, y) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    return x == y


@lru_cache(maxsize=1024)
def _relaxed_constructs(pattern: str) -> tuple[str, ...]:
    """What a relaxed build of ``pattern`` drops (memoised; a pattern too large to try is left to
    the real build, which reports its limit)."""
    try:
        return tuple(relaxed_constructs(pattern))
    except LimitExceededError:
        return ()
