"""The minimal deterministic form of a character automaton (a JSON string's patterns, format, exclusions).

A ``pattern`` is a search (``.*P.*``). Built as an NFA, every position after a match still
carries the partial matches running beside the accept-everything tail, so a lazily built lexer
meets a new state at each character of the rest of the string, and each new state's token table
walks most of the vocabulary: an e-mail search (``[\\w.-]+@([\\w.-]+\\.)+\\w+``) after
``john.doe@example.c`` and after ``...com`` were two states of 10-20 ms tables each on Gemma-3's
vocabulary. In the minimal DFA every such position is one state, the accept-everything tail:
one table, and the shape (a state that every string character keeps) that token-table slices
answer without walking the trie.

Subset construction over the interval alphabet (as :mod:`.complement` does), the states that
can still accept, then Moore refinement over the classes of characters that every state treats
alike. The language is unchanged. An automaton of more than :data:`MAX_NFA_STATES` states, or
whose subset construction needs more than :data:`MAX_STATES`, is returned as it was (a compile
-time bound: a 300-word alternation, 4.5k NFA states, took 134 ms to minimise).
"""

from __future__ import annotations

import numpy as np

from ..jsonstring import CharNFA
from ..refine import refine_numpy
from .complement import _closure

MAX_STATES = 2000       # DFA states of a subset construction before giving up
MAX_NFA_STATES = 1000   # larger automata are kept as they are (their subset construction is the cost)


class _TooLarge(Exception):
    pass


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Disjoint intervals ``[lo[i], hi[i]]`` sorted, with touching ones merged (no surrogates
    appear: every piece lies inside some normalised edge interval)."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    start = np.ones(lo.size, dtype=bool)
    start[1:] = lo[1:] != hi[:-1] + 1
    first = np.flatnonzero(start)
    last = np.append(first[1:], lo.size) - 1
    return tuple(zip(lo[first].tolist(), hi[last].tolist()))


def _classes(nfa: CharNFA) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[list[list[int]]]]:
    """The characters every edge treats alike, as classes: each class's intervals (arrays of
    their first and last characters), and per state and class the edges' targets (``moves[s][k]``)."""
    edges = [(s, iv, t) for s in range(len(nfa)) for iv, t in nfa.edges[s]]
    if not edges:
        return [], [[] for _ in range(len(nfa))]
    ivs = [np.asarray(iv, dtype=np.int64).reshape(-1, 2) for _, iv, _ in edges]
    every = np.concatenate(ivs)
    bounds = np.unique(np.concatenate([every[:, 0], every[:, 1] + 1]))
    # edge x atom [bounds[j], bounds[j+1]): a +1/-1 sweep per edge, one cumulative sum for all
    mark = np.zeros((len(edges), bounds.size), dtype=np.int32)
    for e, iv in enumerate(ivs):
        np.add.at(mark[e], np.searchsorted(bounds, iv[:, 0]), 1)     # add.at: overlaps count twice
        np.add.at(mark[e], np.searchsorted(bounds, iv[:, 1] + 1), -1)
    member = np.cumsum(mark, axis=1)[:, :-1] > 0
    packed = np.ascontiguousarray(np.packbits(member, axis=0).T)     # one row of bytes per atom
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, atom_class = np.unique(keys, return_index=True, return_inverse=True)
    atom_class = atom_class.reshape(-1)
    cols = member[:, first]         # one column per class of atoms
    covered = cols.any(axis=0)
    classes, class_of = [], np.full(cols.shape[1], -1, dtype=np.int64)
    for k in np.flatnonzero(covered):
        hit = np.flatnonzero(atom_class == k)
        class_of[k] = len(classes)
        classes.append((bounds[hit], bounds[hit + 1] - 1))
    moves: list[list[list[int]]] = [[[] for _ in classes] for _ in range(len(nfa))]
    for e, (s, _, t) in enumerate(edges):
        for k in np.flatnonzero(cols[e] & covered):
            moves[s][class_of[k]].append(t)
    return classes, moves


