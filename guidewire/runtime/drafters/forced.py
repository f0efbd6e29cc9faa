"""Grammar fast-forward as a draft: the text the constraint forces, tokenized the model's way.

Where the grammar leaves exactly one way to go (``{"name":"`` at the start of a JSON object with a
required first property), the target model can only accept that text -- but in whichever token
split it finds natural. Proposing the *canonical* split (the one its tokenizer produces) makes the
draft likely to be accepted whole:

1. ``constraint.forced_bytes()`` gives the forced text; a trailing incomplete UTF-8 character is
   trimmed (the model picks the rest).
2. The bytes of the last few emitted tokens (the *tail*, at most ``tail_tokens``, never across a
   special token) are prepended and the text is encoded. The encoding is kept only if it
   re-produces the tail tokens as its prefix and spells exactly tail + forced bytes; otherwise the
   tail is shortened (its first token may be cut mid-character or split differently). If even a
   one-token tail is merged with the forced text by the tokenizer, the split crosses the
   boundary: with ``resync`` the draft spells the bytes up to the encoding's first token
   boundary after the tail on their own and continues with the canonical tokens from there,
   otherwise nothing is proposed.
3. The last ``backoff`` tokens are dropped -- the boundary token may merge with the text the model
   chooses next -- unless the forced text ends where the grammar allows nothing but EOS.
4. The draft is cut at the first token the constraint rejects (``validate``).

Without a tokenizer (``None``), or for a constraint with no ``forced_bytes``, the draft is
``constraint.forced_tokens()`` less the last ``backoff`` tokens (same exception).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Sequence

from ..drafting import Draft
from ._common import DrafterBase, EosCheck, cut_at_stop, stop_ids, validate_cut


def complete_utf8(data: bytes) -> bytes:
    """The longest prefix of ``data`` that is valid UTF-8 (an incomplete last character is cut)."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError as exc:
        return data[:exc.start]


def _encoder(tokenizer_or_encode) -> Callable[[str], list[int]] | None:
    """An ``encode(str) -> list[int]`` from a HF tokenizer, a callable or ``None``."""
    obj = tokenizer_or_encode
    if obj is None:
        return None
    if hasattr(obj, "encode") and hasattr(obj, "convert_ids_to_tokens"):  # a HF tokenizer
        return lambda text: list(obj.encode(text, add_special_tokens=False))
    if callable(obj):
        return lambda text: [int(t) for t in obj(text)]
    if hasattr(obj, "encode"):
        return lambda text: [int(t) for t in obj.encode(text)]
    raise TypeError(f"expected a tokenizer or an encode(str) -> list[int] callable, got {type(obj).__name__}")


