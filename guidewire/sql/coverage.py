"""Does a schema-aware grammar accept the gold queries of its database?

A query is walked through the compiled grammar either as token ids (``encode``: a tokenizer's
encode function; each id is fed to a fresh matcher, and the end must be accepting) or, without
a tokenizer, as raw bytes through the grammar's lexer and parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass
class CoverageReport:
    """Accepted and rejected queries (rejections with the offset where the walk stopped)."""

    accepted: int = 0
    rejected: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Queries walked."""
        return self.accepted + len(self.rejected)

    @property
    def share(self) -> float:
        """Accepted share (0..1); 0.0 when nothing was walked."""
        return self.accepted / self.total if self.total else 0.0


def walk_query(compiled, query: str, encode: Callable[[str], Sequence[int]] | None = None) -> int:
    """``-1`` if ``compiled`` accepts ``query`` completely, else the (token or byte) offset where it stops."""
    if encode is not None:
        m = compiled.matcher()
        ids = list(encode(query))
        for i, t in enumerate(ids):
            if not m.advance(t):
                return i
        return -1 if m.is_accepting() else len(ids)
    data = query.encode("utf-8")
    s, q = compiled.matcher().state
    for i in range(len(data)):
        nxt = compiled.step_bytes(s, q, data[i:i + 1])
        if nxt is None:
            return i
        s, q = nxt
    return -1 if compiled.can_end(s, q) else len(data)


def gold_coverage(compiled, queries: Sequence[str], encode=None) -> CoverageReport:
    """Walk every query of ``queries`` through ``compiled`` (see :func:`walk_query`)."""
    report = CoverageReport()
    for query in queries:
        where = walk_query(compiled, query, encode)
        if where < 0:
            report.accepted += 1
        else:
            report.rejected.append((query, where))
    return report