def _subsets(nfa: CharNFA, start: int, moves: list[list[list[int]]], n_classes: int,
             max_states: int) -> tuple[list[frozenset], np.ndarray]:
    """Reachable eps-closed subsets and their transitions per class (-1: no move)."""
    index: dict[frozenset, int] = {}
    subsets: list[frozenset] = []
    closed: dict[frozenset, frozenset] = {}
    work: list[int] = []

    def state(sub: frozenset) -> int:
        sid = index.get(sub)
        if sid is None:
            if len(subsets) >= max_states:
                raise _TooLarge
            sid = index[sub] = len(subsets)
            subsets.append(sub)
            work.append(sid)
        return sid

    state(_closure(nfa, [start]))
    rows: dict[int, list[int]] = {}
    while work:
        sid = work.pop()
        row = []
        for k in range(n_classes):
            ts = frozenset(t for q in subsets[sid] for t in moves[q][k])
            if not ts:
                row.append(-1)
                continue
            c = closed.get(ts)
            if c is None:
                c = closed[ts] = _closure(nfa, ts)
            row.append(state(c))
        rows[sid] = row
    trans = np.array([rows[i] for i in range(len(subsets))], dtype=np.int64).reshape(len(subsets), n_classes)
    return subsets, trans


def spelled_size(auto: tuple[CharNFA, int, int]) -> int:
    """What the automaton's JSON spelling costs: the character intervals of its distinct (class,
    target) edges (each interval becomes byte paths of its UTF-8 and escape spellings, made once
    per class and target: :func:`~..jsonstring.json_chars_into`), plus one per edge (its own first
    bytes into them)."""
    edges = [(iv, t) for out in auto[0].edges for iv, t in out]
    return sum(len(iv) for iv, _ in set(edges)) + len(edges)


def smaller_automaton(auto: tuple[CharNFA, int, int], *, growth: float = 2.0,
                      slack: int = 256) -> tuple[CharNFA, int, int]:
    """:func:`minimal_automaton` of ``auto`` when its edges carry at most ``growth`` times
    ``auto``'s intervals plus ``slack`` (its JSON spelling grows about that much at most), else
    ``auto``: determinising splits Unicode classes between states (a search for
    ``\\d+-[A-Fa-f0-9]*`` turns 205 intervals into 12,880, and with ``minLength`` 35 the spelled
    string exceeds the automaton bound). A counted string (one spelled copy per counted
    character) asks for ``growth=1, slack=0``."""
    small = minimal_automaton(auto)
    if small is auto or spelled_size(small) <= growth * spelled_size(auto) + slack:
        return small
    return auto


def minimal_automaton(auto: tuple[CharNFA, int, int], max_states: int = MAX_STATES) -> tuple[CharNFA, int, int]:
    """The minimal DFA of ``auto``'s language as a :class:`CharNFA` ``(automaton, start, end)``
    (one ``end``, reached by an epsilon edge from each accepting state); ``auto`` itself when its
    language is empty, it has more than :data:`MAX_NFA_STATES` states or its subset construction
    exceeds ``max_states`` states."""
    nfa, start, end = auto
    if len(nfa) > MAX_NFA_STATES:
        return auto
    classes, moves = _classes(nfa)
    try:
        subsets, trans = _subsets(nfa, start, moves, len(classes), max_states)
    except _TooLarge:
        return auto
    accepting = np.array([end in s for s in subsets], dtype=bool)
    live = accepting.copy()         # states from which an accepting one is reachable
    while True:
        grown = live | (np.where(trans >= 0, live[np.maximum(trans, 0)], False)).any(axis=1)
        if np.array_equal(grown, live):
            break
        live = grown
    if not live[0]:
        return auto
    n = len(subsets)
    # the dead state n: every missing move and every state that can no longer accept goes there
    full = np.full((n + 1, max(1, len(classes))), n, dtype=np.int64)
    if classes:
        ok = (trans >= 0) & live[np.maximum(trans, 0)]
        full[:n, :len(classes)] = np.where(ok, trans, n)
    label0 = np.where(accepting, 1, 0).astype(np.int64)
    label0 = np.append(np.where(live, label0, 2), 2)
    label, n_classes = refine_numpy(label0, full, None)
    dead = label[n]
    reps = np.full(n_classes, n + 1, dtype=np.int64)
    np.minimum.at(reps, label, np.arange(n + 1))
    out = CharNFA()
    ids = {c: out.add_state() for c in range(n_classes) if c != dead}
    final = out.add_state()
    for c, sid in ids.items():
        r = int(reps[c])
        if accepting[r]:
            out.eps[sid].append(final)
        by_target: dict[int, list[int]] = {}
        for k in range(len(classes)):
            t = int(label[full[r, k]])
            if t != dead:
                by_target.setdefault(t, []).append(k)
        for t, ks in by_target.items():
            out.add_chars(sid, ids[t], _merge(np.concatenate([classes[k][0] for k in ks]),
                                              np.concatenate([classes[k][1] for k in ks])))
    return out, ids[int(label[0])], final
