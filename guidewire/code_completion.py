"""The code-completion front door: :func:`complete_code`, fill-in-the-middle with monitors.

The prompt is the model's FIM format when its vocabulary has one (StarCoder, Qwen2.5-Coder,
CodeLlama, DeepSeek-Coder), else the prefix-only fallback (:mod:`guidewire.ide.fim`). The
constraint is the AND (:func:`guidewire.monitors.intersect`) of the requested monitors (names
resolved by ``guidewire.monitors.create_monitor``, factories, or ready constraint objects) and,
when ``grammar=`` describes the whole document, the suffix gate (:mod:`guidewire.ide.gate`).
Decoding stops at EOS or a FIM end token, at the stop rules (:mod:`guidewire.ide.stops`; with a
grammar only at a cut where the suffix fits), at ``max_tokens``, when ``cancel`` is set, or when
``time_limit_s`` has passed; those last two are checked between decode steps.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

from ._checks import check_generation_args
from .monitors.compose import intersect
from .ide.fim import InfillError, build_fim_prompt
from .ide.gate import SuffixGate
from .ide.healing import TokenHealing, healable_tail
from .ide.stops import CodeStops
from .runtime.decode import iter_decode
from .runtime.registry import get_grammar, get_model
from .runtime.sampling import SamplingParams

FINISH_REASONS = ("stop", "length", "cancelled", "time_limit")


@dataclass
class CompletionStats:
    """What one completion did.

    ``triggers``/``abstentions``/``analysis_s`` sum the monitors' stats (``monitors`` has each one's,
    by name; ``wait_s`` is the part of the analysis time decoding waited for: analyses start at
    their trigger and run while the model does); ``ttft_s`` is the time to the first new token (prompt prefill included), ``decode_s``
    the rest; ``suffix_fits`` whether ``prefix + text + suffix`` is in ``grammar``'s language
    (``None`` without a grammar); ``healed`` the prompt's last token when token healing re-spelled it
    (:mod:`guidewire.ide.healing`); ``segment_search`` the searches made, model calls they
    spent and how often they changed the greedy choice (empty when off).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    fim_format: str = ""
    truncated_context: bool = False
    triggers: int = 0
    abstentions: int = 0
    analysis_s: float = 0.0
    wait_s: float = 0.0
    monitors: dict = field(default_factory=dict)
    ttft_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    suffix_fits: bool | None = None
    healed: str = ""
    segment_search: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class CodeCompletion:
    """The middle text to insert at the cursor, why it ended (one of :data:`FINISH_REASONS`) and
    its :class:`CompletionStats`."""

    text: str
    finish_reason: str
    stats: CompletionStats


def _monitor_stats(m) -> dict:
    st = getattr(m, "stats", None)
    if st is None:
        return {}
    get = st.get if isinstance(st, dict) else (lambda k, d=None: getattr(st, k, d))
    abstentions, analysis = get("abstentions", 0) or 0, get("analysis_s", 0.0) or 0.0
    wait = get("wait_s", analysis) or 0.0
    # guidewire.monitors' MonitorStats keeps one entry per abstention / analysis; other monitors may count
    return {"triggers": int(get("triggers", 0) or 0),
            "abstentions": len(abstentions) if isinstance(abstentions, (list, tuple)) else int(abstentions),
            "analysis_s": float(sum(analysis)) if isinstance(analysis, (list, tuple)) else float(analysis),
            "wait_s": float(sum(wait)) if isinstance(wait, (list, tuple)) else float(wait),
            "analysis_each_s": [float(x) for x in analysis] if isinstance(analysis, (list, tuple)) else [],
            "wait_each_s": [float(x) for x in wait] if isinstance(wait, (list, tuple)) else []}


