"""Compile-time token tables: build lexer states' tables before the first mask asks for them.

A mask's expensive part on a first visit is the token table of the current lexer state (the
vocabulary walked from that state, grouped by lexemes and alive terminals). It depends on the
lexer alone, not on the parser state, so it can be built at compile time -- XGrammar's adaptive
token mask cache, kept per lexer state class here. :func:`precompute_tables` builds them in state
order (states are interned breadth first from ``START``, so the states nearest the start of a
lexeme come first) until a wall-clock budget or a byte budget is spent. Masks are the same with
or without it: tables are pure functions of the lexer state, built by the same code either way.

Fixed grammars (Lark, the built-ins) are compiled once and shared, so :func:`compile_lark
<guidewire.grammar.compile_lark>` spends a default budget (``PRECOMPUTE_SECONDS``, environment
``GUIDEWIRE_PRECOMPUTE_SECONDS``; 0 turns it off); per-request grammars (JSON Schema, regex)
stay lazy by default, where time to first mask matters more.
"""

from __future__ import annotations

import time

from ..core.errors import LimitExceededError
from ..core.limits import env_number
from .lexer import START

PRECOMPUTE_SECONDS = 1.0    # default wall-clock budget of compile_lark's precomputation
PRECOMPUTE_SHARE = 0.75     # at most this share of Limits.table_cache_bytes is filled ahead


def default_seconds() -> float:
    """The precomputation budget of :func:`compile_lark`: ``GUIDEWIRE_PRECOMPUTE_SECONDS`` when set
    (a number >= 0), else :data:`PRECOMPUTE_SECONDS`."""
    return env_number("GUIDEWIRE_PRECOMPUTE_SECONDS", PRECOMPUTE_SECONDS, float, allow_zero=True)


def precompute_tables(grammar, seconds: float, max_bytes: int | None = None) -> dict:
    """Build ``grammar``'s token tables for its lexer state classes, ``START`` first, until
    ``seconds`` of wall time have passed or the tables hold ``max_bytes`` (default
    :data:`PRECOMPUTE_SHARE` of the grammar's ``table_cache_bytes``).

    Returns ``{"tables", "classes", "seconds", "bytes", "complete", "stopped"}``: tables built,
    state classes seen, time spent, table bytes held, whether every class known so far has
    its table, and why it stopped early (``"seconds"``, ``"bytes"``, a limit's message) or None.
    A table whose build exceeds a work limit ends the precomputation (the mask that needs it
    later builds it under its own step budget and reports the limit there).
    """
    if not seconds >= 0:
        raise ValueError(f"precompute seconds must be >= 0 (got {seconds!r})")
    with grammar._lock:
        bound = grammar.limits.table_cache_bytes
        cap = int(bound * PRECOMPUTE_SHARE) if max_bytes is None else min(int(max_bytes), bound)
        t0 = time.perf_counter()
        deadline = t0 + seconds
        built, seen = 0, set()
        stopped = None
        dfa = grammar.dfa
        q = START
        while q < dfa.n_states:           # grows when building a table interns lexer states
            rep = grammar._canon(q)
            q += 1
            if rep in seen:
                continue
            seen.add(rep)
            if rep in grammar._tables:
                continue
            if time.perf_counter() >= deadline:
                stopped = "seconds"
                break
            if grammar._table_bytes >= cap:
                stopped = "bytes"
                break
            grammar._fuel.refill()
            try:
                grammar._table_entry(rep)
            except LimitExceededError as exc:   # WorkLimitExceededError included
                stopped = str(exc)
                break
            built += 1
        complete = stopped is None and all(grammar._canon(s) in grammar._tables
                                           for s in range(START, dfa.n_states))
        return {"tables": built, "classes": len(seen), "seconds": time.perf_counter() - t0,
                "bytes": grammar._table_bytes, "complete": complete, "stopped": stopped}
