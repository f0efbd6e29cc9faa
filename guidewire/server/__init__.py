"""OpenAI-compatible HTTP server (``guidewire serve``): chat/completions with structured outputs,
grammar-enforced tool calls, streaming, and continuous batching on one scheduler thread.

Layout: :mod:`.batch` (the continuously batched KV cache), :mod:`.scheduler` (the decoding
thread), :mod:`.tools` (tool-call grammar and parser), :mod:`.chat` (prompts),
:mod:`.plans` (request validation), :mod:`.responses` (OpenAI shapes), :mod:`.app` (routes),
:mod:`.cli` (the ``serve`` subcommand).
"""

_LAZY = {"create_app": ".app", "Scheduler": ".scheduler", "Job": ".scheduler"}


def __getattr__(name):
    """Import FastAPI, torch and the scheduler on first use (``guidewire serve --help`` stays cheap)."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'guidewire.server' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


__all__ = ["create_app", "Scheduler", "Job"]
