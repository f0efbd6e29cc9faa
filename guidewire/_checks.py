"""Argument checks of the front door that import nothing heavy (no torch, no transformers).

:func:`check_generation_args` runs before any model or tokenizer is loaded, in
:func:`guidewire.generate_json`, :func:`guidewire.generate` and the ``guidewire`` command, so a bad
value costs milliseconds, not a model load.
"""

from __future__ import annotations

import math

#: names of the built-in Lark grammars (``guidewire.grammar.builtin_grammar``)
BUILTIN_GRAMMARS = ("json", "sql", "arithmetic", "python")
#: drafters the front door can build (``model`` needs a draft model, which it does not take)
FRONT_DOOR_DRAFTERS = ("forced", "copy", "lookup", "sam")
DEFAULT_DRAFTERS = "forced,copy,lookup,sam"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite_number(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and not math.isnan(value) and not math.isinf(value))


def check_generation_args(*, max_tokens, temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, seed=None,
                          speculative=False) -> None:
    """Reject bad generation arguments before anything is loaded.

    Raises ``ValueError`` naming the argument: ``max_tokens`` must be an int >= 1, ``temperature``
    a finite number >= 0, ``top_p`` in (0, 1], ``top_k`` an int >= 0, ``min_p`` in [0, 1], ``seed``
    an int or None; ``speculative`` as in :func:`check_drafter_names`.
    """
    if not _is_int(max_tokens) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not _finite_number(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    if not _finite_number(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be a number in (0, 1] (1 = off), got {top_p!r}")
    if not _finite_number(min_p) or not 0 <= min_p <= 1:
        raise ValueError(f"min_p must be a number in [0, 1] (0 = off), got {min_p!r}")
    if not _is_int(top_k) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {top_k!r}")
    if seed is not None and not _is_int(seed):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    check_drafter_names(speculative)


def check_drafter_names(speculative) -> None:
    """Reject a ``speculative=`` value the front door cannot build.

    Accepted: ``None``/``False`` (off), ``True`` (the default drafters), a drafter object (with
    ``propose``), or a comma-separated string / list of names from :data:`FRONT_DOOR_DRAFTERS`,
    each at most once.
    """
    if speculative is None or isinstance(speculative, bool) or hasattr(speculative, "propose"):
        return
    if isinstance(speculative, str):
        names = speculative.split(",")
    elif isinstance(speculative, (list, tuple)):
        names = list(speculative)
    else:
        raise ValueError(f"speculative must be True/False, drafter names or a drafter, got {speculative!r}")
    names = [str(n).strip().lower() for n in names if str(n).strip()]
    if not names:
        raise ValueError("no drafter named; known drafters: " + ", ".join(FRONT_DOOR_DRAFTERS))
    for n in names:
        if n not in FRONT_DOOR_DRAFTERS:
            hint = (" (the 'model' drafter needs a draft model: build it with "
                    "guidewire.runtime.drafters.make_drafter and pass the drafter)") if n == "model" else ""
            raise ValueError(f"unknown drafter {n!r}; known drafters: {', '.join(FRONT_DOOR_DRAFTERS)}{hint}")
    if len(set(names)) != len(names):
        raise ValueError(f"a drafter is named twice in {speculative!r}")
