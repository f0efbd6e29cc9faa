"""Enum-only ``anyOf``/``oneOf`` branches folded into one enum, for checking values with ``jsonschema``.

The compiler asks ``jsonschema`` whether an ``enum`` value satisfies the source schemas it was
merged from (:func:`~guidewire.grammar.jsonschema._validator`). A schema listing the names of
hundreds of tasks as ``anyOf: [{"enum": ["A@1"], "description": ...}, ...]`` made each such check
descend every branch (a new validator per branch): 238 branches, ~3 ms a value, 21k values, a
minute of one compile. A branch whose only validating keyword is ``enum`` (the others are
annotations or keywords the draft does not define, which ``jsonschema`` ignores) accepts exactly its
enum's values, so ``anyOf`` over such branches accepts exactly the union of their enums, and
``oneOf`` too where no value is in two branches. The folded copy keeps every other keyword; the
checks read the same verdicts, one enum scan instead of a descent per branch.
"""

from __future__ import annotations

from .negate import json_key

#: fold an ``anyOf``/``oneOf`` of at least this many enum-only branches
FOLD_FROM = 8
_MAX_DEPTH = 64     # nesting followed through allOf/anyOf/oneOf/not


def fold_enum_branches(node, validating: frozenset, depth: int = 0):
    """``node`` with each ``anyOf``/``oneOf`` of :data:`FOLD_FROM` or more enum-only branches
    (see the module) replaced by one branch holding their values, inside ``allOf``, ``anyOf``,
    ``oneOf`` and ``not`` too; ``node`` itself (not a copy) where nothing folds. ``validating``:
    the keywords the draft's validator checks (``Validator.VALIDATORS``)."""
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return node
    out = None
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        if not isinstance(branches, list):
            continue
        new = [fold_enum_branches(b, validating, depth + 1) for b in branches]
        if key != "allOf" and len(new) >= FOLD_FROM and all(_enum_only(b, validating) for b in new):
            values = [v for b in new for v in b["enum"]]
            if key == "anyOf" or _disjoint(new):
                new = [{"enum": values}]
        if any(a is not b for a, b in zip(new, branches)):
            out = dict(node) if out is None else out
            out[key] = new
    inner = node.get("not")
    if isinstance(inner, dict):
        folded = fold_enum_branches(inner, validating, depth + 1)
        if folded is not inner:
            out = dict(node) if out is None else out
            out["not"] = folded
    return node if out is None else out


def _enum_only(branch, validating: frozenset) -> bool:
    """Whether ``branch`` is a schema object whose one validating keyword is a list ``enum``."""
    return (isinstance(branch, dict) and isinstance(branch.get("enum"), list)
            and not any(k in validating for k in branch if k != "enum"))


def _disjoint(branches: list) -> bool:
    """Whether no value is in the enums of two of ``branches`` (a value twice in one counts once)."""
    seen: set[str] = set()
    for b in branches:
        keys = {json_key(v) for v in b["enum"]}
        if not seen.isdisjoint(keys):
            return False
        seen |= keys
    return True