def resolve_monitors(monitors: Sequence, *, vocab, prefix: str, suffix: str, path, project_root,
                     deadline_s: float, dot_follows: bool = False, backend="jedi") -> list[tuple[str, object]]:
    """``(name, constraint)`` for each entry of ``monitors``: a name (``guidewire.monitors.create_monitor``,
    also given ``dot_follows`` and the analysis ``backend``), a factory called with the same keywords
    (but those two), or a constraint object used as is."""
    if isinstance(monitors, str):
        monitors = (monitors,)
    out = []
    for i, spec in enumerate(monitors or ()):
        kw = dict(vocab=vocab, prefix=prefix, suffix=suffix, path=path, project_root=project_root,
                  deadline_s=deadline_s)
        if isinstance(spec, str):
            from .monitors import create_monitor

            out.append((spec, create_monitor(spec, dot_follows=dot_follows, backend=backend, **kw)))
        elif hasattr(spec, "fill_bitmask") and hasattr(spec, "advance"):
            out.append((getattr(spec, "name", None) or f"{type(spec).__name__}#{i}", spec))
        elif callable(spec):
            m = spec(**kw)
            out.append((getattr(m, "name", None) or getattr(spec, "__name__", None) or f"monitor#{i}", m))
        else:
            raise TypeError(f"monitors[{i}] must be a monitor name, a factory or a constraint, got {spec!r}")
    return out


def _grammar(grammar, vocab):
    if grammar is None:
        return None
    if hasattr(grammar, "matcher") and hasattr(grammar, "step_bytes"):
        if grammar.vocab.content_hash != vocab.content_hash:
            raise InfillError("grammar= was compiled for another vocabulary than the model's")
        return grammar
    if isinstance(grammar, str):
        return get_grammar("lark", grammar, vocab)
    raise TypeError(f"grammar must be a compiled grammar, Lark grammar text or a built-in name, got {grammar!r}")


def _check_args(prefix, suffix, max_tokens, temperature, time_limit_s, max_prompt_tokens):
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a string, got {type(prefix).__name__}")
    if not isinstance(suffix, str):
        raise TypeError(f"suffix must be a string, got {type(suffix).__name__}")
    check_generation_args(max_tokens=max_tokens, temperature=temperature)
    if time_limit_s is not None and not (isinstance(time_limit_s, (int, float)) and time_limit_s > 0):
        raise ValueError(f"time_limit_s must be a number > 0 or None, got {time_limit_s!r}")
    if max_prompt_tokens is not None and (not isinstance(max_prompt_tokens, int) or max_prompt_tokens < 8):
        raise ValueError(f"max_prompt_tokens must be an integer >= 8 or None, got {max_prompt_tokens!r}")


