"""Engine adapters: one interface over guidewire, llguidance and XGrammar.

An engine is built inside a worker process from an :class:`EngineContext`; ``compile(schema)``
returns a *compiled* object whose ``matcher()`` gives a fresh matcher with

- ``fill_bitmask(bitmask, row)``: write the next-token mask into a numpy int32 bitmask row,
- ``advance(token_id) -> bool``: consume a token (False: refused),
- ``is_accepting() -> bool``: the text so far is a complete instance.

guidewire's own compiled grammars already have this shape; the peers are wrapped thinly.
Engines are named in :data:`ENGINES` as ``module:Class`` so that workers started with
``spawn`` can import them; ``--engines module:Class`` names a custom one.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
import importlib.util
import json
from dataclasses import dataclass
from typing import Any

from .data import UsageError, load_tokenizer


class EngineError(RuntimeError):
    """An engine reported an error state (bad grammar, exhausted limits) through its API."""


@dataclass(frozen=True)
class EngineContext:
    """What a worker needs to build an engine: the tokenizer spec and the shared mask layout."""

    tokenizer: str
    vocab_size: int
    eos_ids: tuple[int, ...]


#: the schema of :meth:`Engine.warm_up`: a few common keywords, a format and a pattern
WARM_UP_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer", "minimum": 0}, "name": {"type": "string", "maxLength": 8},
    "at": {"type": "string", "format": "date-time"}, "code": {"type": "string", "pattern": "^[A-Z]{2}$"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}, "required": ["id"]}


class Engine(ABC):
    """Base class of the adapters (see the module docstring for the protocol)."""

    #: short engine name used in results
    name = "engine"

    def __init__(self, ctx: EngineContext):
        """Keep the context; subclasses load their tokenizer-side state here (once per worker)."""
        self.ctx = ctx

    @property
    def vocab_size(self) -> int:
        """Mask width in tokens."""
        return self.ctx.vocab_size

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """EOS ids; an instance is accepted iff one of their bits is set in the final mask."""
        return self.ctx.eos_ids

    def warm_up(self) -> None:
        """Compile :data:`WARM_UP_SCHEMA` and ask its first mask, once, before the worker freezes
        its start-up heap: what an engine imports or builds lazily on its first compile (schema
        validators, format checkers, per-vocabulary indexes) is start-up too, as ``guidewire serve``
        warms up before its freeze. Every engine gets the same warm-up."""
        from guidewire.core import allocate_token_bitmask

        self.compile(WARM_UP_SCHEMA).matcher().fill_bitmask(allocate_token_bitmask(1, self.vocab_size), 0)

    @abstractmethod
    def compile(self, schema: Any):
        """Compile a JSON Schema; the result has ``matcher()``. Raises on refusal."""

    def version(self) -> str:
        """The engine's package version (for the report)."""
        return ""


class GuidewireEngine(Engine):
    """guidewire's own ``compile_json_schema`` on the run's tokenizer."""

    name = "guidewire"

    def __init__(self, ctx: EngineContext):
        """Load the Vocab and the compiler (imported lazily: it may not exist yet)."""
        super().__init__(ctx)
        from guidewire.grammar import compile_json_schema

        self._compile = compile_json_schema
        self._vocab = load_tokenizer(ctx.tokenizer).vocab

    def compile(self, schema: Any):
        """``compile_json_schema(schema, vocab)``; its matchers are used as they are."""
        return self._compile(schema, self._vocab)

    def warm_up(self) -> None:
        """The common warm-up, then the process-wide fragment store emptied: the first schema
        builds its own terminals' automata, as it would have without a warm-up."""
        from guidewire.grammar.fragments import STORE

        super().warm_up()
        STORE.clear()

    def version(self) -> str:
        """guidewire's package version."""
        from importlib.metadata import version

        try:
            return version("guidewire")
        except Exception:  # noqa: BLE001 - not installed as a distribution
            return "dev"


