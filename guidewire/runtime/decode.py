"""The constrained decoding loop: mask -> sample -> advance, with forced-token fast-forward.

Each step the constraint fills its row of an int32 bitmask, :func:`~.masking.apply_bitmask_`
sets disallowed logits to ``-inf``, the :class:`~.sampling.Sampler` picks a token and the
constraint advances. EOS (every stop id of the vocabulary) is allowed by the mask only when the
constraint accepts, so a sampled EOS always ends a complete output. When the constraint allows exactly
one token it is emitted without a model call (it has probability 1 under any sampler, so this is
lossless); longer grammar-forced text is drafted and verified by the speculative runtime instead
(:mod:`~.speculative`), never forced with a tokenization the model might not choose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from ..core.bitmask import allocate_token_bitmask, ids_to_bitmask
from .errors import ConstraintViolationError, DeadEndError
from .masking import apply_bitmask_, only_tokens_allowed, single_allowed_token
from .model import BatchModel, Model
from .sampling import Sampler, SamplingParams
from .streaming import TextDeltaDecoder, decode_text


@dataclass
class Usage:
    """Token and work counts of one generation.

    ``completion_tokens`` counts emitted tokens (EOS excluded), ``forced_tokens`` those the
    constraint forced (fed without sampling), ``model_calls`` forward passes including prefill.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    forced_tokens: int = 0
    model_calls: int = 0


@dataclass
class GenerationResult:
    """Outcome of one generation.

    Attributes:
        text: decoded output (EOS excluded; invalid UTF-8 replaced).
        token_ids: emitted token ids (EOS excluded).
        finish_reason: ``"stop"`` (EOS sampled or the constraint terminated) or ``"length"``.
        complete: whether the constraint accepts the output (always True without a constraint).
        usage: :class:`Usage` counts.
        speculation: a :class:`~.speculative.SpeculationStats` when decoded speculatively.
    """

    text: str
    token_ids: list[int]
    finish_reason: str
    complete: bool
    usage: Usage = field(default_factory=Usage)
    speculation: object | None = None


def _sampler(sampling) -> Sampler:
    if isinstance(sampling, Sampler):
        return sampling
    return Sampler(sampling if sampling is not None else SamplingParams())


def _eos_row(vocab) -> np.ndarray:
    row = vocab._cache.get("runtime_eos_row")
    if row is None:
        row = vocab._cache["runtime_eos_row"] = ids_to_bitmask(sorted(vocab.eos_ids), vocab.vocab_size)
    return row


def _eos_tensor(vocab) -> torch.Tensor:
    t = vocab._cache.get("runtime_eos_tensor")
    if t is None:
        t = vocab._cache["runtime_eos_tensor"] = torch.tensor(sorted(vocab.eos_ids), dtype=torch.long)
    return t


