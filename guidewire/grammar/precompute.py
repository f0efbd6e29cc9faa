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

import numpy as np

from ..core.errors import LimitExceededError
from ..core.limits import env_number
from .dfamirror import self_loop_hubs
from .lexer import START

PRECOMPUTE_SECONDS = 1.0    # default wall-clock budget of compile_lark's precomputation
PRECOMPUTE_SHARE = 0.75     # at most this share of Limits.table_cache_bytes is filled ahead
# A per-request grammar's hubs are built ahead where they are many and dear (see hub_states_ahead):
HUBS_AHEAD_VOCAB = 100_000  # a vocabulary of at least this many tokens (a hub's table walks ~5x more than at 49k)
HUBS_AHEAD_MIN = 6          # an eagerly built lexer with at least this many hubs (products of patterns and keys)
HUBS_AHEAD_SECONDS = 0.1    # wall-clock budget of that precomputation
PROJECTED_AHEAD_SHARE = 2.5  # a lazily built lexer's projected strings (projected_states_ahead) get this many times it
PROJECTED_AHEAD_MAX = 64     # ... for at most this many projected states
# a document's first string, read by the first masks of every instance: its states come first
OPENINGS = (b'{"', b'[{"', b'"', b'["')


def default_seconds() -> float:
    """The precomputation budget of :func:`compile_lark`: ``GUIDEWIRE_PRECOMPUTE_SECONDS`` when set
    (a number >= 0), else :data:`PRECOMPUTE_SECONDS`."""
    return env_number("GUIDEWIRE_PRECOMPUTE_SECONDS", PRECOMPUTE_SECONDS, float, allow_zero=True)


def hubs_ahead_seconds() -> float:
    """The budget of a per-request grammar's hub precomputation: ``GUIDEWIRE_HUBS_AHEAD_SECONDS`` when
    set (a number >= 0; 0 turns it off), else :data:`HUBS_AHEAD_SECONDS`."""
    return env_number("GUIDEWIRE_HUBS_AHEAD_SECONDS", HUBS_AHEAD_SECONDS, float, allow_zero=True)


def precompute_hubs(grammar) -> dict | None:
    """Build :func:`hub_states_ahead`'s tables within :func:`hubs_ahead_seconds`, then
    :func:`projected_states_ahead`'s within :data:`PROJECTED_AHEAD_SHARE` times it (a per-request
    grammar's compile calls it): :func:`precompute_tables`' summary (both runs summed: complete
    where both are, stopped for the first reason met), or None where the gates or a zero budget
    build nothing."""
    seconds = hubs_ahead_seconds()
    if seconds <= 0:
        return None
    runs = []
    states = hub_states_ahead(grammar)
    if states is not None:
        runs.append(precompute_tables(grammar, seconds, states=states))
    states = projected_states_ahead(grammar)
    if states:
        runs.append(precompute_tables(grammar, seconds * PROJECTED_AHEAD_SHARE, states=states))
    if not runs:
        return None
    return {"tables": sum(r["tables"] for r in runs), "classes": sum(r["classes"] for r in runs),
            "seconds": sum(r["seconds"] for r in runs), "bytes": runs[-1]["bytes"],
            "complete": all(r["complete"] for r in runs),
            "stopped": next((r["stopped"] for r in runs if r["stopped"] is not None), None)}


def projected_states_ahead(grammar) -> list[int] | None:
    """The projected lexer states a per-request grammar builds at compile time, or None.

    A lexer too large to build up front (a product of patterns, formats and counters) is projected
    as it is read (:mod:`.projection`): after a string's opening quote, the state keeps only the
    sealed terminals the parser expects there, a state no compile made. Its first mask built its
    table and the tables of the search hubs it reuses (an unanchored ``\\w+[\\\\](\\w+\\.)*...``
    walks most of a 262k vocabulary per hub: 20-30 ms in one mask). A lexer built up front has
    its own hubs (:func:`hub_states_ahead`), but the projected states are new states beyond it,
    and their search hubs are not among those. Where the vocabulary has at least
    :data:`HUBS_AHEAD_VOCAB` tokens, each nonterminal's FIRST set that holds a sealed
    terminal that is not narrow (a free string or the extra keys, not a property name) is taken for
    what the parser expects there, and the quote's state projected onto it, in grammar order; each
    projected state comes with the hubs one or two bytes from it (:func:`_hubs_near`). Before them
    come the states of the document's first string (:data:`OPENINGS`: the first key of a top-level
    object, ...), reached from the grammar's start and projected as a matcher's are, whether or
    not the projection dropped anything: every instance's first masks read them, and a large
    schema's FIRST sets alone filled the list before its top-level keys came up. Tables are
    pure functions of lexer states, so a projection that the parser never asks for costs compile
    time only, never a wrong mask. A lexer bound met on the way ends the list there (the masks that
    need those states meet it and report it as before)."""
    proj = grammar._projection
    if proj is None or grammar.vocab.vocab_size < HUBS_AHEAD_VOCAB:
        return None
    dfa = grammar.dfa
    free = sum(1 << t for t, term in enumerate(dfa.terminals) if proj.sealed[t] and not term.narrow)
    if not free:
        return None
    dfa.ensure_rows(np.array([START], dtype=np.int64))
    sealed = sum(1 << t for t, s in enumerate(proj.sealed) if s)
    owners = dfa._owner_list
    entries = []
    for t in dict.fromkeys(dfa.trans[START].tolist()):      # a quote: the state of several sealed terminals
        if t > START and sum(1 for b in {owners[n] for n in dfa.nfa_states(t)} if (sealed >> b) & 1) >= 2:
            entries.append(int(t))
    states: list[int] = []
    seen: set[int] = set()
    ignored = dfa.ignored_bits

    def add(p: int) -> None:        # a state and the hubs near it, each once
        for s in [p] + _hubs_near(dfa, p):
            if s not in seen:
                seen.add(s)
                states.append(s)

    try:
        for text in OPENINGS:
            got = grammar.step_bytes(grammar.earley.initial, START, text)
            if got is not None and got[1] > START and got[1] not in seen:
                add(got[1])
        for first in dict.fromkeys(grammar.earley.cfg.first_sets()):
            if not first & free:
                continue
            for t in entries:
                p = proj.project(t, first | ignored)
                if p == t or p in seen:
                    continue
                add(p)
                if len(states) >= PROJECTED_AHEAD_MAX:
                    return states
    except LimitExceededError:      # the lexer's state or work bound (WorkLimitExceededError included)
        pass
    return states


