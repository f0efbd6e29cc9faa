"""CompiledGrammar: the immutable artifact per grammar x vocabulary (matchers: ``matcher.py``).

A compiled grammar bundles the lexer DFA, the Earley automaton and the vocabulary. Its
lazily filled tables (lexer rows, Earley sets, per-lexer-state token tables, a bounded
mask cache) are memoisation only: they never change what any matcher computes, so one
compiled grammar can serve many matchers, in many threads (see :class:`CompiledGrammar`).
A matcher is a stack of ``(earley_set, lexer_state)`` pairs, one per consumed token:
``fork`` copies a list, ``rollback`` pops.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from ..core.bitmask import bitmask_words, ids_to_bitmask
from ..core.errors import LimitExceededError, UnsatisfiableGrammarError, WorkLimitExceededError
from ..core.limits import DEFAULT_MASK_CACHE_BYTES, Fuel, Limits
from ..core.vocab import Vocab
from . import native
from .earley import EarleyAutomaton
from .elision import VIRTUAL_BASE, CounterElision
from .layerfold import LayerFold
from .lexer import DEAD, START, ByteDFA
from .matcher import GrammarMatcher
from .precompute import PRECOMPUTE_SECONDS, precompute_tables
from .projection import Projection
from .tabletuning import EAGER_LEXER_STATES, EAGER_LEXER_WORK  # the up-front lexer build's bounds
from .tokentable import TableBuilder, TokenTable, vocab_layout

__all__ = ["CompiledGrammar", "DEFAULT_MASK_CACHE_BYTES"]

_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()   # False on a free-threaded build
SPARSE_ROW_DIVISOR = 8     # a group with fewer tokens than words / this is OR-ed from its ids (compiled path)
MASK_ENTRY_OVERHEAD = 200   # bytes a cached mask row costs beyond its words (key, array header, LRU link)
GROUP_BYTES = 96            # bytes a token-table group costs beyond its mask row (tuples, parts entry)
PICK_BYTES = 96             # bytes of one memoised group choice, plus 8 per chosen group
FEW_PARTS = 2               # a table of at most this many lexeme parts is picked from in Python (the C call costs more)
ADMIT_MEMO_BYTES = 4 << 20  # bound of the memo of group keys FOLLOW admits (about ADMIT_ENTRY_BYTES each)
ADMIT_ENTRY_BYTES = 160     # a memoised group key: its tuple, ints and dict slot
PROJECT_LEXEMES = True      # drop unexpected sealed terminals from lexer states (projection.py)
FOLD_COUNTERS = True        # share tables between a length counter's positions (layerfold.py)
# An eagerly built lexer is projected too where that pays (see DESIGN.md, "Projection"): its
# projected states are new small states, whose tables are cheap but not shared with a class, so
# projection trades one expensive table of a product state for several cheap ones
PROJECT_EAGER_VOCAB = 100_000  # ... with a vocabulary of at least this many tokens (a product table's walk
                               # grows with it; on SmolLM2's 49k the extra tables cost more: p99 1.49x)
PROJECT_EAGER_STATES = 512  # ... a lexer of at least this many states (a product of string terminals)
PROJECT_HEAVY_NFA = 64      # ... with a string terminal of at least this many NFA states (a counter, a format)
PROJECT_EAGER_KEPT = 128    # ... into a new state of at most this many NFA states (and half of the state's):
                            # 64 kept CircleCI's job keys (114 of 298 NFA states) unprojected, 38 ms masks


def _weak_call(method):
    """``method`` called through a weak reference to its object: a part the grammar owns can call
    back into it without a reference cycle (a cyclic grammar outlives ``del`` and is freed by a
    full GC collection, inside whichever later call allocates: a 100-300 ms pause)."""
    ref = weakref.WeakMethod(method)

    def call(*args):
        return ref()(*args)

    return call


def _heavy_strings(dfa, sealed) -> bool:
    """Whether a sealed terminal that is not narrow has at least :data:`PROJECT_HEAVY_NFA` NFA states."""
    owner = np.asarray(dfa.owner)
    count = np.bincount(owner[owner >= 0], minlength=len(dfa.terminals))
    return any(sealed[t] and not term.narrow and count[t] >= PROJECT_HEAVY_NFA for t, term in enumerate(dfa.terminals))


class CompiledGrammar:
    """A grammar compiled against one vocabulary. Build with ``compile_lark``/``compile_regex``.

    Sharing contract: one compiled grammar may be used by any number of matchers in any
    number of threads at once. What is *frozen* after compile: the vocabulary, the CFG, the
    NFA and terminal list, the lexer's equivalence classes, ``eos_row``. What is
    *per-matcher*: the stack of ``(earley_set, lexer_state)`` pairs and the error state (a
    single matcher is not thread-safe: use one per request, ``fork`` to branch). What is
    *lazily built and shared*: lexer DFA states and rows, Earley sets and scans, token
    tables and their group choices, the FOLLOW list and the mask LRU. All of it is read
    and built under one re-entrant lock per grammar, taken once per public call (``mask``,
    ``step_bytes``, ``can_end``, ``table``); a mask-cache hit is read without it where the
    GIL makes each dict operation atomic (with it on a free-threaded build). Per-vocabulary
    memos (shared by every grammar of that vocabulary) have their own process-wide lock;
    pure per-vocabulary values (the token layout) may be built twice by racing threads,
    identically. Memos never change a mask:
    the caches can be evicted at any time.

    Limits (:class:`~guidewire.core.Limits`, set with ``limits=`` or :meth:`set_limits`):
    each public call runs on a fresh step budget of ``step_work`` work units and
    ``step_seconds`` of wall time; a call that would exceed it raises
    :class:`~guidewire.core.WorkLimitExceededError` (a matcher turns that into its terminal
    error state with an all-zero mask). The mask LRU is bounded by ``mask_cache_bytes``,
    the token tables (with their memoised group choices) by ``table_cache_bytes``. Lexer
    states and Earley sets are the state space matchers point into, not memos: they are
    bounded by estimated bytes (``lexer_bytes``, ``parser_bytes``) and counts
    (``dfa.max_states``, ``earley.max_sets``/``max_items``) and raise
    :class:`~guidewire.core.LimitExceededError` beyond them.
    """

    def __init__(self, dfa: ByteDFA, earley: EarleyAutomaton, vocab: Vocab, *, source: str = "",
                 mask_cache_bytes: int | None = None, limits: Limits | None = None):
        self.dfa = dfa
        self.earley = earley
        self.vocab = vocab
        self.source = source
        self.words = bitmask_words(vocab.vocab_size)
        self.eos_row = ids_to_bitmask(sorted(vocab.eos_ids), vocab.vocab_size)
        self.eos_row.setflags(write=False)
        self._eos_ids = frozenset(vocab.eos_ids)
        self._lock = threading.RLock()
        # lexer state -> [table, lexeme parts (see _lexeme_parts) or None, bytes accounted, row form]
        self._tables: OrderedDict[int, list] = OrderedDict()
        self._table_bytes = 0
        self._follow: list = []                 # see _lexeme_follow
        self._by_term: list[int] | None = None   # FOLLOW set per terminal
        self._admitted: dict = {}                # group key -> _admits' answer (bounded, see _admits)
        self._group_keys: dict = {}              # group key -> its one shared copy (bounded, see _prune)
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()   # earley set << 32 | lexer state class
        self._zero = np.zeros(self.words, dtype=np.int32)
        self._zero.setflags(write=False)
        self.precomputed: dict | None = None    # precompute()'s summary when compile_lark ran it
        self._builder = TableBuilder(dfa, vocab, lookup=_weak_call(self._table))
        self._builder.admit = _weak_call(self._admits)
        self._builder.has_table = _weak_call(self._has_table)
        self._builder.canon = _weak_call(self._canon)
        # lexer states projected onto the expected terminals where the lexer has a sealed class
        # (JSON Schema's strings and keys), an eagerly built lexer's too: its projected states are
        # new states, each its own class, so its mirror is never copied whole (see DESIGN.md)
        proj = Projection(dfa) if PROJECT_LEXEMES else None
        self._projection = proj if proj is not None and proj.active else None
        heavy = (self._projection is not None and vocab.vocab_size >= PROJECT_EAGER_VOCAB
                 and _heavy_strings(dfa, self._projection.sealed))
        self._builder.allow_growth(heavy)
        self._rep = self._lexer_classes()
        if self._projection is not None and self._rep.size:    # an eager lexer: final unless projection pays
            if heavy and dfa.n_states >= PROJECT_EAGER_STATES:
                self._projection.max_kept = PROJECT_EAGER_KEPT
            else:
                self._projection = None
                self._builder.allow_growth(False)     # copied whole at its first table
        # a list (indexing it is on the hot path) of ints, which the cyclic GC need not walk
        self._rep_list: list[int] = native.gc_free_list()
        self._rep_list.extend(self._rep.tolist())
        # a lazily built lexer's counter positions far from their bounds: one table per run of layers
        fold = LayerFold(dfa, vocab_layout(vocab).max_len) if FOLD_COUNTERS and not self._rep.size else None
        self._fold = fold if fold is not None and fold.active else None
        # long length counters built short, their middle carried as credit beside the lexer state
        elision = CounterElision(dfa, vocab_layout(vocab).max_len, dfa.max_states)
        self._elision = elision if elision.active else None
        if self._elision is not None:   # its moved states are new states after an eager build too
            self._builder.allow_growth(True)
        limits = limits if limits is not None else Limits()
        if mask_cache_bytes is not None:
            limits = replace(limits, mask_cache_bytes=mask_cache_bytes)
        self.set_limits(limits)

    def set_limits(self, limits: Limits) -> None:
        """Use ``limits`` from now on (caches are trimmed to the new bounds at once)."""
        with self._lock:
            self.limits = limits
            self._fuel = fuel = Fuel(limits.step_work, limits.step_seconds)
            self.dfa.fuel = self.earley.fuel = self._builder.fuel = fuel
            self.dfa.max_bytes = limits.lexer_bytes
            self.earley.max_bytes = limits.parser_bytes
            self._mask_budget = max(1, limits.mask_cache_bytes // (self.words * 4 + MASK_ENTRY_OVERHEAD))
            while len(self._masks) > self._mask_budget:
                self._masks.popitem(last=False)
            self._trim_tables()

    def memory_bytes(self) -> int:
        """An estimate of the bytes this grammar holds: its bounded memos plus the lexer and
        parser state built so far (transition rows, per-state arrays, Earley items)."""
        with self._lock:
            caches = self.cache_bytes()
            total = caches["masks"] + caches["tables"] + self.dfa.nbytes + self.earley.nbytes
            return total + (self._elision.nbytes if self._elision is not None else 0)

    def cache_bytes(self) -> dict:
        """Bytes accounted to the bounded memos: ``{"masks": ..., "tables": ...}``."""
        with self._lock:
            return {"masks": len(self._masks) * (self.words * 4 + MASK_ENTRY_OVERHEAD),
                    "tables": self._table_bytes}

    def _lexer_classes(self) -> np.ndarray:
        """Determinise a small lexer eagerly; map each state to its equivalence class's representative.

        States that no walk of one token (at most the longest token's bytes) tells apart
        have the same token tables and masks, so they share them: for example the positions
        of a ``maxLength`` counter more than one token away from its bound. A lexer too big
        (or too slow) to build up front stays lazy, and every state is its own class. A class
        that holds START or a self-loop hub is represented by it, so tables that inherit from
        one (see :class:`TokenTable`) always find a base table there.
        """
        try:
            self.dfa.build_all(limit=EAGER_LEXER_STATES, work=EAGER_LEXER_WORK)
        except LimitExceededError:
            return np.zeros(0, dtype=np.int64)
        prefer = self._builder.hub_states()
        prefer[START] = True   # START's class is represented by START (its table is a base too)
        # tables only see walks of one token: states no token can tell apart share them
        return self.dfa.equivalent_states(prefer=prefer, depth=vocab_layout(self.vocab).max_len)

    def _canon(self, q: int) -> int:
        """The lexer state whose table and masks ``q`` uses: its class's representative in an
        eagerly built lexer, its fold (:mod:`~.layerfold`) in a lazily built one, else ``q``."""
        rep = self._rep_list
        if q < len(rep):
            return rep[q]
        fold = self._fold
        return q if fold is None else fold.fold(q)

    # -- parser x lexer primitives ------------------------------------------------------------
    def _x(self, s: int) -> int:
        return self.earley.expected[s] | self.dfa.ignored_bits

    def _scan(self, s: int, e: int) -> int:
        if self.dfa.term_set_ignored[e]:
            return s
        return self.earley.scan(s, self.dfa.term_sets[e], e)

    def can_end(self, s: int, q: int) -> bool:
        """Whether the text that led to ``(s, q)`` is a complete sentence."""
        if q >= VIRTUAL_BASE:
            q = self._elision.real(q)[0]
        with self._lock:
            self._fuel.refill()
            return self._can_end(s, q)

    def _can_end(self, s: int, q: int) -> bool:
        if q == START:
            return self.earley.accepting[s]
        e = self.dfa.emit[q]
        if e < 0:
            return False
        s2 = self._scan(s, e)
        return s2 >= 0 and self.earley.accepting[s2]

    def step_bytes(self, s: int, q: int, data: bytes) -> tuple[int, int] | None:
        """Consume ``data`` from ``(s, q)``; None if it cannot be a prefix of a sentence."""
        with self._lock:
            self._fuel.refill()
            return self._step_bytes(s, q, data)

    def _step_bytes(self, s: int, q: int, data: bytes) -> tuple[int, int] | None:
        """:meth:`step_bytes` under the lock. With elided length counters (see :mod:`~.elision`) the
        credit of the lexeme read so far rides along, is spent every ``depth`` bytes (and at the
        end), and goes with a lexeme that ends."""
        dfa, el = self.dfa, self._elision
        credit, depth, since = (), 0, 0
        if el is not None:
            q, credit = el.real(q)
            depth = el.depth
        for b in data:
            nq = dfa.step(q, b)
            if nq == DEAD:
                s, nq = self._restart(s, q, b)
                if nq == DEAD:
                    return None
                credit = ()
            q = nq
            if el is not None:
                since += 1
                if since >= depth:     # never more than a token's bytes past the counters' run
                    q, credit = el.elide(q, credit)
                    since = 0
        if q != START and not (dfa.alive[q] & self._x(s)):
            return None
        q = self._project(s, q)
        if el is None:
            return s, q
        q, credit = el.elide(q, credit)
        return s, el.virtual(q, credit)

    def _restart(self, s: int, q: int, b: int) -> tuple[int, int]:
        """Byte ``b`` kills lexer state ``q``: the lexeme ``q`` ends is scanned from ``s`` and ``b``
        starts the next; ``(s, DEAD)`` where either cannot be."""
        e = self.dfa.emit[q]
        if e < 0:
            return s, DEAD
        s = self._scan(s, e)
        if s < 0:
            return s, DEAD
        return s, self.dfa.step(START, b)

    def _project(self, s: int, q: int) -> int:
        """Lexer state ``q`` less the sealed terminals parser state ``s`` does not expect (see
        :class:`~.projection.Projection`): the same mask, the same verdict on every token."""
        proj = self._projection
        if proj is None or q <= START or self._builder._rows is not None:   # a mirror copied whole takes no new state
            return q
        return proj.project(q, self._x(s))

    def table(self, q: int) -> TokenTable:
        """The token table of lexer state ``q`` (built on first use, without impossible groups)."""
        if q >= VIRTUAL_BASE:
            q = self._elision.real(q)[0]
        with self._lock:
            self._fuel.refill()
            return self._table(q)

    def precompute(self, seconds: float = PRECOMPUTE_SECONDS, *, max_bytes: int | None = None,
                   states=None) -> dict:
        """Build token tables ahead of the first masks, ``START`` first (or ``states``' only, in their
        order), within ``seconds`` of wall time and ``max_bytes`` of tables (see
        :func:`~guidewire.grammar.precompute.precompute_tables`, whose summary it returns). Masks are
        the same with or without it."""
        return precompute_tables(self, seconds, max_bytes, states)

    def _table(self, q: int) -> TokenTable:
        return self._table_entry(q)[0]

    def _has_table(self, q: int) -> bool:
        """Whether lexer state ``q``'s table is built (and not evicted)."""
        return self._canon(q) in self._tables

    def _table_entry(self, q: int) -> list:
        """``[table, parts or None, bytes, row form]`` of lexer state ``q``'s class (LRU, bounded in
        bytes; the row form is :meth:`_row_form`'s list, None before a first mask and False after it).

        The parts (see :meth:`_lexeme_parts`) index the groups of the very table they sit
        beside, so a table and its parts are evicted and rebuilt together.
        """
        q = self._canon(q)
        entry = self._tables.get(q)
        if entry is not None:
            self._tables.move_to_end(q)
            return entry
        table = self._prune(self._builder.table(q))
        size = table.masks.nbytes + GROUP_BYTES * (len(table.groups) + 1)
        if table.restart_mask is not None:
            size += table.restart_mask.nbytes
        size += sum(r.nbytes for _h, r in table.inherit)
        entry = self._tables.get(q)   # building may have built this very table (hub reuse)
        if entry is None:
            entry = self._tables[q] = [table, None, size, None]
            self._table_bytes += size
            self._trim_tables()
        return entry

    def _trim_tables(self) -> None:
        """Evict least recently used tables beyond ``table_cache_bytes`` (the newest one stays)."""
        tables, bound = self._tables, self.limits.table_cache_bytes
        while self._table_bytes > bound and len(tables) > 1:
            _q, evicted = tables.popitem(last=False)
            self._table_bytes -= evicted[2]

    def _prune(self, table: TokenTable) -> TokenTable:
        """Drop the groups that no parser state can allow, and share the kept group keys.

        A group whose lexemes cannot follow one another, or whose unfinished lexeme's
        terminals cannot follow the last of them, is refused in every parser state (the
        grammar's FOLLOW sets say so), so it is never scanned at mask time.

        The kept ``(lexemes, alive)`` keys are replaced by one copy per distinct key across the
        grammar's tables (a few hundred distinct keys stand for tens of thousands of groups in a
        large schema): the copies a table walk made die at once, by reference count, instead of
        living beside their table and being examined by every collection of the cyclic GC (a
        burst of new tables left 37k young tuples and lists for one 30 ms collection inside a
        mask). The sharing dict is cleared past ``ADMIT_MEMO_BYTES``, as the admit memo is.
        """
        groups = table.groups
        admitted = self._admits(groups)
        shared = self._group_keys
        if len(shared) * ADMIT_ENTRY_BYTES > ADMIT_MEMO_BYTES:
            shared.clear()
        compiled = native.module()

        def one(key):
            got = shared.get(key)
            if got is None:     # a tuple of tuples is untracked one level per collection: all at once here
                got = shared[key] = key if compiled is None else compiled.untrack_nested(key)
            return got

        if all(admitted):
            return replace(table, groups=tuple([one(k) for k in groups]))
        keep = [g for g, ok in enumerate(admitted) if ok]
        masks = table.masks[keep]
        masks.setflags(write=False)
        return replace(table, groups=tuple([one(groups[g]) for g in keep]), masks=masks)

    def _admits(self, groups) -> list[bool]:
        """Per group key ``(lexemes, alive)``: whether some parser state could allow it (see
        :meth:`_prune`; the table builder asks before it builds the groups' rows). Memoised per
        key (a function of the grammar alone), the memo cleared past ``ADMIT_MEMO_BYTES``."""
        follow = self._lexeme_follow()
        memo = self._admitted
        if len(memo) * ADMIT_ENTRY_BYTES > ADMIT_MEMO_BYTES:
            memo.clear()
        got = memo.get
        out = [got(key) for key in groups]    # nearly all hits: one pass, then the misses
        if None not in out:
            return out
        for i, key in enumerate(groups):
            ok = out[i]
            if ok is None:
                lexemes, alive = key
                nxt = -1   # what may come after the lexemes so far (-1: anything)
                ok = True
                for e in lexemes:
                    f = follow[e]
                    if f is None:      # an ignored lexeme changes nothing
                        continue
                    if not (f[1] & nxt):
                        ok = False
                        break
                    nxt = f[0]
                ok = out[i] = memo[key] = ok and bool(alive & nxt)
        return out

    def _lexeme_follow(self) -> list:
        """Per lexer terminal set: (terminals that may follow it, ignored ones included; its own
        terminals as a bitset), or None for an ignored lexeme. Extended as the lexer interns sets."""
        if self._by_term is None:
            self._by_term = self.earley.cfg.follow()
        out, dfa, by_term = self._follow, self.dfa, self._by_term
        ign = dfa.ignored_bits
        for e in range(len(out), len(dfa.term_sets)):
            if dfa.term_set_ignored[e]:
                out.append(None)
                continue
            f = ign
            bits = 0
            for t in dfa.term_sets[e]:
                f |= by_term[t]
                bits |= 1 << t
            out.append((f, bits))
        return out

    def mask(self, s: int, q: int) -> np.ndarray:
        """The int32 bitmask row for state ``(s, q)``, EOS bits included (cached, read-only)."""
        if q >= VIRTUAL_BASE:      # a lexer state with elided length credit: the same mask as without
            q = self._elision.real(q)[0]
        rep = self._rep_list
        key = s << 32 | (rep[q] if q < len(rep) else q)     # an int: hashed in C, never tracked by the GC
        if _GIL:
            # the hit path without the lock: with the GIL each OrderedDict call below is atomic
            # (int keys hash and compare in C), a stored row is final and read-only, and
            # an entry evicted between the two calls only skips the LRU touch
            row = self._masks.get(key)
            if row is not None:
                try:
                    self._masks.move_to_end(key)
                except KeyError:
                    pass
                return row
        with self._lock:
            row = self._masks.get(key)
            if row is not None:
                self._masks.move_to_end(key)
                return row
            self._fuel.refill()
            p = self._project(s, q)
            if p == q:
                return self._mask(s, q)
            try:
                row = self._mask(s, p)      # the same row: kept under q's key too
            except WorkLimitExceededError:
                raise
            except LimitExceededError:      # the projected state's rows or table did not fit
                return self._mask(s, q)
            self._masks[key] = row
            if len(self._masks) > self._mask_budget:
                self._masks.popitem(last=False)
            return row

    def _mask(self, s: int, q: int) -> np.ndarray:
        key = s << 32 | self._canon(q)
        row = self._masks.get(key)
        if row is not None:
            self._masks.move_to_end(key)
            if self._fold is not None:      # folded positions build no table: keep the mirror's
                self._builder.sync()        # per-state arrays current a few states at a time
            return row
        row = self._compute_mask(s, q)
        self._masks[key] = row
        if len(self._masks) > self._mask_budget:
            self._masks.popitem(last=False)
        return row

    @staticmethod
    def _lexeme_parts(entry: list) -> tuple:
        """The groups of a table entry's table by their lexemes: ``(lexemes, members, picks)``
        per distinct lexeme sequence, ``members`` its groups' alive bits and indexes as one flat
        tuple ``(alive, group, alive, group, ...)`` and ``picks`` a memo from the terminals
        allowed after the lexemes to the groups chosen. The members are a tuple of ints, not a
        list of pairs: untracked by the cyclic GC at once with the compiled module (after its first
        look without it), so a table keeps one tracked tuple per part (it holds the picks dict)
        where it kept a list, a list and a tuple per group (large schemas hold thousands of tables)."""
        parts = entry[1]
        if parts is None:
            by: dict[tuple[int, ...], list] = {}
            for g, (lexemes, alive) in enumerate(entry[0].groups):
                by.setdefault(lexemes, []).extend((alive, g))
            compiled = native.module()
            untrack = (lambda t: t) if compiled is None else compiled.untrack_nested
            parts = entry[1] = tuple([(lexemes, untrack(tuple(members)), {}) for lexemes, members in by.items()])
        return parts

    def _account(self, entry: list, q: int, size: int) -> None:
        """Add ``size`` bytes built for the table ``entry`` of lexer state ``q`` to its bound
        (and to the table cache's, while the entry is still cached)."""
        if size:
            entry[2] += size
            if self._tables.get(self._canon(q)) is entry:
                self._table_bytes += size
                self._trim_tables()

    def _row_form(self, entry: list, compiled, sel: np.ndarray) -> tuple:
        """A table's group rows as the compiled OR reads them, for the groups ``sel`` at least:
        ``(masks, slot, offsets, ids, new bytes)``.

        A group with fewer tokens than ``words / SPARSE_ROW_DIVISOR`` is also kept as its sorted
        token ids (``ids[offsets[slot[g]]:offsets[slot[g] + 1]]``), which are set bit by bit:
        cheaper than OR-ing its whole dense row. Tables in product lexers hold hundreds of small
        groups; a mask choosing most of them cost a full row each (Gemma-3: 32 KB a row). Made on
        a table's second mask (a table used once never pays for it), and then a group at a time,
        when a mask first chooses it (``slot`` -2: not looked at yet; -1: dense): a ``START`` table
        of hundreds of groups of which each mask picks a few never scans the others. The last item
        is the bytes it adds. Runs under the grammar's lock (the arrays grow in place).
        """
        form = entry[3]
        added = 0
        if not form:
            masks = np.ascontiguousarray(entry[0].masks)
            form = entry[3] = [masks, np.full(masks.shape[0], -2, dtype=np.int64),
                               np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32)]
            added += form[1].nbytes + 8
        masks, slot, offsets, ids = form
        counts, got = compiled.row_form_grow(masks, slot, sel, self.words, max(1, self.words // SPARSE_ROW_DIVISOR),
                                             offsets.size - 1)
        if counts:
            counts = np.frombuffer(counts, dtype=np.int64)
            offsets = np.concatenate([offsets, offsets[-1] + np.cumsum(counts)])
            ids = np.concatenate([ids, np.frombuffer(got, dtype=np.int32)])
            form[2], form[3] = offsets, ids
            added += 8 * counts.size + len(got)
        return masks, slot, offsets, ids, added

    def _pick_groups(self, parts: tuple, s: int) -> tuple[list[int], int]:
        """The groups of a table's lexeme ``parts`` (:meth:`_lexeme_parts`) the parser in set ``s``
        allows, part by part (a part's lexemes read from ``s``; then its members whose alive
        terminals it allows), and the bytes of new memo entries: the reference of the compiled
        ``pick_groups``."""
        base = self._x(s)
        scan = self._scan
        expected = self.earley.expected
        ign = self.dfa.ignored_bits
        sel = []
        added = 0
        for lexemes, members, picks in parts:
            x = base
            if lexemes:
                cur = s
                for e in lexemes:
                    cur = scan(cur, e)
                    if cur < 0:
                        break
                if cur < 0:
                    continue
                x = expected[cur] | ign
            chosen = picks.get(x)
            if chosen is None:
                chosen = picks[x] = tuple([members[i + 1] for i in range(0, len(members), 2)
                                           if members[i] & x])   # ints: untracked by the GC
                added += PICK_BYTES + 8 * len(chosen)
            sel += chosen
        return sel, added

    def _compute_mask(self, s: int, q: int) -> np.ndarray:
        entry = self._table_entry(q)
        table = entry[0]
        compiled = native.module()
        parts = self._lexeme_parts(entry)
        if compiled is not None and len(parts) > FEW_PARTS:   # the loop, in C (scan memo misses call _scan)
            sel, added = compiled.pick_groups(parts, s, self._x(s), self.earley.expected,
                                              self.dfa.ignored_bits, self.dfa.term_set_ignored, self.earley.scan_memo,
                                              self.earley.term_bits,
                                              self._scan, PICK_BYTES)
        else:
            sel, added = self._pick_groups(parts, s)
        self._account(entry, q, added)
        if len(sel) < 2:
            compiled = None
        if compiled is not None and entry[3] is None:   # a table's first mask: OR its chosen rows in C
            entry[3] = False
            row = np.empty(self.words, dtype=np.int32)
            compiled.or_rows(row, np.ascontiguousarray(table.masks), np.array(sel, dtype=np.int64))
        elif compiled is not None:  # later masks: dense rows, or a sparse group's ids
            chosen = np.array(sel, dtype=np.int64)
            masks, slot, offsets, ids, size = self._row_form(entry, compiled, chosen)
            self._account(entry, q, size)   # nonzero when groups were added to the row form
            row = np.empty(self.words, dtype=np.int32)
            compiled.or_groups(row, masks, chosen, slot, offsets, ids)
        elif sel:
            row = np.bitwise_or.reduce(table.masks[sel], axis=0)
        else:
            row = self._zero.copy()
        for h, inherited in table.inherit:
            # these tokens read as from h (START, which inherits nothing, or a hub, inheriting
            # from hubs only and acyclically, or a shadow with fewer NFA states: the recursion ends)
            row |= self._mask(s, h) & inherited
        if table.restart_lexeme >= 0:
            # tokens whose first byte ends the current lexeme: allowed iff allowed after it
            s1 = self._scan(s, table.restart_lexeme)
            if s1 >= 0:
                row |= self._mask(s1, START) & table.restart_mask
        if self._can_end(s, q):
            row = row | self.eos_row
        row.setflags(write=False)
        return row

    # -- public ---------------------------------------------------------------------------------
    def matcher(self) -> "GrammarMatcher":
        """A fresh per-request matcher at the start of the grammar."""
        return GrammarMatcher(self, [(self.earley.initial, START, False)])

    def check_satisfiable(self) -> None:
        """Raise if no token sequence of this vocabulary can begin (or be) a sentence."""
        row = self.mask(self.earley.initial, START)
        if not row.any():
            raise UnsatisfiableGrammarError(
                "no token of the vocabulary can start a sentence of this grammar "
                "(the vocabulary cannot express its first lexeme)")

    def stats(self) -> dict:
        """Sizes of the lazily built parts (for benchmarks and debugging)."""
        with self._lock:
            return {"lexer_states": self.dfa.n_states, "earley_sets": self.earley.n_sets,
                    "token_tables": len(self._tables), "cached_masks": len(self._masks),
                    "projected_states": self._projection.made if self._projection is not None else 0,
                    "folded_states": self._fold.folded if self._fold is not None else 0,
                    "terminals": len(self.dfa.terminals), "rules": len(self.earley.cfg.rules),
                    **{f"{k}_cache_bytes": v for k, v in self.cache_bytes().items()}}
