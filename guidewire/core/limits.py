"""Work and memory limits of compiled grammars: defaults, environment overrides, the step budget.

Every mask or advance of a :class:`~guidewire.grammar.CompiledGrammar` runs on a *step
budget* ("fuel"): building lazy parts (lexer states and rows, Earley sets, token-table
walks) spends work units, and a step that would spend more than ``step_work`` units, or
run longer than ``step_seconds``, stops with :class:`~guidewire.core.errors.WorkLimitExceededError`
(the matcher then holds a zero mask in a terminal error state). Memo hits cost nothing.
Every memo of a grammar is bounded in bytes (``mask_cache_bytes``, ``table_cache_bytes``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .errors import WorkLimitExceededError

# One unit ~ one running token per walk step, one NFA edge swept or lexer state built, one
# Earley item built: about 0.13 us each (median over the big steps of 300 MaskBench schemas,
# bench/step_work.py), whose largest single step took 378k units. The default is 13x that
# (about 0.65 s of work); the wall-clock cap is a backstop for work the units undercount.
DEFAULT_STEP_WORK = 5_000_000
DEFAULT_STEP_SECONDS = 5.0
DEFAULT_MASK_CACHE_BYTES = 32 << 20
DEFAULT_TABLE_CACHE_BYTES = 256 << 20   # a Gemma-3 group row is 32 KB: at 64 MiB product lexers evicted tables they reused
DEFAULT_LEXER_BYTES = 512 << 20    # lexer states are not a memo (matchers hold their ids):
DEFAULT_PARSER_BYTES = 256 << 20   # ... past these bounds a step fails with LimitExceededError


def env_number(name: str, default, cast, *, allow_zero: bool = False):
    """The number in environment variable ``name`` read with ``cast`` (``default`` when unset or
    empty); a value that does not parse, or is not positive (not >= 0 with ``allow_zero``), raises
    ValueError naming the variable."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a valid {cast.__name__}") from None
    if not (value >= 0 if allow_zero else value > 0):
        raise ValueError(f"environment variable {name}={raw!r} must be {'>= 0' if allow_zero else 'positive'}")
    return value


@dataclass(frozen=True)
class Limits:
    """The limits of one compiled grammar (see the module docstring).

    ``lexer_bytes``/``parser_bytes`` bound the estimated memory of the lexer states and Earley
    sets built: they are the state space matchers point into, not memos, so past a bound a
    step fails with :class:`~guidewire.core.errors.LimitExceededError` instead of evicting.
    Defaults come from the environment when set: ``GUIDEWIRE_STEP_WORK``,
    ``GUIDEWIRE_STEP_SECONDS``, ``GUIDEWIRE_MASK_CACHE_BYTES``, ``GUIDEWIRE_TABLE_CACHE_BYTES``,
    ``GUIDEWIRE_LEXER_BYTES``, ``GUIDEWIRE_PARSER_BYTES``.
    ``step_seconds=None`` turns the wall-clock cap off (the work budget alone is deterministic).
    """

    step_work: int = field(default_factory=lambda: env_number("GUIDEWIRE_STEP_WORK", DEFAULT_STEP_WORK, int))
    step_seconds: float | None = field(
        default_factory=lambda: env_number("GUIDEWIRE_STEP_SECONDS", DEFAULT_STEP_SECONDS, float))
    mask_cache_bytes: int = field(
        default_factory=lambda: env_number("GUIDEWIRE_MASK_CACHE_BYTES", DEFAULT_MASK_CACHE_BYTES, int))
    table_cache_bytes: int = field(
        default_factory=lambda: env_number("GUIDEWIRE_TABLE_CACHE_BYTES", DEFAULT_TABLE_CACHE_BYTES, int))
    lexer_bytes: int = field(default_factory=lambda: env_number("GUIDEWIRE_LEXER_BYTES", DEFAULT_LEXER_BYTES, int))
    parser_bytes: int = field(default_factory=lambda: env_number("GUIDEWIRE_PARSER_BYTES", DEFAULT_PARSER_BYTES, int))

    def __post_init__(self):
        for name in ("step_work", "mask_cache_bytes", "table_cache_bytes", "lexer_bytes", "parser_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be a positive int, got {getattr(self, name)!r}")
        if self.step_seconds is not None and not self.step_seconds > 0:
            raise ValueError(f"Limits.step_seconds must be positive or None, got {self.step_seconds!r}")


class Fuel:
    """The work budget of one step: :meth:`refill` at the start, :meth:`spend` while building.

    Not thread-safe by itself: the compiled grammar's lock serialises the steps that use it.
    """

    __slots__ = ("limit", "seconds", "left", "deadline", "spent")

    def __init__(self, limit: int, seconds: float | None):
        self.limit = limit
        self.seconds = seconds
        self.left = limit
        self.deadline = None
        self.spent = 0     # work spent by the current step (for benchmarks)

    def refill(self) -> None:
        """Start a new step with a full budget (the clock starts at the first spend)."""
        self.left = self.limit
        self.deadline = None
        self.spent = 0

    def spend(self, units: int) -> None:
        """Spend ``units`` of work; raise :class:`WorkLimitExceededError` past the budget or deadline."""
        self.left -= units
        self.spent += units
        if self.left < 0:
            raise WorkLimitExceededError(
                f"a single step needs more than {self.limit} work units (step_work; lexer states, "
                "Earley items, token walks); raise it with Limits(step_work=...) or GUIDEWIRE_STEP_WORK")
        if self.seconds is not None:
            now = time.perf_counter()
            if self.deadline is None:
                self.deadline = now + self.seconds
            elif now > self.deadline:
                raise WorkLimitExceededError(
                    f"a single step runs longer than {self.seconds} s (step_seconds); raise it with "
                    "Limits(step_seconds=...) or GUIDEWIRE_STEP_SECONDS")
