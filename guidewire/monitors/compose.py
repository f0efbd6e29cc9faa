"""Composing constraints: :func:`intersect` (AND of masks) and :func:`gated` (a monitor on only
inside a delimited region).

``intersect(a, b, ...)`` is itself a constraint: a token is allowed iff every part allows it,
EOS iff every part accepts, it is terminated when any part is (nothing but EOS can follow one of
them), ``advance`` is all-or-nothing (parts already advanced are rolled back when a later one
refuses). Parts may be monitors, grammar matchers or other compositions.

``gated(monitor, region=(start, end), prefix="")`` switches ``monitor`` on only between the
literal delimiters ``start`` and ``end`` (e.g. ``("```python\\n", "```")`` for code fences in a
chat answer). The monitor sees only the text inside regions, all regions in turn as one buffer
(its own ``prefix`` first). Outside a region every token and EOS are allowed; at a token boundary
inside one the monitor's mask applies. A token that opens a region mid-token is checked only up
to the delimiter, and the text after it is given to the monitor unchecked.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.bitmask import fill_row
from .base import Monitor, MonitorStats, validate_on_fork


def _row_of(c, words: int) -> np.ndarray:
    buf = np.zeros((1, words), dtype=np.int32)
    c.fill_bitmask(buf, 0)
    return buf[0]


def merged_stats(parts) -> MonitorStats:
    """One :class:`MonitorStats` summing the stats of every monitor among ``parts`` (recursively)."""
    out = MonitorStats()
    for p in parts:
        st = getattr(p, "stats", None)
        if isinstance(st, MonitorStats):
            out.triggers += st.triggers
            out.abstentions.extend(st.abstentions)
            out.analysis_s.extend(st.analysis_s)
            out.wait_s.extend(st.wait_s)
            out.masked_steps += st.masked_steps
    return out


class Intersection:
    """The AND of several constraints (see the module docstring)."""

    def __init__(self, parts: Sequence):
        if not parts:
            raise ValueError("intersect() needs at least one constraint")
        self.parts = list(parts)

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the AND of every part's mask into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask(bitmask.shape[1]))

    def current_mask(self, words: int | None = None) -> np.ndarray:
        """The packed AND of the parts' rows (``words``: the row width, for parts that only
        have ``fill_bitmask``; else taken from the other parts)."""
        rows = [np.asarray(p.current_mask(), dtype=np.int32) if hasattr(p, "current_mask") else None
                for p in self.parts]
        if any(r is None for r in rows):
            width = words or max((r.shape[0] for r in rows if r is not None), default=0)
            if not width:
                raise ValueError("intersect(): no part gives its mask width; pass words=")
            rows = [r if r is not None else _row_of(p, width) for r, p in zip(rows, self.parts)]
        n = min(r.shape[0] for r in rows)
        out = rows[0][:n].copy()
        for r in rows[1:]:
            out &= r[:n]
        return out

    def advance(self, token_id: int) -> bool:
        """Advance every part, or none (False) when one refuses."""
        done = []
        for p in self.parts:
            if not p.advance(token_id):
                for q in done:
                    q.rollback(1)
                return False
            done.append(p)
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest prefix every part accepts; the state is not changed."""
        return validate_on_fork(self, tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens in every part."""
        for p in self.parts:
            p.rollback(n)

    def is_accepting(self) -> bool:
        """Whether every part accepts."""
        return all(p.is_accepting() for p in self.parts)

    def is_terminated(self) -> bool:
        """Whether some part allows nothing but EOS (or reached its error state)."""
        return any(p.is_terminated() for p in self.parts)

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """Tokens forced from here: each the only token the AND allows, in turn."""
        f = self.fork()
        out: list[int] = []
        while len(out) < limit and not f.is_terminated():
            words = f.current_mask().view(np.uint32)
            nz = np.flatnonzero(words)
            if nz.size != 1 or (int(words[nz[0]]) & (int(words[nz[0]]) - 1)):
                break
            tok = int(nz[0]) * 32 + int(words[nz[0]]).bit_length() - 1
            if not f.advance(tok):
                break
            out.append(tok)
        return out

    def fork(self) -> "Intersection":
        """An independent copy (every part forked)."""
        return Intersection([p.fork() for p in self.parts])

    @property
    def segment_open(self) -> bool:
        """Whether some part is masking a segment (see :attr:`Monitor.segment_open`)."""
        return any(getattr(p, "segment_open", False) for p in self.parts)

    @property
    def analysis_in_flight(self) -> bool:
        """Whether some part's analysis runs ahead (see :attr:`Monitor.analysis_in_flight`)."""
        return any(getattr(p, "analysis_in_flight", False) for p in self.parts)

    @property
    def stats(self) -> MonitorStats:
        """The monitors' stats summed (a fresh record each call)."""
        return merged_stats(self.parts)

    @property
    def error(self):
        """The first part's error message, if any part has one (grammar matchers do)."""
        for p in self.parts:
            err = getattr(p, "error", None)
            if err:
                return err
        return None


def intersect(*constraints) -> Intersection:
    """The AND of ``constraints`` (monitors, grammar matchers, other compositions)."""
    return Intersection(constraints)


class Gated:
    """``monitor`` switched on only inside ``start ... end`` regions (see the module docstring)."""

    def __init__(self, monitor: Monitor, start: str, end: str, prefix: str = ""):
        if not start or not end:
            raise ValueError("a gated region needs non-empty start and end delimiters")
        self.monitor = monitor
        self.start = start.encode("utf-8")
        self.end = end.encode("utf-8")
        self._text = bytearray()
        self._inside = False
        self._mark = 0  # where to look for the next delimiter
        self._hist: list[tuple] = []
        self._feed(prefix.encode("utf-8"), record=False)

    def _feed(self, data: bytes, record: bool = True) -> int:
        """Append ``data``; give the in-region parts to the monitor. Returns its new entries."""
        fed = 0
        self._text.extend(data)
        while True:
            delim = self.end if self._inside else self.start
            at = self._text.find(delim, self._mark)
            if self._inside:
                stop = len(self._text) if at < 0 else at
                # hold back a possible partial end delimiter at the very end
                hold = 0
                if at < 0:
                    for k in range(min(len(self.end) - 1, stop - self._mark), 0, -1):
                        if self._text.endswith(self.end[:k]):
                            hold = k
                            break
                chunk = bytes(self._text[self._mark:stop - hold])
                if chunk:
                    self.monitor.advance_bytes(chunk)
                    fed += 1
                self._mark = stop - hold
                if at < 0:
                    return fed
                self._inside = False
                self._mark = at + len(delim)
            else:
                if at < 0:
                    self._mark = max(self._mark, len(self._text) - len(delim) + 1)
                    return fed
                self._inside = True
                self._mark = at + len(delim)

    def current_mask(self) -> np.ndarray:
        """The monitor's mask inside a region, else everything."""
        if self._inside and self._mark == len(self._text):
            return self.monitor.current_mask()
        return self.monitor._free_row()

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the current mask into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask())

    def advance(self, token_id: int) -> bool:
        """Consume ``token_id``; False (no change) if the monitor forbids it inside a region."""
        words = self.current_mask()
        if not 0 <= token_id < words.shape[0] * 32 or not (int(words[token_id >> 5]) >> (token_id & 31)) & 1:
            return False
        vocab = self.monitor.vocab
        if token_id in vocab.eos_ids:
            return False
        data = vocab.token_bytes[token_id] if token_id < len(vocab.token_bytes) else b""
        snapshot = (len(self._text), self._inside, self._mark)
        fed = self._feed(data)
        self._hist.append((snapshot, fed))
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix of ``tokens``; the state is not changed."""
        return validate_on_fork(self, tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens."""
        if n < 0 or n > len(self._hist):
            raise ValueError(f"cannot roll back {n} tokens, {len(self._hist)} were advanced")
        for _ in range(n):
            (size, inside, mark), fed = self._hist.pop()
            del self._text[size:]
            self._inside, self._mark = inside, mark
            self.monitor.rollback(fed)

    def is_accepting(self) -> bool:
        """Outside a region always; inside, when the monitor accepts."""
        return not self._inside or self.monitor.is_accepting()

    def is_terminated(self) -> bool:
        """Always False."""
        return False

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """Tokens forced from here (the monitor's, at a token boundary inside a region)."""
        if self._inside and self._mark == len(self._text):
            return self.monitor.forced_tokens(limit)
        return []

    def fork(self) -> "Gated":
        """An independent copy (the monitor forked)."""
        g = object.__new__(Gated)
        g.__dict__.update(self.__dict__)
        g.monitor = self.monitor.fork()
        g._text = bytearray(self._text)
        g._hist = list(self._hist)
        return g

    @property
    def inside(self) -> bool:
        """Whether the text so far ends inside a region."""
        return self._inside

    @property
    def segment_open(self) -> bool:
        """Whether the text ends inside a region and the monitor is masking a segment there."""
        return self._inside and self.monitor.segment_open

    @property
    def analysis_in_flight(self) -> bool:
        """Whether the monitor's analysis runs ahead (see :attr:`Monitor.analysis_in_flight`)."""
        return self.monitor.analysis_in_flight

    @property
    def stats(self) -> MonitorStats:
        """The monitor's stats."""
        return self.monitor.stats


def gated(monitor: Monitor, region: tuple[str, str] = ("```python\n", "```"), *, prefix: str = "") -> Gated:
    """``monitor`` on only inside ``region = (start, end)`` delimited text (see the module docstring)."""
    start, end = region
    return Gated(monitor, start, end, prefix)
