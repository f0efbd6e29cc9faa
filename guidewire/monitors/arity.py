"""The call-arity monitor: inside ``f(...)`` the number of arguments must fit ``f``'s signature.

Trigger: the buffer ends with ``NAME(`` (``NAME`` not a keyword, not after ``def``/``class``),
outside a comment and a string opened on that line. The back end gives the signature of the call
at that point (jedi's ``get_signatures``; none, or overloads with different parameter lists ->
abstain). While the call is open the rule of :mod:`.argscan` holds; the ``)`` that closes the call
makes the monitor dormant again. Nested calls are part of the outer call's argument text (one
call is monitored at a time). EOS is always allowed: the monitor limits argument counts, not where
a completion may stop.
"""

from __future__ import annotations

import keyword
import re

import numpy as np

from .analysis import cursor
from .argscan import DONE, REJECT, START, ArgMasks, ArgSpec, run, signature_of
from .base import Monitor
from .dereference import _line_open

_DORMANT = ("dormant",)
_CALL = re.compile(rb"(?:^|[^A-Za-z0-9_\x80-\xff])((?:def|class)\s+)?([A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*)\(\Z")


def call_trigger(buf: bytes) -> int | None:
    """Offset of the ``(`` when ``buf`` ends by opening a call ``NAME(``, else None."""
    m = _CALL.search(buf[-256:])
    if m is None or m.group(1) or keyword.iskeyword(m.group(2).decode("utf-8", errors="replace")):
        return None
    paren = len(buf) - 1
    if _line_open(buf[buf.rfind(b"\n", 0, paren) + 1:paren]):
        return None
    return paren


class ArityMonitor(Monitor):
    """At most as many arguments as the called signature takes (see the module docstring)."""

    name = "arity"

    def __init__(self, vocab, prefix, **kw):
        self._masks = ArgMasks.for_vocab(vocab)
        super().__init__(vocab, prefix, **kw)

    def _initial_state(self, buf):
        paren = call_trigger(buf)
        return _DORMANT if paren is None else ("pending", paren)

    def _pending(self, state) -> bool:
        return state[0] == "pending"

    def _dormant(self, state) -> bool:
        return state[0] != "active"

    def _query_for(self, state, buf):
        paren = state[1]
        code = buf[:paren + 1].decode("utf-8", errors="replace")
        line, col = cursor(code)
        return "signature", paren, lambda d: self.backend.signature(
            code + self.suffix, line, col, path=self.path, deadline_s=d)

    def _resolve(self, state, buf):
        sig = self._analyse(*self._query_for(state, buf))
        if sig is None:
            return _DORMANT
        return ("active", ArgSpec.from_signature(sig), START, sig)

    def _step(self, state, data, buf):
        if state[0] == "active":
            res = run(state[1], state[2], signature_of(data))
            if res is REJECT:  # only unchecked text (advance_bytes) can break the rule
                return _DORMANT
            if not (res and res[0] == DONE):
                return ("active", state[1], res, state[3])
        paren = call_trigger(buf)
        if paren is None or paren < len(buf) - len(data):
            return _DORMANT
        return ("pending", paren)

    def _row(self, state) -> np.ndarray:
        if state[0] != "active":
            return self._masks.free_row
        return self._masks.row(state[1], state[2])

    @property
    def signature(self):
        """The :class:`~.analysis.Signature` of the call being monitored (None while dormant)."""
        state = self._current()
        return state[3] if state[0] == "active" else None