class ForcedTextDrafter(DrafterBase):
    """Proposes the constraint's forced text in the tokenizer's canonical split.

    Args:
        tokenizer_or_encode: a Hugging Face tokenizer (``encode(text, add_special_tokens=False)``
            is used), a callable ``encode(str) -> list[int]``, or ``None`` (forced tokens only).
        vocab: the :class:`~guidewire.core.Vocab` of the model (token bytes, EOS ids).
        backoff: forced tokens withheld at the end of a draft (see the module docstring).
        tail_tokens: emitted tokens re-encoded with the forced text to find the boundary split.
        resync: on a boundary-crossing split, still propose the text after the crossing.
        max_bytes: cap on the forced text looked at per call (``forced_bytes`` costs per byte).
    """

    name = "forced"
    supports_prefix = True

    def __init__(self, tokenizer_or_encode, vocab, backoff: int = 1, *, tail_tokens: int = 3,
                 resync: bool = True, max_bytes: int = 256, cache_size: int = 4096):
        super().__init__()
        if backoff < 0 or tail_tokens < 0:
            raise ValueError("backoff and tail_tokens must be >= 0")
        self.encode = _encoder(tokenizer_or_encode)
        self.vocab = vocab
        self.backoff = int(backoff)
        self.tail_tokens = int(tail_tokens)
        self.resync = bool(resync)
        self.max_bytes = int(max_bytes)
        self.stop = stop_ids(vocab)
        self._eos = EosCheck(vocab)
        self._tail: list[int] = []
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = int(cache_size)

    # -- history -------------------------------------------------------------------------------
    def _push_tail(self, tail: list[int], tokens: Sequence[int]) -> list[int]:
        tb, stop = self.vocab.token_bytes, self.stop
        for t in tokens:
            t = int(t)
            if t in stop or t < 0 or t >= len(tb) or not tb[t]:
                tail = []
            else:
                tail.append(t)
        return tail[-self.tail_tokens:] if self.tail_tokens else []

    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start over; only the prompt's last few tokens are kept."""
        self._tail = self._push_tail([], list(prompt_ids)[-max(self.tail_tokens, 1) * 4:])

    def extend(self, tokens: Sequence[int]) -> None:
        """Append accepted tokens (the tail is updated)."""
        self._tail = self._push_tail(self._tail, tokens)

    # -- forced text ---------------------------------------------------------------------------
    def _forced_bytes(self, constraint, limit: int) -> bytes:
        key = None
        grammar, state = getattr(constraint, "grammar", None), getattr(constraint, "state", None)
        if grammar is not None and state is not None and getattr(constraint, "error", None) is None:
            key = (grammar, state, limit)  # forced text is a function of the matcher state
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        try:
            data = constraint.forced_bytes(limit)
        except TypeError:
            data = constraint.forced_bytes()[:limit]
        if key is not None:
            self._cache[key] = data
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return data

    def _spell(self, tokens: Sequence[int]) -> bytes:
        tb = self.vocab.token_bytes
        return b"".join(tb[t] if 0 <= t < len(tb) else b"\0\0\0" for t in tokens)

    def _encode_bytes(self, data: bytes) -> list[int] | None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        enc = self.encode(text)
        return enc if self._spell(enc) == data else None

    def canonical(self, forced: bytes, tail: Sequence[int] | None = None) -> list[int]:
        """Tokens spelling ``forced`` the way the tokenizer would split it after ``tail``
        (default: the last emitted tokens); ``[]`` when no canonical split can be found."""
        if not forced:
            return []
        tail = list(self._tail if tail is None else tail)
        for k in range(len(tail), 0, -1):
            head = tail[-k:]
            hb = self._spell(head)
            enc = self._encode_bytes(hb + forced)
            if enc is not None and enc[:k] == head:
                return enc[k:]
        if not tail:
            return self._encode_bytes(forced) or []
        if not self.resync:
            return []
        hb = self._spell(tail[-1:])
        enc = self._encode_bytes(hb + forced)
        if enc is None:
            return []
        tb, full = self.vocab.token_bytes, hb + forced
        pos = j = 0
        while j < len(enc) and pos < len(hb):  # first token boundary at or after the tail's end
            pos += len(tb[enc[j]])
            j += 1
        gap = full[len(hb):pos]
        gap_tokens = self._encode_bytes(gap) if gap else []
        return [] if gap_tokens is None else gap_tokens + enc[j:]

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """The forced text's canonical tokens, less ``backoff``, cut where the constraint rejects."""
        self.calls += 1
        k = int(max_tokens)
        if constraint is None or k <= 0:
            return self._emit([])
        view, tail = constraint, self._tail
        if prefix:
            view = constraint.fork()
            for t in prefix:
                if not view.advance(int(t)):
                    return self._emit([])
            tail = self._push_tail(list(tail), prefix)
        if view.is_terminated():
            return self._emit([])
        if self.encode is not None and hasattr(view, "forced_bytes"):
            limit = min(self.max_bytes, 16 * (k + self.backoff) + 16)
            raw = self._forced_bytes(view, limit)
            forced = complete_utf8(raw)
            tokens = self.canonical(forced, tail)
            maybe_final = forced == raw and len(raw) < limit
        else:
            tokens = list(view.forced_tokens())
            maybe_final = True
        tokens = cut_at_stop(tokens, self.stop)
        if not tokens:
            return self._emit([])
        keep = len(tokens)
        if self.backoff and not (maybe_final and self._ends_grammar(view, tokens)):
            keep -= self.backoff
        tokens = validate_cut(view, tokens[:max(0, min(keep, k))])
        return self._emit(tokens)

    def _ends_grammar(self, constraint, tokens: list[int]) -> bool:
        """Whether after ``tokens`` the constraint allows nothing but EOS."""
        c = constraint.fork()
        for t in tokens:
            if not c.advance(t):
                return False
        return c.is_accepting() and self._eos.only_eos(c)
