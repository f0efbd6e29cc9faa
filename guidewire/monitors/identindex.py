"""Token masks for "continue a legal identifier": a per-vocabulary index from identifier heads to ids.

Every ordinary token is split once into its *head* (the leading run of identifier bytes:
``[A-Za-z0-9_]`` and bytes >= 0x80) and whether a *break* byte (any other byte) follows it. With a
partial identifier ``p`` typed so far and the legal names ``S``, a token is allowed iff

* it has no break and ``p + head`` is a prefix of some name in ``S`` (it extends the identifier), or
* it has a break and ``p + head`` is exactly a name in ``S`` (it completes one and breaks out).

So the mask is the union of the index entries for every prefix of every remaining suffix: a loop
over the legal names' characters, never over the vocabulary. Tokens that contain a dot followed by
an identifier start (``.append``, ``x.y``) are *straddling* tokens: they would open a dereference in
the middle of a token, where no monitor can mask, so monitors that guard dereferences exclude them
in every state (the same text is still reachable as ``.`` then the name).
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from ..core.bitmask import ids_to_bitmask
from ..core.vocab import Vocab

_IDENT_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") | \
    frozenset(range(0x80, 0x100))
_STRADDLE = re.compile(rb"\.[A-Za-z_\x80-\xff]")
_EMPTY = np.zeros(0, dtype=np.int64)


def is_ident_byte(b: int) -> bool:
    """Whether byte ``b`` can be part of a Python identifier (ASCII word bytes or any non-ASCII byte)."""
    return b in _IDENT_BYTES


def ident_head(data: bytes) -> int:
    """Length of the leading run of identifier bytes of ``data``."""
    n = 0
    for b in data:
        if b not in _IDENT_BYTES:
            break
        n += 1
    return n


class IdentIndex:
    """The per-vocabulary index behind identifier masks (build with :meth:`for_vocab`, cached).

    Attributes:
        cont: head bytes -> ids of break-free, non-straddling tokens with that head (non-empty heads).
        brk: head bytes -> ids of non-straddling tokens whose head is followed by a break byte.
        free_row: packed row of every non-straddling ordinary token (no EOS).
        break_row: packed row of ``brk[b""]`` (tokens that start with a break byte).
        straddling: number of straddling tokens excluded.
        dot_cont, dot_brk: the same tables for the straddling tokens that *start* with the dot
            (``.append``, ``._``), keyed by the head after the dot (tokens with a second
            straddle left out): what may follow an expression when the dot's analysis is known.
    """

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        cont: dict[bytes, list[int]] = {}
        brk: dict[bytes, list[int]] = {}
        dot_cont: dict[bytes, list[int]] = {}
        dot_brk: dict[bytes, list[int]] = {}
        free: list[int] = []
        straddling = 0
        tb = vocab.token_bytes
        for i in vocab.normal_ids.tolist():  # once per vocabulary, not per step
            b = tb[i]
            if _STRADDLE.search(b):
                straddling += 1
                if _STRADDLE.match(b) and not _STRADDLE.search(b, 1):
                    rest = b[1:]
                    n = ident_head(rest)
                    (dot_cont if n == len(rest) else dot_brk).setdefault(rest[:n], []).append(i)
                continue
            free.append(i)
            n = ident_head(b)
            if n == len(b):
                cont.setdefault(b, []).append(i)
            else:
                brk.setdefault(b[:n], []).append(i)
        self.cont = {k: np.asarray(v, dtype=np.int64) for k, v in cont.items()}
        self.brk = {k: np.asarray(v, dtype=np.int64) for k, v in brk.items()}
        self.dot_cont = {k: np.asarray(v, dtype=np.int64) for k, v in dot_cont.items()}
        self.dot_brk = {k: np.asarray(v, dtype=np.int64) for k, v in dot_brk.items()}
        self.max_head = max((len(k) for d in (self.cont, self.dot_cont) for k in d), default=0)
        self.free_row = ids_to_bitmask(free, vocab.vocab_size)
        self.break_row = ids_to_bitmask(self.brk.get(b"", _EMPTY), vocab.vocab_size)
        self.eos_row = ids_to_bitmask(sorted(vocab.eos_ids), vocab.vocab_size)
        self.straddling = straddling

    @classmethod
    def for_vocab(cls, vocab: Vocab) -> "IdentIndex":
        """The index of ``vocab`` (built once, kept in the vocabulary's cache)."""
        idx = vocab._cache.get("monitor_ident_index")
        if idx is None:
            idx = vocab._cache["monitor_ident_index"] = cls(vocab)
        return idx

    def memory_bytes(self) -> int:
        """Approximate size of the index's arrays and keys."""
        n = sum(a.nbytes + len(k) + 64 for d in (self.cont, self.brk, self.dot_cont, self.dot_brk)
                for k, a in d.items())
        return n + self.free_row.nbytes * 3

    def mask(self, names: Iterable[bytes], partial: bytes) -> np.ndarray:
        """Packed int32 row: tokens that extend ``partial`` towards a name in ``names`` or complete
        one and break; EOS bits set iff ``partial`` itself is a name."""
        ids, complete = self._ids(self.cont, self.brk, [s[len(partial):] for s in names if s.startswith(partial)])
        row = ids_to_bitmask(ids, self.vocab.vocab_size)
        if complete:
            row = row | self.break_row | self.eos_row
        return row

    def dot_mask(self, names: Iterable[bytes]) -> np.ndarray:
        """Packed int32 row of the straddling tokens ``.`` + head that begin a dereference
        towards a name in ``names`` (head a prefix of one, or one followed by a break)."""
        ids, _ = self._ids(self.dot_cont, self.dot_brk, list(names))
        return ids_to_bitmask(ids, self.vocab.vocab_size)

    def _ids(self, cont: dict, brk: dict, rems: list[bytes]) -> tuple[np.ndarray, bool]:
        """Ids of ``cont`` tokens whose head is a non-empty prefix of a remainder in ``rems`` and
        of ``brk`` tokens whose head is one; and whether some remainder is empty."""
        prefixes: set[bytes] = set()
        parts = []
        complete = False
        for r in rems:
            if not r:
                complete = True
                continue
            for k in range(1, min(len(r), self.max_head) + 1):
                prefixes.add(r[:k])
            ids = brk.get(r)
            if ids is not None:
                parts.append(ids)
        parts.extend(cont[p] for p in prefixes if p in cont)
        return (np.concatenate(parts) if parts else _EMPTY), complete
