"""SAM decoding: a suffix automaton over prompt + output finds the longest repeated suffix.

The automaton is built online (the standard incremental construction: states with ``len``,
``link`` and a ``next`` dict; cloning on split), one token at a time in :meth:`begin`/:meth:`extend`,
amortised O(1) per token. Each state also stores ``end``, the end position of one occurrence of its
strings, kept recent cheaply: a new state gets its own position, a clone its original's, and the
state of the longest repeated suffix (``link`` of the newest state) is bumped to the current
position when the next token arrives (bumping every state on the suffix-link path would cost
O(depth) per token).

To propose, the state of the longest suffix of the history that also ends at an *earlier*
position is found by walking suffix links from the newest state (which stands for the whole
history) until a state whose ``end`` precedes the current end -- one step, ``link(last)``, in
practice. The draft copies the tokens that followed that earlier occurrence. With a hypothetical
``prefix`` the match is extended through the automaton's transitions (matching statistics:
the longest suffix of history + prefix that occurs in the history), costing O(len(prefix))
amortised.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..drafting import Draft
from ._common import DrafterBase, copy_ahead, cut_at_stop, stop_ids, validate_cut


class SuffixAutomatonDrafter(DrafterBase):
    """Drafts by copying after the longest earlier occurrence of the history's suffix.

    Args:
        max_draft: most tokens per draft.
        min_match: shortest suffix match (tokens) worth proposing from.
        vocab / eos_ids: ids never proposed (a draft stops before the first of them).
    """

    name = "sam"
    supports_prefix = True

    def __init__(self, max_draft: int = 8, min_match: int = 1, *, vocab=None,
                 eos_ids: Iterable[int] | None = None):
        super().__init__()
        if max_draft < 1 or min_match < 1:
            raise ValueError(f"max_draft and min_match must be >= 1, got {max_draft}, {min_match}")
        self.max_draft, self.min_match = int(max_draft), int(min_match)
        self.stop = stop_ids(vocab, eos_ids)
        self.begin(())

    # -- automaton -------------------------------------------------------------------------------
    @property
    def history(self) -> list[int]:
        """A copy of the token history."""
        return list(self._tokens)

    @property
    def num_states(self) -> int:
        """Number of automaton states (at most ``2 * len(history)``, root included)."""
        return len(self._len)

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start a new automaton over ``prompt_ids``."""
        self._tokens: list[int] = []
        self._len: list[int] = [0]
        self._link: list[int] = [-1]
        self._next: list[dict[int, int]] = [{}]
        self._end: list[int] = [-1]
        self._last = 0
        self.extend(prompt_ids)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append tokens to the automaton."""
        for t in tokens:
            self._add(int(t))

    def _add(self, c: int) -> None:
        lens, link, nxt, end = self._len, self._link, self._next, self._end
        i = len(self._tokens)
        m = link[self._last]
        if m > 0:  # the previous position is the latest occurrence of link(last)'s strings
            end[m] = i - 1
        self._tokens.append(c)
        cur = len(lens)
        lens.append(lens[self._last] + 1)
        link.append(0)
        nxt.append({})
        end.append(i)
        p = self._last
        while p != -1 and c not in nxt[p]:
            nxt[p][c] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][c]
            if lens[p] + 1 == lens[q]:
                link[cur] = q
            else:
                clone = len(lens)
                lens.append(lens[p] + 1)
                link.append(link[q])
                nxt.append(dict(nxt[q]))
                end.append(end[q])
                while p != -1 and nxt[p].get(c) == q:
                    nxt[p][c] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        self._last = cur

    def match(self, prefix: Sequence[int] = ()) -> tuple[int, int]:
        """``(length, end)``: the longest suffix of history + ``prefix`` that occurs ending at an
        earlier position, and that position (``(0, -1)`` when none).

        With an empty prefix this is exact; with a prefix only occurrences inside the history
        count (one that overlaps the prefix itself is not seen).
        """
        lens, link, nxt, end = self._len, self._link, self._next, self._end
        v, n = self._last, lens[self._last]
        for c in prefix:
            c = int(c)
            while v > 0 and c not in nxt[v]:
                v = link[v]
                n = lens[v]
            w = nxt[v].get(c)
            if w is None:
                v, n = 0, 0
            else:
                v, n = w, n + 1
        current = len(self._tokens) + len(prefix) - 1
        while v > 0 and end[v] >= current:
            v = link[v]
            n = lens[v]
        if v <= 0 or n == 0:
            return 0, -1
        return n, end[v]

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """Copy the tokens that followed the earlier occurrence of the longest repeated suffix."""
        self.calls += 1
        k = min(int(max_tokens), self.max_draft)
        if k <= 0:
            return self._emit([])
        n, pos = self.match(prefix)
        if n < self.min_match:
            return self._emit([])
        h, size = self._tokens, len(self._tokens)

        def get(i: int) -> int:
            return h[i] if i < size else int(prefix[i - size])

        tokens = copy_ahead(get, pos + 1, size + len(prefix), k)
        tokens = validate_cut(constraint, cut_at_stop(tokens, self.stop), prefix)
        return self._emit(tokens)
