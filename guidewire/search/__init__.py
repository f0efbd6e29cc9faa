"""Search layer: choosing tokens well on top of the masks.

Two parts: sampling the model's distribution *conditioned on* a constraint (``sample``,
``Sampler``; below), and code search with a sandbox (``solve`` with greedy / sample+filter /
beam / PG-TD / AdaDec, ``run_tests``, ``parse_public_tests``, ``learn_tau``).

**The target.** For every method, the distribution sampled (or, for weighted methods, estimated)
is, over complete token sequences ``w`` of at most ``max_tokens`` tokens that the constraint
allows, ``P(w · EOS) / Z`` with ``P(w · EOS) = prod_i p_T(w_i | prompt, w_<i) * p_T(EOS | prompt, w)``,
``p_T = softmax(logits / temperature)`` (temperature is applied to the logits first), ``EOS``
any of the vocabulary's end ids (their probabilities add), and ``Z`` the sum over all such
``w``: every tokenization of every sentence counts, so the probability of a *text* is the sum
over its tokenizations. No top-k/top-p truncation.

Methods (``sample(..., method=)``): ``gcd`` masks and renormalises each step (the baseline every
engine uses; biased, since it ignores how much valid mass lies below each prefix); ``asap``
(grammar-aligned sampling) re-weights tokens by a trie of expected future grammaticality kept
across samples and converges to the target; ``cars`` proposes from the model minus the mass of
prefixes proven invalid and rejects the rest: every accepted sample is exact; ``awrs`` checks
tokens lazily in Gumbel order (a few checks per token instead of the whole vocabulary) and
weights each sample by unbiased estimates of the local normalisers; ``smc`` runs particles of
AWRS proposals with resampling and optional potentials on the text.

Layering: imports core, grammar and runtime (the registry for named models and grammars), never
the front door.
"""

from .._lazy import lazy_getattr

_NAMES = {
    "sample": ".sampler",
    "Sampler": ".sampler",
    "METHODS": ".sampler",
    "SampleSet": ".sampleset",
    "SearchStats": ".sampleset",
    "Target": ".target",
    "PrefixTrie": ".prefix_trie",
    "SearchError": ".errors",
    "SearchBudgetExceeded": ".errors",
    "run_tests": ".sandbox",
    "TestRun": ".sandbox",
    "parse_public_tests": ".public_tests",
    "solve": ".solver",
    "CodeResult": ".solver",
    "CodeTask": ".code_search",
    "learn_tau": ".adadec",
    "best_segment": ".segment",
    "SegmentSearch": ".segment",
}

__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = sorted(_NAMES)
