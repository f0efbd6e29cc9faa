"""Tool calls enforced by the grammar, and their incremental parser.

The tool-call format is the Hermes / Qwen one (``<tool_call>`` JSON ``</tool_call>``), used
as the generic format for every model whose chat template has no tool support (SmolLM2 and
Gemma-3 have none)::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Several calls (``parallel_tool_calls``) are separated by one newline. :func:`compile_tool_grammar`
builds ONE grammar with guidewire's JSON-Schema builder: the call body is the schema
``anyOf`` over the allowed tools of ``{"name": const, "arguments": <the tool's parameters>}``
(each tool's ``parameters`` placed under ``$defs`` with its ``$ref`` pointers rebased), and the
wrapper literals are added as terminals and rules of the same builder.

``tool_choice="auto"`` is :class:`AutoToolConstraint`: a regex allows free text that does not
begin with ``<tool_call>``, or exactly ``<tool_call>\n``; once the reply is that opening tag the
constraint switches to the call grammar (advanced over the tag's tokens). (A single grammar
``calls | TEXT`` would be cleaner, but today's mask computation rejects tokens that span two
lexemes when such an always-alive text terminal is in the grammar; see the report.)
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Iterator, Sequence

from ..grammar.cache import GrammarCache

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
CALL_NEXT = "\n" + CALL_OPEN
_TAG = "<tool_call>"
_NAME_PREFIX = '{"name": "'
_ARGS_PREFIX = '", "arguments": '
SEPARATORS = (", ", ": ")

_CACHE = GrammarCache(32, int(os.environ.get("GUIDEWIRE_TOOL_CACHE_BYTES") or (256 << 20)))


def render_call(name: str, arguments: str) -> str:
    """One call in the generic format (for assistant messages in the prompt)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        args = arguments
    return CALL_OPEN + json.dumps({"name": name, "arguments": args}, separators=SEPARATORS) + CALL_CLOSE


def _rebase(node, base: str):
    """Copy of ``node`` with every local ``$ref`` (``#...``) re-pointed under ``base``."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = base + v[1:]
            elif k in ("$id", "$schema"):
                continue
            else:
                out[k] = _rebase(v, base)
        return out
    if isinstance(node, list):
        return [_rebase(v, base) for v in node]
    return copy.deepcopy(node)


def call_schema(tools: Sequence[dict]) -> dict:
    """JSON Schema of one call body: ``{"name": <one of tools>, "arguments": <its parameters>}``."""
    defs, branches = {}, []
    for i, tool in enumerate(tools):
        params = tool.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        key = f"tool{i}"
        defs[key] = _rebase(params, f"#/$defs/{key}")
        branches.append({"type": "object",
                         "properties": {"name": {"const": tool["name"]}, "arguments": {"$ref": f"#/$defs/{key}"}},
                         "required": ["name", "arguments"], "additionalProperties": False})
    schema = {"$defs": defs}
    if len(branches) == 1:
        schema.update(branches[0])
    else:
        schema["anyOf"] = branches
    return schema


def _not_starting_with(prefix: str) -> str:
    """Regex of the non-empty strings that do not begin with ``prefix``."""
    alts = [re.escape(prefix[:i]) + "[^" + re.escape(prefix[i]) + "]" + r"[\s\S]*" for i in range(len(prefix))]
    alts += [re.escape(prefix[:i]) for i in range(1, len(prefix))]
    return "(?:" + "|".join(alts) + ")"


def _validator(root):
    """``check(subschema, value)`` for the schema builder's enum/const filtering (``jsonschema``)."""
    from ..core.lazydeps import import_jsonschema

    validators = import_jsonschema().validators

    cls = validators.validator_for(root)
    base = cls(root, format_checker=cls.FORMAT_CHECKER)

    def check(sub, value) -> bool:
        if isinstance(sub, bool):
            return sub
        try:
            return base.evolve(schema=sub).is_valid(value)
        except Exception:  # noqa: BLE001 - unresolvable parts are enforced by the grammar itself
            return True

    return check


