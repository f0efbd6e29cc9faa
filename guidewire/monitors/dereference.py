"""The dereference monitor: after ``expr.`` only attribute names that exist may follow.

Trigger: the buffer ends with ``.`` right after an identifier that does not start with a digit
(so not ``1.``) or after a closing bracket or quote, outside a comment and outside a string
opened on the same line (an f-string's replacement field is code: ``f"{self.`` triggers); a buffer that ends inside such an attribute name (``os.pa``) triggers
with that partial name. The back end lists the attributes at the dot; while active, a token is
allowed iff it extends the partial name towards a listed one, or completes a listed name and
continues with a break character (any byte that cannot be in an identifier), after which the
monitor is dormant again (a break of ``.`` re-triggers at once for chained access). EOS is
allowed while active only when the partial name is a listed name. Straddling tokens (a dot and
an identifier start inside one token) are excluded, see :mod:`.identindex`, except where the
dot is known to come next: a monitor made with ``dot_follows=True`` (the caller's token healing
re-spells a trailing ``.`` of the prompt, so the output starts with a dot) analyses the dot
after the buffer at once and also allows the tokens ``.`` + name head that begin a listed name
(``._`` when only private names start with ``_``), the spelling the model was trained on where
its vocabulary has such tokens.
"""

from __future__ import annotations

import re

import numpy as np

from .analysis import cursor
from .base import Monitor
from .identindex import IdentIndex, ident_head

_DORMANT = ("dormant",)
_TAIL = re.compile(rb"(?:([A-Za-z_0-9\x80-\xff]+)|[)\]}'\"])\.([A-Za-z_\x80-\xff][A-Za-z_0-9\x80-\xff]*)?\Z")


class _Names:
    """A legal-name set with identity hashing (cheap as part of a state key)."""

    __slots__ = ("names",)

    def __init__(self, names):
        self.names = tuple(sorted(set(names)))

    def __repr__(self) -> str:
        return f"<{len(self.names)} names>"


_PREFIX_LETTERS = b"rRbBuUfF"


def _string_prefix(line: bytes, quote_at: int) -> bytes:
    """The letters right before a quote at ``quote_at`` when they form a string prefix (``rf``...)."""
    j = quote_at
    while j > 0 and line[j - 1] in _PREFIX_LETTERS and quote_at - j < 2:
        j -= 1
    if j > 0 and (chr(line[j - 1]).isalnum() or line[j - 1] in b"_" or line[j - 1] >= 0x80):
        return b""  # the end of a longer name (``elif"`` is no prefix)
    return line[j:quote_at]


def _line_open(line: bytes) -> bool:
    """Whether the end of ``line`` is not code: inside a comment, or inside a string opened on
    that line (text or an f-string's format spec). An f-string's replacement field is code
    (``f"{os.`` ends in code), with its own brackets and nested strings of the other quotes."""
    stack: list = [("code",)]
    i = 0
    while i < len(line):
        top, c = stack[-1], line[i]
        kind = top[0]
        if kind == "str":
            quote, is_f = top[1], top[2]
            if c == 0x5C:  # backslash escapes the next byte
                i += 2
                continue
            if line.startswith(quote, i):
                stack.pop()
                i += len(quote)
                continue
            if is_f and c in (0x7B, 0x7D):  # { }
                if line[i + 1:i + 2] == bytes([c]):
                    i += 2  # {{ and }} are literal braces
                    continue
                if c == 0x7B:
                    stack.append(("field", 0))
            i += 1
            continue
        if kind == "spec":  # a format spec: text, where { opens a nested field and } ends the field
            if c == 0x7B:
                stack.append(("field", 0))
            elif c == 0x7D:
                stack.pop()
            i += 1
            continue
        # code: the line's own, or a replacement field's
        if c == 0x23:  # '#'
            return True
        if c in (0x22, 0x27):
            q = bytes([c])
            quote = q * 3 if line.startswith(q * 3, i) else q
            stack.append(("str", quote, b"f" in _string_prefix(line, i).lower()))
            i += len(quote)
            continue
        if kind == "field":
            depth = top[1]
            if c in b"([{":
                stack[-1] = ("field", depth + 1)
            elif c in b")]}" and depth > 0:
                stack[-1] = ("field", depth - 1)
            elif c == 0x7D:  # the field ends
                stack.pop()
            elif depth == 0 and (c == 0x3A or (c == 0x21 and line[i + 1:i + 2] != b"=")):
                stack[-1] = ("spec",)  # ':' format spec or '!' conversion: text up to the closing }
        i += 1
    return stack[-1][0] not in ("code", "field")


def dot_trigger(buf: bytes) -> tuple[int, bytes] | None:
    """``(dot offset, partial name)`` when ``buf`` ends at a dereference, else None."""
    m = _TAIL.search(buf[-256:])
    if m is None:
        return None
    ident = m.group(1)
    if ident is not None and ident[:1].isdigit():
        return None  # a number literal: 1. / 1e5.
    partial = m.group(2) or b""
    dot = len(buf) - len(partial) - 1
    line = buf[buf.rfind(b"\n", 0, dot) + 1:dot]
    if _line_open(line):
        return None
    return dot, partial


