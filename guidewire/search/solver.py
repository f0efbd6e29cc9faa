"""``solve``: one entry point over the code-search methods, returning a :class:`CodeResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .code_search import CodeTask, SearchContext

METHODS = ("greedy", "sample", "beam", "diverse_beam", "adadec", "pgtd")

# AdaDec's entropy threshold (nats) per named model, for style="chat": learned by
# bench/bench_humaneval.py (guidewire.search.adadec.learn_tau) on the reference solutions of
# HumanEval/82..101 (3,855 teacher-forced tokens, top-1 rate 0.89; fit a=3.45, b=-1.64).
DEFAULT_TAU = {"smollm2": 2.10}

CHAT_INSTRUCTION = ("Complete the following Python function. Reply with the complete function in one "
                    "```python code block.\n\n```python\n")


@dataclass
class CodeResult:
    """The returned program (``code`` = prompt + completion), its public-test pass fraction and
    the search's counters (``stats``: forwards, positions, rollouts, sandbox runs, cache hits,
    wall seconds, method options)."""

    code: str
    public_pass: float
    stats: dict = field(default_factory=dict)
    best_by_rollout: list[str] = field(default_factory=list)


def solve(prompt: str, *, entry_point: str = "", public_tests: Sequence[str] | None = None,
          method: str = "greedy", budget: int = 16, model=None, seed: int | None = None,
          timeout_s: float = 5.0, max_new_tokens: int = 192, constraint=None, stop: str | None = "code",
          tau: float | None = None, style: str = "chat", **options) -> CodeResult:
    """Complete the program ``prompt`` with ``method`` at ``budget`` rollouts (complete programs).

    ``public_tests``: assertion snippets (default: parsed from the prompt's docstring examples of
    ``entry_point``). ``model``: a name, a loaded model, or ``None`` for the shared default.
    ``constraint``: a grammar matcher (``fill_bitmask``/``advance``/``rollback``/``fork``) every
    step is masked by. ``tau``: AdaDec's entropy threshold (default: the model's learned one).
    ``style="chat"`` (default) asks the model, through its chat template, for the whole function
    in a code block and assembles ``prompt + reply's code``; ``style="complete"`` continues
    ``prompt`` as plain text and stops at the next top-level line (Codex-style).
    ``options`` go to the method (``k``/``c``/``base`` for PG-TD, ``beams``/``lookahead`` for
    AdaDec, ``temperature``/``top_p`` for sampling, ``groups``/``diversity`` for diverse beams).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1 (got {budget})")
    if public_tests is None:
        from .public_tests import parse_public_tests as parse

        public_tests = parse(prompt, entry_point) if entry_point else []
    lm = _model(model)
    if style == "chat":
        text = CHAT_INSTRUCTION + prompt.rstrip("\n") + "\n```"
        ids = lm.encode_prompt(text, chat=True)
        stop = "fence" if stop == "code" else stop
    elif style == "complete":
        text = prompt
        ids = lm.encode_prompt(prompt, chat=False)
    else:
        raise ValueError(f"unknown style {style!r} (expected 'chat' or 'complete')")
    task = CodeTask(prompt=text, entry_point=entry_point, public_tests=list(public_tests),
                    timeout_s=timeout_s, max_new_tokens=max_new_tokens, stop=stop, prefix=prompt)
    ctx = SearchContext(lm, task, ids, constraint=constraint)
    code = _run(ctx, method, budget, seed, tau, lm, options)
    stats = ctx.stats.as_dict()
    stats.update(method=method, budget=budget, wall_s=ctx.wall(), prompt_tokens=len(ids))
    return CodeResult(code=code, public_pass=ctx.reward(code), stats=stats,
                      best_by_rollout=list(ctx.stats.best_by_rollout))


def _model(model):
    if model is not None and hasattr(model, "sequence") and hasattr(model, "vocab"):
        return model
    from ..runtime.registry import get_model

    return get_model(model)


def _run(ctx: SearchContext, method: str, budget: int, seed, tau, lm, options) -> str:
    if method == "greedy":
        from .baselines import greedy

        return greedy(ctx)
    if method == "sample":
        from .baselines import sample_filter

        return sample_filter(ctx, budget, seed=seed, **options)
    if method in ("beam", "diverse_beam"):
        from .beams import beam_search

        if method == "diverse_beam":
            options.setdefault("groups", 2 if budget % 2 == 0 and budget > 1 else 1)
        return beam_search(ctx, budget, **options)
    if method == "adadec":
        from .adadec import adadec

        if tau is None:
            tau = DEFAULT_TAU.get(getattr(lm, "name", ""))
            if tau is None:
                raise ValueError(f"no learned AdaDec tau for model {getattr(lm, 'name', lm)!r}; "
                                 "pass tau= (see guidewire.search.adadec.learn_tau)")
        return adadec(ctx, float(tau), **options)
    from .pgtd import pgtd

    return pgtd(ctx, budget, **options)
