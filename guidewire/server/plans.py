"""Request bodies -> decoding plans: validated parameters, prompt ids, one job spec per choice.

Everything a client sends is checked here (types, ranges, tool names, the context window) and
refused with a 400 :class:`~.errors.APIError` naming the parameter; constraints are compiled
later, on the scheduler thread, where their errors are reported the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from ..api import GENERATION_SCHEMA_OPTIONS, fit_context, get_grammar
from ..runtime.errors import ContextLengthError
from ..runtime.sampling import SamplingParams
from .chat import chat_prompt_ids, completion_prompt_ids, normalise_messages
from ..ide.endtokens import EndTokens
from .errors import APIError
from .tools import AutoToolConstraint, compile_tool_grammar

MAX_N = 8


@dataclass
class Plan:
    """What to generate for one request (``samplings`` has one entry per choice)."""

    prompt_ids: list[int]
    max_tokens: int
    samplings: list[SamplingParams]
    stop: tuple[str, ...] = ()
    make_constraint: Callable[[], object] | None = None
    constraint_param: str = "response_format"
    tool_mode: str = "none"          # none | auto | calls (required or named)
    stream: bool = False
    include_usage: bool = False
    extra: dict = field(default_factory=dict)


def _get(body: dict, key: str, types, default=None):
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, types) or isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise APIError(f"{key} has the wrong type ({type(v).__name__})", param=key)
    return v


def _number(body, key, default, lo, hi, integer=False):
    v = _get(body, key, (int,) if integer else (int, float), default)
    if v is None:
        return None
    if not lo <= v <= hi:
        raise APIError(f"{key} must be between {lo} and {hi}, got {v}", param=key)
    return v


def _sampling(body: dict) -> list[SamplingParams]:
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0:
        top_p, temperature = 1.0, 0.0
    seed = _number(body, "seed", None, -2**63, 2**63 - 1, integer=True)
    n = _number(body, "n", 1, 1, MAX_N, integer=True)
    return [SamplingParams(temperature=float(temperature), top_p=float(top_p),
                           seed=None if seed is None else seed + i) for i in range(n)]


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop):
        raise APIError("stop must be a string or a list of at most 4 strings", param="stop")
    return tuple(stop)


def _constraint(body: dict, vocab) -> tuple[Callable | None, str]:
    """The response constraint (``response_format`` or one vLLM ``guided_*`` field)."""
    found = []
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
            raise APIError("response_format.type must be text, json_object or json_schema", param="response_format")
        if rf["type"] == "json_object":
            found.append(("json_schema", {"type": "object"}, {}, "response_format"))
        elif rf["type"] == "json_schema":
            js = rf.get("json_schema")
            if not isinstance(js, dict) or "schema" not in js or not isinstance(js["schema"], (dict, bool)):
                raise APIError("response_format.json_schema must be an object with a 'schema' (a JSON Schema)",
                               param="response_format.json_schema")
            found.append(("json_schema", js["schema"], dict(GENERATION_SCHEMA_OPTIONS),
                          "response_format.json_schema.schema"))
    for key, kind in (("guided_json", "json_schema"), ("guided_regex", "regex"), ("guided_grammar", "lark"),
                      ("guided_choice", "choices")):
        v = body.get(key)
        if v is None:
            continue
        if kind == "json_schema":
            if isinstance(v, str):
                try:
                    v = json.loads(v)
                except json.JSONDecodeError as exc:
                    raise APIError(f"guided_json is not valid JSON: {exc}", param=key) from None
            if not isinstance(v, (dict, bool)):
                raise APIError("guided_json must be a JSON Schema", param=key)
            found.append((kind, v, dict(GENERATION_SCHEMA_OPTIONS), key))
        elif kind == "choices":
            if not isinstance(v, list) or not v or not all(isinstance(c, str) and c for c in v):
                raise APIError("guided_choice must be a non-empty list of non-empty strings", param=key)
            found.append((kind, v, {}, key))
        else:
            if not isinstance(v, str) or not v:
                raise APIError(f"{key} must be a non-empty string", param=key)
            found.append((kind, v, {}, key))
    if len(found) > 1:
        raise APIError("give at most one of response_format (json), guided_json, guided_regex, guided_grammar, "
                       "guided_choice", param=found[1][3])
    if not found:
        return None, "response_format"
    kind, spec, opts, param = found[0]
    return (lambda: get_grammar(kind, spec, vocab, **opts).matcher()), param


def _tools(body: dict) -> tuple[list[dict], str, list[dict]]:
    """(tool functions, mode, the tools the grammar allows)."""
    tools = body.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise APIError("tools must be a list", param="tools")
    funcs, names = [], set()
    for i, t in enumerate(tools):
        f = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        name = f.get("name") if isinstance(f, dict) else None
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
            raise APIError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': [A-Za-z0-9_-]+, ...}}}}",
                           param=f"tools[{i}]")
        if name in names:
            raise APIError(f"tools[{i}]: duplicate function name {name!r}", param=f"tools[{i}]")
        params = f.get("parameters")
        if params is not None and not isinstance(params, (dict, bool)):
            raise APIError(f"tools[{i}].function.parameters must be a JSON Schema", param=f"tools[{i}]")
        names.add(name)
        funcs.append({k: f[k] for k in ("name", "description", "parameters") if k in f})
    choice = body.get("tool_choice", "auto" if funcs else "none")
    if choice == "none":
        return funcs, "none", []
    if not funcs:
        raise APIError(f"tool_choice {choice!r} needs tools", param="tool_choice")
    if choice == "auto":
        return funcs, "auto", funcs
    if choice == "required":
        return funcs, "calls", funcs
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(name, str):
        raise APIError("tool_choice must be none, auto, required or {'type': 'function', 'function': {'name': ...}}",
                       param="tool_choice")
    if name not in names:
        raise APIError(f"tool_choice names the unknown tool {name!r} (tools: {sorted(names)})", param="tool_choice",
                       code="unknown_tool")
    return funcs, "calls", [f for f in funcs if f["name"] == name]


def _budget(body, prompt_ids, lm, default_max: int, keys=("max_completion_tokens", "max_tokens")) -> int:
    asked = None
    for k in keys:
        v = _number(body, k, None, 1, 2**31 - 1, integer=True)
        if v is not None:
            asked = v
            break
    try:
        return fit_context(len(prompt_ids), asked or default_max, lm.max_context)
    except ContextLengthError as exc:
        raise APIError(str(exc), param="messages", code="context_length_exceeded") from None


def _no_stop_with(body: dict, make) -> None:
    if make is not None and body.get("stop"):
        raise APIError("stop cannot be combined with a structured output (response_format json, guided_*, or "
                       "tools): the constraint decides where the output ends", param="stop")


def _common(body: dict, plan: Plan) -> Plan:
    plan.stream = bool(_get(body, "stream", bool, False))
    so = _get(body, "stream_options", dict, {}) or {}
    plan.include_usage = bool(so.get("include_usage", False))
    if body.get("logprobs") not in (None, False, 0) or body.get("top_logprobs") is not None:
        raise APIError("logprobs are not supported by this server", param="logprobs")
    return plan


def chat_plan(body: dict, lm, *, default_max: int) -> Plan:
    """Validate a chat/completions body; the prompt is templated and tokenized here."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise APIError("messages must be a non-empty list of message objects", param="messages")
    funcs, mode, allowed = _tools(body)
    make, param = _constraint(body, lm.vocab)
    if mode != "none" and make is not None:
        raise APIError("response_format json / guided_* cannot be combined with tool_choice auto, required or a "
                       "named tool; use tool_choice none", param="tool_choice")
    parallel = bool(_get(body, "parallel_tool_calls", bool, True))
    if mode == "calls":
        make, param = (lambda: compile_tool_grammar(allowed, lm.vocab, parallel=parallel).matcher()), "tools"
    elif mode == "auto":
        make, param = (lambda: AutoToolConstraint(allowed, lm.vocab, parallel=parallel)), "tools"
    _no_stop_with(body, make)
    ids = chat_prompt_ids(lm, normalise_messages(messages, funcs))
    plan = Plan(ids, _budget(body, ids, lm, default_max), _sampling(body), _stop(body), make, param, mode)
    return _common(body, plan)


def completion_plan(body: dict, lm, *, default_max: int = 16) -> Plan:
    """Validate a completions body (``prompt``, optional ``suffix`` for fill-in-the-middle)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise APIError("prompt must be a non-empty string (batched prompts are not supported; send one "
                       "request each)", param="prompt")
    suffix = _get(body, "suffix", str, None)
    if body.get("echo"):
        raise APIError("echo is not supported", param="echo")
    make, param = _constraint(body, lm.vocab)
    _no_stop_with(body, make)
    ids, ends = completion_prompt_ids(lm, prompt, suffix)
    if make is None and ends:   # a FIM model's own end-of-middle tokens end the text too
        make = lambda: EndTokens(lm.vocab.vocab_size, ends)  # noqa: E731
    plan = Plan(ids, _budget(body, ids, lm, default_max, keys=("max_tokens",)), _sampling(body), _stop(body),
                make, param)
    return _common(body, plan)