def complete_code(prefix: str, *, suffix: str = "", path: str | None = None, project_root: str | None = None,
                  monitors: Sequence = ("dereference",), model=None, max_tokens: int = 64,
                  temperature: float = 0.0, stop: Sequence[str] | None = None, grammar=None,
                  extra: Sequence = (), seed: int | None = None, monitor_deadline_s: float = 0.5,
                  max_prompt_tokens: int | None = None, fallback: str = "prefix", token_healing: bool = True,
                  time_limit_s: float | None = None, cancel=None, segment_search: bool | None = None,
                  monitor_backend="jedi") -> CodeCompletion:
    """Complete the code between ``prefix`` and ``suffix`` (the text before and after the cursor).

    ``path``/``project_root`` say where the buffer lives (monitors resolve imports from there; the
    buffer given is what is analysed). ``monitors``: names, factories or constraint objects, ANDed;
    named monitors analyse with ``monitor_backend`` (``"jedi"`` in-process, ``"jedi-process"``,
    ``"lsp"`` or a back-end object; see :func:`guidewire.monitors.make_backend`).
    ``grammar``: a compiled grammar, Lark text or built-in name for the *whole document*; the
    middle then keeps ``prefix + middle`` viable and may only end where ``suffix`` can follow.
    ``stop``: stop strings (``None``: the code rules of :mod:`guidewire.ide.stops`). ``extra``:
    other files as ``{"filename", "text"}``. ``max_prompt_tokens``: prompt budget (default: the
    model's window less ``max_tokens``). ``fallback``: prompt of models without FIM tokens
    (``"prefix"`` or ``"suffix_comment"``; ``token_healing`` re-spells their last prompt token, see
    :mod:`guidewire.ide.healing`). ``cancel`` (anything with ``is_set()``) and
    ``time_limit_s`` end decoding early, between steps, with what was generated so far.
    ``segment_search`` (default: on at temperature 0 with monitors): when a monitor starts
    masking a name, choose the most probable whole legal name (a best-first search over the
    monitor's names, :mod:`guidewire.search.segment`) instead of greedy token by token.
    """
    _check_args(prefix, suffix, max_tokens, temperature, time_limit_s, max_prompt_tokens)
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    lm = get_model(model)
    t0 = time.monotonic()   # timings leave out a first call's model load
    vocab = lm.vocab
    budget = max_prompt_tokens
    if lm.max_context is not None:
        room = lm.max_context - max_tokens
        budget = room if budget is None else min(budget, room)
    prompt = build_fim_prompt(lm.tokenizer, prefix, suffix, extra=extra, path=path, budget=budget,
                              fallback=fallback)
    heal = b""
    if token_healing and prompt.format.startswith("fallback") and prompt.prefix_tokens:
        heal = healable_tail(vocab, prompt.ids, prefix)
    # the constraints see the buffer without the healed tail: the output re-spells it first
    seen = prefix[:len(prefix) - len(heal.decode("utf-8"))] if heal else prefix
    gate = None
    if grammar is not None:
        compiled = _grammar(grammar, vocab)
        gate = SuffixGate(compiled, prefix, suffix)     # checks the whole prefix (line, column on error)
        if heal:
            gate = SuffixGate(compiled, seen, suffix)
    named = resolve_monitors(monitors, vocab=vocab, prefix=seen, suffix=suffix, path=path,
                             project_root=project_root, deadline_s=monitor_deadline_s,
                             dot_follows=heal.startswith(b"."), backend=monitor_backend)
    parts = ([TokenHealing(vocab, heal)] if heal else []) + ([gate] if gate is not None else []) \
        + [m for _, m in named]
    constraint = None if not parts else parts[0] if len(parts) == 1 else intersect(*parts)
    stops = CodeStops(prefix, suffix, stop)
    stats = CompletionStats(prompt_tokens=len(prompt.ids) - bool(heal), fim_format=prompt.format,
                            truncated_context=prompt.truncated, healed=heal.decode("utf-8"))
    sampling = SamplingParams(temperature=float(temperature), seed=seed)
    if segment_search is None:
        segment_search = bool(named) and float(temperature) == 0.0
    searcher = None
    if segment_search and constraint is not None:
        from .search.segment import SegmentSearch

        searcher = SegmentSearch(vocab)
    steps = iter_decode(lm.sequence(), prompt.ids[:-1] if heal else prompt.ids, constraint, vocab=vocab,
                        max_tokens=max_tokens, sampling=sampling, segment_search=searcher)
    tb, healed = vocab.token_bytes, heal.decode("utf-8")
    raw, text, finish, n_out, t_first = b"", "", "length", 0, None
    try:
        while True:
            try:
                chunk = next(steps)
            except StopIteration as end:
                finish = end.value.finish_reason
                break
            if t_first is None:
                t_first = time.monotonic()
            hit = next((k for k, t in enumerate(chunk) if t in prompt.stop_ids), None)
            chunk = chunk if hit is None else chunk[:hit]
            n_out += len(chunk)
            raw += b"".join(tb[t] for t in chunk if t < len(tb))
            text = raw[len(heal):].decode("utf-8", "replace") if len(raw) >= len(heal) else ""
            if hit is not None:
                finish = "stop"
                break
            cut = next((c for c in stops.cuts(text) if gate is None or gate.accepts(healed + text[:c])), None)
            if cut is not None:
                text, finish = text[:cut], "stop"
                break
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
                break
            if deadline is not None and time.monotonic() > deadline:
                finish = "time_limit"
                break
    finally:
        steps.close()
    t_end = time.monotonic()
    stats.completion_tokens = n_out
    stats.ttft_s = (t_first or t_end) - t0
    stats.decode_s = t_end - (t_first or t_end)
    stats.total_s = t_end - t0
    for name, m in named:
        ms = _monitor_stats(m)
        stats.monitors[name] = ms
        stats.triggers += ms.get("triggers", 0)
        stats.abstentions += ms.get("abstentions", 0)
        stats.analysis_s += ms.get("analysis_s", 0.0)
        stats.wait_s += ms.get("wait_s", 0.0)
    if searcher is not None:
        stats.segment_search = searcher.stats()
    if gate is not None:
        stats.suffix_fits = gate.accepts(healed + text)
    return CodeCompletion(text, finish, stats)
