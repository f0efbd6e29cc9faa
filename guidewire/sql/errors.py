"""Typed errors of the text-to-SQL pipeline."""

from __future__ import annotations

from ..core.errors import GuidewireError


class DatabaseError(GuidewireError):
    """A database that cannot be opened or read (missing file, not a database, bad URL, no driver)."""


class EmptySchemaError(GuidewireError):
    """A database with no tables: there is nothing a query could name."""


class UnsafeQueryError(GuidewireError):
    """A statement that is not a single read-only ``SELECT`` (it is never executed)."""
