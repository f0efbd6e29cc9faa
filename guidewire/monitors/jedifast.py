"""Attribute names after ``expr.`` from jedi, faster than ``Script.complete``.

``Script.complete`` at a dot infers the expression (a set of values: often the same class many
times over, e.g. 26 ``bytes``/``str`` instances for one ``data.``), then walks every value's
name filters (every class of its MRO, each name checked for reachability): most of a query's
time, and all of its tail. Here, through jedi's own completion code with one method replaced:

- each distinct value is walked once (values are keyed by their kind and their definition node:
  instances of one class list the same names whatever their arguments);
- the names of a value defined in *library* code (a file under the interpreter's prefixes or
  jedi's bundled stubs, never the buffer) are kept across queries in a :class:`NameCache`,
  keyed by the file, its modification time and the definition's position;
- a class's names come from a per-module index of names by scope (:class:`_NameIndex`), not
  from a walk over every name of its module per class of the MRO;
- (with :class:`.jedistates.InferenceStates`) the inference of imported modules is kept
  across queries.

The names returned are those ``Script.complete`` lists at that point (same order of precedence
for a name defined by a ``del``: the first definition met decides), which
``tests/test_monitor_jedifast.py`` checks against ``Script.complete`` on random standard-library
dots. Anything but a trailer completion (and any jedi whose internals differ) goes through
``Script.complete`` itself. This module imports nothing from guidewire: the jedi child process
(:mod:`.jediproc`) runs it from its source file.
"""

from __future__ import annotations

import bisect
import os
import sys
import threading
from collections import OrderedDict

_ENTRY_OVERHEAD = 96  # bytes charged per cached value besides its names


class NameCache:
    """An LRU of ``key -> ((name, is_del), ...)`` bounded in bytes (names' lengths plus a fixed
    charge per entry and per name)."""

    def __init__(self, max_bytes: int = 8 << 20):
        self.max_bytes = max_bytes
        self._entries: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def _size(entries) -> int:
        return _ENTRY_OVERHEAD + sum(len(n) + 16 for n, _ in entries)

    def get(self, key):
        """The cached entries of ``key`` (None: not cached)."""
        with self._lock:
            got = self._entries.get(key)
            if got is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return got

    def put(self, key, entries) -> None:
        """Keep ``entries`` for ``key`` (the least recently used go beyond the byte bound)."""
        size = self._size(entries)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
            self._entries[key] = entries
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= self._size(dropped)

    @property
    def nbytes(self) -> int:
        """Bytes charged by the entries held."""
        return self._bytes


def _library_roots() -> tuple[str, ...]:
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    try:
        import jedi

        roots.add(os.path.realpath(os.path.dirname(jedi.__file__)))
    except ImportError:  # pragma: no cover - jedi is what this module serves
        pass
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


_LIBRARY = _library_roots()

try:
    from jedi.inference.value.iterable import Sequence as _SEQUENCE
except ImportError:  # pragma: no cover - another jedi
    _SEQUENCE = None


def _forwards(value) -> bool:
    """Whether an instance's class defines ``__getattr__``/``__getattribute__`` other than
    ``object``'s (whose stub forwards nothing)."""
    if not hasattr(value, "get_function_slot_names"):
        return False
    for slot in ("__getattr__", "__getattribute__"):
        for name in value.get_function_slot_names(slot):
            tree_name = getattr(name, "tree_name", None)
            cls = tree_name.search_ancestor("classdef") if tree_name is not None else None
            if cls is None or cls.name.value != "object":
                return True
    return False


