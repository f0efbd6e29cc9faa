"""Complement of a character automaton (strings a ``pattern`` does *not* match).

Subset construction over the interval alphabet: each DFA state's outgoing intervals are split
into disjoint pieces; the DFA is completed with a sink and its accepting set flipped.
"""

from __future__ import annotations

from ...core.errors import LimitExceededError
from ..charset import complement, normalize
from ..jsonstring import CharNFA

MAX_DFA_STATES = 4000


def _closure(nfa: CharNFA, states) -> frozenset:
    seen = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _pieces(nfa: CharNFA, subset) -> list[tuple[int, int, frozenset]]:
    """Disjoint (lo, hi, targets) covering every character with at least one edge out of ``subset``."""
    events: dict[int, list] = {}
    for s in subset:
        for iv, t in nfa.edges[s]:
            for a, b in iv:
                events.setdefault(a, []).append((1, t))
                events.setdefault(b + 1, []).append((-1, t))
    if not events:
        return []
    out = []
    active: dict[int, int] = {}
    points = sorted(events)
    for i, p in enumerate(points):
        for delta, t in events[p]:
            c = active.get(t, 0) + delta
            if c:
                active[t] = c
            else:
                active.pop(t, None)
        if active and i + 1 < len(points):
            out.append((p, points[i + 1] - 1, frozenset(active)))
    merged: list[tuple[int, int, frozenset]] = []
    for lo, hi, ts in out:
        if merged and merged[-1][2] == ts and merged[-1][1] + 1 == lo:
            merged[-1] = (merged[-1][0], hi, ts)
        else:
            merged.append((lo, hi, ts))
    return merged


def complement_automaton(auto: tuple[CharNFA, int, int]) -> tuple[CharNFA, int, int]:
    """Character automaton of every string that ``auto`` does not accept."""
    nfa, start, end = auto
    out = CharNFA()
    final = out.add_state()
    sink = out.add_state()
    out.add_chars(sink, sink, complement(()))
    out.eps[sink].append(final)
    index: dict[frozenset, int] = {}
    work: list[frozenset] = []

    def state(subset: frozenset) -> int:
        sid = index.get(subset)
        if sid is None:
            if len(index) >= MAX_DFA_STATES:
                raise LimitExceededError(f"complement of a pattern needs more than {MAX_DFA_STATES} states")
            sid = index[subset] = out.add_state()
            work.append(subset)
        return sid

    root = state(_closure(nfa, [start]))
    while work:
        subset = work.pop()
        sid = index[subset]
        if end not in subset:
            out.eps[sid].append(final)
        pieces = _pieces(nfa, subset)
        for lo, hi, ts in pieces:
            out.add_chars(sid, state(_closure(nfa, ts)), ((lo, hi),))
        gaps = complement(normalize([(lo, hi) for lo, hi, _ in pieces]))
        if gaps:
            out.add_chars(sid, sink, tuple(gaps))
    return out, root, final


def automaton_matches(auto: tuple[CharNFA, int, int], text: str) -> bool:
    """Whether the character automaton accepts ``text``."""
    nfa, start, end = auto
    cur = _closure(nfa, [start])
    for ch in text:
        c = ord(ch)
        nxt = [t for q in cur for iv, t in nfa.edges[q] if any(a <= c <= b for a, b in iv)]
        if not nxt:
            return False
        cur = _closure(nfa, nxt)
    return end in cur


def pattern_matches(entry, text: str) -> bool:
    """Whether ``text`` satisfies a pattern entry ``(pattern, search[, negated])`` (exactly as compiled)."""
    from ..jsonstring import pattern_automaton

    hit = automaton_matches(pattern_automaton(entry[0], search=entry[1]), text)
    return (not hit) if len(entry) > 2 and entry[2] else hit
