"""Typed errors raised by guidewire.

Every failure a user can cause (bad grammar text, an unsupported regex
construct, a grammar whose language is empty, a vocabulary that cannot spell a
literal, a work limit that was hit) has its own class, so callers can react to
the kind of problem rather than parse messages.
"""

from __future__ import annotations


class GuidewireError(Exception):
    """Base class of every error guidewire raises on purpose."""


class GrammarSyntaxError(GuidewireError):
    """Grammar or regex text that does not parse; carries ``line`` and ``column`` (1-based)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 source: str = "grammar"):
        self.line = line
        self.column = column
        self.source = source
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{source} syntax error{where}: {message}")


class RegexSyntaxError(GrammarSyntaxError):
    """A regular expression that does not parse (Python ``re`` syntax)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message, line, column, source="regex")


class UnsupportedFeatureError(GuidewireError):
    """A construct that parses but cannot be enforced exactly (lookarounds, backreferences, ...)."""


class UnsatisfiableGrammarError(GuidewireError):
    """A grammar (or regex) whose language is empty, or a rule/terminal that can never match."""


class InexpressibleLiteralError(GuidewireError):
    """A literal that no sequence of vocabulary tokens can spell."""


class LimitExceededError(GuidewireError):
    """A documented work or size limit was hit (compile size, per-step work, cache budget)."""


class VocabError(GuidewireError):
    """A tokenizer that cannot be turned into a byte-level vocabulary."""


class WorkLimitExceededError(LimitExceededError):
    """One mask or advance needed more work (or wall time) than its step budget allows."""
