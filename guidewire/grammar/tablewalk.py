"""The vectorised token walk: many tokens through the lexer DFA at once, one numpy step per byte.

Tokens sitting in a self-loop hub jump over their runs of loop bytes; the last few running
tokens are finished byte by byte in Python.
"""

from __future__ import annotations

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD, START
from .tablearrays import _distinct, _flatnonzero, _kept, admitted_numbers, rows_by_group
from .dfamirror import _ROW
from .vocabindex import SENTINEL


class TokenWalker:
    """Mixin of :class:`TableBuilder`: walk candidate tokens to their final states and lexemes."""

    def _walk(self, state: np.ndarray, ptr: np.ndarray, ends: np.ndarray, met: dict | None = None):
        """Walk tokens from ``state`` (int64) at flat positions ``ptr`` to their ``ends``.

        ``ptr`` must sit at each token's second byte (``state`` is the state after the first).
        Returns (final state, DEAD if unlexable; number of completed lexemes; the first
        :data:`~.tabletuning.MAX_TRACKED_BOUNDARIES` lexemes, -1 padded, as rows: ``lex[k]`` holds every
        token's ``k``-th lexeme). One numpy step per byte that
        is not a hub self-loop; the extended transition table sends the sentinel to
        ``-1 - state``, so finished and killed tokens are found with one comparison.

        With ``met`` (a dict), a token that reaches a hub ``h`` before ending a lexeme,
        having read only bytes of ``h``'s self-loop, reads from here exactly as from ``h``
        (from ``h`` the same bytes loop in ``h``, then both walks go on from ``h`` alike):
        it leaves the walk (final state DEAD) and its index goes to ``met[h]``.
        """
        compiled = native.module()
        if compiled is not None:
            return self._walk_compiled(compiled, state, ptr, ends, met)
        dfa = self.dfa
        flat = self.layout.flat
        n = state.size
        fin = np.zeros(n, dtype=np.int64)
        nb = np.zeros(n, dtype=np.int64)
        lex = np.full((tuning.MAX_TRACKED_BOUNDARIES, n), -1, dtype=np.int64)
        idx = np.arange(n)
        origin = ptr - 1
        ptr = ptr.copy()
        fuel = self.fuel
        while idx.size:
            if fuel is not None:
                fuel.spend(idx.size)
            if _small_walk(idx.size, ends.take(idx), ptr, tuning.SMALL_WALK_TOKENS):
                self._finish_small(idx, state, ptr, ends, fin, nb, lex)
                break
            if self._hubs:
                hub = self.hub.take(state)
                jump = _flatnonzero(hub >= 0)
                if jump.size and met is not None:
                    gone = self._meet_hubs(jump, hub.take(jump), idx, state, ptr, origin, nb, met)
                    if gone is not None:
                        idx, state, ptr = _kept(~gone, idx, state, ptr)
                        hub = self.hub.take(state)
                        jump = _flatnonzero(hub >= 0)
                if jump.size:
                    self._jump(ptr, jump, hub.take(jump))
            if self._rows is None:
                self._need(state)
            b = flat.take(ptr)
            nxt = self.trans.take(state * _ROW + b)
            stop = _flatnonzero(nxt <= DEAD)
            if stop.size:
                self._stop(stop, idx, state, b, nxt, fin, nb, lex)
                keep = nxt > DEAD
                idx, nxt, ptr = _kept(keep, idx, nxt, ptr)
            state = nxt
            ptr += 1
        return fin, nb, lex

    def _walk_compiled(self, compiled, state, ptr, ends, met):
        """:meth:`_walk` in C (``_native.walk``), one token at a time; the same readings.

        The C walk stops a token where it needs Python: a row not built yet (it is built
        here and the walk resumes), or, with ``met``, a token that reads as from its hub
        (recorded in ``met``). It skips a hub's loop bytes with the mirror's loop table.
        The tokens a hub takes may differ from :meth:`_walk`'s (which finishes its last few
        tokens without looking for hubs); both partitions are exact.
        """
        n = state.size
        fin = np.zeros(n, dtype=np.int64)
        nb = np.zeros(n, dtype=np.int64)
        lex = np.full((tuning.MAX_TRACKED_BOUNDARIES, n), -1, dtype=np.int64)
        st = np.ascontiguousarray(state, dtype=np.int64).copy()
        at = np.ascontiguousarray(ptr, dtype=np.int64).copy()
        origin = at - 1
        ends = np.ascontiguousarray(ends, dtype=np.int64)
        idx = None          # the tokens still to walk (None: all of them)
        while True:
            if self._rows is None:
                self._sync()
            busy = np.zeros(self._cap, dtype=bool)
            for h in self._busy:
                if h < self._cap:
                    busy[h] = True
            if idx is None:
                s_, p_, o_, e_, f_, n_, l_ = st, at, origin, ends, fin, nb, lex
            else:
                s_, p_, o_, e_ = st.take(idx), at.take(idx), origin.take(idx), ends.take(idx)
                f_, n_, l_ = fin.take(idx), nb.take(idx), np.ascontiguousarray(lex[:, idx])
            pending = np.zeros(s_.size, dtype=np.uint8)
            steps, n_pending = compiled.walk(self.trans, self.emit, self._copied, self.hub, busy, self._loop_table,
                                             self.layout.flat16, s_, p_, o_, e_, f_, n_, l_, pending,
                                             met is not None, tuning.MAX_TRACKED_BOUNDARIES, DEAD, START)
            if idx is not None:
                st[idx], at[idx], fin[idx], nb[idx] = s_, p_, f_, n_
                lex[:, idx] = l_
            if self.fuel is not None:
                self.fuel.spend(max(1, steps))
            if not n_pending:
                return fin, nb, lex
            where = _flatnonzero(pending)
            kind = pending.take(where)
            tok = where if idx is None else idx.take(where)
            gone = kind == 2
            if gone.any():      # read as from their hub: leave the walk
                for h in _distinct(st.take(tok[gone])):
                    met.setdefault(int(h), []).append(tok[gone][st.take(tok[gone]) == h])
            wait = tok[~gone]
            if not wait.size:
                return fin, nb, lex
            q = st.take(wait)
            if self._rows is None:      # and the rows these tokens reach later (see _build_ahead)
                q = self._build_ahead(q, at.take(wait), nb.take(wait), compiled)
            self._need(q)       # rows not built or not copied yet (a no-op once mirrored whole)
            idx = wait

    def _build_ahead(self, state: np.ndarray, ptr: np.ndarray, ended: np.ndarray, compiled=None) -> np.ndarray:
        """Build the lexer rows that tokens stopped at ``state`` (rows not built yet; the next byte
        to read at ``ptr``; ``ended`` lexemes so far) will ask for, and return ``state`` and the
        states they pass through (repeats allowed), for the mirror to copy their rows at once.

        The tokens are walked on byte by byte through the lexer's own rows, a layer of them at a
        time (a lexeme's end restarts a token from START, as the walk does), and every state
        they reach whose row is not built yet is built, one ``ensure_rows`` per layer: the rows
        the walk itself would stop at and ask for, one round each, but where a token leaves
        the walk at a hub it reads as from (its later rows are then built for nothing: rows are
        a function of the state, so no mask changes; such rows are mostly the ones the hub's own
        table builds). A token is followed up to its end, a dead end, more lexemes than the walk
        tracks, :data:`~.tabletuning.BUILD_AHEAD_IDLE` bytes in a row through built rows (it has
        likely joined lexer states built before), or :data:`~.tabletuning.BUILD_AHEAD_LAYERS`
        bytes in all; and no layer past the first is built once the lexer is past half its state
        or byte bound or the step has spent half its work budget (:meth:`_room_ahead`), so near
        a limit the walk builds only the rows it asks for.

        With ``compiled`` the tokens are walked in C (``ahead``) up to the next rows not built,
        a round per depth of them rather than a numpy pass per byte; the same rows are built
        (rows built in an earlier round count as built, as an earlier layer's do here).
        """
        if compiled is not None:
            return self._build_ahead_compiled(compiled, state, ptr, ended)
        dfa, flat = self.dfa, self.layout.flat16
        seen = [state]
        q, p, count = state, ptr, ended
        idle = np.zeros(q.size, dtype=np.int64)     # bytes since the token last met a row not built
        for layer in range(tuning.BUILD_AHEAD_LAYERS):
            if layer and not self._room_ahead():
                break
            fresh = ~dfa.row_done.take(q)
            if fresh.any():
                dfa.ensure_rows(q[fresh])
            if layer:
                seen.append(q)
            idle = np.where(fresh, 0, idle + 1)
            b = flat.take(p).astype(np.int64)
            go = _flatnonzero((b < SENTINEL) & (idle <= tuning.BUILD_AHEAD_IDLE))
            if not go.size:
                break
            q, p, b, count, idle = q.take(go), p.take(go), b.take(go), count.take(go), idle.take(go)
            t = dfa.trans[q, b].astype(np.int64)
            end = _flatnonzero(t == DEAD)
            if end.size:        # a lexeme ends before this byte: restart from START if it emits
                self._sync()
                emits = self.emit.take(q.take(end)) >= 0
                t[end] = np.where(emits, dfa.trans[START].take(b.take(end)), DEAD)
                count[end] += 1
                t[end[count.take(end) > tuning.MAX_TRACKED_BOUNDARIES]] = DEAD
            keep = _flatnonzero(t > DEAD)
            if not keep.size:
                break
            q, p, count, idle = t.take(keep), p.take(keep) + 1, count.take(keep), idle.take(keep)
        return np.concatenate(seen)

    def _build_ahead_compiled(self, compiled, state: np.ndarray, ptr: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """:meth:`_build_ahead` with the walk in C: build the rows the tokens stop at, walk them
        on to the next rows not built, and again, while there is room (:meth:`_room_ahead`)."""
        dfa = self.dfa
        n = state.size
        q = np.array(state, dtype=np.int64)
        p, count = np.array(ptr, dtype=np.int64), np.array(ended, dtype=np.int64)
        # a row built already is an idle byte, a row built now is not (-1: as the numpy layers count)
        idle, layer = np.where(dfa.row_done.take(q), 0, -1).astype(np.int64), np.zeros(n, dtype=np.int64)
        seen = [state]
        active = np.arange(n, dtype=np.int64)
        first = True
        while active.size:
            if not first and not self._room_ahead():
                break
            stop = q.take(active)
            fresh = stop[~dfa.row_done.take(stop)]
            if fresh.size:
                dfa.ensure_rows(np.asarray(_distinct(fresh), dtype=np.int64))
            first = False
            self._sync()
            passed, stopped = compiled.ahead(dfa.trans, dfa.row_done, self.emit, self.layout.flat16, active, q, p,
                                             count, idle, layer, tuning.MAX_TRACKED_BOUNDARIES,
                                             tuning.BUILD_AHEAD_IDLE, tuning.BUILD_AHEAD_LAYERS, DEAD, START)
            if passed:
                seen.append(np.frombuffer(passed, dtype=np.int64))
            active = np.frombuffer(stopped, dtype=np.int64)
        return np.concatenate(seen)

    def _room_ahead(self) -> bool:
        """Whether rows may be built ahead of the walk: the lexer is within half its bounds on
        states and bytes and the step has half its work budget left."""
        dfa = self.dfa
        if not dfa.within_half_bounds():
            return False
        fuel = dfa.fuel
        return fuel is None or fuel.left * 2 >= fuel.limit

    def _meet_hubs(self, jump, slots, idx, state, ptr, origin, nb, met):
        """Running tokens ``jump`` sit in hubs (``slots``): take out those that read as from their hub.

        A token qualifies when it has ended no lexeme and every byte it read so far is a
        self-loop byte of its hub (the hub's run from the token's first byte reaches ``ptr``),
        and the hub's table is not being built. Returns a bool per running token (None if none).
        """
        at = idx.take(jump)
        ok = nb.take(at) == 0
        if not ok.any():
            return None
        gone = None
        for slot in _distinct(slots[ok]):
            sel = _flatnonzero(ok & (slots == slot))
            runs = self._run_ends(slot)
            sel = sel[runs.take(origin.take(at.take(sel))) >= ptr.take(jump.take(sel))]
            if not sel.size:
                continue
            where = state.take(jump.take(sel))
            for h in _distinct(where):
                if h in self._busy:
                    continue
                pick = sel[where == h]
                met.setdefault(h, []).append(at.take(pick))
                if gone is None:
                    gone = np.zeros(idx.size, dtype=bool)
                gone[jump.take(pick)] = True
        return gone

    def _stop(self, stop, idx, state, b, nxt, fin, nb, lex) -> None:
        """Tokens ``stop`` reached their end (record the final state) or killed their lexeme.

        A killed lexeme is recorded and the token restarts at START with the same byte
        (``nxt`` updated); ``nxt`` is DEAD for every token that leaves the walk.
        """
        v = nxt.take(stop)
        ended = v < DEAD
        if ended.any():
            fin[idx.take(stop[ended])] = -1 - v[ended]
            nxt[stop[ended]] = DEAD
            stop = stop[~ended]
        if not stop.size:
            return
        e = self.emit.take(state.take(stop))
        restart = self.trans.take(START * _ROW + b.take(stop))
        ok = (e >= 0) & (restart > DEAD)
        nxt[stop] = np.where(ok, restart, DEAD)
        good = idx.take(stop[ok])
        if good.size:
            pos = nb.take(good)
            track = pos < tuning.MAX_TRACKED_BOUNDARIES
            lex[pos[track], good[track]] = e[ok][track]
            nb[good] += 1
            if not track.all():  # one lexeme too many: left to the exact regrouping
                nxt[stop[ok][~track]] = DEAD

    def _jump(self, ptr: np.ndarray, jump: np.ndarray, slots: np.ndarray) -> None:
        """Move ``ptr[jump]`` (tokens sitting in hubs ``slots``) past their runs of loop bytes."""
        present = _flatnonzero(np.bincount(slots)).tolist()
        if len(present) == 1:
            ptr[jump] = self._run_ends(present[0]).take(ptr.take(jump))
            return
        for slot in present:
            sel = jump[slots == slot]
            ptr[sel] = self._run_ends(slot).take(ptr.take(sel))

    def _finish_small(self, idx, state, ptr, ends, fin, nb, lex) -> None:
        """Finish the last few running tokens byte by byte in Python (results written back at once)."""
        raw = self.layout.raw
        rows = self._row_lists()
        jobs = zip(idx.tolist(), state.tolist(), ptr.tolist(), ends.take(idx).tolist(), nb.take(idx).tolist())
        emit = self.dfa.emit
        start = rows[START]
        finals, counts, at_k, at_i, at_e = [], [], [], [], []
        for i, q, p, end, count in jobs:
            for b in raw[p:end]:
                nq = rows[q][b]
                if nq == DEAD:          # the lexeme ends before b: record it, restart at START
                    e = emit[q]
                    if e < 0:
                        q = DEAD
                        break
                    if count < tuning.MAX_TRACKED_BOUNDARIES:
                        at_k.append(count)
                        at_i.append(i)
                        at_e.append(e)
                    count += 1
                    nq = start[b]
                    if count > tuning.MAX_TRACKED_BOUNDARIES or nq == DEAD:   # too many lexemes: regrouped later
                        q = DEAD
                        break
                q = nq
            finals.append(q)
            counts.append(count)
        fin[idx] = finals
        nb[idx] = counts
        if at_i:
            lex[at_k, at_i] = at_e

    def _walk_group_small(self, cand, state, ptr, ends, stays):
        """Walk and group a few tokens in plain Python, all at once: ``(groups, masks)``.

        The same readings as :meth:`_walk` followed by :meth:`_group` (every lexeme kept, so
        no token needs regrouping), without their arrays: for a few tokens, the numpy calls
        cost more than the walk.
        """
        raw = self.layout.raw
        rows = self._row_lists()
        emit, alive = self.dfa.emit, self.dfa.alive
        start = rows[START]
        index: dict[tuple[tuple[int, ...], int], int] = {}
        gid, toks = [], []
        for tok, q, p, end in zip(self.layout.ids.take(cand).tolist(), state.tolist(), ptr.tolist(),
                                  ends.tolist()):
            lexemes = ()
            for b in raw[p:end]:
                nq = rows[q][b]
                if nq == DEAD:          # the lexeme ends before b: record it, restart at START
                    e = emit[q]
                    nq = start[b]
                    if e < 0 or nq == DEAD:
                        q = DEAD
                        break
                    lexemes += (e,)
                q = nq
            bits = alive[q]
            if bits:                    # DEAD has no alive terminals
                key = (lexemes, bits)
                g = index.get(key)
                if g is None:
                    g = index[key] = len(index)
                gid.append(g)
                toks.append(tok)
        words = self.layout.words
        keys = list(index)
        gid = np.array(gid, dtype=np.int64)
        if self.admit is not None and keys:   # groups no parser state allows get no row
            ok = self.admit(keys)
            if not all(ok):
                gid = admitted_numbers(ok).take(gid)
                keys = [k for k, y in zip(keys, ok) if y]
        masks = rows_by_group(gid, np.array(toks, dtype=np.int64), len(keys), words)
        return self._add_stays(keys, masks, {}, stays)

    def _walk_bytes(self, q: int, data) -> tuple[list[int], int]:
        """:func:`walk_token` on plain rows (for the exact regrouping of many-lexeme tokens)."""
        rows = self._row_lists()
        emit = self.dfa.emit
        start = rows[START]
        lexemes: list[int] = []
        for b in data:
            nq = rows[q][b]
            if nq == DEAD:
                e = emit[q]
                if e < 0:
                    return lexemes, DEAD
                lexemes.append(e)
                nq = start[b]
                if nq == DEAD:
                    return lexemes, DEAD
            q = nq
        return lexemes, q


def _small_walk(n: int, ends: np.ndarray, ptr: np.ndarray, max_tokens: int) -> bool:
    """Whether ``n`` tokens with these ``ends`` and positions ``ptr`` are walked in plain Python."""
    return n <= tuning.SMALL_WALK or (n <= max_tokens and int((ends - ptr).sum()) <= tuning.SMALL_WALK_BYTES)
