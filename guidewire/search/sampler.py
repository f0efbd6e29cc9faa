"""The entry point: :func:`sample` and the reusable :class:`Sampler`."""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Sequence

import numpy as np

from .asap import run_asap
from .awrs import run_awrs
from .cars import run_cars
from .gcd import run_gcd
from .prefix_trie import DEFAULT_MAX_BYTES, PrefixTrie
from .problem import Problem
from .sampleset import SampleSet, log_mean_exp, normalise_log_weights
from .smc import run_smc
from .target import DEFAULT_CACHE_BYTES, Target

METHODS = ("gcd", "asap", "cars", "awrs", "smc")
_CONSTRAINT_KINDS = {"grammar": "lark", "regex": "regex", "json_schema": "json_schema", "choices": "choices"}
_OPTIONS = {
    "gcd": {"max_proposals"},
    "asap": {"max_proposals"},
    "cars": {"max_proposals"},
    "awrs": {"successes", "max_checks"},
    "smc": {"potential", "potential_every", "potential_in_check", "ess_threshold", "successes", "max_checks"},
}


def _constraint(vocab, constraints: dict):
    given = {k: v for k, v in constraints.items() if v is not None}
    if len(given) != 1:
        raise ValueError("pass exactly one of grammar=, regex=, json_schema=, choices= "
                         f"(got {sorted(given) or 'none'})")
    (kind, spec), = given.items()
    if hasattr(spec, "matcher"):          # an already compiled grammar
        if spec.vocab.content_hash != vocab.content_hash:
            raise ValueError("the compiled grammar was built for another vocabulary than the model's")
        source = getattr(spec, "source", "")
        return spec, (f"compiled:{source}" if source else f"compiled-object:{id(spec)}")
    from ..runtime.registry import get_grammar

    grammar = get_grammar(_CONSTRAINT_KINDS[kind], spec, vocab)
    key = json.dumps(spec, sort_keys=True, default=str) if not isinstance(spec, str) else spec
    return grammar, f"{kind}:{key}"


