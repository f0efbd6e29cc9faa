"""Grouping walked tokens by (completed lexemes, alive terminals) and building the groups' bitmask rows."""

from __future__ import annotations

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD
from .tablearrays import _add_row, _flatnonzero, _row_of, admitted_numbers, rows_by_group


class TokenGrouping:
    """Mixin of :class:`TableBuilder`: group walked tokens; the parser decides per group."""

    def _group_keys(self, cand, fin, nb, lex):
        """(groups, group index of each grouped token, its id) of walked tokens, vectorised.

        A token is grouped when it ends alive with at most :data:`~.tabletuning.MAX_TRACKED_BOUNDARIES` lexemes.
        """
        alive_id = self.alive_id.take(fin)
        # DEAD has no alive set, and a token with too many lexemes was stopped in DEAD
        live = _flatnonzero(alive_id >= 0)
        # key of a token: (its lexemes, its alive set), each part renumbered densely among
        # the values present. Most tokens complete no lexeme; the lexeme pairs (the count
        # is implied: a missing lexeme is -1) are renumbered among the others only
        alive_u, key = _dense_ids(alive_id.take(live), max(len(self._alive_values), 1))
        n_alive = alive_u.size
        bounded = _flatnonzero(nb.take(live))
        n1 = len(self.dfa.term_sets) + 1
        if bounded.size:
            at = live.take(bounded)
            pair_u, pair_i = _dense_ids((lex[0].take(at) + 1) * n1 + lex[1].take(at) + 1, n1 * n1)
            key = key.copy()
            key[bounded] += (pair_i + 1) * n_alive
            uniq, gid = _dense_ids(key, (pair_u.size + 1) * n_alive)
        else:
            pair_u = np.zeros(0, dtype=np.int64)
            uniq, gid = np.arange(n_alive), key
        lexemes_of = [()]
        for code in pair_u.tolist():
            l1, l2 = divmod(code, n1)
            lexemes_of.append((l1 - 1,) if l2 == 0 else (l1 - 1, l2 - 1))
        alive_values = [self._alive_values[a] for a in alive_u.tolist()]
        groups: list[tuple[tuple[int, ...], int]] = []
        for k in uniq.tolist():
            p, a = divmod(k, n_alive)
            groups.append((lexemes_of[p], alive_values[a]))
        return groups, gid, self.layout.ids.take(cand.take(live))

    def _group_keys_small(self, cand, fin, nb, lex):
        """:meth:`_group_keys` in plain Python, for a few tokens (groups in order of appearance)."""
        alive = self.dfa.alive
        index: dict[tuple[tuple[int, ...], int], int] = {}
        gid, toks = [], []
        for tok, f, count, l1, l2 in zip(self.layout.ids.take(cand).tolist(), fin.tolist(), nb.tolist(),
                                         lex[0].tolist(), lex[1].tolist()):
            bits = alive[f]
            if not bits:            # DEAD, or stopped with too many lexemes
                continue
            key = ((() if count == 0 else (l1,) if count == 1 else (l1, l2)), bits)
            g = index.get(key)
            if g is None:
                g = index[key] = len(index)
            gid.append(g)
            toks.append(tok)
        return list(index), np.array(gid, dtype=np.int64), np.array(toks, dtype=np.int64)

    def _group(self, q: int, cand: np.ndarray, fin, nb, lex, stays):
        """Group walked tokens by (lexemes, alive terminals) and build the groups' rows.

        ``stays`` are extra ``(final state, row)`` groups of tokens that complete no lexeme.
        Tokens that end dead are in no group: where they are many (a ``START`` table of a large
        vocabulary walks ~140k tokens to keep a few hundred) they are dropped before grouping.
        """
        self._sync()
        words = self.layout.words
        over = nb > tuning.MAX_TRACKED_BOUNDARIES
        extra = self._regroup(q, cand, over)
        if fin.size > tuning.SMALL_GROUP:
            live = _flatnonzero(self.alive_id.take(fin) >= 0)
            if live.size * tuning.DEAD_DROP_RATIO < fin.size:
                cand, fin, nb, lex = cand.take(live), fin.take(live), nb.take(live), lex.take(live, axis=1)
        spare = len(extra) + len(stays)   # rows for them, so that adding them copies no row
        compiled = native.module()
        if compiled is not None and fin.size > tuning.SMALL_GROUP:
            groups, rows = self._group_compiled(compiled, cand, fin, nb, lex, spare)
            return self._add_stays(groups, rows, extra, stays)
        if fin.size <= tuning.SMALL_GROUP:
            groups, gid, toks = self._group_keys_small(cand, fin, nb, lex)
        else:
            groups, gid, toks = self._group_keys(cand, fin, nb, lex)
        rows = _group_rows(gid, toks, len(groups), words)
        return self._add_stays(groups, rows, extra, stays)

    def _regroup(self, q: int, cand: np.ndarray, over: np.ndarray) -> dict:
        """Rows by group key of the tokens ``over`` that complete more lexemes than the walk tracks,
        walked again exactly (a few tokens)."""
        if not over.any():
            return {}
        index: dict[tuple[tuple[int, ...], int], int] = {}
        gid, toks = [], []
        for tok in self.layout.ids.take(cand[over]).tolist():
            lexemes, f = self._walk_bytes(q, self.vocab.token_bytes[tok])
            if f != DEAD and self.dfa.alive[f]:
                gid.append(index.setdefault((tuple(lexemes), self.dfa.alive[f]), len(index)))
                toks.append(tok)
        rows = rows_by_group(np.array(gid, dtype=np.int64), np.array(toks, dtype=np.int64), len(index),
                             self.layout.words)
        return dict(zip(index, rows))

    def _group_compiled(self, compiled, cand, fin, nb, lex, spare: int = 0):
        """:meth:`_group_keys` and the rows in C (``_native.group`` / ``scatter``): ``(groups, rows)``;
        ``rows`` has ``spare`` zero rows after the groups' (room for :meth:`_add_stays`)."""
        n = fin.size
        width = tuning.MAX_TRACKED_BOUNDARIES + 2
        gid = np.empty(n, dtype=np.int64)
        keys = np.empty((n, width), dtype=np.int64)
        n_groups = compiled.group(np.ascontiguousarray(fin, dtype=np.int64), np.ascontiguousarray(nb, dtype=np.int64),
                                  np.ascontiguousarray(lex, dtype=np.int64), self.alive_id, gid, keys,
                                  tuning.MAX_TRACKED_BOUNDARIES)
        words = self.layout.words
        values = self._alive_values
        groups = [(tuple(k[1:1 + k[0]]), values[k[-1]]) for k in keys[:n_groups].tolist()]
        toks = self.layout.ids.take(cand)
        if self.admit is not None:   # groups no parser state allows get no row (half of START's)
            ok = self.admit(groups)
            if not all(ok):
                # refused groups renumbered to -1 (scatter skips them): no compaction of the tokens
                gid = admitted_numbers(ok).take(gid)
                groups = [g for g, k in zip(groups, ok) if k]
                n_groups = len(groups)
        rows = np.zeros((n_groups + spare, words), dtype=np.int32)
        compiled.scatter(rows, np.ascontiguousarray(gid), np.ascontiguousarray(toks, dtype=np.int64), words)
        return groups, rows

    def _add_stays(self, groups, rows, extra, stays):
        """Merge the ``extra`` rows (by group key) and the ``stays`` rows into ``(groups, rows)``.

        ``rows`` may have zero rows beyond ``len(groups)``: new groups take those first (no copy)."""
        groups = list(groups)
        index = {g: i for i, g in enumerate(groups)}
        more = []
        for target, row in stays:
            _add_row(extra, ((), self.dfa.alive[target]), row)
        if self.admit is not None and extra:
            extra = {k: r for (k, r), ok in zip(extra.items(), self.admit(list(extra))) if ok}
        for k, row in extra.items():
            i = index.get(k)
            if i is not None:
                rows[i] |= row
                continue
            index[k] = len(groups)
            if len(groups) < rows.shape[0]:
                rows[len(groups)] = row
            else:
                more.append(row[None])
            groups.append(k)
        if more:
            rows = np.concatenate([rows] + more)
        return tuple(groups), rows[:len(groups)]