def compile_tool_grammar(tools: Sequence[dict], vocab, *, parallel: bool):
    """One grammar for the assistant's reply: one call (or several with ``parallel``) to one of
    ``tools`` (``{"name", "parameters"}`` dicts) whose arguments match the tool's parameters.

    Cached per (tools, options, vocabulary): at most 32 grammars and 256 MiB
    (``GUIDEWIRE_TOOL_CACHE_BYTES``) in all.
    """
    key = (json.dumps(list(tools), sort_keys=True), parallel, vocab.content_hash)
    return _CACHE.get_or_build(key, lambda: _build_elided(tools, vocab, parallel=parallel))


def _build_elided(tools: Sequence[dict], vocab, *, parallel: bool):
    """The tool grammar with long ``maxLength`` counters elided for the vocabulary's tokens, or
    built whole where a counter's run is too short for them (as ``compile_json_schema`` does)."""
    from ..grammar.elision import ElisionRefusedError
    from ..grammar.vocabindex import vocab_layout

    try:
        return _build_tool_grammar(tools, vocab, parallel=parallel, token_depth=vocab_layout(vocab).max_len)
    except ElisionRefusedError:
        return _build_tool_grammar(tools, vocab, parallel=parallel, token_depth=None)


def _build_tool_grammar(tools: Sequence[dict], vocab, *, parallel: bool, token_depth: int | None):
    from ..grammar.jsonschema import JsonSchemaOptions
    from ..grammar.jsonschema.emit import SchemaGrammarBuilder
    from ..grammar.jsonschema.flatten import Flattener
    from ..grammar.jsonschema.resolve import Resolver, draft_of, load_schema

    root = load_schema(call_schema(tools))
    notes: list[str] = []
    flattener = Flattener(Resolver(root), draft_of(root), strict=True, notes=notes)
    b = SchemaGrammarBuilder(flattener, _validator(root), JsonSchemaOptions(separators=SEPARATORS,
                                                                             extra_properties=False),
                             token_depth)
    body = b.value(root, "#", 0)
    if body is None:
        from ..core.errors import UnsatisfiableGrammarError

        raise UnsatisfiableGrammarError("no tool call satisfies the tools' parameters")
    open_, close, nxt = (b.term(("gw-tool", s), n, pattern=re.escape(s))
                         for s, n in ((CALL_OPEN, "CALL_OPEN"), (CALL_CLOSE, "CALL_CLOSE"), (CALL_NEXT, "CALL_NEXT")))
    calls = b.nt("tool_calls")
    b.rule(calls, open_, body, close)
    if parallel:
        b.rule(calls, calls, nxt, body, close)
    top = calls
    g = b.build(top, vocab, source=json.dumps(root)[:10_000])
    g.notes = tuple(dict.fromkeys(notes))
    return g


class AutoToolConstraint:
    """Text or tool calls (``tool_choice="auto"``): see the module docstring. Implements the
    constraint protocol the decoder uses (``fill_bitmask``/``advance``/``is_accepting``/``is_terminated``)."""

    def __init__(self, tools: Sequence[dict], vocab, *, parallel: bool):
        from ..api import get_grammar

        self._vocab = vocab
        self._calls = compile_tool_grammar(tools, vocab, parallel=parallel)
        self._m = get_grammar("regex", f"{_not_starting_with(_TAG)}|{re.escape(CALL_OPEN)}", vocab).matcher()
        self._open = CALL_OPEN.encode()
        self._tokens: list[int] | None = []
        self._bytes = b""

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """The current mask into ``bitmask[row]``."""
        self._m.fill_bitmask(bitmask, row)

    def is_accepting(self) -> bool:
        """Whether the reply so far is complete."""
        return self._m.is_accepting()

    def is_terminated(self) -> bool:
        """Whether nothing can follow."""
        return self._m.is_terminated()

    def advance(self, token: int) -> bool:
        """Consume ``token`` (False: not allowed, state unchanged)."""
        if not self._m.advance(token):
            return False
        if self._tokens is not None:
            self._tokens.append(token)
            self._bytes += self._vocab.token_bytes[token]
            if self._bytes == self._open:
                m = self._calls.matcher()
                for t in self._tokens:
                    if not m.advance(t):
                        raise RuntimeError("the tool-call grammar refused its own opening tag")
                self._m, self._tokens = m, None
            elif not self._open.startswith(self._bytes):
                self._tokens = None  # free text from here on
        return True