class _LlgCompiled:
    """A constructed llguidance matcher; ``matcher()`` hands out deep copies."""

    def __init__(self, proto):
        self._proto = proto

    def matcher(self) -> "_LlgMatcher":
        """A fresh matcher in the start state."""
        return _LlgMatcher(self._proto.deep_copy())


class _LlgMatcher:
    """llguidance ``LLMatcher`` behind the common matcher protocol."""

    __slots__ = ("_m", "_fill")

    def __init__(self, m):
        from llguidance.numpy import fill_next_token_bitmask

        self._m = m
        self._fill = fill_next_token_bitmask

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """``llguidance.numpy.fill_next_token_bitmask``; an error state raises :class:`EngineError`."""
        self._fill(self._m, bitmask, row)
        if self._m.is_error():
            raise EngineError(self._m.get_error())

    def advance(self, token_id: int) -> bool:
        """``consume_token``; False when refused."""
        return bool(self._m.consume_token(token_id))

    def is_accepting(self) -> bool:
        """``LLMatcher.is_accepting``."""
        return bool(self._m.is_accepting())


class LlguidanceEngine(Engine):
    """llguidance with its default JSON options: flexible whitespace, ``,``/``:`` separators."""

    name = "llguidance"
    #: JSON compile options; flexible whitespace accepts ``json.dumps``' ``", "`` and ``": "``
    DEFAULTS = {"whitespace_flexible": True}

    def __init__(self, ctx: EngineContext):
        """Build the ``LLTokenizer`` from the HF tokenizer (about a second)."""
        super().__init__(ctx)
        import llguidance
        import llguidance.hf

        self._llg = llguidance
        hf = load_tokenizer(ctx.tokenizer).hf
        self._tok = llguidance.hf.from_tokenizer(hf, n_vocab=ctx.vocab_size, eos_token=list(ctx.eos_ids))

    def compile(self, schema: Any):
        """Translate the schema and construct the matcher; an error state raises."""
        grammar = self._llg.LLMatcher.grammar_from_json_schema(schema, defaults=dict(self.DEFAULTS))
        m = self._llg.LLMatcher(self._tok, grammar, log_level=0)
        if m.is_error():
            raise EngineError(m.get_error())
        return _LlgCompiled(m)

    def version(self) -> str:
        """llguidance's package version."""
        from importlib.metadata import version

        return version("llguidance")


class _XgrCompiled:
    """An XGrammar ``CompiledGrammar``; ``matcher()`` builds a ``GrammarMatcher``."""

    def __init__(self, xgr, compiled):
        self._xgr = xgr
        self._compiled = compiled

    def matcher(self) -> "_XgrMatcher":
        """A fresh matcher in the start state."""
        return _XgrMatcher(self._xgr.GrammarMatcher(self._compiled))


class _XgrMatcher:
    """XGrammar ``GrammarMatcher`` behind the common matcher protocol (numpy masks via torch views)."""

    __slots__ = ("_m", "_np", "_view")

    def __init__(self, m):
        self._m = m
        self._np = None
        self._view = None

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """``fill_next_token_bitmask`` into a zero-copy torch view of ``bitmask``."""
        if bitmask is not self._np:
            import torch

            self._np, self._view = bitmask, torch.from_numpy(bitmask)
        self._m.fill_next_token_bitmask(self._view, row)

    def advance(self, token_id: int) -> bool:
        """``accept_token``; False when refused."""
        return bool(self._m.accept_token(token_id))

    def is_accepting(self) -> bool:
        """``is_completed`` (a stop token may follow)."""
        return bool(self._m.is_completed())


