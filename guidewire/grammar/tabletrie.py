"""The token trie of a vocabulary and the table path that walks it in C (``_native.trie_walk``).

A lexer state that is neither ``START`` nor a hub is usually a few bytes away from one: a
property-name trie inside a key string, an escape inside a string body. Its table then differs
from the hub's in a handful of tokens, and the vectorised build finds them with a dozen array
passes and several shortcuts (hundreds of numpy calls, the bulk of the slow masks). Here the
vocabulary is walked as a trie, depth first, beside the walks from ``START``, from the hubs
one or two bytes away (not those whose tables are not built, where there are several:
:meth:`TrieTables._affordable_refs`) and from the state's shadow (see :meth:`TrieTables._shadow`): a subtree
whose walk meets a reference walk before either ends a lexeme
reads as from that reference and is inherited whole, a dead one is skipped, and only the few
nodes where the readings differ are visited (llguidance's trie walk with subtree skipping,
applied to the table of a lexer state rather than to each mask). A state with little to meet
(a ``maxLength`` counter, and a hub, walked beside built hub tables only) is walked with its UTF-8 slice
taken out (:class:`TrieSlice`): the slice's members are answered by its rows and only the other
tokens' paths are visited; a state with no slice is walked plainly (a hub beside those hubs). The
vectorised build is the reference and the fallback (no compiled module, a hub with neither a slice
nor a built hub to meet, or a walk past its budget: a first walk past :data:`~.tabletuning.TRIE_NODES`
is tried again with the slice taken out, or plainly, up to :data:`~.tabletuning.TRIE_SLICED_NODES`).
Where the walk reaches lexer
rows not made yet (a lazily built lexer), it leaves those subtrees on a frontier and resumes below
them once the rows are made."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import native
from . import tabletuning as tuning
from .lexer import DEAD, START
from .tablearrays import _distinct, _flatnonzero, admitted_numbers, rows_by_group
from .tableslices import _NO_LIMIT
from .vocabindex import _byte_set_cached, per_vocab, utf8_slice, utf8_tokens, vocab_layout

__all__ = ["TokenTrie", "TrieSlice", "prepare_trie", "range_max", "token_trie", "trie_slice"]

_TRIE_KEY = "tokentable.trie"
_CHARS_KEY = "tokentable.trie_chars"
_SLICE_KEY = "tokentable.trie_slices"
_SLICE_BYTES = (32 << 20, 512)     # per vocabulary, for trie_slice (a slice is 5 bytes per token): see cache_budget
_FRONT_START = 4096   # subtrees a trie walk may leave for rows not made yet, per round, at first
_FRONT_SLOTS = 65536  # ... and at most (a full frontier grows eightfold and the walk starts again);
# a walk with the large budget (a hub's, a sliced one, a plain one after the small budget) starts with
# the most: a Gemma-3 hub of a product lexer filled 4,096 after 291k of its 441k nodes and walked them
# again (the arrays are not touched beyond what a round writes)
_FRONT_LEXEMES = 4    # ... and lexemes they completed on the way, per subtree on average
_MAX_REFS = 64      # hubs walked beside a table's walk (each adds a lookup per node while it lasts)
_MAX_SIBLINGS = 2   # hubs with the same alive terminals walked beside a hub's own walk (see _sibling_hubs)
_TWINS = 1024      # room for tokens that repeat another's bytes (several tokens at one node)


def _frontier_buffers(slots: int, width: int, max_depth: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Two frontiers of ``slots`` entries of ``width`` int64 and their two lexeme pools (a round's
    input and output, swapped each round; a pool has room for one entry's lexemes at least)."""
    pool = max(slots * _FRONT_LEXEMES, max_depth)
    return ([np.empty(slots * width, dtype=np.int64) for _ in range(2)],
            [np.empty(pool, dtype=np.int64) for _ in range(2)])


