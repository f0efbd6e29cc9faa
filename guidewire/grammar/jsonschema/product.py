"""Intersection of character automata (several ``pattern``s, a ``format`` and a pattern, exclusions)."""

from __future__ import annotations

from ...core.errors import LimitExceededError
from ..charset import intersect as intersect_intervals
from ..jsonstring import CharNFA

MAX_PRODUCT = 50_000


def intersect(a: tuple[CharNFA, int, int], b: tuple[CharNFA, int, int]) -> tuple[CharNFA, int, int]:
    """The product automaton accepting strings accepted by both ``a`` and ``b``."""
    na, sa, ea = a
    nb, sb, eb = b
    out = CharNFA()
    index: dict[tuple[int, int], int] = {}
    work: list[tuple[int, int]] = []

    def state(x: int, y: int) -> int:
        sid = index.get((x, y))
        if sid is None:
            if len(index) >= MAX_PRODUCT:
                raise LimitExceededError(f"intersection of string constraints exceeds {MAX_PRODUCT} states")
            sid = index[(x, y)] = out.add_state()
            work.append((x, y))
        return sid

    start = state(sa, sb)
    while work:
        x, y = work.pop()
        sid = index[(x, y)]
        for t in na.eps[x]:
            out.eps[sid].append(state(t, y))
        for t in nb.eps[y]:
            out.eps[sid].append(state(x, t))
        for iva, ta in na.edges[x]:
            for ivb, tb in nb.edges[y]:
                iv = intersect_intervals(iva, ivb)
                if iv:
                    out.add_chars(sid, state(ta, tb), iv)
    end = state(ea, eb)
    return out, start, end


def intersect_all(autos):
    """Fold :func:`intersect` over a non-empty list of automata."""
    result = autos[0]
    for other in autos[1:]:
        result = intersect(result, other)
    return result
