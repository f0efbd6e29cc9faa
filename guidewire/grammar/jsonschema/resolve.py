"""Schema input and ``$ref`` resolution: JSON pointers, ``$defs``/``definitions``, ``$id``s, anchors."""

from __future__ import annotations

import json
from urllib.parse import unquote, urldefrag, urljoin

from ...core.errors import GuidewireError, UnsupportedFeatureError


class SchemaError(GuidewireError):
    """A malformed JSON Schema (invalid JSON, wrong keyword value, dangling ``$ref``...).

    ``pointer`` is the JSON pointer of the offending subschema.
    """

    def __init__(self, message: str, pointer: str = ""):
        self.pointer = pointer
        super().__init__(f"{message} (at {pointer or '#'})")


def load_schema(schema) -> dict | bool:
    """Accept a dict, a bool, JSON text, or a Pydantic model class; return the schema value."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        try:
            value = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") \
                from None
        if not isinstance(value, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(value).__name__}")
        return value
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise SchemaError(f"cannot read a schema from {type(schema).__name__}")


DRAFT4 = "draft4"
LEGACY = "legacy"
MODERN = "modern"


def draft_of(root) -> str:
    """``draft4`` (boolean exclusive bounds), ``legacy`` (06/07: ``$ref`` hides its siblings), ``modern``."""
    uri = root.get("$schema", "") if isinstance(root, dict) else ""
    if not isinstance(uri, str):
        return MODERN
    if "draft-04" in uri or "draft-03" in uri:
        return DRAFT4
    if "draft-06" in uri or "draft-07" in uri:
        return LEGACY
    return MODERN


class Resolver:
    """Finds the target of a ``$ref`` inside one schema document."""

    def __init__(self, root):
        self.root = root
        self.by_id: dict[str, object] = {}
        self._index(root, "", "#")

    def _index(self, node, base: str, pointer: str) -> None:
        if isinstance(node, dict):
            for key in ("$id", "id"):
                ident = node.get(key)
                if isinstance(ident, str):
                    base = urljoin(base, ident) if base else ident
                    self.by_id[base.rstrip("#")] = node
                    if ident.startswith("#"):
                        self.by_id[ident] = node
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.by_id[urljoin(base, "#" + anchor)] = node
                self.by_id["#" + anchor] = node
            for k, v in node.items():
                if k in ("enum", "const", "examples", "default"):
                    continue
                self._index(v, base, pointer + "/" + k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._index(v, base, f"{pointer}/{i}")

    def resolve(self, ref: str, pointer: str) -> tuple[object, str]:
        """The schema ``ref`` points to, and its JSON pointer (for messages and memo keys)."""
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer)
        if ref in self.by_id:
            return self.by_id[ref], ref
        doc, frag = urldefrag(ref)
        target = self.root
        if doc:
            root_id = self.root.get("$id", self.root.get("id")) if isinstance(self.root, dict) else None
            if doc in self.by_id:
                target = self.by_id[doc]
            elif isinstance(root_id, str) and urljoin(root_id, doc).rstrip("#") in self.by_id:
                target = self.by_id[urljoin(root_id, doc).rstrip("#")]
            elif isinstance(root_id, str) and urldefrag(root_id)[0] == doc:
                target = self.root
            else:
                raise UnsupportedFeatureError(
                    f"$ref {ref!r} points outside this document (remote references are not fetched) "
                    f"(at {pointer or '#'})")
        if frag and not frag.startswith("/"):
            hit = self.by_id.get("#" + frag)
            if hit is None:
                raise SchemaError(f"dangling $ref {ref!r}: no anchor {frag!r}", pointer)
            return hit, ref
        for part in frag.split("/")[1:] if frag else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"dangling $ref {ref!r}: {part!r} not found", pointer)
        if not isinstance(target, (dict, bool)):
            raise SchemaError(f"$ref {ref!r} does not point to a schema", pointer)
        return target, (doc + "#" + frag)