class XgrammarEngine(Engine):
    """XGrammar in JSON-Schema-compliant mode: ``any_whitespace=True, strict_mode=False``, 1 thread."""

    name = "xgrammar"

    def __init__(self, ctx: EngineContext):
        """Build ``TokenizerInfo`` and a single-threaded, uncached ``GrammarCompiler``."""
        super().__init__(ctx)
        import xgrammar

        self._xgr = xgrammar
        hf = load_tokenizer(ctx.tokenizer).hf
        info = xgrammar.TokenizerInfo.from_huggingface(hf, vocab_size=ctx.vocab_size,
                                                       stop_token_ids=list(ctx.eos_ids))
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema: Any):
        """``compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)``."""
        compiled = self._compiler.compile_json_schema(json.dumps(schema), any_whitespace=True,
                                                      strict_mode=False)
        return _XgrCompiled(self._xgr, compiled)

    def version(self) -> str:
        """xgrammar's package version."""
        from importlib.metadata import version

        return version("xgrammar")


#: engine name -> ``module:Class``
ENGINES: dict[str, str] = {
    "guidewire": "guidewire.maskbench.engines:GuidewireEngine",
    "llguidance": "guidewire.maskbench.engines:LlguidanceEngine",
    "xgrammar": "guidewire.maskbench.engines:XgrammarEngine",
    "fake-accept": "guidewire.maskbench.fake:AcceptAllEngine",
    "fake-reject": "guidewire.maskbench.fake:RejectAllEngine",
    "fake-sleep": "guidewire.maskbench.fake:SleepyEngine",
    "fake-oneshot": "guidewire.maskbench.fake:OneShotEngine",
    "fake-warm-raises": "guidewire.maskbench.fake:WarmUpRaisesEngine",
    "fake-warm-dies": "guidewire.maskbench.fake:WarmUpDiesEngine",
}
#: the real engines, in report order
REAL_ENGINES = ("guidewire", "llguidance", "xgrammar")


def engine_spec(name: str) -> str:
    """``module:Class`` of an engine name (or the name itself when it already is one)."""
    if name in ENGINES:
        return ENGINES[name]
    if ":" in name:
        return name
    raise UsageError(f"unknown engine {name!r}; known: {', '.join(ENGINES)} (or module:Class)")


def engine_available(name: str) -> str | None:
    """``None`` when the engine can be built here, else the reason it cannot."""
    if name == "guidewire":
        try:
            import guidewire.grammar as gg
        except Exception as exc:  # noqa: BLE001 - report any import failure
            return f"guidewire.grammar does not import: {exc}"
        if not hasattr(gg, "compile_json_schema"):
            return "guidewire.grammar.compile_json_schema does not exist yet"
        return None
    if name in ("llguidance", "xgrammar"):
        return None if importlib.util.find_spec(name) else f"{name} is not installed (pip install {name})"
    module = engine_spec(name).split(":", 1)[0]
    try:
        return None if importlib.util.find_spec(module) else f"module {module!r} not found"
    except ModuleNotFoundError:
        return f"module {module!r} not found"


def default_engines() -> list[str]:
    """guidewire plus every installed peer (guidewire is left out while it cannot be built)."""
    return [e for e in REAL_ENGINES if engine_available(e) is None]


def resolve_engines(names: list[str] | None) -> list[str]:
    """Validate requested engines; an unavailable one raises :class:`UsageError`."""
    if not names:
        found = default_engines()
        if not found:
            raise UsageError("no engine is available (guidewire's compile_json_schema, llguidance, xgrammar)")
        return found
    for name in names:
        engine_spec(name)
        reason = engine_available(name)
        if reason:
            raise UsageError(f"engine {name!r} is not available: {reason}")
    if len(set(names)) != len(names):
        raise UsageError(f"engine listed twice in {names}")
    return list(names)


def build_engine(name: str, ctx: EngineContext) -> Engine:
    """Import and construct an engine by name or ``module:Class``."""
    module, _, cls = engine_spec(name).partition(":")
    engine = getattr(importlib.import_module(module), cls)(ctx)
    if ":" in name:
        engine.name = name
    return engine