@dataclass(frozen=True)
class TokenTrie:
    """The ordinary tokens of a vocabulary as a byte trie in preorder (lexicographic order).

    Node ``k`` holds byte ``node_byte[k]`` at depth ``node_depth[k]`` (1: a first byte); its
    subtree is the nodes ``k:node_end[k]``; the tokens ending at ``k`` are
    ``toks[node_tok[k]:node_tok[k + 1]]`` (ids; several where byte strings repeat), so a
    subtree's tokens are ``toks[node_tok[k]:node_tok[node_end[k]]]``; ``pos[i]`` is the layout
    index of ``toks[i]``. ``max_depth`` is the longest token's length.
    """

    node_byte: np.ndarray
    node_depth: np.ndarray
    node_end: np.ndarray
    node_tok: np.ndarray
    toks: np.ndarray
    pos: np.ndarray
    max_depth: int

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return sum(a.nbytes for a in (self.node_byte, self.node_depth, self.node_end, self.node_tok, self.toks,
                                      self.pos))


@dataclass(frozen=True)
class TrieSlice:
    """A UTF-8 slice (:class:`~.vocabindex.Utf8Slice`) in the trie's token order, for the C walk:
    ``member[i]`` (uint8) whether the token at position ``i`` is a member, ``prefix[i]`` the
    non-members before position ``i`` (int32, one longer), ``chars[i]`` its characters and
    ``subtree_chars[k]`` the most characters of a token in node ``k``'s subtree (both int32,
    shared by every slice of the vocabulary)."""

    member: np.ndarray
    prefix: np.ndarray
    chars: np.ndarray
    subtree_chars: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by this slice's own arrays."""
        return self.member.nbytes + self.prefix.nbytes


def token_trie(vocab) -> TokenTrie:
    """The :class:`TokenTrie` of ``vocab``'s ordinary tokens (built once per vocabulary, cached on it)."""
    return per_vocab(vocab, _TRIE_KEY, _build_trie)


def prepare_trie(vocab) -> TokenTrie:
    """The trie and the per-vocabulary indexes its sliced walks read (the UTF-8 index, characters
    per trie position and per subtree), built once per vocabulary: with the compile of the first
    grammar for it, not inside the first mask that slices (Gemma-3: ~180 ms)."""
    trie = token_trie(vocab)
    per_vocab(vocab, _CHARS_KEY, _trie_chars)
    return trie


def _build_trie(vocab) -> TokenTrie:
    layout = vocab_layout(vocab)
    raw, starts, lens = layout.raw, layout.starts, layout.lens
    n = int(layout.ids.size)
    data = [raw[s:s + ln] for s, ln in zip(starts.tolist(), lens.tolist())]
    order = np.array(sorted(range(n), key=data.__getitem__), dtype=np.int64)
    s_start, s_len = starts.take(order), lens.take(order)
    # lcp[i]: bytes token i shares with token i - 1 (sorted), column by column over the pairs still equal
    lcp = np.zeros(n, dtype=np.int64)
    active = np.arange(1, n, dtype=np.int64)
    col = 0
    while active.size:
        a_ok = s_len.take(active) > col
        b_ok = s_len.take(active - 1) > col
        ok = a_ok & b_ok
        active = active[ok]
        same = layout.flat.take(s_start.take(active) + col) == layout.flat.take(s_start.take(active - 1) + col)
        active = active[same]
        lcp[active] += 1
        col += 1
    new = s_len - lcp                      # nodes a token adds (0: a repeated byte string)
    node_start = np.concatenate([[0], np.cumsum(new)])
    total = int(node_start[-1])
    tok_of = np.repeat(np.arange(n, dtype=np.int64), new)
    depth = lcp.take(tok_of) + 1 + (np.arange(total, dtype=np.int64) - node_start.take(tok_of))
    node_byte = layout.flat.take(s_start.take(tok_of) + depth - 1).astype(np.uint8)
    # a node (token i, depth d) spans up to the first later token that shares fewer than d bytes
    node_end = np.empty(total, dtype=np.int64)
    max_depth = int(s_len.max(initial=0))
    for d in range(1, max_depth + 1):
        at = _flatnonzero(depth == d)
        if not at.size:
            continue
        breaks = _flatnonzero(lcp < d)          # token 0 always: its lcp is 0
        nxt = np.searchsorted(breaks, tok_of.take(at), side="right")
        j = np.where(nxt < breaks.size, breaks.take(np.minimum(nxt, breaks.size - 1)), n)
        node_end[at] = node_start.take(j)
    final = np.where(new > 0, node_start[:-1] + new - 1, -1)
    final = np.maximum.accumulate(final)      # a repeated byte string ends where its twin does
    node_tok = np.searchsorted(final, np.arange(total + 1)).astype(np.int32)
    trie = TokenTrie(node_byte, depth.astype(np.int32), node_end.astype(np.int32), node_tok,
                     layout.ids.take(order).astype(np.int64), order, max_depth)
    for arr in (trie.node_byte, trie.node_depth, trie.node_end, trie.node_tok, trie.toks, trie.pos):
        arr.setflags(write=False)
    return trie