def iter_decode(model: Model, prompt_ids: Sequence[int], constraint=None, *, vocab,
                max_tokens: int = 256, sampling=None, use_forced: bool = True,
                ignore_eos: bool = False, segment_search=None) -> Iterator[list[int]]:
    """Generator form of :func:`decode`: yields each chunk of newly emitted token ids and returns
    the :class:`GenerationResult` (as ``StopIteration.value``).

    ``model`` is prefilled with ``prompt_ids``, unless it already holds a proper head of them
    (then only the rest is run). ``ignore_eos`` (only without a constraint) never samples EOS, so
    exactly ``max_tokens`` tokens are produced. ``segment_search(model, constraint, logits)``
    (e.g. :class:`guidewire.search.segment.SegmentSearch`) may choose several tokens at once
    from the masked ``logits`` (it must leave ``model`` as it found it and only return tokens
    the constraint allows); an empty answer falls back to the sampler. A constraint whose
    ``analysis_in_flight`` is true gets its mask asked for after the model call, so the analysis
    and the model run at the same time.
    """
    if not prompt_ids:
        raise ValueError("the prompt needs at least one token")
    if ignore_eos and constraint is not None:
        raise ValueError("ignore_eos is only meaningful without a constraint")
    sampler = _sampler(sampling)
    eos_ids = vocab.eos_ids
    eos_row = _eos_row(vocab)
    bitmask = torch.from_numpy(allocate_token_bitmask(1, vocab.vocab_size))
    bm_np = bitmask.numpy()
    usage = Usage(prompt_tokens=len(prompt_ids))
    out: list[int] = []
    pending: list[int] = list(prompt_ids)
    prefilled = False
    finish = "length"
    calls0 = getattr(model, "calls", None)
    own_calls = 0

    held = getattr(model, "length", 0) or 0
    if 0 < held < len(prompt_ids) and list(getattr(model, "tokens", ())) == [int(t) for t in prompt_ids[:held]]:
        pending, prefilled = list(prompt_ids[held:]), True  # the model already holds the prompt's head

    def forward():
        nonlocal prefilled, own_calls, pending
        if prefilled:
            lg = model.step(pending, last_only=True)
        else:
            lg = model.prefill(pending, last_only=True)
            prefilled = True
        own_calls += 1
        pending = []
        return lg[-1:].clone() if lg.shape[0] != 1 else lg

    while True:
        if len(out) >= max_tokens:
            break
        logits = None
        if constraint is not None:
            if getattr(constraint, "analysis_in_flight", False):
                logits = forward()  # the constraint's analysis runs meanwhile; its mask comes after
            action, only = constrained_shortcut(constraint, bm_np, eos_row, force=use_forced)
            if action == "stop":
                finish = "stop"
                break
            if action == "forced":
                out.append(only)
                pending.append(only)
                usage.forced_tokens += 1
                yield [only]
                continue
        if logits is None:
            logits = forward()
        if constraint is not None:
            apply_bitmask_(logits, bitmask)
        elif ignore_eos:
            eos_t = _eos_tensor(vocab)
            logits[0, eos_t[eos_t < logits.shape[1]]] = float("-inf")
        if segment_search is not None and constraint is not None:
            chosen = segment_search(model, constraint, logits[0])
            if chosen:
                chosen = [int(t) for t in chosen[:max_tokens - len(out)]]
                for t in chosen:
                    if not constraint.advance(t):
                        raise ConstraintViolationError(f"constraint refused token {t} that its mask allowed")
                out.extend(chosen)
                pending.extend(chosen)
                yield chosen
                continue
        tok = int(sampler.sample(logits)[0])
        if tok in eos_ids:
            finish = "stop"
            break
        if constraint is not None and not constraint.advance(tok):
            raise ConstraintViolationError(f"constraint refused token {tok} that its mask allowed")
        out.append(tok)
        pending.append(tok)
        yield [tok]

    usage.completion_tokens = len(out)
    usage.model_calls = (model.calls - calls0) if calls0 is not None else own_calls
    complete = True if constraint is None else bool(constraint.is_accepting())
    return GenerationResult(decode_text(vocab, out), out, finish, complete, usage)


def constrained_shortcut(constraint, bm_np: np.ndarray, eos_row: np.ndarray, *,
                         force: bool = True) -> tuple[str, int | None]:
    """The lossless shortcuts before a model call, with the constraint's mask left in ``bm_np[0]``.

    Returns ``("stop", None)`` when generation ends here (the constraint terminated, or allows
    nothing but EOS), ``("forced", token)`` when exactly one token is allowed (the constraint has
    advanced over it; only with ``force``), else ``("sample", None)``. Raises
    :class:`DeadEndError` when nothing at all is allowed.
    """
    if constraint.is_terminated():
        if not constraint.is_accepting():
            raise DeadEndError(_dead_end_message(constraint))
        return "stop", None
    constraint.fill_bitmask(bm_np, 0)
    row = bm_np[0]
    if only_tokens_allowed(row, eos_row):
        return "stop", None  # nothing but EOS can follow: no model call needed
    if not row.any():
        raise DeadEndError(_dead_end_message(constraint))
    if force:
        only = single_allowed_token(row)
        if only is not None:
            if not constraint.advance(only):
                raise ConstraintViolationError(f"constraint refused its only allowed token {only}")
            return "forced", only
    return "sample", None


def _dead_end_message(constraint) -> str:
    err = getattr(constraint, "error", None)
    return "the constraint allows no token" + (f": {err}" if err else " (its language is exhausted)")


def decode(model: Model, prompt_ids: Sequence[int], constraint=None, *, vocab, max_tokens: int = 256,
           sampling=None, use_forced: bool = True, ignore_eos: bool = False,
           on_tokens: Callable[[list[int]], None] | None = None) -> GenerationResult:
    """Decode up to ``max_tokens`` tokens after ``prompt_ids`` under ``constraint`` (or none).

    ``sampling`` is a :class:`SamplingParams` or a :class:`Sampler`; ``on_tokens`` is called
    with every chunk of emitted ids. Returns a :class:`GenerationResult`; ``finish_reason ==
    "length"`` with ``complete == False`` means the output was cut inside the language.
    """
    gen = iter_decode(model, prompt_ids, constraint, vocab=vocab, max_tokens=max_tokens,
                      sampling=sampling, use_forced=use_forced, ignore_eos=ignore_eos)
    while True:
        try:
            chunk = next(gen)
        except StopIteration as stop:
            return stop.value
        if on_tokens is not None:
            on_tokens(chunk)


