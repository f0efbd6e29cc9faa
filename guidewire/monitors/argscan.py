"""A scanner of Python call-argument lists over byte classes, and the arity rule it enforces.

Bytes are mapped to classes (identifier runs, spaces, newlines, the brackets, quotes, ``\\``,
``#``, ``=``, ``*``, ``:``, ``,``, anything else); runs of spaces, newlines and other bytes are
collapsed (each transition is idempotent on them) and an identifier run is kept verbatim only when
it could be part of the keyword ``lambda``. A token is then a short *signature*; SmolLM2's 49k
tokens have a few hundred distinct signatures, so a mask is a Python loop over signatures, not
over the vocabulary (see :class:`ArgMasks`).

The arity rule, for a call whose signature has ``P`` parameters that can be passed by position,
``K`` keyword-only ones, ``R`` required ones (``Rp`` positional-only, ``Rk`` keyword-only among
them) and maybe ``*args`` / ``**kwargs``; counting the arguments at the call's own bracket depth
(outside strings, comments, nested brackets and ``lambda`` parameter lists), ``npos``
positional (anything not ``NAME=value``) and ``nkw`` keyword arguments:

* an argument may begin only while another one fits: ``*args`` or ``**kwargs`` exists, or
  ``npos + nkw < P + K``; an empty argument (``f(,`` / ``f(a,,``) never;
* an argument is finished (by ``,`` or ``)``) only if ``npos <= P`` (or ``*args``) and
  ``min(npos, P) + nkw <= P + K`` (or ``**kwargs``);
* the call closes (``)``) only if ``min(npos, P) >= Rp``, ``nkw >= Rk`` and
  ``min(npos, P) + nkw >= R``;
* a starred argument (``*x`` / ``**x``) makes the count unknown: no limit until the call closes.

Every condition is necessary for a call that binds (keyword names are not matched against the
parameters), so a correct call is never rejected; calls with too many arguments, or closed before
the required ones, are. A ``]`` or ``}`` at the call's depth (a syntax error) is rejected too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.bitmask import ids_to_bitmask
from ..core.vocab import Vocab
from .analysis import Signature
from .identindex import is_ident_byte

REJECT = "reject"
DONE = "done"
_LAMBDA = b"lambda"
_SPACE = frozenset(b" \t\f")
_NEWLINE = frozenset(b"\r\n")
_PUNCT = {ord(c): c for c in ",()[]{}'\"\\#=*:"}


def signature_of(data: bytes) -> tuple:
    """The class signature of ``data`` (see the module docstring)."""
    out: list = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if is_ident_byte(c):
            j = i
            while j < n and is_ident_byte(data[j]):
                j += 1
            run = data[i:j]
            out.append(run if run in _LAMBDA else "A")
            i = j
            continue
        k = _PUNCT.get(c)
        if k is None:
            k = " " if c in _SPACE else "\n" if c in _NEWLINE else "o"
            if out and out[-1] == k:
                i += 1
                continue
        out.append(k)
        i += 1
    return tuple(out)


@dataclass(frozen=True)
class ArgSpec:
    """The counts the arity rule needs from a signature (see the module docstring)."""

    P: int
    K: int
    R: int
    Rp: int
    Rk: int
    var_pos: bool
    var_kw: bool

    @classmethod
    def from_signature(cls, sig: Signature) -> "ArgSpec":
        """Counts of ``sig``'s parameters by kind."""
        kinds = [p.kind for p in sig.params]
        P = sum(k in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD") for k in kinds)
        K = kinds.count("KEYWORD_ONLY")
        req = [p for p in sig.params if not p.has_default and p.kind not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
        return cls(P, K, len(req), sum(p.kind == "POSITIONAL_ONLY" for p in req),
                   sum(p.kind == "KEYWORD_ONLY" for p in req),
                   "VAR_POSITIONAL" in kinds, "VAR_KEYWORD" in kinds)

    def can_start(self, npos: int, nkw: int) -> bool:
        """Whether another argument may begin."""
        return self.var_pos or self.var_kw or npos + nkw < self.P + self.K

    def fits(self, npos: int, nkw: int) -> bool:
        """Whether the arguments so far can bind (upper bounds)."""
        return (self.var_pos or npos <= self.P) and (self.var_kw or min(npos, self.P) + nkw <= self.P + self.K)

    def covered(self, npos: int, nkw: int) -> bool:
        """Whether the required parameters can all be bound (lower bounds)."""
        p = min(npos, self.P)
        return p >= self.Rp and nkw >= self.Rk and p + nkw >= self.R

    def cap(self, n: int) -> int:
        """Counts above ``P + K + 1`` behave alike: the cap keeps state keys finite."""
        return min(n, self.P + self.K + 1)


# state: (mode, quote, esc, nq, depth, phase, lam, inlam, npos, nkw, free)
#   mode: "c" code, "#" comment, "s" string, "e" empty string just closed, "t" triple-quoted string
#   nq: in "s" 1 while the string is still empty; in "t" the run of closing quotes seen
#   phase (at depth 0): "e" empty argument, "n" one name so far, "ns" name then space,
#   "eq" name then "=", "k" keyword argument, "o" positional expression
#   lam: b"" outside an identifier, a prefix of b"lambda" inside one, None inside any other one
START = ("c", "", False, 0, 0, "e", b"", False, 0, 0, False)


def _finish(spec: ArgSpec, st: tuple, phase: str):
    npos, nkw, free = st[8], st[9], st[10]
    if phase == "k":
        nkw = spec.cap(nkw + 1)
    else:
        npos = spec.cap(npos + 1)
    if not free and not spec.fits(npos, nkw):
        return None
    return npos, nkw


def step(spec: ArgSpec, st: tuple, c):
    """The state after class ``c`` (a class char or an identifier run), or REJECT, or DONE."""
    mode, q, esc, nq, depth, phase, lam, inlam, npos, nkw, free = st
    if mode == "s":
        if esc:
            return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
        if c == "\\":
            return (mode, q, True, 0, depth, phase, lam, inlam, npos, nkw, free)
        if c == q:
            return ("e" if nq == 1 else "c", q, False, 0, depth, phase, b"", inlam, npos, nkw, free)
        return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
    if mode == "t":
        if esc:
            return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
        if c == "\\":
            return (mode, q, True, 0, depth, phase, lam, inlam, npos, nkw, free)
        if c == q:
            return ("c" if nq == 2 else "t", q, False, nq + 1, depth, phase, b"", inlam, npos, nkw, free)
        return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
    if mode == "#":
        if c == "\n":
            return ("c", "", False, 0, depth, phase, b"", inlam, npos, nkw, free)
        return st
    if mode == "e":
        if c == q:
            return ("t", q, False, 0, depth, phase, b"", inlam, npos, nkw, free)
        mode = "c"
    # code
    ident = not isinstance(c, str) or c == "A"
    if ident:
        if lam is not None:
            lam = lam + c if isinstance(c, bytes) and _LAMBDA.startswith(lam + c) else None
    else:
        if lam == _LAMBDA and depth == 0:
            inlam = True
        lam = b""
    if c in (" ", "\n", "\\"):
        return (mode, q, False, 0, depth, "ns" if phase == "n" else phase, lam, inlam, npos, nkw, free)
    if c == "#":
        return ("#", q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
    if depth > 0:
        if c in ("(", "[", "{"):
            depth += 1
        elif c in (")", "]", "}"):
            depth -= 1
        elif c in ("'", '"'):
            return ("s", c, False, 1, depth, phase, lam, inlam, npos, nkw, free)
        return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
    if phase == "eq":
        if c == "=":
            return (mode, q, False, 0, depth, "o", lam, inlam, npos, nkw, free)  # ==
        phase = "k"
    if c == ":" and inlam:
        return (mode, q, False, 0, depth, phase, lam, False, npos, nkw, free)
    if c == ",":
        if inlam:
            return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)
        if phase == "e":
            return st if free else REJECT
        counts = _finish(spec, st, phase)
        if counts is None:
            return REJECT
        return (mode, q, False, 0, 0, "e", b"", False, counts[0], counts[1], free)
    if c == ")":
        if free:
            return DONE
        if inlam:
            return REJECT  # f(lambda x) is not Python
        if phase != "e":
            counts = _finish(spec, st, phase)
            if counts is None:
                return REJECT
            npos, nkw = counts
        return DONE if spec.covered(npos, nkw) else REJECT
    if c in ("]", "}"):
        return st if free else REJECT
    if phase == "e":
        if c == "*":
            return (mode, q, False, 0, depth, "o", lam, inlam, npos, nkw, True)
        if not free and not spec.can_start(npos, nkw):
            return REJECT
        phase = "n" if ident else "o"
    elif phase in ("n", "ns"):
        if c == "=":
            return (mode, q, False, 0, depth, "eq", lam, inlam, npos, nkw, free)
        if not (ident and phase == "n"):
            phase = "o"
    if c in ("(", "[", "{"):
        depth += 1
    elif c in ("'", '"'):
        return ("s", c, False, 1, depth, phase, lam, inlam, npos, nkw, free)
    return (mode, q, False, 0, depth, phase, lam, inlam, npos, nkw, free)


def run(spec: ArgSpec, st: tuple, sig: tuple):
    """Scan a whole signature: the end state, REJECT, or ``(DONE, classes consumed)``."""
    for i, c in enumerate(sig):
        st = step(spec, st, c)
        if st is REJECT:
            return REJECT
        if st is DONE:
            return (DONE, i + 1)
    return st


class ArgMasks:
    """Per-vocabulary signatures of every ordinary token, and masks per (spec, state), LRU-bounded."""

    def __init__(self, vocab: Vocab, max_entries: int = 512):
        self.vocab = vocab
        groups: dict[tuple, list[int]] = {}
        for i in vocab.normal_ids.tolist():  # once per vocabulary
            groups.setdefault(signature_of(vocab.token_bytes[i]), []).append(i)
        self.sigs = list(groups)
        self.ids = [np.asarray(groups[s], dtype=np.int64) for s in self.sigs]
        self.eos_row = ids_to_bitmask(sorted(vocab.eos_ids), vocab.vocab_size)
        self.free_row = ids_to_bitmask(vocab.normal_ids, vocab.vocab_size) | self.eos_row
        self._rows: dict = {}
        self.max_entries = max_entries

    @classmethod
    def for_vocab(cls, vocab: Vocab) -> "ArgMasks":
        """The masks of ``vocab`` (built once, kept in the vocabulary's cache)."""
        m = vocab._cache.get("monitor_arg_masks")
        if m is None:
            m = vocab._cache["monitor_arg_masks"] = cls(vocab)
        return m

    def row(self, spec: ArgSpec, st: tuple) -> np.ndarray:
        """Packed row: every token whose scan from ``st`` is not rejected, plus EOS."""
        key = (spec, st)
        row = self._rows.pop(key, None)
        if row is None:
            keep = [ids for sig, ids in zip(self.sigs, self.ids) if run(spec, st, sig) is not REJECT]
            row = ids_to_bitmask(np.concatenate(keep) if keep else np.zeros(0, np.int64),
                                 self.vocab.vocab_size) | self.eos_row
            while len(self._rows) >= self.max_entries:
                self._rows.pop(next(iter(self._rows)))
        self._rows[key] = row
        return row
