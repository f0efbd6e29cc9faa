"""Reachability and string counts over an NFA's graph: which states reach an accepting one, what a
terminal's automaton reaches, and whether a terminal is infinite or narrow (few strings)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .fragments import STRINGS_CAP, count_strings
from .regex import NFA

if TYPE_CHECKING:   # the lexer imports this module
    from .lexer import Terminal

NARROW_STRINGS = STRINGS_CAP - 1   # a terminal of at most this many strings is narrow (see tabletrie)


def reachable(nfa: NFA, start: int) -> set[int]:
    """The NFA states reachable from ``start`` (epsilon moves and byte edges)."""
    seen = {start}
    stack = [start]
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
        for _lo, _hi, t in nfa.edges[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


def with_counts(nfa: NFA, term: Terminal, live: bytearray) -> Terminal:
    """Copy of ``term`` with ``infinite`` (its live automaton has a cycle) and ``narrow`` set."""
    color: dict[int, int] = {}
    stack = [(term.start, 0)]
    while stack:
        s, i = stack.pop()
        succ = [t for t in nfa.eps[s] if live[t]] + [t for _a, _b, t in nfa.edges[s] if live[t]]
        if i == 0:
            if s in color:
                continue
            color[s] = 1
        if i < len(succ):
            stack.append((s, i + 1))
            t = succ[i]
            c = color.get(t)
            if c == 1:
                return replace(term, infinite=True, narrow=False)
            if c is None:
                stack.append((t, 0))
        else:
            color[s] = 2
    strings = count_strings(nfa.eps, nfa.edges, 0, term.start, term.accept, live)
    return replace(term, infinite=False, narrow=narrow_terminal(False, strings))


def narrow_terminal(infinite: bool, strings: int) -> bool:
    """A finite terminal of at most :data:`NARROW_STRINGS` strings."""
    return not infinite and strings <= NARROW_STRINGS


def coreachable(nfa: NFA, finals: set[int]) -> bytearray:
    """A byte per NFA state: 1 if some state of ``finals`` can be reached from it."""
    rev: list[list[int]] = [[] for _ in range(len(nfa))]
    for s in range(len(nfa)):
        for t in nfa.eps[s]:
            rev[t].append(s)
        for _lo, _hi, t in nfa.edges[s]:
            rev[t].append(s)
    seen = bytearray(len(nfa))
    for f in finals:
        seen[f] = 1
    stack = list(finals)
    while stack:
        s = stack.pop()
        for p in rev[s]:
            if not seen[p]:
                seen[p] = 1
                stack.append(p)
    return seen
