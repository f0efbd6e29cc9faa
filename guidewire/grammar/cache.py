"""A process-wide LRU of compiled grammars, bounded by count and by bytes.

Front-door layers (``guidewire.api``, the server) keep compiled grammars across requests. A
grammar grows as it is used (lexer states, Earley sets, token tables, masks), so the bound is
re-checked on every insertion against :meth:`CompiledGrammar.memory_bytes`; the newest grammar
always stays, so a single oversized grammar is still usable. A grammar whose parser or lexer
state space has used more than half of its own bound (``parser_bytes``, ``lexer_bytes``: states
that matchers point into, never evicted) is dropped on lookup, so the next request compiles a
fresh one instead of failing later with ``LimitExceededError`` (a grammar whose every position
opens new Earley sets, such as ``python``, fills 256 MiB after a few thousand masked tokens).
Matchers already running keep the grammar they hold.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

STALE_FRACTION = 0.5   # a grammar whose state space passed this share of its bound is rebuilt


def _stale(g) -> bool:
    """Whether ``g``'s lexer or parser states use more than :data:`STALE_FRACTION` of their bound."""
    limits = getattr(g, "limits", None)
    if limits is None:
        return False
    for part, bound in ((getattr(g, "earley", None), limits.parser_bytes),
                        (getattr(g, "dfa", None), limits.lexer_bytes)):
        if part is not None and bound and part.nbytes > bound * STALE_FRACTION:
            return True
    return False


class GrammarCache:
    """Thread-safe LRU of compiled grammars: at most ``max_entries`` and ``max_bytes`` in all.

    Values need a ``memory_bytes()`` method (every :class:`CompiledGrammar` has one). Two
    threads asking for the same missing key may both build it; the first stored wins and
    both get that one.
    """

    def __init__(self, max_entries: int, max_bytes: int):
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a grammar cache needs max_entries >= 1 and max_bytes >= 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"GrammarCache({len(self._items)}/{self.max_entries} grammars, max_bytes={self.max_bytes})"

    def values(self) -> list:
        """The cached grammars, least recently used first."""
        with self._lock:
            return list(self._items.values())

    def get(self, key: Hashable):
        """The grammar stored under ``key`` (now the most recently used), or None (also when its
        state space is near its bound: it is dropped, see the module doc)."""
        with self._lock:
            g = self._items.get(key)
            if g is not None and _stale(g):
                del self._items[key]
                return None
            if g is not None:
                self._items.move_to_end(key)
            return g

    def get_or_build(self, key: Hashable, build: Callable[[], Any]):
        """The grammar under ``key``, built by ``build()`` (outside the lock) on a miss."""
        g = self.get(key)
        if g is not None:
            return g
        g = build()
        with self._lock:
            g = self._items.setdefault(key, g)
            self._items.move_to_end(key)
            self.trim()
        return g

    def clear(self) -> None:
        """Drop every grammar."""
        with self._lock:
            self._items.clear()

    def trim(self) -> None:
        """Evict least recently used grammars beyond the count and byte bounds (the newest stays)."""
        with self._lock:
            items = self._items
            while len(items) > self.max_entries:
                items.popitem(last=False)
            sizes = [g.memory_bytes() for g in items.values()]
            total, i = sum(sizes), 0
            while total > self.max_bytes and len(items) > 1:
                items.popitem(last=False)
                total -= sizes[i]
                i += 1
