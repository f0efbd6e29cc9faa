"""Per-lexer-state token tables: the vocabulary walked through the lexer DFA, vectorised.

Lexing restarts at ``START`` after every lexeme (maximal munch without backup), so a
token whose *first* byte kills lexer state ``q`` reads as ``[emit[q]] + walk(START, token)``.
A :class:`TokenTable` therefore stores such tokens as one *restart* row: at mask time
they are allowed iff they are allowed at ``(scan(s, emit[q]), START)``, whose mask is
itself memoised. Only the tokens whose first byte keeps ``q`` alive (for most states a
few hundred) are walked, all at once with numpy over a flat byte layout of the
vocabulary, compacting the set of still-running tokens after every step and jumping
over runs of self-loop bytes (string bodies, identifiers, whitespace) with precomputed
run ends. Each walked token ends up in a *group* keyed by the lexemes it completes and
the set of terminals still alive in its final, unfinished lexeme; the parser decides per
group, never per token, and a mask is a ``bitwise_or`` over the chosen groups' rows.
"""


from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import native
from . import tabletuning as tuning
from .dfamirror import DfaMirror
from .lexer import DEAD, START, ByteDFA
from .tablearrays import concat_ranges as _ranges
from .tablearrays import _add_row, _distinct, _flatnonzero, _row_of, ids_row, rows_by_group
from .tablegroups import TokenGrouping
from .tabletrie import TrieTables, prepare_trie
from .tableshortcuts import InheritanceShortcuts
from .tableslices import SliceShortcuts
from .tablewalk import TokenWalker, _small_walk
from .vocabindex import (
    SENTINEL, CandidateTokens, LoopRuns, VocabLayout, first_byte_row, first_byte_tokens, loop_runs,
    pair_tokens, tail_bytes, tails_within, vocab_layout,
)

__all__ = ["TokenTable", "TableBuilder", "build_table", "walk_token", "VocabLayout", "LoopRuns",
           "CandidateTokens", "vocab_layout", "loop_runs", "first_byte_tokens", "first_byte_row",
           "tails_within", "tail_bytes", "rows_by_group", "ids_row", "SENTINEL"]


@dataclass(frozen=True)
class TokenTable:
    """Token groups for one lexer state.

    ``groups[g] = (lexemes, alive_bits)``; ``masks[g]`` is the int32 bitmask row of its
    tokens. Tokens in ``restart_mask`` (an int32 row, or None) are those whose first byte
    ends the lexeme of ``state``: each reads as ``restart_lexeme`` followed by its own walk
    from ``START``. ``restart_lexeme`` is -1 when there are no such tokens (the state is
    not accepting, or it is ``START``). ``inherit`` holds ``(hub, row)`` pairs: the tokens
    in ``row`` read from ``state`` exactly as from lexer state ``hub`` (their walks meet
    in ``hub`` before any lexeme ends), so they are allowed iff ``hub``'s mask allows them
    under the same parser state; ``hub`` is ``START`` (which inherits nothing) or a self-loop
    hub (a hub's table inherits only from other hubs, acyclically), or (the trie walk's) shadow of
    ``state``, with fewer NFA states (no cycles). Every ordinary token that can be
    lexed from ``state`` is in exactly one group, one inherited row or the restart row (which may also hold tokens that then fail from
    ``START``: the START mask leaves those out; and an inherited row may hold tokens dead from
    both ``state`` and ``hub`` whose first byte restarts neither, which ``hub``'s mask never allows).
    """

    state: int
    groups: tuple[tuple[tuple[int, ...], int], ...]
    masks: np.ndarray
    restart_lexeme: int = -1
    restart_mask: np.ndarray | None = None
    inherit: tuple[tuple[int, np.ndarray], ...] = ()


def walk_token(dfa: ByteDFA, q: int, data: bytes) -> tuple[list[int], int]:
    """Run ``data`` from lexer state ``q``: (completed lexemes' terminal-set ids, final state).

    The final state is :data:`DEAD` when the bytes cannot be lexed at all.
    """
    lexemes: list[int] = []
    for b in data:
        nq = dfa.step(q, b)
        if nq == DEAD:
            e = dfa.emit[q] if q != DEAD else -1
            if e < 0:
                return lexemes, DEAD
            lexemes.append(e)
            nq = dfa.step(START, b)
            if nq == DEAD:
                return lexemes, DEAD
        q = nq
    return lexemes, q


