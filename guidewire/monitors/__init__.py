"""Monitors: constraints from static analysis that switch on at a trigger (``expr.``, ``f(``).

:func:`create_monitor` builds one by name (``"dereference"``, ``"arity"``); :func:`intersect`
ANDs monitors with each other and with grammar matchers; :func:`gated` switches a monitor on only
inside a region; :func:`prepare_buffer` parses an editor's open document ahead of completions
in it. Names are imported lazily.
"""

from .._lazy import lazy_getattr

__all__ = ["Monitor", "MonitorStats", "Abstention", "create_monitor", "intersect", "gated",
           "DereferenceMonitor", "ArityMonitor", "JediBackend", "LspBackend", "AnalysisTimeout",
           "AnalysisError", "Intersection", "Gated", "JediProcessBackend", "make_backend", "close_backends",
           "warm_up_backend", "prepare_buffer"]

_LAZY = {
    "Monitor": ".base", "MonitorStats": ".base", "Abstention": ".base",
    "create_monitor": ".factory", "intersect": ".compose", "gated": ".compose",
    "Intersection": ".compose", "Gated": ".compose",
    "DereferenceMonitor": ".dereference", "ArityMonitor": ".arity",
    "JediBackend": ".analysis", "LspBackend": ".lsp", "JediProcessBackend": ".jediproc",
    "make_backend": ".factory", "close_backends": ".factory", "warm_up_backend": ".factory",
    "prepare_buffer": ".factory",
    "AnalysisTimeout": ".analysis", "AnalysisError": ".analysis",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