def _hubs_near(dfa, p: int) -> list[int]:
    """The hubs (:func:`~.dfamirror.self_loop_hubs`) one or two bytes from lexer state ``p``, in
    state order: a string's search states, whose tables the first masks inside it build."""
    dfa.ensure_rows(np.array([p], dtype=np.int64))
    one = np.unique(dfa.trans[p])
    one = one[one > START]
    dfa.ensure_rows(one)
    near = np.union1d(one, np.unique(dfa.trans[one]))
    near = near[(near > START) & (near != p)]
    dfa.ensure_rows(near)
    return near[self_loop_hubs(dfa.trans[near], near)].tolist()


def hub_states_ahead(grammar) -> list[int] | None:
    """The lexer states whose tables a per-request grammar builds at compile time, or None.

    A string's first character enters its body's hub, and a hub's table inherits from the hubs near
    it; a lexer whose keys and values are products of several patterns and formats has many hubs,
    and the first mask inside a string (after ``{"``) built all of them at once (Gemma-3: 5-6 hub
    tables and the quote's own, 15-28 ms in one mask). Where the vocabulary has at least
    :data:`HUBS_AHEAD_VOCAB` tokens and the lexer is built whole (classes known) with at least
    :data:`HUBS_AHEAD_MIN` hubs, these are ``START``'s one-byte successors and every hub, in state
    order (nearest the start first); elsewhere None: a typical schema's 4 hubs cost ~2 ms, which its
    time to first mask would pay for masks that are cheap anyway."""
    if grammar.vocab.vocab_size < HUBS_AHEAD_VOCAB or not grammar._rep.size:
        return None
    hubs = grammar._builder.hub_states()
    if int(hubs.sum()) < HUBS_AHEAD_MIN:
        return None
    trans = grammar.dfa.trans
    one = np.unique(trans[START])
    one = one[one > START]
    two = np.unique(trans.take(one, axis=0))
    two = two[(two > START) & hubs.take(np.minimum(two, hubs.size - 1))]
    return np.union1d(one, two).tolist()


def precompute_tables(grammar, seconds: float, max_bytes: int | None = None, states=None) -> dict:
    """Build ``grammar``'s token tables for its lexer state classes, ``START`` first, until
    ``seconds`` of wall time have passed or the tables hold ``max_bytes`` (default
    :data:`PRECOMPUTE_SHARE` of the grammar's ``table_cache_bytes``).

    ``states``: only these lexer states' classes, in this order (default: every class, in state order).

    Returns ``{"tables", "classes", "seconds", "bytes", "complete", "stopped"}``: tables built,
    state classes seen, time spent, table bytes held, whether every class known so far (of
    ``states``, where given) has its table, and why it stopped early (``"seconds"``, ``"bytes"``, a limit's message) or None.
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
        order = iter(states) if states is not None else None
        q = START
        while True:
            if order is None:
                if q >= dfa.n_states:     # grows when building a table interns lexer states
                    break
                rep = grammar._canon(q)
                q += 1
            else:
                rep = next(order, None)
                if rep is None:
                    break
                rep = grammar._canon(rep)
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
        wanted = range(START, dfa.n_states) if states is None else states
        complete = stopped is None and all(grammar._canon(s) in grammar._tables for s in wanted)
        return {"tables": built, "classes": len(seen), "seconds": time.perf_counter() - t0,
                "bytes": grammar._table_bytes, "complete": complete, "stopped": stopped}