class ToolCallParser:
    """Splits a reply (fed as text deltas of any size) into content and tool calls, incrementally.

    :meth:`feed` yields ``("content", text)``, ``("call", index, name)`` once a call's name is
    complete, and ``("args", index, fragment)`` for its arguments as they arrive; the events'
    concatenation does not depend on how the text was split. ``calls_only`` (``required`` /
    named) expects calls from the first character; otherwise a reply is text unless it begins
    with ``<tool_call>`` (held back while it could still become one).
    """

    def __init__(self, *, calls_only: bool):
        self._mode = "literal" if calls_only else "undecided"
        self._lit = CALL_OPEN + _NAME_PREFIX
        self._buf = ""
        self.index = -1
        self.calls: list[dict] = []
        self.content = ""

    def feed(self, text: str) -> Iterator[tuple]:
        """Events for the next piece of the reply."""
        if self._mode == "text":
            if text:
                self.content += text
                yield ("content", text)
            return
        if self._mode == "undecided":
            self._buf += text
            if self._buf.startswith(_TAG):
                self._mode, text, self._buf = "literal", self._buf, ""
            elif _TAG.startswith(self._buf):
                return
            else:
                self._mode, buf, self._buf = "text", self._buf, ""
                yield from self.feed(buf)
                return
        args = []
        for ch in text:
            ev = self._char(ch, args)
            if args and self._mode != "args":
                yield self._args_event(args)
            if ev is not None:
                yield ev
        if args:
            yield self._args_event(args)

    def finish(self) -> Iterator[tuple]:
        """Events for text still held back at the end of the reply (an unfinished ``<tool_call`` prefix)."""
        if self._mode == "undecided" and self._buf:
            self._mode, buf, self._buf = "text", self._buf, ""
            yield from self.feed(buf)

    def _args_event(self, args: list) -> tuple:
        frag = "".join(args)
        args.clear()
        self.calls[self.index]["arguments"] += frag
        return ("args", self.index, frag)

    def _char(self, ch: str, args: list):
        mode = self._mode
        if mode == "literal":
            if not self._lit or ch != self._lit[0]:
                raise ValueError(f"unexpected {ch!r} in a tool call (expected {self._lit[:1]!r})")
            self._lit = self._lit[1:]
            if not self._lit:
                self._mode, self._buf = "name", ""
            return None
        if mode == "name":
            if ch == '"':
                self.index += 1
                self.calls.append({"name": self._buf, "arguments": ""})
                self._mode, self._lit, self._after = "literal2", _ARGS_PREFIX[1:], "args"
                self._depth, self._in_str, self._esc = 0, False, False
                return ("call", self.index, self._buf)
            self._buf += ch
            return None
        if mode == "literal2":
            if not self._lit or ch != self._lit[0]:
                raise ValueError(f"unexpected {ch!r} in a tool call (expected {self._lit[:1]!r})")
            self._lit = self._lit[1:]
            if not self._lit:
                self._mode = self._after
            return None
        if mode == "args":
            if self._in_str:
                if self._esc:
                    self._esc = False
                elif ch == "\\":
                    self._esc = True
                elif ch == '"':
                    self._in_str = False
            elif ch == '"':
                self._in_str = True
            elif ch in "{[":
                self._depth += 1
            elif ch in "]}":
                if self._depth == 0:   # the call object's own closing brace
                    self._mode, self._lit, self._after = "literal2", CALL_CLOSE, "between"
                    return None
                self._depth -= 1
            args.append(ch)
            return None
        if mode == "between":
            self._mode, self._lit = "literal", CALL_NEXT[1:] + _NAME_PREFIX
            if ch != "\n":
                raise ValueError(f"unexpected {ch!r} after a tool call")
            return None
        raise ValueError(f"unexpected {ch!r} in a tool call")
