"""Defer the heavy import of ``rfc3987_syntax`` that ``import jsonschema`` triggers.

``jsonschema`` (with its ``format-nongpl`` extras, a dependency of guidewire) imports
``rfc3987_syntax`` when it is imported itself, and that package builds ~40 Lark parsers at import
(1.6 s of a cold process, measured: ``python -X importtime -c "import jsonschema"``) only to check
the ``iri`` / ``iri-reference`` formats. :func:`defer_rfc3987_syntax` puts a stand-in module in
``sys.modules`` whose ``is_valid_syntax`` (the one name ``jsonschema`` takes from it) imports the
real package on its first call and delegates; every other attribute does the same. Format checks
give the same answers; only the cost moves to the first IRI checked. Call it before the first
``import jsonschema`` of the process (:func:`import_jsonschema` does).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

_NAME = "rfc3987_syntax"
_lock = threading.Lock()


class _Deferred(types.ModuleType):
    """Stand-in for ``rfc3987_syntax`` until something actually uses it."""

    def __init__(self):
        super().__init__(_NAME, "guidewire's stand-in: imports rfc3987_syntax on first use")
        self._real = None

    def _load(self):
        with _lock:
            if self._real is None:
                if sys.modules.get(_NAME) is self:
                    del sys.modules[_NAME]
                try:
                    self._real = importlib.import_module(_NAME)
                except BaseException:
                    sys.modules.setdefault(_NAME, self)
                    raise
        return self._real

    def is_valid_syntax(self, *args, **kwargs):
        """``rfc3987_syntax.is_valid_syntax``, imported on first call."""
        return self._load().is_valid_syntax(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._load(), name)


def defer_rfc3987_syntax() -> bool:
    """Install the stand-in unless the package is missing or already imported; True if installed."""
    if _NAME in sys.modules or "jsonschema" in sys.modules:
        return False
    if importlib.util.find_spec(_NAME) is None:
        return False
    stand_in = _Deferred()
    # bind the method so that ``from rfc3987_syntax import is_valid_syntax`` gets a plain callable
    stand_in.is_valid_syntax = stand_in.is_valid_syntax
    sys.modules[_NAME] = stand_in
    return True


def import_jsonschema():
    """``import jsonschema`` with the slow ``rfc3987_syntax`` import deferred (see the module docs)."""
    defer_rfc3987_syntax()
    import jsonschema

    return jsonschema
