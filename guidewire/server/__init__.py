"""OpenAI-compatible HTTP server (``guidewire serve``): chat/completions with structured outputs,
grammar-enforced tool calls, streaming, and continuous batching on one scheduler thread.

Layout: :mod:`.batch` (the continuously batched KV cache), :mod:`.scheduler` (the decoding
thread), :mod:`.tools` (tool-call grammar and parser), :mod:`.chat` (prompts),
:mod:`.plans` (request validation), :mod:`.responses` (OpenAI shapes), :mod:`.app` (routes),
:mod:`.cli` (the ``serve`` subcommand).
"""

from .._lazy import lazy_getattr

_LAZY = {"create_app": ".app", "Scheduler": ".scheduler", "Job": ".scheduler"}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = ["create_app", "Scheduler", "Job"]
