"""JSON Schema -> CompiledGrammar: ``compile_json_schema(schema, vocab, **options)``.

Strict by default: a keyword (or combination) that cannot be enforced exactly raises
:class:`~guidewire.core.errors.UnsupportedFeatureError` naming the keyword and its JSON
pointer. With ``lenient=True`` the closest over-approximation is compiled and what is not
enforced is listed in ``grammar.notes``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ...core.errors import UnsatisfiableGrammarError
from ...core.lazydeps import import_jsonschema
from ..elision import ElisionRefusedError
from ..precompute import precompute_hubs
from ..vocabindex import vocab_layout
from .emit import SchemaGrammarBuilder
from .enumfold import fold_enum_branches
from .flatten import Flattener
from .negate import json_key
from .resolve import Resolver, SchemaError, draft_of, load_schema

__all__ = ["compile_json_schema", "JsonSchemaOptions", "SchemaError"]


@dataclass(frozen=True)
class JsonSchemaOptions:
    """How values are laid out and how strictly the schema is enforced.

    ``whitespace``: ``"flexible"`` (JSON whitespace between tokens, each run at most
    ``max_whitespace`` characters) or ``"compact"``; ``separators=(item, key)`` fixes the
    exact separators (as ``json.dumps``); ``indent=k`` fixes the ``json.dumps(indent=k)``
    layout. ``any_order`` lets named properties appear in any order (default: schema
    order). ``strict_openai`` applies OpenAI strict-mode semantics (every property
    required, no additional properties). ``extra_properties=False`` is a *generation* mode (as
    XGrammar's strict mode): where the schema leaves ``additionalProperties`` (or a tuple's
    ``items``) unset, no unnamed property (or extra tuple item) is generated. The language is then
    a subset of the schema's valid instances, so every output still validates; keep the default
    ``True`` to accept exactly the schema's instances (conformance checking).
    ``default_max_items=n`` and ``default_max_length=n`` are generation modes too: an array whose
    schema sets no ``maxItems`` gets at most ``max(n, minItems, len(prefixItems))`` items, a string
    with no ``maxLength``, ``pattern`` or ``format`` at most ``max(n, minLength)`` characters (a
    subset again: it stops a small model from repeating an item or a phrase until ``max_tokens``).
    """

    lenient: bool = False
    whitespace: str = "flexible"
    max_whitespace: int = 24
    separators: tuple[str, str] | None = None
    indent: int | None = None
    any_order: bool = False
    strict_openai: bool = False
    extra_properties: bool = True
    max_depth: int = 64
    max_string_length: int = 10_000
    default_max_items: int | None = None
    default_max_length: int | None = None


def compile_json_schema(schema, vocab, **options):
    """Compile a JSON Schema (dict, JSON text, or Pydantic model class) against ``vocab``.

    Returns a :class:`~guidewire.grammar.CompiledGrammar` whose ``notes`` list what is not
    enforced (annotation-only formats; in lenient mode, over-approximated keywords).
    """
    opts = JsonSchemaOptions(**options)
    if opts.whitespace not in ("flexible", "compact"):
        raise ValueError(f"whitespace must be 'flexible' or 'compact', got {opts.whitespace!r}")
    if opts.indent is not None and (opts.indent < 0 or opts.separators is not None):
        raise ValueError("indent must be >= 0 and cannot be combined with separators")
    for name in ("default_max_items", "default_max_length"):
        value = getattr(opts, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
    root = load_schema(schema)
    try:
        grammar, notes = _build(root, vocab, opts, vocab_layout(vocab).max_len)
    except ElisionRefusedError:     # a counter's run too short for this vocabulary: unrolled whole
        grammar, notes = _build(root, vocab, opts, None)
    grammar.notes = tuple(dict.fromkeys(notes))
    grammar.precomputed = precompute_hubs(grammar)     # many dear hubs on a large vocabulary only
    return grammar


def _build(root, vocab, opts: JsonSchemaOptions, token_depth: int | None):
    """``(grammar, notes)`` of the loaded schema ``root``, long length counters elided for tokens of
    at most ``token_depth`` bytes (None: built whole)."""
    notes: list[str] = []
    resolver = Resolver(root)
    flattener = Flattener(resolver, draft_of(root), strict=not opts.lenient, notes=notes)
    builder = SchemaGrammarBuilder(flattener, _validator(root, flattener), opts, token_depth)
    sym = builder.value(root, "#", 0)
    if sym is None:
        raise UnsatisfiableGrammarError("the schema admits no JSON value")
    return builder.build(sym, vocab, source=json.dumps(root)[:10_000]), notes


#: an enum of at least this many values is tested by a set of canonical keys (see _validator)
ENUM_SET_FROM = 16


def _validator(root, flattener):
    """``check(subschema, value) -> bool`` with ``jsonschema``, refs resolved against ``root``.

    Never fails open: when ``jsonschema`` cannot decide (a ``pattern`` Python ``re`` cannot compile,
    such as ``\\p{Ll}``...), strict mode raises :class:`UnsupportedFeatureError` naming the keyword
    and its JSON pointer; lenient mode records it in ``notes`` and keeps the value (the callers only
    use a check to *drop* values or cases, so keeping one over-approximates).
    """
    try:
        validators = import_jsonschema().validators
    except ImportError:  # pragma: no cover - jsonschema is a dependency
        return None
    try:
        cls = validators.validator_for(root) if isinstance(root, dict) else validators.Draft202012Validator
        base = cls(root, format_checker=cls.FORMAT_CHECKER)
    except Exception as exc:  # noqa: BLE001 - a schema jsonschema itself rejects
        raise SchemaError(f"invalid schema: {exc}") from None
    pointers: dict[int, str] = {}
    validating = frozenset(getattr(cls, "VALIDATORS", ()))
    prepared: dict[int, tuple] = {}     # id(sub) -> (sub, its enum's value keys or None, what jsonschema checks)

    def prepare(sub) -> tuple:
        # enum-only anyOf/oneOf branches folded into one enum (see enumfold); then an enum of many
        # values is tested by canonical keys in a set (the same equality as jsonschema's: 1 == 1.0,
        # true != 1, deep): jsonschema scans an enum, and checking each of its n values against its
        # own subschema was n^2 comparisons (8,400 values: 70M, 28 s of a compile). The rest of the
        # subschema is still jsonschema's to check ($ref beside enum: jsonschema's own reading)
        folded = fold_enum_branches(sub, validating)
        values = folded.get("enum")
        if "$ref" in folded or not isinstance(values, list) or len(values) < ENUM_SET_FROM:
            return sub, None, folded
        return sub, frozenset(json_key(v) for v in values), {k: v for k, v in folded.items() if k != "enum"}

    def check(sub, value) -> bool:
        if sub is True:
            return True
        if sub is False:
            return False
        checked = sub
        if isinstance(sub, dict):
            hit = prepared.get(id(sub))
            if hit is None or hit[0] is not sub:
                hit = prepared[id(sub)] = prepare(sub)
            if hit[1] is not None and json_key(value) not in hit[1]:
                return False
            checked = hit[2]
        try:
            return base.evolve(schema=checked).is_valid(value)
        except Exception as exc:  # noqa: BLE001 - jsonschema cannot decide: refuse or over-approximate
            if not pointers:
                _index_pointers(root, "#", pointers)
            keyword, where = _undecidable_keyword(sub, pointers)
            flattener.unsupported(keyword, where, f"jsonschema cannot check a value against it "
                                                  f"({type(exc).__name__}: {str(exc)[:120]})")
            return True

    return check


def _index_pointers(node, pointer: str, out: dict, depth: int = 0) -> None:
    """JSON pointer of every object/array inside ``node`` (first occurrence), keyed by ``id``."""
    if depth > 256 or id(node) in out:
        return
    if isinstance(node, dict):
        out[id(node)] = pointer
        for k, v in node.items():
            _index_pointers(v, f"{pointer}/{str(k).replace('~', '~0').replace('/', '~1')}", out, depth + 1)
    elif isinstance(node, list):
        out[id(node)] = pointer
        for i, v in enumerate(node):
            _index_pointers(v, f"{pointer}/{i}", out, depth + 1)


def _undecidable_keyword(sub, pointers: dict) -> tuple[str, str]:
    """The keyword (and its pointer) that keeps ``jsonschema`` from deciding ``sub``: the first
    ``pattern``/``patternProperties`` regex Python ``re`` cannot compile, else the subschema itself."""
    stack = [(sub, pointers.get(id(sub)))]
    seen = set()
    while stack:
        node, ptr = stack.pop()
        if id(node) in seen or len(seen) > 10_000:
            continue
        seen.add(id(node))
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if isinstance(node, dict):
            here = pointers.get(id(node), ptr)
            pats = [("pattern", node["pattern"])] if isinstance(node.get("pattern"), str) else []
            if isinstance(node.get("patternProperties"), dict):
                pats += [("patternProperties", p) for p in node["patternProperties"]]
            for keyword, pat in pats:
                try:
                    re.compile(pat)
                except (re.error, OverflowError, RecursionError, ValueError):
                    return keyword, f"{here or '#'}/{keyword}"
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, pointers.get(id(child), ptr)))
    return "schema", pointers.get(id(sub), "#")