class Sampler:
    """A sampling problem kept across calls: the scored model (with its prefix cache), the
    compiled constraint and, for ASAp and CARS, the prefix trie that makes later calls cheaper
    and, for ASAp, closer to the target.

    ``model`` is a model name / :class:`~guidewire.runtime.LoadedModel` / ``None`` (the default
    model, from the registry), or a runtime ``Model`` (``prefill``/``step``/``truncate``) together
    with ``vocab=`` and token ids as ``prompt``. Exactly one of ``grammar`` (Lark text, a built-in
    name or a compiled grammar), ``regex``, ``json_schema``, ``choices``.
    """

    def __init__(self, prompt: str | Sequence[int], *, grammar=None, regex=None, json_schema=None,
                 choices=None, model=None, vocab=None, chat: bool = True, max_tokens: int = 64,
                 temperature: float = 1.0, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 trie_bytes: int = DEFAULT_MAX_BYTES):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        raw = vocab is not None
        if raw:
            if model is None or isinstance(prompt, str):
                raise ValueError("with vocab=, pass a runtime Model as model= and the prompt as token ids")
        else:
            from ..runtime.registry import get_model, get_vocab

            vocab = get_vocab(model)
        grammar_obj, key = _constraint(vocab, dict(grammar=grammar, regex=regex,
                                                  json_schema=json_schema, choices=choices))
        if raw:
            seq, prompt_ids = model, [int(t) for t in prompt]
        else:
            lm = get_model(model)
            prompt_ids = lm.encode_prompt(prompt, chat=chat) if isinstance(prompt, str) else [int(t) for t in prompt]
            seq = lm.sequence()
        self.vocab = vocab
        self.grammar = grammar_obj
        self.max_tokens = int(max_tokens)
        self.target = Target(seq, prompt_ids, temperature=temperature, cache_bytes=cache_bytes)
        self.fingerprint = hashlib.sha256(json.dumps(
            [prompt_ids, float(temperature), self.max_tokens, key, vocab.content_hash,
             getattr(seq, "name", type(seq).__name__)], default=str).encode()).hexdigest()
        self.trie = PrefixTrie(self.fingerprint, max_bytes=trie_bytes)

    def sample(self, n: int, method: str = "gcd", *, seed: int | None = None, budget: int | None = None,
               max_seconds: float | None = None, **options) -> SampleSet:
        """``n`` samples by ``method`` (see :func:`sample` for the methods and their options)."""
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        unknown = set(options) - _OPTIONS[method]
        if unknown:
            raise TypeError(f"unexpected options for method {method!r}: {sorted(unknown)}")
        pb = Problem(self.target, self.grammar, self.vocab, max_tokens=self.max_tokens,
                     rng=np.random.default_rng(seed), budget=budget, max_seconds=max_seconds)
        log_w = None
        log_z = None
        if method == "gcd":
            seqs = run_gcd(pb, n, **options)
        elif method == "asap":
            seqs = run_asap(pb, self.trie, n, **options)
        elif method == "cars":
            seqs = run_cars(pb, self.trie, n, **options)
        elif method == "awrs":
            seqs, raw = run_awrs(pb, n, **options)
            log_z, log_w = log_mean_exp(raw), normalise_log_weights(raw)
        else:
            seqs, raw, log_z = run_smc(pb, n, **options)
            log_w = normalise_log_weights(raw)
        stats = pb.finish()
        stats.extra["trie_nodes"] = self.trie.num_nodes
        return SampleSet([pb.text(s) for s in seqs], [list(s) for s in seqs],
                         None if log_w is None else [float(x) for x in log_w], stats, method,
                         None if log_z is None else float(log_z))

    def save_trie(self, path) -> None:
        """Save the ASAp/CARS trie (JSON) for a later :meth:`load_trie` on the same problem."""
        self.trie.save(path)

    def load_trie(self, path) -> None:
        """Load a trie saved for the same (model, prompt, temperature, constraint, max_tokens)."""
        self.trie = PrefixTrie.load(path, self.fingerprint, max_bytes=self.trie.max_bytes)


def sample(prompt: str | Sequence[int], *, grammar=None, regex=None, json_schema=None, choices=None,
           n: int = 1, method: str = "gcd", model=None, vocab=None, chat: bool = True, max_tokens: int = 64,
           temperature: float = 1.0, seed: int | None = None, budget: int | None = None,
           max_seconds: float | None = None, potential: Callable[[str], float] | None = None,
           **method_options) -> SampleSet:
    """Draw ``n`` samples of the model's output conditioned on the constraint.

    ``method``: ``"gcd"`` (masked local sampling, the biased baseline), ``"asap"`` (converges to
    the target as its trie fills), ``"cars"`` (exact samples by adaptive rejection), ``"awrs"``
    (lazy token checks, importance-weighted), ``"smc"`` (``n`` particles of AWRS proposals,
    resampled; ``potential=`` a callable on the text, ``potential_every=``, ``ess_threshold=``,
    ``potential_in_check=True`` to test the potential inside each token check).
    ``budget`` caps the model's forward passes and ``max_seconds`` the time
    (:class:`~guidewire.search.errors.SearchBudgetExceeded` past either). For repeated calls on
    one problem, keep a :class:`Sampler` (its caches and trie persist).
    """
    if potential is not None:
        if method != "smc":
            raise ValueError("potential= is only used by method='smc'")
        method_options["potential"] = potential
    s = Sampler(prompt, grammar=grammar, regex=regex, json_schema=json_schema, choices=choices,
                model=model, vocab=vocab, chat=chat, max_tokens=max_tokens, temperature=temperature)
    return s.sample(n, method, seed=seed, budget=budget, max_seconds=max_seconds, **method_options)
