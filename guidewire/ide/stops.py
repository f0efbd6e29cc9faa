"""Where a code completion stops: stop strings, or the default rules for code.

Default rules (``stop=None``), checked on the text generated so far:

* the cursor is inside a line whose rest (the suffix's first line) is not blank: the middle is
  that line's missing part, so it ends at the first newline;
* otherwise at the first blank line (a newline followed by a whitespace-only line);
* or at the first line that starts less indented than the cursor's line (the block being written
  has ended: a dedent).

With explicit ``stop`` strings the output ends before the earliest occurrence of any of them
(OpenAI semantics), and the default rules are off (``stop=[]``: no stop strings at all).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..runtime.streaming import held_stop_prefix

_BLANK_LINE = re.compile(r"\n[ \t\f\r]*\n")
_LINE_START = re.compile(r"\n([ \t]*)(?=[^ \t\r\n\f])")


def _indent_width(ws: str) -> int:
    return len(ws.expandtabs(8))


class CodeStops:
    """The stop rules of one completion (see the module docstring)."""

    def __init__(self, prefix: str, suffix: str = "", stop: Sequence[str] | None = None):
        if stop is not None:
            if isinstance(stop, str):
                stop = [stop]
            if not all(isinstance(s, str) for s in stop):
                raise TypeError("stop must be a string or a list of strings")
        self.stops = None if stop is None else tuple(s for s in stop if s)
        last_line = prefix[prefix.rfind("\n") + 1:]
        ws = last_line[:len(last_line) - len(last_line.lstrip(" \t"))]
        self.cursor_indent = _indent_width(ws)
        self.in_line = bool(suffix.split("\n", 1)[0].strip())

    def cuts(self, text: str) -> list[int]:
        """Every position where a stop rule fires in ``text`` (the completion so far), ascending."""
        out: set[int] = set()
        if self.stops is not None:
            for s in self.stops:
                i = text.find(s)
                while i >= 0:
                    out.add(i)
                    i = text.find(s, i + 1)
            return sorted(out)
        if self.in_line:
            return [i for i, ch in enumerate(text) if ch == "\n"]
        out.update(m.start() for m in _BLANK_LINE.finditer(text))
        out.update(m.start() for m in _LINE_START.finditer(text) if _indent_width(m.group(1)) < self.cursor_indent)
        return sorted(out)

    def settled(self, text: str) -> int:
        """How much of ``text`` no later text can cut (what a stream may emit now)."""
        if self.stops is not None:
            return len(text) - held_stop_prefix(text, self.stops)
        # the rules cut only at a newline, decided by the first non-blank character after it
        nl = text.rfind("\n")
        if nl >= 0 and not text[nl + 1:].strip(" \t\r\f"):
            return nl
        return len(text)

    def cut(self, text: str) -> int | None:
        """Where to cut ``text`` (the earliest stop), or ``None`` to go on."""
        c = self.cuts(text)
        return c[0] if c else None