class TextStream:
    """An iterator of text deltas over a running generation; ``result`` is set once exhausted.

    Multi-byte UTF-8 characters split across tokens are emitted whole.
    """

    def __init__(self, steps: Iterator[list[int]], vocab, finalize: Callable | None = None):
        self._steps = steps
        self._dec = TextDeltaDecoder(vocab)
        self._finalize = finalize
        self._done = False
        self.result: GenerationResult | None = None

    def __iter__(self) -> "TextStream":
        return self

    def __next__(self) -> str:
        while not self._done:
            try:
                chunk = next(self._steps)
            except StopIteration as stop:
                self._done = True
                self.result = stop.value
            else:
                delta = self._dec.feed(chunk)
                if delta:
                    return delta
                continue
            # outside the ``except`` block: an error raised by ``finalize`` (e.g. IncompleteOutputError)
            # reaches the caller alone, not chained to the generator's StopIteration
            tail = self._dec.flush()
            if self._finalize is not None:
                self._finalize(self.result)
            if tail:
                return tail
        raise StopIteration

    def text(self) -> str:
        """Consume the rest of the stream and return the whole output text."""
        for _ in self:
            pass
        return self.result.text


def stream_decode(model: Model, prompt_ids: Sequence[int], constraint=None, *, vocab,
                  max_tokens: int = 256, sampling=None, use_forced: bool = True,
                  finalize: Callable | None = None) -> TextStream:
    """Like :func:`decode` but returns a :class:`TextStream` of text deltas.

    ``finalize(result)`` runs when the stream ends (and may raise, e.g. on incomplete output).
    """
    gen = iter_decode(model, prompt_ids, constraint, vocab=vocab, max_tokens=max_tokens,
                      sampling=sampling, use_forced=use_forced)
    return TextStream(gen, vocab, finalize)


def decode_batch(model: BatchModel, prompts: Sequence[Sequence[int]], constraints=None, *, vocab,
                 max_tokens: int = 256, sampling=None) -> list[GenerationResult]:
    """Decode a batch in lockstep, each row with its own constraint (or ``None``).

    Every row takes one token per step (forced tokens are sampled through the mask like any
    other, since the batch needs a model call per step anyway). Finished rows keep feeding
    their last token, whose outputs are ignored.
    """
    n = len(prompts)
    constraints = list(constraints) if constraints is not None else [None] * n
    if len(constraints) != n:
        raise ValueError(f"{n} prompts but {len(constraints)} constraints")
    sampler = _sampler(sampling)
    eos_ids = vocab.eos_ids
    eos_row = _eos_row(vocab)
    bitmask = torch.from_numpy(allocate_token_bitmask(n, vocab.vocab_size))
    bm_np = bitmask.numpy()
    outs: list[list[int]] = [[] for _ in range(n)]
    finish = ["length"] * n
    active = [True] * n
    calls = 0
    logits = None
    last = [p[-1] for p in prompts]

    def _close(i: int, reason: str) -> None:
        active[i] = False
        finish[i] = reason

    while True:
        for i in range(n):
            if not active[i]:
                continue
            if len(outs[i]) >= max_tokens:
                _close(i, "length")
                continue
            c = constraints[i]
            if c is not None:
                if c.is_terminated():
                    if not c.is_accepting():
                        raise DeadEndError(f"row {i}: " + _dead_end_message(c))
                    _close(i, "stop")
                    continue
                c.fill_bitmask(bm_np, i)
                if only_tokens_allowed(bm_np[i], eos_row):
                    _close(i, "stop")
                    continue
                if not bm_np[i].any():
                    raise DeadEndError(f"row {i}: " + _dead_end_message(c))
            else:
                bm_np[i] = -1
        if not any(active):
            break
        if logits is None:
            logits = model.prefill(prompts)
        else:
            logits = model.step(last)
        calls += 1
        rows = [i for i in range(n) if active[i]]  # finished rows' logits are ignored, never sampled
        live = logits[rows]  # a copy
        apply_bitmask_(live, bitmask[rows])
        toks = dict(zip(rows, sampler.sample(live).tolist()))
        for i in rows:
            t = int(toks[i])
            if t in eos_ids:
                _close(i, "stop")
                continue
            c = constraints[i]
            if c is not None and not c.advance(t):
                raise ConstraintViolationError(f"row {i}: constraint refused token {t} that its mask allowed")
            outs[i].append(t)
            last[i] = t

    results = []
    for i in range(n):
        c = constraints[i]
        usage = Usage(prompt_tokens=len(prompts[i]), completion_tokens=len(outs[i]), model_calls=calls)
        results.append(GenerationResult(decode_text(vocab, outs[i]), outs[i], finish[i],
                                        True if c is None else bool(c.is_accepting()), usage))
    return results
