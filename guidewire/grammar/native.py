"""The switch between the compiled inner loops (``guidewire.grammar._native``, C) and their numpy/Python references.

The C module is built by ``pip install`` when a compiler is there (it is optional: without one the
package installs and runs the reference paths, with identical results). ``GUIDEWIRE_NATIVE=0``
turns it off at import; :func:`set_enabled` switches it at run time (the tests run both paths).
Each caller asks :func:`module` at the start of a call, so a switch takes effect at the next call.
"""

from __future__ import annotations

import os

try:
    from . import _native as _compiled
except ImportError:  # built without a compiler, or from a source tree never built
    _compiled = None

_enabled = _compiled is not None and os.environ.get("GUIDEWIRE_NATIVE", "1") != "0"


def available() -> bool:
    """Whether the compiled module was built and imports."""
    return _compiled is not None


def module():
    """The compiled module when it is available and enabled, else None (use the reference path)."""
    return _compiled if _enabled else None


def set_enabled(on: bool) -> bool:
    """Turn the compiled paths on or off; returns the previous setting. On without the module raises."""
    global _enabled
    if on and _compiled is None:
        raise RuntimeError("guidewire.grammar._native is not built (reinstall with a C compiler)")
    old, _enabled = _enabled, bool(on)
    return old


def gc_free_list() -> list:
    """A new empty list that CPython's cyclic collector does not walk (an ordinary list without
    the compiled module). For a grammar's append-only per-state arrays of ints, bools, untracked
    tuples and acyclic objects only: the collector never frees an object held only there, so
    nothing that can be part of a reference cycle may be put in one."""
    return _compiled.gc_free_list() if _enabled else []