# -- per-grammar builder ---------------------------------------------------------------------------
class TableBuilder(DfaMirror, InheritanceShortcuts, SliceShortcuts, TokenWalker, TokenGrouping, TrieTables):
    """Builds :class:`TokenTable` s for one lexer DFA and vocabulary (caches per-DFA arrays).

    Works on a partially determinised DFA too (rows are computed as the walk needs them);
    a fully built DFA just never needs to. The per-state arrays live in :class:`DfaMirror`,
    the shortcuts in :class:`InheritanceShortcuts`, the walk in :class:`TokenWalker` and the
    grouping in :class:`TokenGrouping`; this class puts a table together.
    """

    def __init__(self, dfa: ByteDFA, vocab, lookup=None):
        super().__init__(dfa, vocab, lookup)
        self._narrow_nfa: bytes | None = None   # per NFA state, 1 if a narrow terminal owns it (see _shadow)
        if lookup is not None and native.module() is not None:
            prepare_trie(vocab)   # once per vocabulary, with the layout: not inside a first mask

    def first_byte_row(self, first: np.ndarray) -> np.ndarray:
        """Bitmask row of the ordinary tokens whose first byte is in the 256-bool set ``first``.

        Read-only; see :func:`first_byte_row`.
        """
        return first_byte_row(self.vocab, first)

    # -- the table -----------------------------------------------------------------------------
    def table(self, q: int) -> TokenTable:
        """The token table of lexer state ``q``."""
        self._busy.add(q)
        try:
            return self._table(q)
        finally:
            self._busy.discard(q)

    def _table(self, q: int) -> TokenTable:
        dfa, layout = self.dfa, self.layout
        if self._rows is None:      # a lexer mirrored row by row: the rows this table reads first
            self._need(np.array([q, START], dtype=np.int64))
            # and the rows one byte on, so that it knows which of them are hubs
            self._need(np.concatenate([dfa.trans[q], dfa.trans[START]]))
        row = dfa.trans[q].astype(np.int64)
        live_first = row != DEAD
        restart_lexeme, restart_mask = -1, None
        e = int(self.emit[q])
        if q != START and e >= 0:
            # a token whose first byte kills q (and can start a lexeme) restarts at START
            kill_first = ~live_first & (dfa.trans[START] != DEAD)
            if kill_first.any():
                restart_lexeme = e
                restart_mask = self.first_byte_row(kill_first)  # read-only
        # hubs and START are bases: a hub's table inherits from other hubs only (acyclically),
        # and START must not inherit (a hub's restart row leads back to START)
        base = q == START or bool(self.hub[q] >= 0)
        reused = self._reusable_hubs(q, row)
        if reused and base:
            reused = self._merge_plan(q, reused)
        if reused:
            row = row.copy()
            for _h, first, *_plan in reused:
                row[first] = DEAD   # these first bytes are answered by the hub's own table
        if q != START:  # a few bytes from a hub or START: the trie walk visits only where they differ
            got = self._trie_table(q, row, base, [h for h, *_plan in reused])  # (a hub: sliced, beside built hubs)
            if got is not None:
                groups, masks, inherit = got
                return self._finish_table(q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask)
        few = self._few_candidates(row)
        if few is not None:     # a handful of tokens: no shortcut pays for its own checks
            cand, first, ptr, ends = few
            if self.fuel is not None:
                self.fuel.spend(1 + cand.size)
            groups, masks = self._walk_group_small(cand, row.take(first), ptr, ends, [])
            return self._finish_table(q, base, groups, masks, reused, {}, restart_lexeme, restart_mask)
        cand, first, ptr, stays = self._sliced_candidates(q, row)
        if self._rows is None:      # the slice's checks may have built lexer rows: mirror them
            self._sync()
        if self.fuel is not None:
            self.fuel.spend(1 + cand.size)
        state = row.take(first)
        inherit: dict[int, np.ndarray] = {}
        chained = None
        if not base and self.lookup is not None:
            cand, state, ptr, inherit = self._second_byte_hubs(row, cand, state, ptr)
            cand, state, ptr, from_start = self._start_meets(row, cand, state, ptr)
            if from_start is not None:
                inherit[START] = from_start
        if not base:
            cand, state, ptr, chained = self._counter_chain(row, cand, state, ptr)
        ends = layout.ends.take(cand)
        if chained is None and cand.size <= tuning.SMALL_TABLE and _small_walk(cand.size, ends, ptr, tuning.SMALL_TABLE):
            groups, masks = self._walk_group_small(cand, state, ptr, ends, stays)
            return self._finish_table(q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask)
        met: dict[int, list[np.ndarray]] | None = None if base or self.lookup is None else {}
        fin, nb, lex = self._walk(state, ptr, ends, met)
        for h, parts in (met or {}).items():
            r = _row_of(layout.ids.take(cand.take(np.concatenate(parts))), layout.words)
            _add_row(inherit, h, r)
        if chained is not None:   # these end inside the chain, completing no lexeme
            cand = np.concatenate([cand, chained[0]])
            fin = np.concatenate([fin, chained[1]])
            nb = np.concatenate([nb, np.zeros(chained[0].size, dtype=np.int64)])
            lex = np.concatenate([lex, np.full((tuning.MAX_TRACKED_BOUNDARIES, chained[0].size), -1, dtype=np.int64)],
                                 axis=1)
        groups, masks = self._group(q, cand, fin, nb, lex, stays)
        return self._finish_table(q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask)

    def _few_candidates(self, row: np.ndarray):
        """``(cand, first, ptr, ends)`` of every token whose first byte ``row`` keeps alive, when
        they are few enough to walk and group in one Python pass (:data:`~.tabletuning.FEW_TOKENS`
        tokens, a short walk); else None. Typical: a property-name trie inside a key string, whose
        other first bytes are answered by the string's hub."""
        live = row != DEAD
        if int(self.layout.bucket_size.take(_flatnonzero(live)).sum()) > tuning.FEW_TOKENS:
            return None
        c = first_byte_tokens(self.vocab, live)
        ends = self.layout.ends.take(c.tokens)
        if not _small_walk(c.tokens.size, ends, c.ptr, tuning.FEW_TOKENS):
            return None
        return c.tokens, c.first, c.ptr, ends

    def _finish_table(self, q, base, groups, masks, reused, inherit, restart_lexeme, restart_mask):
        """Add the reused hubs' tokens (merged into a base table's groups, else inherited) and
        make the :class:`TokenTable`."""
        if reused and base:
            groups, masks, kept = self._merge_hubs(groups, masks, reused)
            for h, r in kept.items():
                _add_row(inherit, h, r)
        else:
            for h, first in reused:
                _add_row(inherit, h, self.first_byte_row(first))
        for r in inherit.values():
            r.setflags(write=False)
        return TokenTable(q, groups, masks, restart_lexeme, restart_mask,
                          tuple(sorted(inherit.items())))

    def _sliced_candidates(self, q: int, row: np.ndarray):
        """:meth:`_candidates` of ``q`` less its UTF-8 slice's members (moved to ``stays``).

        Where every candidate comes from whole first-byte buckets (no first byte enters a hub),
        the slice is taken from per-bucket counts without making the candidates (a string body or
        a ``maxLength`` counter of a 262k vocabulary holds most of it); otherwise from the
        candidates (see :meth:`_utf8_slice`)."""
        live = row != DEAD
        if not bool((self.hub.take(row[live]) >= 0).any()):
            stays = []
            got = self._utf8_slice_buckets(q, row, live, stays)
            if got is not None:
                return got + (stays,)
        cand, first, ptr, stays = self._candidates(row)
        cand, first, ptr = self._utf8_slice(q, row, cand, first, ptr, stays)
        return cand, first, ptr, stays

    def _candidates(self, row: np.ndarray):
        """Tokens to walk from a state with transition ``row`` (their first byte is taken).

        Returns ``(cand, first, ptr, stays)``: the tokens (layout order), their first bytes,
        the flat positions of their second bytes, and ``stays``. A token whose first byte
        enters a hub and whose other bytes all loop there ends in that hub: such tokens
        are returned in ``stays`` as ``(hub state, row)`` instead of walked.
        """
        layout = self.layout
        hub_of = np.where(row != DEAD, self.hub.take(row), -1)
        parts = []
        plain = (row != DEAD) & (hub_of < 0)
        if plain.any():
            parts.append(self._plain_candidates(row, plain))
        stays = []
        for slot in _distinct(hub_of[hub_of >= 0]):
            h = self._hub(slot)
            via = hub_of == slot
            toks = self._live_exits(row, via, h, _ranges(h.exit_bucket[:-1][via], h.exit_bucket[1:][via]))
            parts.append(CandidateTokens(toks, layout.first.take(toks), layout.starts.take(toks) + 1))
            for target in _distinct(row[via]):
                firsts = self.first_byte_row(row == target)
                stay = firsts & h.stay_row
                if stay.any():
                    stays.append((target, stay))
        if len(parts) == 1:
            c = parts[0]
            return c.tokens, c.first, c.ptr, stays
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, stays
        return (np.concatenate([c.tokens for c in parts]), np.concatenate([c.first for c in parts]),
                np.concatenate([c.ptr for c in parts]), stays)

    def _plain_candidates(self, row: np.ndarray, plain: np.ndarray):
        """The tokens whose first byte is in ``plain`` (whole first-byte buckets), less those
        that die at their second byte: it kills the state the first byte leads to, and the lexeme
        there cannot end or the byte cannot start one from ``START``. Such a token is in no row of
        the table; on a 262k vocabulary most of START's candidates are space-led words, dead at
        their second byte when whitespace is not a hub (a bounded run of it, say)."""
        firsts = _flatnonzero(plain)
        total = int(self.layout.bucket_size.take(firsts).sum())
        if total <= tuning.FEW_TOKENS:
            return first_byte_tokens(self.vocab, plain)    # a few: cutting costs more than walking
        counts = self.layout.pair_count.take(firsts, axis=0)
        states = row.take(firsts)
        dfa = self.dfa
        kills = dfa.trans.take(states, axis=0) == DEAD
        ends = self.emit.take(states) >= 0
        dead = kills & ~(ends[:, None] & (dfa.trans[START] != DEAD)[None, :])
        dead[~dfa.row_done.take(states)] = False     # a row not built yet kills nothing here
        if int(counts[:, 1:][dead].sum()) * tuning.DEAD_CUT_RATIO <= total:
            return first_byte_tokens(self.vocab, plain)    # few die there: the memoised buckets
        keep = counts > 0
        keep[:, 1:] &= ~dead
        return pair_tokens(self.vocab, firsts, keep)

    def _live_exits(self, row: np.ndarray, via: np.ndarray, h, at: np.ndarray) -> np.ndarray:
        """The exits ``h.exits[at]`` of the hub entered by the first bytes ``via`` (to the states
        ``row`` gives), less those that die at their exit byte: the byte kills the hub state, and
        the lexeme there cannot end or the byte cannot start one from ``START``. Such a token is in
        no row of the table (where whitespace is an ignored hub, say, a space-led word whose first
        letter starts no terminal)."""
        dfa = self.dfa
        targets = np.array(_distinct(row[via]), dtype=np.int64)
        dead = np.zeros((targets.size, 256), dtype=bool)
        restart_dead = dfa.trans[START] == DEAD
        for i, t in enumerate(targets.tolist()):
            if not dfa.row_done[t]:
                continue                # a row not built yet kills nothing here
            kills = dfa.trans[t] == DEAD
            dead[i] = kills & restart_dead if dfa.emit[t] >= 0 else kills
        if not dead.any():
            return h.exits.take(at)
        exit_byte = h.exit_byte.take(at)
        if targets.size == 1:
            gone = dead[0].take(exit_byte)
        else:
            slot = np.searchsorted(targets, row.take(self.layout.first.take(h.exits.take(at))))
            gone = dead[slot, exit_byte]
        return h.exits.take(at[~gone])


def build_table(dfa: ByteDFA, q: int, vocab) -> TokenTable:
    """The token table of lexer state ``q`` (a one-off :class:`TableBuilder`; see its docs)."""
    return TableBuilder(dfa, vocab).table(q)
