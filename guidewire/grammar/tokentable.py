"""Per-lexer-state token tables: the vocabulary walked through the lexer DFA once, vectorised.

For a lexer state ``q`` every ordinary token is run byte by byte through the DFA, all
tokens at once with numpy (tokens are sorted by length, so column ``j`` only touches the
tokens longer than ``j``). Each token ends up in a *group* keyed by the lexemes it
completes on the way (a tuple of terminal-set ids) and the set of terminals still alive
in its final, unfinished lexeme. At mask time the parser decides per group, never per
token: a group is allowed iff its lexemes can be scanned from the current Earley set and
one of its alive terminals is expected afterwards. The groups' token bitmasks are stacked
so the mask is a single ``bitwise_or.reduce`` over the chosen rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.bitmask import bitmask_words
from .lexer import DEAD, START, ByteDFA

MAX_TRACKED_BOUNDARIES = 2
_FIELD = 1 << 20


@dataclass(frozen=True)
class TokenTable:
    """Token groups for one lexer state.

    ``groups[g] = (lexemes, alive_bits)``; ``masks[g]`` is the int32 bitmask row of its tokens.
    """

    state: int
    groups: tuple[tuple[tuple[int, ...], int], ...]
    masks: np.ndarray
    n_tokens: int


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


def build_table(dfa: ByteDFA, q: int, vocab) -> TokenTable:
    """Walk every ordinary token of ``vocab`` (a :class:`Vocab`) from lexer state ``q``."""
    ids, lens, _mat = vocab.token_matrix()
    cols = vocab.token_columns()
    vocab_size = vocab.vocab_size
    n = ids.shape[0]
    state = np.full(n, q, dtype=np.int32)
    nb = np.zeros(n, dtype=np.int32)
    lex = np.full((n, MAX_TRACKED_BOUNDARIES), -1, dtype=np.int32)
    dfa.ensure_rows(np.array([q, START], dtype=np.int32))
    maxlen = int(lens[0]) if n else 0
    # number of tokens with length > j, for each column j (lens sorted descending)
    active_counts = _active_counts(lens, maxlen)
    emit = np.asarray(dfa.emit, dtype=np.int32)
    for j in range(maxlen):
        k = int(active_counts[j])
        if k == 0:
            break
        s = state[:k]
        b = cols[j, :k]
        dfa.ensure_rows(s)
        nxt = dfa.trans.ravel()[(s << 8) | b]
        kill = np.flatnonzero((nxt == DEAD) & (s != DEAD))
        if kill.size:
            if emit.shape[0] < dfa.n_states:
                emit = np.asarray(dfa.emit, dtype=np.int32)
            e = emit[s[kill]]
            ok = e >= 0
            restart = dfa.trans[START, b[kill]]
            nxt[kill] = np.where(ok, restart, DEAD)
            good = kill[ok & (restart != DEAD)]
            if good.size:
                pos = nb[good]
                track = pos < MAX_TRACKED_BOUNDARIES
                lex[good[track], pos[track]] = e[ok & (restart != DEAD)][track]
                nb[good] += 1
        state[:k] = nxt
    alive_arr = _alive_ids(dfa)
    alive_id = alive_arr[0][state]
    live = np.flatnonzero((state != DEAD) & (alive_id >= 0))
    groups: list[tuple[tuple[int, ...], int]] = []
    rows: list[np.ndarray] = []
    words = bitmask_words(vocab_size)
    if live.size:
        # one int64 key per token: boundary count (2 bits) | lexeme 1 | lexeme 2 | alive id
        nbl = np.minimum(nb[live], MAX_TRACKED_BOUNDARIES + 1).astype(np.int64)
        l1 = lex[live, 0].astype(np.int64) + 1
        l2 = lex[live, 1].astype(np.int64) + 1
        al = alive_id[live]
        exact = (l1 < _FIELD) & (l2 < _FIELD) & (al < _FIELD) & (nbl <= MAX_TRACKED_BOUNDARIES)
        keys = (((nbl << 20 | l1) << 20 | l2) << 20) | al
        keys[~exact] = -1
        uniq, inverse = np.unique(keys, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(uniq.shape[0] + 1))
        toks_sorted = ids[live][order]
        for g in range(uniq.shape[0]):
            members = toks_sorted[bounds[g]:bounds[g + 1]]
            key = int(uniq[g])
            if key >= 0:
                count = key >> 60
                lexemes = ((key >> 40) & (_FIELD - 1)) - 1, ((key >> 20) & (_FIELD - 1)) - 1
                groups.append((tuple(lexemes[:count]), alive_arr[1][key & (_FIELD - 1)]))
                rows.append(_ids_to_row(members, words))
            else:  # many boundaries (or huge ids): regroup these few tokens exactly
                sub: dict[tuple[tuple[int, ...], int], list[int]] = {}
                for tok in members.tolist():
                    lexemes, fin = walk_token(dfa, q, vocab.token_bytes[tok])
                    sub.setdefault((tuple(lexemes), dfa.alive[fin]), []).append(tok)
                for key2, toks in sub.items():
                    groups.append(key2)
                    rows.append(_ids_to_row(np.array(toks, dtype=np.int64), words))
    masks = np.stack(rows) if rows else np.zeros((0, words), dtype=np.int32)
    return TokenTable(q, tuple(groups), masks, int(live.size))


def _active_counts(lens: np.ndarray, maxlen: int) -> np.ndarray:
    counts = np.bincount(lens, minlength=maxlen + 1)
    # tokens with length > j  ==  total - tokens with length <= j
    return lens.shape[0] - np.cumsum(counts)[:maxlen]


def _alive_ids(dfa: ByteDFA) -> tuple[np.ndarray, list[int]]:
    """Map each DFA state to a dense id of its alive-terminal bitset (-1 for none)."""
    index: dict[int, int] = {}
    values: list[int] = []
    out = np.full(dfa.n_states, -1, dtype=np.int64)
    for s, bits in enumerate(dfa.alive):
        if bits:
            i = index.get(bits)
            if i is None:
                i = index[bits] = len(values)
                values.append(bits)
            out[s] = i
    return out, values


def _ids_to_row(ids: np.ndarray, words: int) -> np.ndarray:
    row = np.zeros(words, dtype=np.uint32)
    ids = ids.astype(np.int64)
    np.bitwise_or.at(row, ids >> 5, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    return row.view(np.int32)