def _dense_ids(keys: np.ndarray, key_space: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, index of each key among them) for keys in ``range(key_space)``.

    Counts into a table (no sort) when the key space is small, or not much larger than
    the number of keys; sorts otherwise.
    """
    if keys.size == 0:
        return keys, keys
    if keys.size <= tuning.FEW_KEYS:       # a few keys: plain Python beats any array pass
        values = keys.tolist()
        uniq = sorted(set(values))
        at = {k: i for i, k in enumerate(uniq)}
        return np.array(uniq, dtype=np.int64), np.array([at[k] for k in values], dtype=np.int64)
    lo = int(keys.min())
    if lo == int(keys.max()):       # one key (no token completes a lexeme, say)
        return np.array([lo], dtype=np.int64), np.zeros(keys.size, dtype=np.int64)
    if key_space <= max(tuning.DENSE_KEY_SPACE, tuning.DENSE_KEY_RATIO * keys.size):
        counts = np.bincount(keys, minlength=key_space)
        uniq = _flatnonzero(counts)
        lut = np.zeros(key_space, dtype=np.int64)
        lut[uniq] = np.arange(uniq.size)
        return uniq, lut.take(keys)
    uniq, gid = np.unique(keys, return_inverse=True)
    return uniq, gid.ravel()


def _group_rows(gid: np.ndarray, toks: np.ndarray, n_groups: int, words: int) -> np.ndarray:
    """Bitmask rows of ``n_groups`` groups (token ``toks[i]`` in group ``gid[i]``; tokens distinct).

    Few tokens per group are scattered with ``bitwise_or.at``. Many are summed with one
    ``bincount`` per (group, word): the bits of distinct tokens are distinct powers of two
    below 2**32, so their sum is exact in float64 and equals their OR.
    """
    if n_groups == 0:
        return np.zeros((0, words), dtype=np.int32)
    if n_groups == 1:
        return _row_of(toks, words)[None]
    if toks.size < tuning.SUM_ROWS_TOKENS * n_groups:
        return rows_by_group(gid, toks, n_groups, words)
    sums = np.bincount(gid * words + (toks >> 5), weights=np.left_shift(1, toks & 31),
                       minlength=n_groups * words)
    return sums.astype(np.uint32).view(np.int32).reshape(n_groups, words)
