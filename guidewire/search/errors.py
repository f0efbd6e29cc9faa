"""Typed errors of the search layer."""

from __future__ import annotations

from ..core.errors import GuidewireError, LimitExceededError


class SearchError(GuidewireError):
    """A sampler could not produce what was asked (empty language, all particles dead, ...)."""


class SearchBudgetExceeded(LimitExceededError):
    """A sampler ran past its ``budget`` (forward passes, proposals or seconds) before ``n`` samples."""