class DereferenceMonitor(Monitor):
    """Only attribute names that exist after ``expr.`` (see the module docstring).

    States: ``("dormant",)``; ``("pending", dot, partial)`` (the trigger fired, analysis not run
    yet); ``("active", names, partial)``; with ``dot_follows``, ``("predot", dot)`` (the buffer
    ends before a dot not written yet, analysis not run) and ``("dotted", names)`` (answered:
    dormant, plus the straddling tokens that begin a listed name); after a timeout
    ``("waiting", dot, partial)`` (dormant for this token) and, once a token extended the name,
    ``("late", dot, partial)``: the answer
    is looked for again (a poll of a few ms) and, if it has come and ``partial`` starts a listed
    name, the rest of the name is masked.
    """

    name = "dereference"

    def __init__(self, vocab, prefix, *, dot_follows: bool = False, **kw):
        self._index = IdentIndex.for_vocab(vocab)
        self.dot_follows = bool(dot_follows)
        super().__init__(vocab, prefix, **kw)

    def _initial_state(self, buf):
        hit = dot_trigger(buf)
        if hit is None and self.dot_follows and dot_trigger(buf + b".") is not None:
            return ("predot", len(buf))
        return _DORMANT if hit is None else ("pending", hit[0], hit[1])

    def _pending(self, state) -> bool:
        return state[0] in ("pending", "late", "predot")

    def _trigger_text(self, offset: int) -> bytes:
        return bytes(self._buf[:offset]) + b"."  # the dot itself may not be written yet (predot)

    def _dormant(self, state) -> bool:
        return state[0] != "active"

    def _in_segment(self, state) -> bool:
        return state[0] == "active"

    def _query_for(self, state, buf):
        dot = state[1]
        code = (buf[:dot] + b".").decode("utf-8", errors="replace")
        line, col = cursor(code)
        return "attributes", dot, self._query(dot, code, line, col)

    def _resolve(self, state, buf):
        if state[0] == "predot":
            names = self._analyse("attributes", state[1], self._query_for(state, buf)[2])
            # no answer (recorded as an abstention): plain dormant, the straddling tokens stay out
            return _DORMANT if names is None else ("dotted", _Names(n.encode("utf-8") for n in names))
        dot, partial = state[1], state[2]
        query = self._query_for(state, buf)[2]
        if state[0] == "late":
            names = self._late_answer("attributes", dot, query)
            if names is None:
                return ("waiting",) + state[1:]
        else:
            timeouts = self.stats.abstention_reasons().get("timeout", 0)
            names = self._analyse("attributes", dot, query)
            if names is None:
                if self.stats.abstention_reasons().get("timeout", 0) > timeouts:
                    return ("waiting", dot, partial)  # abstain now; mask if the answer comes in time
                return _DORMANT
        legal = _Names(n.encode("utf-8") for n in names)
        if not any(n.startswith(partial) for n in legal.names):
            self.stats.abstentions.append(_no_match(dot, partial))
            return _DORMANT  # the buffer already names something the analysis does not know
        return ("active", legal, partial)

    def _query(self, dot: int, code: str, line: int, col: int):
        return lambda d: self.backend.attributes(code + self.suffix, line, col, path=self.path, deadline_s=d)

    def _step(self, state, data, buf):
        if state[0] == "waiting" and ident_head(data) == len(data):
            return ("late", state[1], state[2] + data)  # still inside the name: look again
        if state[0] == "active":
            n = ident_head(data)
            if n == len(data):
                partial = state[2] + data
                if any(name.startswith(partial) for name in state[1].names):
                    return ("active", state[1], partial)
                return _DORMANT  # only unchecked text (advance_bytes) can leave the names
        hit = dot_trigger(buf)
        if hit is None or hit[0] < len(buf) - len(data):
            return _DORMANT  # no dot in this token: an abstained or finished name goes on unmasked
        return ("pending", hit[0], hit[1])

    def _row(self, state) -> np.ndarray:
        idx = self._index
        if state[0] == "dotted":
            return idx.free_row | idx.eos_row | idx.dot_mask(state[1].names)
        if state[0] != "active":
            return idx.free_row | idx.eos_row
        return idx.mask(state[1].names, state[2])

    def _accepting(self, state) -> bool:
        return state[0] != "active" or state[2] in state[1].names

    @property
    def legal_names(self) -> tuple[str, ...] | None:
        """The attribute names the current trigger allows (None while dormant)."""
        state = self._current()
        if state[0] != "active":
            return None
        return tuple(n.decode("utf-8", errors="replace") for n in state[1].names)


def _no_match(dot: int, partial: bytes):
    from .base import Abstention

    return Abstention("no-match", dot, f"no listed attribute starts with {partial.decode(errors='replace')!r}")
