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
from typing import Sequence

from ..drafting import Draft
from ._common import DrafterBase, EosCheck, cut_at_stop, stop_ids, validate_cut
from .canonical import CanonicalSplitter, complete_utf8, encoder


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
        self.encode = encoder(tokenizer_or_encode)
        self.vocab = vocab
        self.backoff = int(backoff)
        self.max_bytes = int(max_bytes)
        self.stop = stop_ids(vocab)
        self.splitter = CanonicalSplitter(self.encode, vocab, tail_tokens=tail_tokens, resync=resync)
        self._eos = EosCheck(vocab)
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = int(cache_size)

    # -- history ---------------------------------------------------------------------------------
    def begin(self, prompt_ids: Sequence[int]) -> None:
        """Start over; only the prompt's last few tokens are kept."""
        self.splitter.begin(prompt_ids)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append accepted tokens (the tail is updated)."""
        self.splitter.extend(tokens)

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

    def canonical(self, forced: bytes, tail: Sequence[int] | None = None) -> list[int]:
        """Tokens spelling ``forced`` the way the tokenizer would split it after ``tail``
        (default: the last emitted tokens); ``[]`` when no canonical split can be found."""
        return self.splitter.split(forced, tail)

    def propose(self, constraint, max_tokens: int, *, prefix: Sequence[int] = ()) -> Draft:
        """The forced text's canonical tokens, less ``backoff``, cut where the constraint rejects."""
        self.calls += 1
        k = int(max_tokens)
        if constraint is None or k <= 0:
            return self._emit([])
        view, tail = constraint, self.splitter.tail
        if prefix:
            view = constraint.fork()
            for t in prefix:
                if not view.advance(int(t)):
                    return self._emit([])
            tail = self.splitter.push(list(tail), prefix)
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