def trie_slice(vocab, class_set: np.ndarray) -> TrieSlice:
    """The :class:`TrieSlice` of ``vocab``'s UTF-8 slice for the 256-bool class ``class_set``
    (:func:`~.vocabindex.utf8_slice`), memoised per vocabulary (bounded by :data:`_SLICE_BYTES`, see :func:`~.vocabindex.cache_budget`)."""
    return _byte_set_cached(vocab, _SLICE_KEY, class_set, _build_trie_slice, lambda t: t.nbytes, _SLICE_BYTES)


def _build_trie_slice(vocab, class_set: np.ndarray) -> TrieSlice:
    trie = token_trie(vocab)
    chars, subtree = per_vocab(vocab, _CHARS_KEY, _trie_chars)
    layout_member = utf8_slice(vocab, class_set).member
    compiled = native.module()
    if compiled is not None:    # one pass in C; the numpy lines below are the reference
        member = np.empty(trie.pos.size, dtype=np.uint8)
        prefix = np.empty(member.size + 1, dtype=np.int32)
        compiled.slice_trie(layout_member.view(np.uint8), trie.pos, member, prefix)
    else:
        member = layout_member.take(trie.pos).view(np.uint8)
        prefix = np.zeros(member.size + 1, dtype=np.int32)
        np.cumsum(member == 0, out=prefix[1:])
    for arr in (member, prefix):
        arr.setflags(write=False)
    return TrieSlice(member, prefix, chars, subtree)


def _trie_chars(vocab) -> tuple[np.ndarray, np.ndarray]:
    """(characters per trie position, most characters of a token per node's subtree), int32."""
    trie = token_trie(vocab)
    chars = utf8_tokens(vocab).chars.take(trie.pos).astype(np.int32)
    lo = trie.node_tok[:-1].astype(np.int64)
    hi = trie.node_tok.take(trie.node_end.astype(np.int64)).astype(np.int64)   # every subtree holds a token
    subtree = range_max(chars, lo, hi)
    for arr in (chars, subtree):
        arr.setflags(write=False)
    return chars, subtree


