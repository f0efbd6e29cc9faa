"""An Earley parser over lexemes whose item sets are interned into a lazy automaton.

Items are ``(rule, dot, origin)`` where ``origin`` is the id of an earlier *interned*
Earley set (``-1`` while the item sits in the set that predicted it), each stored as one int
(see :class:`EarleyAutomaton`). Two Earley sets
with the same items behave the same forever, so each set is stored once and
``scan(set, lexeme)`` is memoised: a parse is a path through a lazily built
deterministic automaton, fork and rollback are list copies, and repeated contexts
(every element of a list, every character of a string) cost a dict lookup.
Works for any CFG: ambiguous, left-recursive, with empty rules (nullable symbols are
handled with the Aycock-Horspool prediction rule).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import LimitExceededError, UnsatisfiableGrammarError
from . import native

Item = tuple[int, int, int]
SET_BYTES = 600     # an interned set: its lists' slots, index entry, per-symbol dicts
ITEM_BYTES = 180    # an item of its core: its int, its advanced copy, set, dict and list slots
SCAN_BYTES = 120    # a memoised scan
_KEY_SHIFT = 1 << 32   # scan keys lie in [-2**32, 2**32): lexer term-set ids, and a post-lexer's own (negative) ones


@dataclass(frozen=True)
class CFG:
    """A context-free grammar over terminal ids ``0..n_terms-1``; nonterminal ids start at ``n_terms``."""

    n_terms: int
    rules: tuple[tuple[int, tuple[int, ...]], ...]   # (lhs, rhs)
    start: int
    names: tuple[str, ...]                          # names of all symbols, terminals first
    by_lhs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    nullable: frozenset[int] = frozenset()

    @classmethod
    def build(cls, n_terms: int, rules, start: int, names, empty_terms=()) -> "CFG":
        """Reduce (drop unproductive and unreachable rules), index and check the grammar.

        ``empty_terms`` are terminals whose language is empty (they make rules unproductive).
        """
        rules = [(lhs, tuple(rhs)) for lhs, rhs in rules]
        productive: set[int] = set(range(n_terms)) - set(empty_terms)
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                if lhs not in productive and all(s in productive for s in rhs):
                    productive.add(lhs)
                    changed = True
        if start not in productive:
            raise UnsatisfiableGrammarError(
                f"the start rule {names[start]!r} derives no finite sentence (its language is empty)")
        rules = [(lhs, rhs) for lhs, rhs in rules if lhs in productive and all(s in productive for s in rhs)]
        reach = {start}
        stack = [start]
        by: dict[int, list[int]] = {}
        for i, (lhs, _rhs) in enumerate(rules):
            by.setdefault(lhs, []).append(i)
        while stack:
            a = stack.pop()
            for i in by.get(a, ()):
                for s in rules[i][1]:
                    if s not in reach:
                        reach.add(s)
                        if s >= n_terms:
                            stack.append(s)
        rules = [r for r in rules if r[0] in reach]
        by_lhs: dict[int, list[int]] = {}
        for i, (lhs, _rhs) in enumerate(rules):
            by_lhs.setdefault(lhs, []).append(i)
        nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                if lhs not in nullable and all(s in nullable for s in rhs):
                    nullable.add(lhs)
                    changed = True
        return cls(n_terms, tuple(rules), start, tuple(names),
                   {k: tuple(v) for k, v in by_lhs.items()}, frozenset(nullable))

    def first_sets(self) -> list[int]:
        """FIRST sets: per symbol, the bitset of terminals that can begin it (a terminal: itself)."""
        T, rules, nullable = self.n_terms, self.rules, self.nullable
        n = len(self.names)
        first = [1 << t if t < T else 0 for t in range(n)]
        readers: list[list[int]] = [[] for _ in range(n)]   # symbol -> rules whose FIRST reads it
        for i, (_lhs, rhs) in enumerate(rules):
            for sym in rhs:
                if sym >= T:
                    readers[sym].append(i)
                if sym not in nullable:
                    break
        work = list(range(len(rules) - 1, -1, -1))
        queued = [True] * len(rules)
        while work:
            i = work.pop()
            queued[i] = False
            lhs, rhs = rules[i]
            acc = first[lhs]
            for sym in rhs:
                acc |= first[sym]
                if sym not in nullable:
                    break
            if acc != first[lhs]:
                first[lhs] = acc
                for j in readers[lhs]:
                    if not queued[j]:
                        queued[j] = True
                        work.append(j)
        return first

    def follow(self) -> list[int]:
        """FOLLOW sets: per terminal, the bitset of terminals that can come right after it.

        Computed over the reduced grammar, so it is a sound over-approximation of what
        any parser state can expect after scanning that terminal. Both fixed points (FIRST,
        then FOLLOW) are solved with worklists: a rule or symbol is revisited only when
        something it reads changed (the round-robin passes took ~4 us per rule per pass).
        """
        T, rules, nullable = self.n_terms, self.rules, self.nullable
        n = len(self.names)
        first = self.first_sets()
        follow = [0] * n
        inherits: list[list[int]] = [[] for _ in range(n)]   # lhs -> symbols ending a rule of it
        for lhs, rhs in rules:
            trail, at_end = 0, True      # what may follow the suffix after each position
            for sym in reversed(rhs):
                follow[sym] |= trail
                if at_end and sym != lhs:
                    inherits[lhs].append(sym)
                trail = first[sym] | (trail if sym in nullable else 0)
                at_end = at_end and sym in nullable
        work = list(range(n - 1, -1, -1))
        queued = [True] * n
        while work:
            a = work.pop()
            queued[a] = False
            fa = follow[a]
            for b in inherits[a]:
                if follow[b] | fa != follow[b]:
                    follow[b] |= fa
                    if not queued[b]:
                        queued[b] = True
                        work.append(b)
        return follow[:T]

    def used_terminals(self) -> set[int]:
        """Terminals that occur in some (reduced) rule."""
        return {s for _lhs, rhs in self.rules for s in rhs if s < self.n_terms}


@dataclass(frozen=True)
class Prediction:
    """The items a set predicts for a set of nonterminals (all with origin ``-1``, this set).

    Predicting a nonterminal adds its rules at dot 0, their own predictions, and the
    advances over nullable symbols (Aycock-Horspool); none of this depends on the rest
    of the set, so it is computed once per set of predicted nonterminals. Items are
    encoded as ints (see :class:`EarleyAutomaton`; origin ``-1`` encodes as 0, so an item
    here is its dotted rule). ``waiting`` maps a nonterminal to the items waiting for it,
    the dot already advanced over it (their origin is the set that holds them: add its
    origin code), ``by_terminal`` a terminal to the items that scan it, ``expected`` is the
    bitset of those terminals, and ``accepts_start`` says whether an item completes the start symbol.
    """

    items: tuple[int, ...]      # sorted
    expected: int
    waiting: dict[int, tuple[int, ...]]
    by_terminal: dict[int, tuple[int, ...]]
    accepts_start: bool         # an item completes the start symbol (it derives the empty string)


class EarleyAutomaton:
    """Interned Earley sets and memoised scans for one :class:`CFG`.

    A set is stored as its *core*: the items whose origin is an earlier set (the scanned
    kernel, completions and nullable advances of those), plus a shared
    :class:`Prediction` for the nonterminals they predict. The predicted part is a
    function of the core, so the core alone identifies the set.

    An item ``(rule, dot, origin)`` is one int: ``(origin + 1) << shift | dotted``, where
    ``dotted`` numbers the positions of every rule consecutively (rule ``r`` at dot ``d`` is
    ``rule_base[r] + d``), so advancing the dot is ``+ 1``; :meth:`item` decodes one. Ints are
    hashed and sorted faster than tuples, and never tracked by the cyclic garbage collector
    (a set of tuples made hundreds of tracked objects per new Earley set, and the collections
    they triggered landed inside masks).
    """

    def __init__(self, cfg: CFG, max_sets: int = 2_000_000, max_items: int = 200_000):
        self.cfg = cfg
        self.max_sets = max_sets
        self.max_items = max_items
        T = cfg.n_terms
        # per dotted rule: the symbol after the dot (-1 at the end), the rule's left-hand side
        # (tuples of ints, fixed from here on: the cyclic GC untracks them, so its full collections
        # do not walk them, as they would walk lists)
        rule_base: list[int] = []
        nxt: list[int] = []
        lhs_of: list[int] = []
        for lhs, rhs in cfg.rules:
            rule_base.append(len(nxt))
            nxt.extend(rhs)
            nxt.append(-1)
            lhs_of.extend([lhs] * (len(rhs) + 1))
        self.rule_base: tuple[int, ...] = tuple(rule_base)
        self._next = tuple(nxt)
        self._lhs = tuple(lhs_of)
        self.shift = max(len(nxt), 1).bit_length()
        self._mask = (1 << self.shift) - 1
        n_sym = len(cfg.names)
        self._nullable = tuple(s in cfg.nullable for s in range(max(n_sym, T)))
        self._n_sym = max(n_sym, T)
        # the same as bytes of int32 (and of bools), for the compiled earley_make / earley_predict
        self._next_b = np.array(nxt, dtype=np.int32).tobytes()
        self._lhs_b = np.array(lhs_of, dtype=np.int32).tobytes()
        self._nullable_b = bytes(self._nullable)
        # per nonterminal, the first positions of its rules (for the compiled earley_closure)
        first_off, first = [0], []
        for sym in range(self._n_sym):
            first.extend(self.rule_base[r] for r in cfg.by_lhs.get(sym, ()))
            first_off.append(len(first))
        self._first_off_b = np.array(first_off, dtype=np.int32).tobytes()
        self._first_b = np.array(first, dtype=np.int32).tobytes()
        # per-set arrays, appended to only: lists the cyclic GC does not walk (native.gc_free_list;
        # they hold untracked tuples and dicts, ints, bools and acyclic Predictions), else every
        # full collection would visit each set built for as long as the grammar lives
        self.items: list[tuple[int, ...]] = native.gc_free_list()   # the core of each set (sorted item codes)
        self.predictions: list[Prediction] = native.gc_free_list()  # its predicted part
        self.expected: list[int] = native.gc_free_list()    # bitset of terminals some item waits for
        self.accepting: list[bool] = native.gc_free_list()
        # per set, dicts of tuples of ints: untracked by the cyclic GC, whose full collections
        # otherwise walk every set built
        self.waiting: list[dict[int, tuple[int, ...]]] = native.gc_free_list()   # core items waiting per nonterminal, advanced over it
        self._index: dict[tuple[int, ...], int] = {}
        self._scan: dict[int, int] = {}     # (set << 33) + lexeme key + 2**32 -> set after the scan
        #: the scans made so far (``_scan``), for the compiled ``pick_groups`` to read in place
        self.scan_memo = self._scan
        self._term_bits: dict[int, int] = {}                        # scan key -> its terminals' bitset
        #: the same, for the compiled ``pick_groups`` (a memo miss whose terminals the set does not
        #: expect is answered there, -1, without calling ``scan``)
        self.term_bits = self._term_bits
        self.core_by_terminal: list[dict[int, tuple[int, ...]]] = native.gc_free_list()   # core items waiting per terminal
        self._advances: dict[int, tuple[int, ...]] = {}  # (origin + 1) * symbols + lhs -> advanced items
        self._predictions: dict[frozenset[int], Prediction] = {}   # predicted nonterminals -> part
        self.fuel = None   # a core.limits.Fuel charged per item built (set by the compiled grammar)
        self.max_bytes: int | None = None   # bound on nbytes (set by the compiled grammar)
        self.nbytes = 0    # estimated memory of the sets and scans built (see SET_BYTES)
        self.initial = -1
        self.initial = self._make([], predicts={cfg.start}, initial=True)

    def item(self, code: int) -> Item:
        """The ``(rule, dot, origin)`` of an item code (origin ``-1``: the set holding it)."""
        dotted = code & self._mask
        r = bisect_right(self.rule_base, dotted) - 1
        return r, dotted - self.rule_base[r], (code >> self.shift) - 1

    def _predicted(self, syms) -> tuple[int, ...]:
        """Every item (origin ``-1``) that predicting the nonterminals ``syms`` adds to a set,
        sorted: one search of their union (a closure per nonterminal, then the union, cost the
        square of a chain of nonterminals each predicting the next: an object of many optional
        properties). Memoised by :meth:`_prediction`, per set of predicted nonterminals."""
        compiled = native.module()
        if compiled is not None:
            out = compiled.earley_closure(syms, self._next_b, self._first_off_b, self._first_b, self._nullable_b,
                                          self.cfg.n_terms, self.max_items)
            if out is None:
                raise LimitExceededError(f"an Earley set exceeds {self.max_items} items")
            return out
        by_lhs, nullable, T, base, nxt = self.cfg.by_lhs, self._nullable, self.cfg.n_terms, self.rule_base, self._next
        seen = set(syms)
        items = {base[r] for sym in seen for r in by_lhs.get(sym, ())}
        agenda = list(items)
        while agenda:
            it = agenda.pop()
            s = nxt[it]
            if s >= T:
                if s not in seen:
                    seen.add(s)
                    for r2 in by_lhs.get(s, ()):
                        it2 = base[r2]
                        if it2 not in items:
                            items.add(it2)
                            agenda.append(it2)
                if nullable[s] and it + 1 not in items:
                    items.add(it + 1)
                    agenda.append(it + 1)
            if len(items) > self.max_items:
                raise LimitExceededError(f"an Earley set exceeds {self.max_items} items")
        return tuple(sorted(items))

    def _prediction(self, predicts: frozenset[int]) -> Prediction:
        """The shared :class:`Prediction` of a set of predicted nonterminals."""
        pred = self._predictions.get(predicts)
        if pred is not None:
            return pred
        closures = [self._predicted(predicts)]
        compiled = native.module()
        if compiled is not None:
            items, waiting, by_terminal, terms, accepts = compiled.earley_predict(
                closures, self._next_b, self._lhs_b, self.cfg.n_terms, self.shift, self.cfg.start)
            expected = 0
            for t in terms:
                expected |= 1 << t
        else:
            items, expected, waiting, by_terminal, accepts = self._predict(closures)
        if self.fuel is not None:
            self.fuel.spend(1 + len(items))
        pred = self._predictions[predicts] = Prediction(items, expected, waiting, by_terminal, accepts)
        return pred

    def _predict(self, closures) -> tuple:
        """``(items, expected, waiting, by_terminal, accepts_start)`` of the union of ``closures``
        (see :class:`Prediction`): the reference of the compiled ``earley_predict``."""
        items = tuple(sorted(frozenset().union(*closures)))
        T, nxt, lhs_of, start = self.cfg.n_terms, self._next, self._lhs, self.cfg.start
        expected = 0
        waiting: dict[int, list[int]] = {}
        by_terminal: dict[int, list[int]] = {}
        accepts = False
        for it in items:
            sym = nxt[it]
            if sym < 0:
                accepts = accepts or lhs_of[it] == start
            elif sym < T:
                expected |= 1 << sym
                by_terminal.setdefault(sym, []).append(it)
            else:
                waiting.setdefault(sym, []).append(it + 1)
        return (items, expected, {k: tuple(v) for k, v in waiting.items()},
                {k: tuple(v) for k, v in by_terminal.items()}, accepts)

    def _make(self, kernel: list[int], predicts=(), initial: bool = False) -> int:
        """Intern the set whose core grows from ``kernel`` (item codes with an earlier origin)."""
        cfg = self.cfg
        T, nxt, lhs_of = cfg.n_terms, self._next, self._lhs
        shift, mask = self.shift, self._mask
        compiled = native.module()
        done = (self.initial + 1) << shift
        if compiled is not None:   # the closure and the split in one call
            got = compiled.earley_make(kernel, tuple(predicts), self._next_b, self._lhs_b, self._nullable_b, T,
                                       shift, self._n_sym, self._advances, self._advanced, self.max_items,
                                       cfg.start, done)
            if got is None:
                raise LimitExceededError(f"an Earley set exceeds {self.max_items} items")
            key, predicted, waiting, by_terminal, terms, acc = got
        else:
            key, predicted = self._close(kernel, predicts)
        if self.fuel is not None:
            self.fuel.spend(1 + len(key))
        sid = self._index.get(key)
        if sid is not None:
            return sid
        sid = len(self.items)
        if sid >= self.max_sets:
            raise LimitExceededError(f"the parser exceeds {self.max_sets} distinct Earley sets")
        pred = self._prediction(predicted)
        if len(key) + len(pred.items) > self.max_items:
            raise LimitExceededError(f"an Earley set exceeds {self.max_items} items")
        size = SET_BYTES + ITEM_BYTES * len(key)
        if self.max_bytes is not None and self.nbytes + size > self.max_bytes:
            raise LimitExceededError(f"the parser's Earley sets exceed {self.max_bytes} bytes "
                                     f"({sid} sets; parser_bytes)")
        self.nbytes += size
        expected = pred.expected
        accepting = initial and pred.accepts_start
        if compiled is not None:
            for t in terms:
                expected |= 1 << t
            accepting = accepting or acc
        else:
            waiting_l: dict[int, list[int]] = {}
            by_terminal_l: dict[int, list[int]] = {}
            start = cfg.start
            for it in key:
                sym = nxt[it & mask]
                if sym >= T:    # stored advanced over sym, ready for completion
                    waiting_l.setdefault(sym, []).append(it + 1)
                elif sym >= 0:
                    expected |= 1 << sym
                    by_terminal_l.setdefault(sym, []).append(it)
                elif lhs_of[it & mask] == start and it & ~mask == done:
                    accepting = True
            waiting = {k: tuple(v) for k, v in waiting_l.items()}
            by_terminal = {k: tuple(v) for k, v in by_terminal_l.items()}
        self._index[key] = sid
        self.items.append(key)
        self.predictions.append(pred)
        self.expected.append(expected)
        self.accepting.append(accepting)
        self.waiting.append(waiting)
        self.core_by_terminal.append(by_terminal)
        return sid

    def _close(self, kernel: list[int], predicts) -> tuple[tuple[int, ...], frozenset[int]]:
        """The core grown from ``kernel`` (sorted item codes) and the nonterminals it predicts
        (``predicts`` included): the reference of the compiled ``earley_make``'s closure."""
        T, nxt, lhs_of, nullable = self.cfg.n_terms, self._next, self._lhs, self._nullable
        shift, n_sym, mask = self.shift, self._n_sym, self._mask
        items = set(kernel)
        agenda = list(items)
        predicted: set[int] = set(predicts)
        completed: set[int] = set()   # (origin + 1) * n_sym + lhs: advanced once
        advanced = self._advances
        limit = self.max_items
        while agenda:
            it = agenda.pop()
            dotted = it & mask
            sym = nxt[dotted]
            if sym >= T:
                predicted.add(sym)
                if nullable[sym] and it + 1 not in items:
                    items.add(it + 1)
                    agenda.append(it + 1)
            elif sym < 0:
                lhs = lhs_of[dotted]
                ck = (it >> shift) * n_sym + lhs
                if ck in completed:
                    continue
                completed.add(ck)
                moved = advanced.get(ck)
                if moved is None:
                    moved = advanced[ck] = self._advanced((it >> shift) - 1, lhs)
                for it2 in moved:
                    if it2 not in items:
                        items.add(it2)
                        agenda.append(it2)
                if len(items) > limit:
                    raise LimitExceededError(f"an Earley set exceeds {limit} items")
        return tuple(sorted(items)), frozenset(predicted)

    def _advanced(self, o: int, lhs: int) -> tuple[int, ...]:
        """The items of set ``o`` waiting for ``lhs``, advanced over it (origins resolved to ``o``)."""
        out = self.waiting[o].get(lhs, ())
        pred = self.predictions[o].waiting.get(lhs)
        if pred:
            at = (o + 1) << self.shift
            out = out + tuple([it + at for it in pred])
        return out

    def scan(self, sid: int, terms: tuple[int, ...], key: int) -> int:
        """The set after reading a lexeme whose readings are ``terms``; -1 if none fits.

        ``key`` identifies ``terms`` for memoisation (the lexer's terminal-set id).
        """
        mk = (sid << 33) + key + _KEY_SHIFT     # an int key (never tracked by the GC); key may be negative
        memo = self._scan.get(mk)
        if memo is not None:
            return memo
        bits = self._term_bits.get(key)
        if bits is None:
            bits = self._term_bits[key] = sum(1 << t for t in terms)
        if not self.expected[sid] & bits:
            self._scan[mk] = -1
            return -1
        kernel = []
        core = self.core_by_terminal[sid]
        by_terminal = self.predictions[sid].by_terminal
        at = ((sid + 1) << self.shift) + 1
        for t in terms:
            got = core.get(t)
            if got:
                kernel.extend([it + 1 for it in got])
            got = by_terminal.get(t)
            if got:
                kernel.extend([it + at for it in got])
        out = self._make(kernel) if kernel else -1
        self._scan[mk] = out
        self.nbytes += SCAN_BYTES
        return out

    @property
    def n_sets(self) -> int:
        """Number of distinct Earley sets built so far."""
        return len(self.items)
