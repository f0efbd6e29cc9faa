"""OpenAI-compatible HTTP server (``guidewire serve``): chat/completions with structured outputs,
grammar-enforced tool calls, streaming, and continuous batching on one scheduler thread.

Layout: :mod:`.batch` (the continuously batched KV cache), :mod:`.scheduler` (the decoding
thread), :mod:`.tools` (tool-call grammar and parser), :mod:`.chat` (prompts),
:mod:`.plans` (request validation), :mod:`.responses` (OpenAI shapes), :mod:`.app` (routes),
:mod:`.cli` (the ``serve`` subcommand).
"""

from .app import create_app
from .scheduler import Job, Scheduler

__all__ = ["create_app", "Scheduler", "Job"]