def range_max(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(vals[lo[i]:hi[i]])`` for each ``i`` (every range non-empty), by a sparse table."""
    levels = [vals]
    while (2 << (len(levels) - 1)) <= vals.size:
        half = 1 << (len(levels) - 1)
        prev = levels[-1]
        levels.append(np.maximum(prev[:-half], prev[half:]))
    span = hi - lo
    if span.size and int(span.min()) < 1:
        raise ValueError("range_max: an empty range")
    level = np.frexp(span.astype(np.float64))[1].astype(np.int64) - 1     # floor(log2(span))
    out = np.empty(lo.size, dtype=vals.dtype)
    for j in _distinct(level):
        sel = _flatnonzero(level == j)
        t = levels[j]
        a, b = lo.take(sel), hi.take(sel) - (1 << j)
        out[sel] = np.maximum(t.take(a), t.take(b))
    return out


def _chars_needed(sl, firsts: np.ndarray) -> int:
    """How far a slice's chain is followed for the first bytes ``firsts``: the fewest characters
    that all but :data:`~.tabletuning.SLICE_LONG_LEFT` of their members have at most. Each step of
    the chain checks every character of the class through the lexer (rows for each lead byte's
    continuations: ~0.2 ms a step in a lazily built product); the few longer members (runs of
    spaces or dashes, up to 48 characters) are walked instead, where rows are made for their bytes
    only (see :meth:`TrieTables._rows_ahead`)."""
    cum = sl.by_first.take(firsts, axis=0).sum(axis=0)     # members of fewer than c characters, per c
    ok = _flatnonzero(int(cum[-1]) - cum[1:] <= tuning.SLICE_LONG_LEFT)
    most = int(sl.most.take(firsts).max(initial=0))
    return min(most, max(1, int(ok[0]))) if ok.size else most      # one step at least: a loop shows there


class TrieTables:
    """The trie-walk path of :class:`~.tokentable.TableBuilder` (a mixin over :class:`~.dfamirror.DfaMirror`)."""

    def _trie_refs(self, compiled, q: int, first: np.ndarray) -> list[int]:
        """The hubs one or two bytes from ``q`` over the first bytes ``first`` (uint8 per byte; not
        ``q``, not a hub whose table is being built), in the order found, then ``START`` (in C,
        ``compiled.trie_refs``; :meth:`_trie_refs_numpy` is the reference)."""
        if self._rows is None:      # a lexer mirrored row by row: hubs are known by their copied rows
            one = np.asarray(_distinct(self._ext[q, :256][first.view(bool)]), dtype=np.int64)
            self._need(one, build=False)
            known = one[self._copied.take(one)]
            if known.size:
                self._need(self._ext.take(known, axis=0)[:, :256].reshape(-1), build=False)
        busy = np.fromiter(self._busy, dtype=np.int64, count=len(self._busy))
        return compiled.trie_refs(self.trans, self._copied.view(np.uint8), self.hub, q, first, busy, _MAX_REFS)

    def _affordable_refs(self, refs: list[int], reused) -> list[int]:
        """``refs`` less the hubs whose tables are not built, when they are of more than
        :data:`~.tabletuning.TRIE_UNBUILT_REFS` classes (``START`` and the classes of the ``reused``
        hubs aside; the shadow, added after this, is not a hub and is not counted).

        A subtree that meets a hub inherits that hub's row, so the mask that first reads this table
        builds the hub's table too, for all its tokens, to answer the few that met it. Beside one such
        hub (a key string's body) that pays; a key state inside a product of pattern strings meets five
        to eight (each pattern alive or not makes its own hub), and its first mask built them all (a
        Gemma-3 schema's first key: 8 tables, 25-50 ms). There the walk meets built tables only and
        walks the rest itself: exact either way (the meeting, not the choice, makes it exact)."""
        built = self.has_table
        if built is None:
            return refs
        kept = {self._class_of(h) for h in reused}
        unbuilt = {h: c for h in refs if h != START and (c := self._class_of(h)) not in kept and not built(h)}
        if len(set(unbuilt.values())) <= tuning.TRIE_UNBUILT_REFS:
            return refs
        return [h for h in refs if h not in unbuilt]

    def _shadow(self, q: int) -> int | None:
        """The lexer state of ``q``'s NFA states less those of its *narrow* terminals (a handful of
        strings each: a property name, an enum constant), when that drops some and leaves some.

        Inside a key the lexer state is the product of the property-name literals with every
        string terminal alive there, a ``maxLength`` counter included; its shadow is the same
        product without the literals, which most tokens reach after their first byte (they leave
        the names), so a walk beside it meets at once. Its table may itself inherit (from hubs or
        ``START``), never from a state with more NFA states: a shadow has no narrow terminal left,
        so it is its own shadow and the inheritance is acyclic. Only a state the lexer has made is
        used; in a lazily built lexer, only one whose table is built."""
        dfa = self.dfa
        members = dfa.nfa_states(q)
        narrow = self._narrow_nfa
        if narrow is None:   # a flag byte per NFA state (bytes: never walked by the cyclic GC)
            flags = np.array([t.narrow for t in dfa.terminals] + [False], dtype=np.uint8)   # owner -1: none
            narrow = self._narrow_nfa = flags.take(dfa.owner).tobytes()
        if not any(map(narrow.__getitem__, members)):   # no narrow terminal's state in q: no shadow
            return None
        keep = [s for s in members if not narrow[s]]
        if not keep:
            return None
        shadow = dfa.find_state(keep)   # never a new one: no walk reached it, and its table would be new
        if shadow is None or self._rows is not None:
            return shadow               # a complete lexer: the shadow's table costs walks, not lexer rows
        # a lazy lexer: only a shadow whose table is built (building one in a product lexer makes
        # lexer rows by the thousand, inside the mask that asked for this table)
        return shadow if self.has_table is not None and self.has_table(shadow) else None

    def _sibling_hubs(self, q: int) -> list[int]:
        """Up to :data:`_MAX_SIBLINGS` hubs with ``q``'s set of alive terminals whose tables are
        built (not ``q``, not one being built), for a hub's walk to meet.

        A string terminal read in several places (a free string beside key literals, say) makes
        one hub per set of NFA states still alive, with the same terminals alive: on Gemma-3 two
        such hubs of `traefik-v2`'s first key walked 482k trie nodes each (5-7 ms) for the same
        202k tokens. Beside one another, most subtrees meet after a byte (the states the sets
        differ by die) and the later table inherits them; meeting, not the choice, keeps it exact."""
        built = self.has_table
        if built is None:
            return []
        n = self._n
        same = (self.hub[:n] >= 0) & (self.alive_id[:n] == self.alive_id[q]) & self._copied[:n]
        out = []
        for h in _flatnonzero(same).tolist():
            if h != q and h not in self._busy and built(h):
                out.append(h)
                if len(out) == _MAX_SIBLINGS:
                    break
        return out

    def _trie_refs_numpy(self, q: int, first: np.ndarray) -> list[int]:
        """:meth:`_trie_refs` in numpy, as a set in sorted order, then ``START`` (the reference;
        reads only mirrored rows)."""
        one = np.asarray(_distinct(self._ext[q, :256][first.view(bool)]), dtype=np.int64)
        one = one[one > DEAD]
        known = one[self._copied.take(one)]
        two = self._ext.take(known, axis=0)[:, :256].reshape(-1) if known.size else known
        near = np.concatenate([one, two])
        near = near[near > DEAD]
        hubs = near[(self.hub.take(near) >= 0) & self._copied.take(near)]
        return [h for h in _distinct(hubs) if h != q and h not in self._busy][:_MAX_REFS] + [START]

    def _trie_table(self, q: int, row: np.ndarray, base: bool = False, reused=()):
        """``(groups, masks, inherit)`` of the tokens whose first byte ``row`` keeps alive, by the
        trie walk (see the module docstring), or None where it does not apply (no compiled module,
        no table cache to inherit from, a hub with no slice and no built hub to meet, or a walk past
        :data:`~.tabletuning.TRIE_SLICED_NODES`).

        A first walk past :data:`~.tabletuning.TRIE_NODES` nodes is tried once more with ``q``'s UTF-8
        slice taken out (a string body or a ``maxLength`` counter with no reference to meet: see
        :meth:`~.tableslices.SliceShortcuts._slice_plan`), its members answered by the slice's rows and only the rest of the trie
        walked, or plainly with the large budget where ``q`` has no slice. A hub's table
        (``base``) is walked with its slice taken out (plainly where it has none) beside the hubs
        whose tables are built and whose inheritance never leads back to it
        (:meth:`~.tableshortcuts.InheritanceShortcuts._may_inherit`). Another table meets the hubs
        near it (:meth:`_affordable_refs`; ``reused``: the hubs whose first bytes its table reuses,
        built by the mask anyway) and, with no slice, is walked plainly with the large budget."""
        compiled = native.module()
        if compiled is None or self.lookup is None:
            return None
        trie = token_trie(self.vocab)
        first = np.ascontiguousarray(row != DEAD).view(np.uint8)
        if base:
            # beside the hubs whose tables are built (a mask reads an inherited table: no table is
            # built for it alone) and whose inheritance never leads back to q (no cycles)
            built = self.has_table
            refs = [h for h in self._trie_refs(compiled, q, first)
                    if built is not None and built(h) and self._may_inherit(q, h)]
            for h in self._sibling_hubs(q):     # after the near hubs (a base table never inherits START)
                if h not in refs and self._may_inherit(q, h):
                    refs.append(h)
            got = None      # a hub's plain walk meets little: most of the trie
        else:
            refs = self._affordable_refs(self._trie_refs(compiled, q, first), reused)
            shadow = self._shadow(q)
            if shadow is not None and shadow not in refs:
                refs.insert(len(refs) - 1, shadow)      # before START: a base table is met first
            got = self._trie_walk(compiled, trie, q, refs, first, None, tuning.TRIE_NODES)
        stays: list = []
        if got is None:
            firsts = _flatnonzero(first)
            if self._rows is None:      # a lexer mirrored row by row: a chain step may make rows
                plan = self._slice_plan(q, lambda sl: _chars_needed(sl, firsts))
            else:                       # every row is there: the chain is cheap to follow
                plan = self._slice_plan(q, lambda sl: int(sl.most.take(firsts).max(initial=0)))
            if plan is None:
                if base and not refs:       # a hub with no slice and no hub to meet: the vectorised build
                    return None
                got = self._trie_walk(compiled, trie, q, refs, first, None, tuning.TRIE_SLICED_NODES)
                return None if got is None else self._trie_result(q, got, refs, base, [])
            # members of fewer than plan.limit characters are read along the chains, not walked; where
            # longer ones are dead (a counter runs out), they are skipped too (no row holds them)
            limit = plan.limit if plan.limit >= _NO_LIMIT or not self._plan_ends_dead(plan) else _NO_LIMIT
            got = self._trie_walk(compiled, trie, q, refs, first, (trie_slice(self.vocab, plan.class_set), limit),
                                  tuning.TRIE_SLICED_NODES)
            if got is None:
                return None
            self._slice_stays(q, row, plan, stays)  # the members the walk left out, as rows
        return self._trie_result(q, got, refs, base, stays)

    def _trie_result(self, q: int, got, refs: list[int], base: bool, stays: list):
        """``(groups, masks, inherit)`` from a walk's ``(gid, tok, group keys, inherited rows)`` and
        the slice's ``stays`` rows; a hub's inherited references are recorded (see ``_may_inherit``)."""
        gid, tok, keys, inh = got
        values = self._alive_values
        groups = [(lex, values[a]) for lex, a in keys]
        if self.admit is not None and groups:   # groups no parser state allows get no row
            ok = self.admit(groups)
            if not all(ok):
                gid = admitted_numbers(ok).take(gid)
                groups = [g for g, y in zip(groups, ok) if y]
        masks = rows_by_group(gid, tok, len(groups), self.layout.words)
        if stays:
            groups, masks = self._add_stays(groups, masks, {}, stays)
        inherit = {refs[r]: inh[r] for r in _flatnonzero(inh.any(axis=1)).tolist()} if refs else {}
        if base:
            for h in inherit:
                self._inherits_from(q, h)
        return tuple(groups), masks, inherit

    def _trie_walk(self, compiled, trie: TokenTrie, q: int, refs: list[int], first: np.ndarray, sliced,
                   budget: int):
        """One C walk of the trie from ``q`` beside ``refs`` (``sliced``: ``(TrieSlice, limit)`` or
        None): ``(gid, tok, group keys, inherited rows per reference)``, or None past ``budget`` nodes.

        Where the walk reaches lexer rows not made yet it leaves those subtrees on a frontier; the
        rows are made and the walk resumes below the frontier only (a lazily built product lexer
        reveals its rows a byte layer at a time: walking again from ``q`` each round walked the
        trie once per layer)."""
        words = self.layout.words
        size = 1 + min(budget, trie.node_byte.size) + _TWINS    # a walked token is a node visited (or its twin)
        gid, tok = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
        width = 5 + len(refs)           # a frontier entry (see _native_trie.c)
        # a lexer mirrored whole never defers a subtree; else the frontier starts small and grows
        slots = 1 if self._rows is not None else (_FRONT_SLOTS if budget > tuning.TRIE_NODES else _FRONT_START)
        fronts, pools = _frontier_buffers(slots, width, trie.max_depth)     # in, out: swapped each round
        n_in = 0
        ref_arr = np.asarray(refs, dtype=np.int64)
        extra = () if sliced is None else (sliced[0].member, sliced[0].prefix, sliced[0].chars,
                                           sliced[0].subtree_chars, sliced[1])
        inh = np.zeros((len(refs), words), dtype=np.int32)
        key_id: dict = {}       # group key -> id over every call (each call numbers its own from 0)
        n, left, ref_rows, wait = 0, budget, 0, True
        while True:
            if self._rows is None:      # a lexer mirrored row by row (else every row is there)
                self._need(np.concatenate([ref_arr, [q, START]]))
            status, n_now, n_front, nodes, keys = compiled.trie_walk(
                trie.node_byte, trie.node_depth, trie.node_end, trie.node_tok, trie.toks, trie.max_depth,
                self.trans, self._copied.view(np.uint8), self.emit, self.alive_id, q, ref_arr, first, inh,
                words, gid, tok, n, fronts[0], pools[0], n_in, fronts[1], pools[1], left, wait, *extra)
            if self.fuel is not None:
                self.fuel.spend(1 + nodes)
            left -= nodes
            if status == -1:
                return None
            waiting = fronts[1][:n_front * width].reshape(n_front, width)
            if status == -2:    # more subtrees wait than the frontier holds: make the rows of those it
                if not n_front:                 # holds, then walk again from q (with a larger frontier,
                    raise RuntimeError("trie_walk: a full frontier with no entry")     # up to _FRONT_SLOTS)
                n, n_in, key_id = 0, 0, {}
                inh[:] = 0
                if slots < _FRONT_SLOTS:
                    slots = min(slots * 8, _FRONT_SLOTS)
                    fronts, pools = _frontier_buffers(slots, width, trie.max_depth)
            else:
                if n_now > n:
                    ids = np.fromiter((key_id.setdefault(k, len(key_id)) for k in keys), dtype=np.int64,
                                      count=len(keys))
                    gid[n:n_now] = ids.take(gid[n:n_now])
                n, n_in = n_now, n_front
                fronts.reverse()        # this round's frontier is the next round's input
                pools.reverse()
            if not n_front:
                return gid[:n], tok[:n], list(key_id), inh
            todo = waiting[:, 2]
            todo = np.asarray(_distinct(todo[~self._copied.take(todo)]), dtype=np.int64)
            if refs:        # a reference's rows are made only while they are few (a shadow's product
                at = waiting[:, 5:].reshape(-1)                               # can be huge)
                at = at[at > DEAD]
                more = np.asarray(_distinct(at[~self._copied.take(at)]), dtype=np.int64)
                if more.size and wait and ref_rows + more.size <= tuning.TRIE_REF_ROWS:
                    ref_rows += more.size
                    todo = np.concatenate([todo, more])
                elif more.size:
                    self._need(more, build=False)   # rows already made are only copied; then walk on without
                    wait = False
            self._need(todo)
            if n_front <= tuning.TRIE_THIN_FRONT:
                self._rows_ahead(trie, waiting, sliced)

    def _rows_ahead(self, trie: TokenTrie, waiting: np.ndarray, sliced=None) -> None:
        """Make and mirror the lexer rows the walk will need below a thin frontier (``waiting``'s
        entries, their own rows made): the subtrees are followed byte by byte through the lexer, a
        byte layer at a time with one row build per layer, so the next round walks them whole. A
        few long tokens along a counter (a run of 64 spaces in a ``maxLength`` string) otherwise cost
        a round of the walk per byte. Skipped past :data:`~.tabletuning.TRIE_AHEAD_NODES` nodes;
        what it makes is only rows the walk would make itself (a byte that kills an accepting state
        restarts at ``START``, as the walk does; a subtree of the slice's members only, ``sliced``
        as for :meth:`_trie_walk`, is skipped, as the walk skips it), so the table is the same
        either way."""
        nodes = waiting[:, 0]
        below = int((trie.node_end.take(nodes) - nodes - 1).sum())
        if below > tuning.TRIE_AHEAD_NODES:
            return
        compiled = native.module()
        if compiled is None:
            made = self._rows_ahead_python(trie, waiting, sliced)
        else:       # each layer lists distinct nodes, children of the last's: at most `below` of them
            made = self._rows_ahead_compiled(compiled, trie, waiting, sliced, below)
        if made:
            self._need(np.asarray(made, dtype=np.int64))

    def _rows_ahead_compiled(self, compiled, trie: TokenTrie, waiting: np.ndarray, sliced, room: int) -> list[int]:
        """:meth:`_rows_ahead`'s layers, rows and all, in C (``ByteDFA.rows_below``; called again
        only where the lexer's table must grow between layers): the states whose rows it made
        (``room``: the most trie nodes below the frontier)."""
        dfa = self.dfa
        extra = () if sliced is None else (sliced[0].prefix, sliced[0].subtree_chars, sliced[1])
        nodes = np.ascontiguousarray(waiting[:, 0], dtype=np.int64)
        states = np.ascontiguousarray(waiting[:, 2], dtype=np.int64)
        out = np.empty((2, max(room, 1)), dtype=np.int64)
        made = np.empty(max(room, 1), dtype=np.int64)
        n_made, fresh = 0, True
        while True:
            self._sync()        # the emitted sets of every state made so far
            n_front, n, again = dfa.rows_below(compiled, trie, self.emit, nodes, states, out, made[n_made:], fresh, extra)
            n_made += n
            if not again:
                return made[:n_made].tolist()
            nodes, states, fresh = out[0, :n_front].copy(), out[1, :n_front].copy(), False

    def _rows_ahead_python(self, trie: TokenTrie, waiting: np.ndarray, sliced) -> list[int]:
        """:meth:`_rows_ahead`'s layers in Python (no compiled module; the reference of
        ``_native.ahead_rows``): the states whose rows it made."""
        end, byte, ntok = trie.node_end, trie.node_byte, trie.node_tok
        if sliced is not None:
            non_members, sub_chars, limit = sliced[0].prefix, sliced[0].subtree_chars, sliced[1]
        dfa = self.dfa
        layer = list(zip(waiting[:, 0].tolist(), waiting[:, 2].tolist()))
        made: list[int] = []
        while layer:
            trans, emit = dfa.trans, dfa.emit
            start_row = trans[START]
            nxt = []
            for k, s in layer:
                row, ends = trans[s], emit[s] >= 0
                j, stop = k + 1, int(end[k])
                while j < stop:                 # k's children: the next sibling of j is end[j]
                    b = int(byte[j])
                    t = int(row[b])
                    if t == DEAD and ends:
                        t = int(start_row[b])
                    stop_j = int(end[j])
                    if t != DEAD and stop_j > j + 1 and not (     # a child with children of its own ...
                            sliced is not None and int(sub_chars[j]) < limit     # ... not all the slice's
                            and non_members[ntok[stop_j]] == non_members[ntok[j + 1]]):
                        nxt.append((j, t))
                    j = stop_j
            if not nxt:
                break
            states = np.asarray(_distinct(np.fromiter((t for _j, t in nxt), dtype=np.int64, count=len(nxt))),
                                dtype=np.int64)
            build = states[~dfa.row_done.take(states)]
            trans = row = start_row = None      # no view of the lexer's rows across its growth (see growtable)
            if build.size:
                dfa.ensure_rows(build)
            made.extend(states.tolist())
            layer = nxt
        return made
