"""Array rules of the schema-to-grammar builder: counted items, ``prefixItems``, ``contains``
and ``uniqueItems`` over a finite item domain."""

from __future__ import annotations

import math

from ...core.errors import LimitExceededError
from .emitbase import ALL_TYPES, MAX_COUNTED, _internal_ok, _Sym
from .negate import json_key

MAX_UNIQUE_STATES = 4096


class ArrayRules:
    """Mixin of :class:`~.emit.SchemaGrammarBuilder`: array values."""

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