def _shareable_key(value, module_context):
    """The cross-query key of a value's names, or None when they may depend on the buffer
    (defined in it, outside library code, a proxy class whose ``__getattr__`` forwards).
    Literals and comprehensions (``[]``, ``{k: v ...}``, ``*args``) list their builtin class's
    names whatever they hold: keyed by their kind."""
    if _SEQUENCE is not None and isinstance(value, _SEQUENCE):
        kind = getattr(value, "array_type", None)
        return None if kind is None else ("sequence", type(value).__name__, str(kind))
    node = value.tree_node
    if node is None:
        return None
    root = value.get_root_context()
    if root.tree_node is module_context.tree_node or node.get_root_node() is not root.tree_node:
        return None  # defined in the buffer, or a node elsewhere than the file the key names
    path = root.py__file__()
    if path is None:
        return None
    path = os.path.realpath(str(path))
    if not path.startswith(_LIBRARY):
        return None
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    if _forwards(value):
        return None  # jedi's getattr heuristic lists the forwarded object's names: per instance
    return (type(value).__name__, path, mtime, node.start_pos, bool(value.is_stub()))


def _entries(names) -> tuple:
    """``(string name, defined by a del)`` of completion names, as ``filter_names`` reads them."""
    out = []
    for n in names:
        tree_name = n.tree_name
        definition = tree_name.get_definition() if tree_name is not None else None
        out.append((n.string_name, definition is not None and definition.type == "del_stmt"))
    return tuple(out)


class _NameIndex:
    """Which name keys of one module a used-names filter can yield, found in one pass.

    jedi's ``values()`` of a class (or module, or stub) filter walks every name key of the whole
    module and keeps the names whose scope is the filter's: listing an instance of a class from
    ``builtins.pyi`` or ``tkinter`` checks ~10^5 names (8 ``io`` classes after ``open()``: 0.55 s
    of a 0.67 s query). Here one pass per module indexes its definition names by scope (the
    test ``ParserTreeFilter._is_name_reachable`` applies) and, for ``self.x`` names, by position
    (the test ``SelfAttributeFilter._filter`` applies); a filter then runs its own ``_filter`` on
    just the keys that can pass it, in the module's key order, so it yields the same names.
    """

    def __init__(self, cache_node, used_names, definition_names, parent_scope):
        self.used_names = used_names
        self.by_scope: dict[int, list] = {}
        self_names = []  # (start_pos, key order, key) of names defined as ``x.name``
        for order, key in enumerate(used_names):
            for name in definition_names(cache_node, used_names, key):
                parent = name.parent
                if parent.type == "trailer":
                    self_names.append((name.start_pos, order, key))
                    continue
                base = parent if parent.type in ("classdef", "funcdef") else name
                keys = self.by_scope.setdefault(id(parent_scope(cache_node, base)), [])
                if not keys or keys[-1] is not key:
                    keys.append(key)
        self_names.sort(key=lambda t: t[:2])
        self._self_pos = [t[0] for t in self_names]
        self._self_names = self_names

    def keys_in_scope(self, scope) -> list:
        """Keys with a definition whose scope is ``scope`` (module order)."""
        return self.by_scope.get(id(scope), [])

    def self_keys_within(self, start, end) -> list:
        """Keys with a trailer definition strictly between ``start`` and ``end`` (module order)."""
        lo = bisect.bisect_right(self._self_pos, start)
        hi = bisect.bisect_left(self._self_pos, end)
        got = {}
        for _pos, order, key in self._self_names[lo:hi]:
            got[order] = key
        return [got[o] for o in sorted(got)]


