"""The per-process registry of loaded models and compiled grammars, shared by every layer above
the runtime (search, monitors, the front door, the server).

Models are an LRU of 2; grammars an LRU keyed on the constraint spec, its options and the
vocabulary's content hash, at most 64 of them and at most 512 MiB or
``GUIDEWIRE_API_CACHE_BYTES`` in all, by each grammar's ``memory_bytes()``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict

from .._checks import BUILTIN_GRAMMARS
from ..core.errors import GuidewireError
from ..grammar.cache import GrammarCache
from .loading import DEFAULT_MODEL, LoadedModel, load_model

_MODEL_CACHE_SIZE = 2
_models: OrderedDict[tuple[str, str], LoadedModel] = OrderedDict()
_grammars = GrammarCache(64, int(os.environ.get("GUIDEWIRE_API_CACHE_BYTES") or (512 << 20)))
_lock = threading.RLock()


# -- caches ---------------------------------------------------------------------------------------
def model_key(name: str) -> tuple[str, str]:
    """The model cache's key of model ``name``: the name and the device ``$GUIDEWIRE_DEVICE`` asks for
    (one copy per device)."""
    return name, os.environ.get("GUIDEWIRE_DEVICE") or "cpu"


def get_model(model: str | LoadedModel | None = None) -> LoadedModel:
    """A loaded model from the per-process LRU cache (``None`` = the default ``smollm2``)."""
    if isinstance(model, LoadedModel):
        return model
    name = str(model) if model is not None else DEFAULT_MODEL
    key = model_key(name)
    with _lock:
        lm = _models.get(key)
        if lm is not None:
            _models.move_to_end(key)
            return lm
    lm = load_model(name)
    with _lock:
        _models[key] = lm
        while len(_models) > _MODEL_CACHE_SIZE:
            _models.popitem(last=False)
    return lm


def get_vocab(model: str | LoadedModel | None = None):
    """The model's :class:`~guidewire.core.Vocab`, without loading the weights when the model is
    a named one (so constraints can be compiled, and their errors reported, before loading)."""
    if isinstance(model, LoadedModel):
        return model.vocab
    from ..core.vocab import _NAMED, Vocab

    key = str(model) if model is not None else DEFAULT_MODEL
    with _lock:
        lm = _models.get(model_key(key))
        if lm is not None:
            return lm.vocab
    if key in _NAMED:
        return Vocab.load(key)
    return get_model(key).vocab


def _schema_key(schema) -> str:
    if isinstance(schema, type):
        try:
            body = json.dumps(schema.model_json_schema(), sort_keys=True)
        except AttributeError:
            body = ""
        return f"class:{schema.__module__}.{schema.__qualname__}:{body}"
    if isinstance(schema, (bytes, str)):
        return "text:" + (schema.decode() if isinstance(schema, bytes) else schema)
    return "dict:" + json.dumps(schema, sort_keys=True, default=str)


def _options_key(options: dict) -> str:
    return json.dumps(options, sort_keys=True, default=repr)


def get_grammar(kind: str, spec, vocab, **options):
    """A compiled grammar from the per-process LRU cache.

    ``kind`` is ``"json_schema"`` (``spec``: dict, JSON text or Pydantic model class; ``options``
    go to ``compile_json_schema``), ``"regex"``, ``"lark"`` (grammar text or a built-in name:
    json, sql, arithmetic, python) or ``"choices"`` (a list of strings).
    """
    if kind == "json_schema":
        spec_key = _schema_key(spec)
    elif kind == "choices":
        spec_key = json.dumps(list(spec))
    else:
        spec_key = str(spec)
    key = (kind, spec_key, _options_key(options), vocab.content_hash)
    return _grammars.get_or_build(key, lambda: _compile(kind, spec, vocab, options))


def _compile(kind: str, spec, vocab, options: dict):
    from .. import grammar as gm

    if kind == "json_schema":
        compile_json_schema = getattr(gm, "compile_json_schema", None)
        if compile_json_schema is None:
            raise GuidewireError("JSON Schema support (guidewire.grammar.compile_json_schema) is not "
                                 "available in this build")
        return compile_json_schema(spec, vocab, **options)
    if options:
        raise TypeError(f"unexpected options for a {kind} constraint: {sorted(options)}")
    if kind == "regex":
        return gm.compile_regex(spec, vocab)
    if kind == "lark":
        text = gm.builtin_grammar(spec) if spec in BUILTIN_GRAMMARS else spec
        return gm.compile_lark(text, vocab)
    if kind == "choices":
        choices = [str(c) for c in spec]
        if not choices:
            raise ValueError("choices must not be empty")
        return gm.compile_regex("|".join(re.escape(c) for c in choices), vocab)
    raise ValueError(f"unknown constraint kind {kind!r}")


def clear_caches() -> None:
    """Drop the cached models and compiled grammars."""
    with _lock:
        _models.clear()
        _grammars.clear()
