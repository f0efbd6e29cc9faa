"""What the schema-to-grammar builder and its value-kind mixins share: the symbol type, value
checks made outside the grammar, and small regex helpers."""

from __future__ import annotations

import re

from .negate import json_key, value_kind

ALL_TYPES = ("null", "boolean", "object", "array", "number", "string")
MAX_COUNTED = 2000


class _Sym:
    """A grammar symbol of the builder: a terminal (``kind`` "t") or a nonterminal ("n"), by index."""

    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int):
        self.kind, self.index = kind, index


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


def _rx_literal(text: str) -> str:
    """``text`` as a regex that matches it literally."""
    return re.escape(text)


def _safe_search(pattern: str, name: str) -> bool:
    """``re.search(pattern, name)``; False for a pattern Python's ``re`` cannot compile."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
