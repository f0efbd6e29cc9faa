"""The front door: ``generate_json`` and ``generate`` over a cached default model.

Models and compiled grammars are cached per process (LRU; grammars keyed on the constraint
spec, its options and the vocabulary's content hash, at most 64 of them and at most
512 MiB or ``GUIDEWIRE_API_CACHE_BYTES`` in all, by each grammar's ``memory_bytes()``), so repeated calls
pay only for decoding (the caches live in :mod:`guidewire.runtime.registry`, shared with search,
monitors and the server).
Every structured result is checked by an independent oracle before it is returned: JSON is
parsed and validated with ``jsonschema`` (with a FormatChecker) or Pydantic, choices are
compared with the list; a generation cut by ``max_tokens`` inside the language raises
:class:`IncompleteOutputError` instead of returning a partial value.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from ._checks import BUILTIN_GRAMMARS, DEFAULT_DRAFTERS, check_generation_args
from .runtime.decode import GenerationResult, TextStream, iter_decode
from .runtime.errors import ContextLengthError, IncompleteOutputError, OutputValidationError
from .runtime.loading import LoadedModel
from .runtime.registry import clear_caches, get_grammar, get_model, get_vocab  # noqa: F401 (re-exported)
from .runtime.sampling import SamplingParams


# -- helpers --------------------------------------------------------------------------------------
def _sampling(temperature, top_p, top_k, min_p, seed) -> SamplingParams:
    return SamplingParams(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                          min_p=float(min_p), seed=seed)


def speculation_drafter(lm: LoadedModel, speculative):
    """The drafter for ``speculative=``: ``False``/``None`` (none), ``True`` (the default
    model-free drafters), a comma-separated string or list of drafter names, or a ``Drafter``."""
    if speculative is None or speculative is False:
        return None
    if hasattr(speculative, "propose"):
        return speculative
    from .runtime.drafters import make_drafter

    names = DEFAULT_DRAFTERS if speculative is True else speculative
    return make_drafter(names, tokenizer=lm.tokenizer, vocab=lm.vocab)


def fit_context(prompt_tokens: int, max_tokens: int, max_context: int | None) -> int:
    """``max_tokens`` clamped so prompt plus output fit in the model's context window.

    Raises :class:`~guidewire.runtime.errors.ContextLengthError` when the prompt alone leaves no
    room; a clamped run that fills the window ends with ``finish_reason == "length"``.
    """
    if max_context is None:
        return max_tokens
    room = max_context - prompt_tokens
    if room < 1:
        raise ContextLengthError(f"the prompt is {prompt_tokens} tokens but the model's context window "
                                 f"is {max_context}; shorten the prompt")
    return min(max_tokens, room)


def _steps(lm: LoadedModel, prompt, constraint, *, chat, system, max_tokens, sampling, speculative=False):
    ids = lm.encode_prompt(prompt, chat=chat, system=system)
    max_tokens = fit_context(len(ids), max_tokens, lm.max_context)
    drafter = speculation_drafter(lm, speculative)
    if drafter is not None:
        from .runtime.speculative import iter_speculative_decode

        return iter_speculative_decode(lm.sequence(), ids, constraint, vocab=lm.vocab, drafter=drafter,
                                       max_tokens=max_tokens, sampling=sampling)
    return iter_decode(lm.sequence(), ids, constraint, vocab=lm.vocab, max_tokens=max_tokens,
                       sampling=sampling)


def _run(steps) -> GenerationResult:
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def _require_complete(result: GenerationResult, what: str) -> None:
    if not result.complete:
        raise IncompleteOutputError(
            f"max_tokens reached after {result.usage.completion_tokens} tokens inside an incomplete "
            f"{what}; raise max_tokens (partial output: {result.text[:80]!r}"
            f"{'...' if len(result.text) > 80 else ''})", result)


def _schema_dict(schema):
    if isinstance(schema, type):
        return None
    if isinstance(schema, (str, bytes)):
        return json.loads(schema)
    return schema


def validate_json_output(schema, result: GenerationResult):
    """Parse ``result.text`` and validate it against ``schema`` (dict/JSON text with
    ``jsonschema`` and a FormatChecker, or a Pydantic model class with ``model_validate``).

    Returns the value (a model instance for Pydantic); raises :class:`IncompleteOutputError` or
    :class:`OutputValidationError`.
    """
    _require_complete(result, "JSON value")
    try:
        value = json.loads(result.text)
    except json.JSONDecodeError as exc:
        raise OutputValidationError(f"output is not valid JSON ({exc})", result) from None
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        try:
            return schema.model_validate(value)
        except Exception as exc:  # pydantic.ValidationError
            first = str(exc).splitlines()
            raise OutputValidationError(f"output fails the Pydantic model: {' '.join(first[:3])}",
                                        result) from None
    from .core.lazydeps import import_jsonschema

    jsonschema = import_jsonschema()
    schema_dict = _schema_dict(schema)
    cls = jsonschema.validators.validator_for(schema_dict)
    validator = cls(schema_dict, format_checker=cls.FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise OutputValidationError(f"output fails the schema at {path}: {error.message}", result)
    return value


# -- public ---------------------------------------------------------------------------------------
#: ``compile_json_schema`` defaults of the generation front door (callers may override each one),
#: chosen on the end-to-end bench (``bench/bench_e2e_json.py``): no unnamed properties (as in
#: XGrammar's strict mode), compact layout (no whitespace padding), and at most 8 items in an array
#: whose schema sets no ``maxItems`` (a small model otherwise repeats an item until ``max_tokens``).
#: Each keeps the outputs a subset of the valid instances; conformance checking
#: (``guidewire bench maskbench``) keeps the exact schema semantics.
GENERATION_SCHEMA_OPTIONS = {"extra_properties": False, "whitespace": "compact", "default_max_items": 8}


def generation_schema_options(options: dict) -> dict:
    """:data:`GENERATION_SCHEMA_OPTIONS` overridden by ``options``; a caller's ``indent=`` or
    ``separators=`` layout replaces the compact default (``json.dumps`` spacing)."""
    base = dict(GENERATION_SCHEMA_OPTIONS)
    if options.get("indent") is not None or options.get("separators") is not None:
        base.pop("whitespace", None)
    return {**base, **options}


def generate_json(schema, prompt: str | Sequence[dict], *, model=None, max_tokens: int = 512,
                  temperature: float = 0.0, seed: int | None = None, top_p: float = 1.0,
                  top_k: int = 0, min_p: float = 0.0, chat: bool = True, system: str | None = None,
                  speculative=False, **schema_options):
    """Generate a JSON value that matches ``schema`` and return it, validated.

    ``schema`` is a JSON Schema (dict or JSON text) or a Pydantic model class (then an instance
    is returned). ``schema_options`` go to ``compile_json_schema`` (e.g. ``lenient=``,
    ``any_order=``, ``indent=``, ``separators=``, ``strict_openai=``, ``extra_properties=``; see
    :data:`GENERATION_SCHEMA_OPTIONS` for the defaults here). The prompt is wrapped in
    the model's chat template unless ``chat=False``. ``speculative=True`` (or drafter names such
    as ``"forced,copy"``) decodes speculatively: the same output, fewer model forwards.

    Raises :class:`IncompleteOutputError` when ``max_tokens`` cuts the value and
    :class:`OutputValidationError` if the output fails the independent JSON/schema check.
    """
    check_generation_args(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                          min_p=min_p, seed=seed, speculative=speculative)
    options = generation_schema_options(schema_options)
    vocab = get_vocab(model)  # compile (and report schema errors) before the weights load
    grammar = get_grammar("json_schema", schema, vocab, **options)
    lm = get_model(model)
    if lm.vocab.content_hash != vocab.content_hash:
        grammar = get_grammar("json_schema", schema, lm.vocab, **options)
    steps = _steps(lm, prompt, grammar.matcher(), chat=chat, system=system, max_tokens=max_tokens,
                   sampling=_sampling(temperature, top_p, top_k, min_p, seed), speculative=speculative)
    return validate_json_output(schema, _run(steps))


def _constraint_spec(json_schema, regex, grammar, choices, schema_options):
    given = [(k, v) for k, v in (("json_schema", json_schema), ("regex", regex), ("lark", grammar),
                                 ("choices", choices)) if v is not None]
    if len(given) > 1:
        raise ValueError("pass at most one of json_schema=, regex=, grammar=, choices=")
    if schema_options and (not given or given[0][0] != "json_schema"):
        raise TypeError(f"unexpected keyword arguments {sorted(schema_options)}")
    if given and given[0][0] == "lark" and isinstance(grammar, str) and grammar not in BUILTIN_GRAMMARS \
            and re.fullmatch(r"[\w.-]+", grammar.strip()):
        raise ValueError(f"grammar={grammar!r} is neither a built-in grammar ({', '.join(BUILTIN_GRAMMARS)}; "
                         f"names are lower case) nor Lark grammar text")
    return given[0] if given else (None, None)


def generate(prompt: str | Sequence[dict], *, json_schema=None, regex: str | None = None,
             grammar=None, choices: Sequence[str] | None = None, model=None, max_tokens: int = 256,
             temperature: float = 0.0, seed: int | None = None, top_p: float = 1.0, top_k: int = 0,
             min_p: float = 0.0, chat: bool = True, system: str | None = None, stream: bool = False,
             return_result: bool = False, speculative=False, **schema_options):
    """Generate text, optionally constrained by one of ``json_schema=``, ``regex=``, ``grammar=``
    (Lark text, a built-in name ``json``/``sql``/``arithmetic``/``python``, or a compiled grammar) or
    ``choices=`` (a list of strings; the output is exactly one of them).

    Returns the text; with ``stream=True`` a :class:`~guidewire.runtime.TextStream` of text
    deltas (checked when it ends); with ``return_result=True`` the
    :class:`~guidewire.runtime.GenerationResult` (no completeness check). A constrained output
    cut by ``max_tokens`` raises :class:`IncompleteOutputError`. ``speculative=`` as in
    :func:`generate_json`.
    """
    kind, spec = _constraint_spec(json_schema, regex, grammar, choices, schema_options)
    check_generation_args(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                          min_p=min_p, seed=seed, speculative=speculative)
    if kind is None:
        constraint, what = None, "text"
    elif kind == "lark" and hasattr(spec, "matcher"):
        constraint, what = spec.matcher(), "grammar sentence"
    else:
        if kind == "json_schema":
            schema_options = generation_schema_options(schema_options)
        vocab = get_vocab(model)  # compile (and report constraint errors) before the weights load
        compiled = get_grammar(kind, spec, vocab, **schema_options)
        if get_model(model).vocab.content_hash != vocab.content_hash:
            compiled = get_grammar(kind, spec, get_model(model).vocab, **schema_options)
        constraint = compiled.matcher()
        what = {"json_schema": "JSON value", "regex": "regex match", "lark": "grammar sentence",
                "choices": "choice"}[kind]
    lm = get_model(model)
    sampling = _sampling(temperature, top_p, top_k, min_p, seed)
    steps = _steps(lm, prompt, constraint, chat=chat, system=system, max_tokens=max_tokens,
                   sampling=sampling, speculative=speculative)

    def _check(result: GenerationResult) -> None:
        if constraint is None:
            return
        _require_complete(result, what)
        if kind == "json_schema":
            validate_json_output(json_schema, result)
        elif kind == "choices" and result.text not in [str(c) for c in choices]:
            raise OutputValidationError(f"output {result.text!r} is not one of the choices", result)

    if stream:
        return TextStream(steps, lm.vocab, finalize=_check)
    result = _run(steps)
    if return_result:
        return result
    _check(result)
    return result.text
