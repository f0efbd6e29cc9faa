"""llama.cpp-compatible ``POST /infill``: fill-in-the-middle for editors (llama.vim, llama.vscode, ...).

Request fields (llama.cpp's names): ``input_prefix``, ``input_suffix``, ``input_extra``
(``[{"filename", "text"}]``, other files as context), ``prompt`` (text typed on the cursor's line,
appended to the prefix), ``n_predict`` (-1: the server default), ``temperature``, ``top_k``,
``top_p``, ``min_p``, ``seed`` (-1: random), ``stop``, ``stream``, ``t_max_predict_ms`` (latency
budget); other llama.cpp fields (``cache_prompt``, ``samplers``, ``n_indent`` ...) are accepted and
ignored. Extensions: ``monitors`` (names for ``guidewire.monitors.create_monitor``, default none),
``path`` and ``project_root`` (where the buffer lives, for the monitors), ``guided_grammar`` (Lark
text or a built-in name for the *whole document*: the middle keeps the prefix viable and ends only
where the suffix fits, see :mod:`guidewire.ide.gate`; the reply's ``suffix_fits`` says whether it did).

The prompt is the model's FIM format, or the prefix-only fallback with token healing
(:mod:`guidewire.ide`). Without ``stop`` the code stop rules of :mod:`guidewire.ide.stops` apply.
Stops are applied here, on the text deltas (the job is cancelled at a stop), so they work with
monitors too. The reply is llama.cpp's: ``content``, ``stop``, ``stop_type`` (``eos``, ``limit``,
``word``, ``cancelled`` or ``time_limit``), ``stopping_word``, ``tokens_predicted``,
``tokens_evaluated``, ``truncated``, ``timings``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Callable

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..code_completion import resolve_monitors
from ..monitors.compose import intersect
from ..ide.endtokens import EndTokens
from ..ide.fim import InfillError, build_fim_prompt
from ..ide.healing import TokenHealing, healable_tail
from ..ide.stops import CodeStops
from ..runtime.sampling import SamplingParams
from .chat import _TOKENIZER_LOCK
from ..ide.gate import SuffixGate
from ..runtime.registry import get_grammar
from .errors import APIError, constraint_error
from .plans import Plan, _get, _number

MAX_MONITORS = 8


@dataclass
class InfillState:
    """What the reply needs besides the plan: stop rules, the healed tail, prompt facts."""

    stops: CodeStops
    heal: str
    fim_format: str
    truncated: bool
    time_limit: float | None
    requested_stop: tuple[str, ...] | None
    fits: Callable[[str], bool] | None = None     # with guided_grammar: does the suffix fit after this middle

    def first_cut(self, visible: str) -> int | None:
        """The earliest stop in ``visible`` (with a grammar: the earliest where the suffix fits)."""
        for c in self.stops.cuts(visible):
            if self.fits is None or self.fits(self.heal + visible[:c]):
                return c
        return None


def _text_field(body: dict, key: str) -> str:
    return _get(body, key, str, "") or ""


def _extra(body: dict) -> list[dict]:
    extra = body.get("input_extra")
    if extra is None:
        return []
    if not isinstance(extra, list):
        raise APIError("input_extra must be a list of {filename, text} objects", param="input_extra")
    out = []
    for i, item in enumerate(extra):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) \
                or not isinstance(item.get("filename", ""), str):
            raise APIError(f"input_extra[{i}] must be {{'filename': str, 'text': str}}", param=f"input_extra[{i}]")
        out.append({"filename": item.get("filename", ""), "text": item["text"]})
    return out


def _stops(body: dict) -> tuple[str, ...] | None:
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 16:
        raise APIError("stop must be a string or a list of at most 16 strings", param="stop")
    return tuple(stop)


def _monitor_names(body: dict) -> list[str]:
    names = body.get("monitors")
    if names is None:
        return []
    if not isinstance(names, list) or len(names) > MAX_MONITORS or \
            not all(isinstance(n, str) and n for n in names):
        raise APIError(f"monitors must be a list of at most {MAX_MONITORS} monitor names", param="monitors")
    return names


def _sampling(body: dict) -> SamplingParams:
    temperature = _number(body, "temperature", 0.8, 0.0, 2.0)
    top_k = _number(body, "top_k", 40, 0, 2**31 - 1, integer=True)
    top_p = _number(body, "top_p", 0.95, 0.0, 1.0)
    min_p = _number(body, "min_p", 0.05, 0.0, 1.0)
    seed = _number(body, "seed", -1, -1, 2**63 - 1, integer=True)
    if top_p == 0:
        top_p, temperature = 1.0, 0.0
    return SamplingParams(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), min_p=float(min_p),
                          seed=None if seed == -1 else seed)


def infill_plan(body: dict, lm, *, default_max: int = 128) -> Plan:
    """Validate an ``/infill`` body (400 :class:`APIError` naming the field) and build its plan."""
    prefix = _text_field(body, "input_prefix") + _text_field(body, "prompt")
    suffix = _text_field(body, "input_suffix")
    extra = _extra(body)
    n_predict = _number(body, "n_predict", -1, -1, 2**31 - 1, integer=True)
    if n_predict == 0:
        raise APIError("n_predict must be -1 (server default) or >= 1", param="n_predict")
    max_tokens = default_max if n_predict == -1 else n_predict
    budget_ms = _number(body, "t_max_predict_ms", None, 1, 10**9)
    stop = _stops(body)
    names = _monitor_names(body)
    path = _get(body, "path", str, None)
    root = _get(body, "project_root", str, None)
    stream = bool(_get(body, "stream", bool, False))
    sampling = _sampling(body)
    tok, vocab = lm.tokenizer, lm.vocab
    room = None
    if lm.max_context is not None:
        max_tokens = min(max_tokens, max(1, lm.max_context // 2))
        room = lm.max_context - max_tokens
    try:
        fp = build_fim_prompt(tok, prefix, suffix, extra=extra, path=path, budget=room,
                              lock=_TOKENIZER_LOCK)
    except InfillError as exc:
        raise APIError(str(exc), param="input_prefix") from None
    if not fp.ids:
        raise APIError("input_prefix, input_suffix and input_extra are all empty", param="input_prefix")
    heal = b""
    if fp.format.startswith("fallback") and fp.prefix_tokens:
        heal = healable_tail(vocab, fp.ids, prefix)
    seen = prefix[:len(prefix) - len(heal.decode("utf-8"))] if heal else prefix
    ends = fp.stop_ids - vocab.eos_ids
    grammar = _document_grammar(body, vocab, prefix, suffix)

    def make_constraint():
        parts = [TokenHealing(vocab, heal)] if heal else []
        if grammar is not None:
            parts.append(SuffixGate(grammar, seen, suffix))
        parts += [m for _, m in resolve_monitors(names, vocab=vocab, prefix=seen, suffix=suffix, path=path,
                                                 project_root=root, deadline_s=0.5,
                                                 dot_follows=heal.startswith(b"."))]
        if ends:
            parts.append(EndTokens(vocab.vocab_size, ends))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else intersect(*parts)

    ids = fp.ids[:-1] if heal else fp.ids
    plan = Plan(ids, max_tokens, [sampling], (), make_constraint, "monitors" if names else "guided_grammar")
    plan.stream = stream
    plan.extra["infill"] = InfillState(CodeStops(prefix, suffix, stop), heal.decode("utf-8"), fp.format,
                                       fp.truncated, None if budget_ms is None else budget_ms / 1000.0, stop,
                                       None if grammar is None else SuffixGate(grammar, seen, suffix).accepts)
    return plan


def _document_grammar(body: dict, vocab, prefix: str, suffix: str):
    """``guided_grammar`` (Lark text or a built-in name) of the whole document, compiled, with the
    prefix checked against it; ``None`` when not given."""
    spec = body.get("guided_grammar")
    if spec is None:
        return None
    if not isinstance(spec, str) or not spec:
        raise APIError("guided_grammar must be a non-empty string (Lark grammar text or a built-in name)",
                       param="guided_grammar")
    try:
        grammar = get_grammar("lark", spec, vocab)
    except Exception as exc:  # noqa: BLE001 - typed by constraint_error
        raise constraint_error(exc, "guided_grammar") from None
    try:
        SuffixGate(grammar, prefix, suffix)
    except InfillError as exc:
        raise APIError(str(exc), param="input_prefix", code="prefix_outside_grammar") from None
    return grammar


class _Reply:
    """The content so far, the stop decision and the timings of one /infill request."""

    def __init__(self, plan: Plan, model: str, t0: float):
        self.state: InfillState = plan.extra["infill"]
        self.plan, self.model, self.t0 = plan, model, t0
        self.raw = ""
        self.pieces = 0
        self.sent = 0
        self.t_first: float | None = None
        self.stop_type: str | None = None
        self.stopping_word = ""
        self.usage: dict | None = None

    @property
    def visible(self) -> str:
        h = len(self.state.heal)
        return self.raw[h:] if len(self.raw) >= h else ""

    def feed(self, text: str) -> None:
        """Take a delta; decides a stop (``stop_type == "word"``) when a stop rule fires."""
        if self.t_first is None:
            self.t_first = time.monotonic()
        self.raw += text
        self.pieces += 1
        cut = self.state.first_cut(self.visible)
        if cut is not None:
            v = self.visible
            if self.state.requested_stop:
                self.stopping_word = next((s for s in self.state.requested_stop if v.startswith(s, cut)), "")
            self.raw = self.raw[:len(self.state.heal) + cut]
            self.stop_type = "word"

    def settled(self) -> str:
        """New content safe to stream now."""
        v = self.visible
        upto = len(v) if self.stop_type is not None else self.state.stops.settled(v)
        out = v[self.sent:upto] if upto > self.sent else ""
        self.sent = max(self.sent, upto)
        return out

    def body(self, *, final: bool, content: str) -> dict:
        """A llama.cpp reply object (``final``: with stop facts and timings)."""
        out = {"content": content, "stop": final, "model": self.model}
        if not final:
            return out
        now = time.monotonic()
        first = self.t_first or now
        n = self.usage["completion_tokens"] if self.usage else self.pieces
        prompt_n = len(self.plan.prompt_ids)
        prompt_ms, predicted_ms = (first - self.t0) * 1e3, (now - first) * 1e3
        out.update({
            "stop_type": self.stop_type or "limit", "stopping_word": self.stopping_word,
            "tokens_predicted": n, "tokens_evaluated": prompt_n, "truncated": self.state.truncated,
            "has_new_line": "\n" in self.visible, "fim_format": self.state.fim_format,
            "suffix_fits": None if self.state.fits is None else self.state.fits(self.state.heal + self.visible),
            "timings": {"prompt_n": prompt_n, "prompt_ms": prompt_ms,
                        "prompt_per_token_ms": prompt_ms / max(prompt_n, 1),
                        "prompt_per_second": prompt_n / max(prompt_ms / 1e3, 1e-9),
                        "predicted_n": n, "predicted_ms": predicted_ms,
                        "predicted_per_token_ms": predicted_ms / max(n, 1),
                        "predicted_per_second": n / max(predicted_ms / 1e3, 1e-9)}})
        return out

    def over_budget(self) -> bool:
        limit = self.state.time_limit
        return limit is not None and time.monotonic() - self.t0 > limit


async def _events(request: Request, run, reply: _Reply):
    """Scheduler events until the reply is decided; yields ``("delta", text)`` or ``("error", err)``."""
    while reply.stop_type is None:
        if reply.over_budget():
            reply.stop_type = "time_limit"
            run.cancel()
            return
        try:
            _i, ev = await asyncio.wait_for(run.next(request), 0.05 if reply.state.time_limit else None)
        except asyncio.TimeoutError:
            continue
        if ev[0] == "error":
            run.cancel()
            yield ev
            return
        if ev[0] == "delta":
            reply.feed(ev[1])
            if reply.stop_type is not None:
                run.cancel()
            yield ("delta", ev[1])
            continue
        reply.usage = ev[2]
        reply.stop_type = "eos" if ev[1] == "stop" else "limit"


async def infill_reply(request: Request, run, plan: Plan, model: str, t0: float):
    """The HTTP reply of one /infill request (whole JSON, or llama.cpp's SSE stream)."""
    reply = _Reply(plan, model, t0)
    if not plan.stream:
        try:
            async for ev in _events(request, run, reply):
                if ev[0] == "error":
                    return JSONResponse(ev[1].body(), status_code=ev[1].status)
        except asyncio.CancelledError:
            run.cancel()
            return JSONResponse({}, status_code=499)
        return JSONResponse(reply.body(final=True, content=reply.visible))

    async def sse():
        try:
            async for ev in _events(request, run, reply):
                if ev[0] == "error":
                    yield f"data: {json.dumps(ev[1].body())}\n\n"
                    return
                piece = reply.settled()
                if piece:
                    yield f"data: {json.dumps(reply.body(final=False, content=piece))}\n\n"
            piece = reply.visible[reply.sent:]
            reply.sent = len(reply.visible)
            yield f"data: {json.dumps(reply.body(final=True, content=piece))}\n\n"
        finally:
            run.cancel()

    return StreamingResponse(sse(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

