"""Drafters for the speculative runtime (see :mod:`guidewire.runtime.drafting`).

* :class:`ForcedTextDrafter` (``"forced"``): the grammar's forced text, canonically tokenized.
* :class:`TextCopyDrafter` (``"copy"``): text after the longest earlier byte-level match, re-split
  canonically (copies values whose tokenization differs between the prompt and the output).
* :class:`PromptLookupDrafter` (``"lookup"``): n-gram prompt lookup.
* :class:`SuffixAutomatonDrafter` (``"sam"``): longest repeated suffix via a suffix automaton.
* :class:`DraftModelDrafter` (``"model"``): a small draft model sampling under the constraint.
* :class:`DrafterChain`: the first non-empty draft of several, continued piece by piece.

Every drafter counts ``calls``, ``proposed`` (and ``accepted``, which the verifier increments).
"""

from __future__ import annotations

from typing import Sequence

from ._common import DrafterBase
from .chain import DrafterChain
from .forced import ForcedTextDrafter
from .lookup import PromptLookupDrafter
from .copy import TextCopyDrafter
from .model import DraftModelDrafter
from .sam import SuffixAutomatonDrafter

DRAFTER_NAMES = ("forced", "copy", "lookup", "sam", "model")


def make_drafters(names: str | Sequence[str], *, tokenizer=None, vocab=None, draft_model=None,
                  sampling=None, max_draft: int = 8) -> list:
    """Build drafters from names like ``"forced,lookup,sam"`` (``"model"`` needs ``draft_model``).

    ``tokenizer`` is a Hugging Face tokenizer or an ``encode(str) -> list[int]`` callable (used by
    ``forced``, which without one proposes the grammar's forced tokens, and required by ``copy``);
    ``vocab`` is required by ``forced``, ``copy`` and ``model`` and lets ``lookup``/``sam`` skip EOS and special ids; ``sampling``
    is the draft model's :class:`~guidewire.runtime.sampling.SamplingParams`.

    Raises:
        ValueError: an unknown or repeated name, or a missing ``vocab``/``draft_model``.
    """
    if isinstance(names, str):
        names = [n for n in names.split(",")]
    names = [n.strip().lower() for n in names if n.strip()]
    out = []
    seen: set[str] = set()
    for n in names:
        if n not in DRAFTER_NAMES:
            raise ValueError(f"unknown drafter {n!r}; known drafters: {', '.join(DRAFTER_NAMES)}")
        if n in seen:
            raise ValueError(f"drafter {n!r} named twice")
        seen.add(n)
        if n in ("forced", "copy", "model") and vocab is None:
            raise ValueError(f"the {n!r} drafter needs vocab=")
        if n == "forced":
            out.append(ForcedTextDrafter(tokenizer, vocab))
        elif n == "copy":
            if tokenizer is None:
                raise ValueError("the 'copy' drafter needs tokenizer=")
            out.append(TextCopyDrafter(tokenizer, vocab))
        elif n == "lookup":
            out.append(PromptLookupDrafter(max_draft=max_draft, vocab=vocab))
        elif n == "sam":
            out.append(SuffixAutomatonDrafter(max_draft=max_draft, vocab=vocab))
        else:
            if draft_model is None:
                raise ValueError("the 'model' drafter needs draft_model= (a Model or LoadedModel)")
            model = draft_model.sequence() if hasattr(draft_model, "sequence") else draft_model
            out.append(DraftModelDrafter(model, vocab, sampling))
    return out


def make_drafter(names: str | Sequence[str], **kwargs):
    """One drafter from names like ``"forced,lookup,sam"``: the drafter itself for a single name,
    else a :class:`DrafterChain` of them (same keyword arguments as :func:`make_drafters`)."""
    drafters = make_drafters(names, **kwargs)
    if not drafters:
        raise ValueError("no drafter named")
    return drafters[0] if len(drafters) == 1 else DrafterChain(drafters)


__all__ = ["DrafterBase", "DrafterChain", "ForcedTextDrafter", "PromptLookupDrafter",
           "SuffixAutomatonDrafter", "DraftModelDrafter", "TextCopyDrafter", "make_drafters", "make_drafter",
           "DRAFTER_NAMES"]