def _make_indexed_values():
    """``values()`` for jedi's used-names filters through a per-module :class:`_NameIndex`
    (exact filter types only; anything else runs jedi's own)."""
    import weakref

    from jedi.inference import filters as jf
    from jedi.inference.gradual.stub_value import StubFilter
    from jedi.inference.value.instance import SelfAttributeFilter
    from jedi.inference.value.klass import ClassFilter
    from jedi.parser_utils import get_cached_parent_scope

    original = jf._AbstractUsedNamesFilter.values
    by_scope = {jf.ParserTreeFilter, ClassFilter, StubFilter}
    indexes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # parso cache node -> index

    def values(self):
        kind = type(self)
        cache_node = self._parso_cache_node
        if cache_node is None or (kind not in by_scope and kind is not SelfAttributeFilter):
            return original(self)
        index = indexes.get(cache_node)
        if index is None or index.used_names is not self._used_names:
            index = indexes[cache_node] = _NameIndex(cache_node, self._used_names, jf._get_definition_names,
                                                     get_cached_parent_scope)
        if kind is SelfAttributeFilter:
            keys = index.self_keys_within(self._parser_scope.start_pos, self._parser_scope.end_pos)
        else:
            keys = index.keys_in_scope(self._parser_scope)
        return self._convert_names(
            name for key in keys
            for name in self._filter(jf._get_definition_names(cache_node, self._used_names, key)))

    return jf._AbstractUsedNamesFilter, original, values


try:
    _FILTER_CLASS, _ORIGINAL_VALUES, _INDEXED_VALUES = _make_indexed_values()
except (ImportError, AttributeError):  # pragma: no cover - another jedi
    _FILTER_CLASS = None


def _list_names(user_context, value, complete_trailer):
    """``complete_trailer(user_context, [value])`` with the indexed filter values in place
    (only for this call: ``Script.complete`` elsewhere keeps jedi's own)."""
    if _FILTER_CLASS is None:
        return complete_trailer(user_context, [value])
    _FILTER_CLASS.values = _INDEXED_VALUES
    try:
        return complete_trailer(user_context, [value])
    finally:
        _FILTER_CLASS.values = _ORIGINAL_VALUES


def _make_completion_class():
    from jedi.api.completion import Completion, complete_trailer, get_user_context

    class AttributeCompletion(Completion):
        """jedi's completion with the trailer's name walk replaced (see the module docstring)."""

        attribute_entries = None
        name_cache = None

        def _complete_trailer_for_values(self, values):
            user_context = get_user_context(self._module_context, self._position)
            seen, entries = set(), []
            for value in values:
                node = value.tree_node
                ident = (type(value), id(node) if node is not None else id(value))
                if ident in seen:
                    continue
                seen.add(ident)
                key = _shareable_key(value, self._module_context) if self.name_cache is not None else None
                got = self.name_cache.get(key) if key is not None else None
                if got is None:
                    got = _entries(_list_names(user_context, value, complete_trailer))
                    if key is not None:
                        self.name_cache.put(key, got)
                entries.extend(got)
            self.attribute_entries = entries
            return []  # the caller reads attribute_entries

    return AttributeCompletion


try:
    _AttributeCompletion = _make_completion_class()
except (ImportError, AttributeError, TypeError):  # pragma: no cover - another jedi
    _AttributeCompletion = None


def _matches(name: str, like: str) -> bool:
    from jedi import settings

    if settings.case_insensitive_completion:
        return name.lower().startswith(like.lower())
    return name.startswith(like)


def attribute_names(script, line: int, column: int, cache: NameCache | None = None) -> list[str]:
    """The names ``script.complete(line, column)`` lists at a dot (identifiers or not), computed
    as the module docstring says; any other completion falls back to ``Script.complete``."""
    if _AttributeCompletion is not None:
        try:
            state = script._inference_state
            state.reset_recursion_limitations()
            comp = _AttributeCompletion(state, script._get_module_context(), script._code_lines,
                                        (line, column), script.get_signatures)
        except (AttributeError, TypeError):  # pragma: no cover - another jedi
            comp = None
        if comp is not None:
            comp.name_cache = cache
            result = comp.complete()
            if comp.attribute_entries is None:
                return [c.name for c in result]
            like = getattr(comp, "_like_name", "")
            done, out = set(), []
            for name, is_del in comp.attribute_entries:
                if like and not _matches(name, like):
                    continue
                if name not in done:
                    done.add(name)
                    if not is_del:
                        out.append(name)
            return out
    return [c.name for c in script.complete(line, column)]
