"""OpenAI-style error objects: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

from __future__ import annotations

from ..core.errors import (GrammarSyntaxError, GuidewireError, InexpressibleLiteralError, LimitExceededError,
                           UnsatisfiableGrammarError, UnsupportedFeatureError)
from ..runtime.errors import ContextLengthError


class APIError(Exception):
    """An error answered to the client as an OpenAI error object."""

    def __init__(self, message: str, *, status: int = 400, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.message, self.status, self.type, self.param, self.code = message, status, type, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        """The JSON body OpenAI clients parse."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def constraint_error(exc: Exception, param: str) -> APIError:
    """A 400 for a constraint that does not compile (bad schema, unsupported keyword, bad grammar...)."""
    from ..grammar.jsonschema import SchemaError

    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, ContextLengthError):
        return APIError(str(exc), param="messages", code="context_length_exceeded")
    code = {SchemaError: "invalid_schema", UnsupportedFeatureError: "unsupported_schema_feature",
            GrammarSyntaxError: "invalid_grammar", UnsatisfiableGrammarError: "unsatisfiable_constraint",
            InexpressibleLiteralError: "inexpressible_literal", LimitExceededError: "constraint_too_large"}
    for cls, name in code.items():
        if isinstance(exc, cls):
            return APIError(f"{param}: {exc}", param=param, code=name)
    if isinstance(exc, (GuidewireError, ValueError, TypeError, KeyError, RecursionError)):
        return APIError(f"{param}: {type(exc).__name__}: {exc}", param=param, code="invalid_constraint")
    return APIError(f"internal error while compiling {param}: {type(exc).__name__}: {exc}", status=500,
                    type="server_error", param=param, code="internal_error")
