"""Typed errors of the decoding runtime (all subclass :class:`~guidewire.core.errors.GuidewireError`)."""

from __future__ import annotations

from ..core.errors import GuidewireError


class ModelLoadError(GuidewireError):
    """A model name or path that cannot be found, converted or loaded."""


class ContextLengthError(GuidewireError):
    """A prompt that leaves no room in the model's context window for even one generated token."""


class DeadEndError(GuidewireError):
    """The constraint allows no token at all (it is in an error state or its language is exhausted)."""


class ConstraintViolationError(GuidewireError):
    """A token chosen by the runtime was refused by its constraint (an engine bug, never expected)."""


class IncompleteOutputError(GuidewireError):
    """Generation hit ``max_tokens`` before the constrained output was complete.

    ``result`` holds the :class:`~guidewire.runtime.decode.GenerationResult` with the partial
    text (``finish_reason == "length"``); it is never a valid output.
    """

    def __init__(self, message: str, result=None):
        self.result = result
        super().__init__(message)


class OutputValidationError(GuidewireError):
    """A finished output failed its independent check (JSON parse, JSON Schema, Pydantic, choices).

    ``result`` holds the generation result and ``text`` its text.
    """

    def __init__(self, message: str, result=None):
        self.result = result
        self.text = getattr(result, "text", None)
        super().__init__(message)
