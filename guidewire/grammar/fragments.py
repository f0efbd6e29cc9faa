"""Terminal automata shared across compiles: closed NFA fragments stored by what defines them.

Building a terminal's byte NFA (UTF-8 classes, JSON string escapes, length counters)
and analysing it (which states can still reach an accepting end, whether the language
is infinite) costs as much as the rest of a small compile, while most grammars use the
same few lexemes: JSON strings, numbers, bounded whitespace, punctuation, common keys.

A terminal is built into consecutive fresh states of the grammar's NFA, with edges only
among them (a *closed* fragment). Such a fragment is stored with state ids relative to
its first state and copied into another NFA at an offset (:func:`splice`), with its
analysis. :class:`FragmentStore` keys fragments by what determines the automaton exactly
(a pattern and its flags, a literal, or a builder's key) and is bounded by the number of
NFA states it holds and by an estimate of their bytes (least recently used fragments go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from . import native
from .regex import NFA, RegexFragment

MAX_FRAGMENT_STATES = 20_000    # larger fragments are rebuilt each time, never stored
MAX_STORED_STATES = 200_000     # total NFA states held by the process-wide store
MAX_STORED_BYTES = 64 << 20     # ... and at most this many bytes (see StoredFragment.nbytes)
STRINGS_CAP = 17                # path counts stop here (a terminal of at most 16 strings is narrow)
COUNT_STATES = 1024             # ... and past this many states (16 names of 32 bytes, two spellings each)


@dataclass(frozen=True)
class FragmentFacts:
    """What the lexer needs to know about one terminal's fragment.

    ``live[i]`` is 1 when state ``first + i`` can reach the fragment's end; ``infinite``
    tells whether the live automaton reachable from the start has a cycle; ``strings`` counts
    its paths from start to end (a byte range counting once per byte: an upper bound on the
    strings of its language), capped at :data:`STRINGS_CAP` (also when infinite).
    """

    live: bytes
    infinite: bool
    strings: int = 0


@dataclass(frozen=True)
class StoredFragment:
    """A closed NFA fragment with relative state ids, its entry/exit and its facts."""

    eps: tuple[tuple[int, ...], ...]
    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    fragment: RegexFragment
    facts: FragmentFacts
    nbytes: int = 0     # estimated memory held (tuples, ints, liveness), set by capture()

    @property
    def n_states(self) -> int:
        """Number of NFA states the fragment occupies."""
        return len(self.eps)


def analyse(nfa: NFA, first: int, frag: RegexFragment) -> FragmentFacts | None:
    """Facts about the fragment built into states ``first ..`` of ``nfa`` (None if not closed):
    in C (``fragment_facts``) when the compiled module is on, else :func:`analyse_python`."""
    compiled = native.module()
    if compiled is None:
        return analyse_python(nfa, first, frag)
    got = compiled.fragment_facts(nfa.eps, nfa.edges, first, frag.start, frag.end, STRINGS_CAP, COUNT_STATES)
    return None if got is None else FragmentFacts(*got)


def analyse_python(nfa: NFA, first: int, frag: RegexFragment) -> FragmentFacts | None:
    """:func:`analyse`'s reference. Liveness is a reverse search from the end over the fragment's
    states only; the cycle check is a depth-first search over its live states from the start."""
    eps, edges = nfa.eps, nfa.edges
    n = len(eps) - first
    rev: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for t in eps[first + i]:
            if not first <= t < first + n:
                return None
            rev[t - first].append(i)
        for _lo, _hi, t in edges[first + i]:
            if not first <= t < first + n:
                return None
            rev[t - first].append(i)
    end = frag.end - first
    if not 0 <= end < n or not 0 <= frag.start - first < n:
        return None
    live = bytearray(n)
    live[end] = 1
    stack = [end]
    while stack:
        for p in rev[stack.pop()]:
            if not live[p]:
                live[p] = 1
                stack.append(p)
    start = frag.start - first
    infinite = _has_cycle(eps, edges, first, start, live)
    strings = STRINGS_CAP if infinite or n > COUNT_STATES else count_strings(eps, edges, first, start, end, live)
    return FragmentFacts(bytes(live), infinite, strings)


def _has_cycle(eps, edges, first: int, start: int, live: bytearray) -> bool:
    """Whether the live states reachable from ``start`` (relative ids) contain a cycle."""
    if not live[start]:
        return False
    color = bytearray(len(live))   # 0 unseen, 1 on the stack, 2 done
    color[start] = 1
    stack = [(start, _live_successors(eps, edges, first, start, live), 0)]
    while stack:
        s, succ, i = stack[-1]
        if i == len(succ):
            color[s] = 2
            stack.pop()
            continue
        stack[-1] = (s, succ, i + 1)
        t = succ[i]
        if color[t] == 1:
            return True
        if color[t] == 0:
            color[t] = 1
            stack.append((t, _live_successors(eps, edges, first, t, live), 0))
    return False


def count_strings(eps, edges, first: int, start: int, end: int, live) -> int:
    """The paths from ``start`` to ``end`` over live states (ids relative to ``first``; the automaton
    reachable from ``start`` has no cycle), a byte range counting once per byte: an upper bound on
    the strings of the language. Capped at :data:`STRINGS_CAP`, also once more than
    :data:`COUNT_STATES` states are reached (a handful of names is far smaller)."""
    if not live[start]:
        return 0
    count: dict[int, int] = {}
    stack = [(start, False)]
    while stack:
        s, done = stack.pop()
        if done:
            n = 1 if s == end else 0
            n += sum(count[t - first] for t in eps[first + s] if live[t - first])
            n += sum((hi - lo + 1) * count[t - first] for lo, hi, t in edges[first + s] if live[t - first])
            count[s] = min(n, STRINGS_CAP)
            continue
        if s in count:
            continue
        if len(count) + len(stack) > COUNT_STATES:
            return STRINGS_CAP
        stack.append((s, True))
        stack.extend((t, False) for t in _live_successors(eps, edges, first, s, live) if t not in count)
    return count[start]


def _live_successors(eps, edges, first: int, s: int, live: bytearray) -> list[int]:
    out = [t - first for t in eps[first + s] if live[t - first]]
    out.extend(t - first for _lo, _hi, t in edges[first + s] if live[t - first])
    return out


def capture(nfa: NFA, first: int, frag: RegexFragment, facts: FragmentFacts) -> StoredFragment:
    """The closed fragment built into states ``first ..`` of ``nfa``, with relative ids."""
    eps = tuple(tuple(t - first for t in e) for e in nfa.eps[first:])
    edges = tuple(tuple((lo, hi, t - first) for lo, hi, t in e) for e in nfa.edges[first:])
    rel = RegexFragment(frag.start - first, frag.end - first, frag.has_lazy, frag.nullable,
                        tuple(u - first for u in frag.universal), tuple((lo - first, *rest) for lo, *rest in frag.layers))
    # per state two tuples (56 B each); per epsilon target a slot and an int; per edge a
    # 3-tuple with its ints and slot; a liveness byte; a counter's layer bytes
    size = (113 * len(eps) + 36 * sum(len(e) for e in eps) + 160 * sum(len(e) for e in edges)
            + sum(120 + len(lay) + len(shape) for _lo, lay, shape, _elided in frag.layers))
    return StoredFragment(eps, edges, rel, facts, size)


def splice(nfa: NFA, stored: StoredFragment) -> RegexFragment:
    """Copy ``stored`` into fresh states of ``nfa``; returns its entry and exit there."""
    nfa.reserve(stored.n_states)
    off = len(nfa)
    compiled = native.module()
    (compiled.splice if compiled is not None else splice_lists)(nfa.eps, nfa.edges, stored.eps, stored.edges, off)
    f = stored.fragment
    return RegexFragment(f.start + off, f.end + off, f.has_lazy, f.nullable, tuple(u + off for u in f.universal),
                         tuple((lo + off, *rest) for lo, *rest in f.layers))


def splice_lists(eps: list, edges: list, stored_eps, stored_edges, off: int) -> None:
    """Append a fresh list per stored state to ``eps``/``edges``, targets shifted by ``off``
    (:func:`splice`'s reference for the compiled ``splice``)."""
    eps.extend([[t + off for t in e] for e in stored_eps])
    edges.extend([[(lo, hi, t + off) for lo, hi, t in e] for e in stored_edges])


def _pack(item: StoredFragment) -> tuple:
    """``item`` as nested plain tuples of atoms, untracked by the cyclic GC with the compiled module."""
    f, facts = item.fragment, item.facts
    packed = (item.eps, item.edges, (f.start, f.end, f.has_lazy, f.nullable, f.universal, f.layers),
              (facts.live, facts.infinite, facts.strings), item.nbytes)
    compiled = native.module()
    # the collector alone untracks a tuple of tuples one level per collection (see untrack_nested)
    return packed if compiled is None else compiled.untrack_nested(packed)


def _unpack(packed: tuple) -> StoredFragment:
    """:func:`_pack`'s inverse."""
    eps, edges, frag, facts, nbytes = packed
    return StoredFragment(eps, edges, RegexFragment(*frag), FragmentFacts(*facts), nbytes)


class FragmentStore:
    """A thread-safe LRU store of :class:`StoredFragment` by key, bounded by total NFA states
    and by total estimated bytes."""

    def __init__(self, max_states: int = MAX_STORED_STATES, max_fragment_states: int = MAX_FRAGMENT_STATES,
                 max_bytes: int = MAX_STORED_BYTES):
        self.max_states = max_states
        self.max_fragment_states = max_fragment_states
        self.max_bytes = max_bytes
        # values are plain tuples of ints, bytes and bools (see _pack), which the cyclic collector
        # stops tracking: a store of thousands of dataclass instances is walked by every full
        # collection of a long-lived process, one cache miss per reference
        self._items: OrderedDict[object, tuple] = OrderedDict()
        self._states = 0
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key) -> StoredFragment | None:
        """The fragment stored under ``key`` (marked recently used), or None."""
        with self._lock:
            packed = self._items.get(key)
            if packed is not None:
                self._items.move_to_end(key)
        return None if packed is None else _unpack(packed)

    def accepts(self, n_states: int) -> bool:
        """Whether a fragment of ``n_states`` states would be stored."""
        return n_states <= min(self.max_fragment_states, self.max_states)

    def put(self, key, item: StoredFragment) -> None:
        """Store ``item`` under ``key``, evicting least recently used fragments beyond the bound."""
        if not self.accepts(item.n_states) or item.nbytes > self.max_bytes:
            return
        packed = _pack(item)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._states -= len(old[0])
                self._bytes -= old[-1]
            self._items[key] = packed
            self._states += item.n_states
            self._bytes += item.nbytes
            while self._states > self.max_states or self._bytes > self.max_bytes:
                _k, gone = self._items.popitem(last=False)
                self._states -= len(gone[0])
                self._bytes -= gone[-1]

    def clear(self) -> None:
        """Drop every stored fragment."""
        with self._lock:
            self._items.clear()
            self._states = 0
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def n_states(self) -> int:
        """Total NFA states held."""
        return self._states

    @property
    def n_bytes(self) -> int:
        """Total estimated bytes held."""
        return self._bytes


STORE = FragmentStore()
