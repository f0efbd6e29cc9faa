"""Code search on scripted fake models: P-UCB arithmetic, max backup, PG-TD finding what greedy
misses within its rollout budget, caches, KV reuse against fresh prefixes, beams against brute-force
enumeration, AdaDec's rerank and its tau fit against scipy's optimiser, search over a grammar's
masks against Python's ``re``."""

from __future__ import annotations

import itertools
import math
import random
import re

import numpy as np
import pytest
import torch
from runtime_fakes import EOS, FakeModel, byte_id, tiny_vocab

from guidewire.search.adadec import adadec, fit_logistic, tau_from_fit
from guidewire.search.baselines import greedy, sample_filter
from guidewire.search.beams import beam_search
from guidewire.search.code_search import CodeTask, Cursor, Rows, SearchContext, completion_text
from guidewire.search.pgtd import Node, backup, p_ucb, pgtd, select_child
from guidewire.search.solver import solve

VOCAB = tiny_vocab()
LOW = -30.0


class ScriptModel(FakeModel):
    """Logits from a table: completion text so far -> {next text: probability} (single bytes or
    EOS as ``None``); unlisted tokens get a tiny probability."""

    def __init__(self, table: dict[str, dict], prompt_len: int):
        super().__init__(VOCAB.vocab_size)
        self.table, self.prompt_len = table, prompt_len

    def logits_for(self, prefix):
        text = VOCAB.decode(prefix[self.prompt_len:]).decode("utf-8", "replace")
        x = torch.full((VOCAB.vocab_size,), LOW)
        for nxt, p in self.table.get(text, {None: 1.0}).items():
            x[EOS if nxt is None else byte_id(nxt.encode())] = math.log(p)
        return x

    def fork(self):
        m = ScriptModel(self.table, self.prompt_len)
        m.tokens = list(self.tokens)
        return m


class FakeLM:
    """The slice of LoadedModel the search uses."""

    def __init__(self, table, prompt=(byte_id(b"#"),)):
        self.vocab = VOCAB
        self.prompt = list(prompt)
        self.table = table

    def sequence(self):
        return ScriptModel(self.table, len(self.prompt))

    def encode_prompt(self, prompt, chat=False):
        return list(self.prompt)


# "x=1" is the greedy program, "x=2" the one the public test wants.
TABLE = {"": {"x": 1.0}, "x": {"=": 1.0}, "x=": {"1": 0.55, "2": 0.35, "3": 0.10},
         "x=1": {"\n": 1.0}, "x=2": {"\n": 1.0}, "x=3": {"\n": 1.0}}


def _ctx(table=TABLE, tests=("assert x == 2",), stop=None, max_new=12, constraint=None):
    lm = FakeLM(table)
    task = CodeTask(prompt="", public_tests=list(tests), stop=stop, max_new_tokens=max_new)
    return SearchContext(lm, task, lm.prompt, constraint=constraint)


def test_p_ucb_arithmetic_and_selection():
    child = Node((1,), prior=0.3, visits=1, q=0.5)
    beta = math.log((5 + 10 + 1) / 10) + 4
    assert p_ucb(5, child) == pytest.approx(0.5 + beta * 0.3 * math.sqrt(math.log(5)) / 2)
    assert p_ucb(5, child, c=0.0, base=1.0) == pytest.approx(0.5 + math.log(7) * 0.3 * math.sqrt(math.log(5)) / 2)
    # one parent visit: sqrt(log 1) = 0, so Q alone decides, ties going to the higher prior
    parent = Node((), visits=1, expanded=True,
                  children=[Node((1,), prior=0.2), Node((2,), prior=0.7), Node((3,), prior=0.1)])
    assert select_child(parent).tokens == (2,)
    parent.children[0].q = 0.1
    assert select_child(parent).tokens == (1,)


def test_max_backup_keeps_the_best_return():
    path = [Node(()), Node((1,)), Node((1, 2))]
    for r in (0.25, 1.0, 0.5):
        backup(path, r)
    assert [n.visits for n in path] == [3, 3, 3] and [n.q for n in path] == [1.0, 1.0, 1.0]


def test_pgtd_finds_what_greedy_misses_within_budget():
    g = _ctx()
    assert greedy(g) == "x=1\n" and g.rewards["x=1\n"] == 0.0
    ctx = _ctx()
    assert pgtd(ctx, budget=3) == "x=2\n"
    s = ctx.stats
    assert 1 <= s.rollouts <= 3 and s.sandbox_runs == len(ctx.rewards) >= 2
    assert s.prior_cache_hits + s.sequence_cache_hits > 0  # expansions along the first rollout are free
    one = _ctx()
    assert pgtd(one, budget=1) == "x=1\n" and one.stats.rollouts == 1  # budget 1 = greedy
    assert one.stats.best_by_rollout == ["x=1\n"]


def test_pgtd_forward_count_with_kv_reuse():
    """Every model call appends tokens to a kept state: positions computed stay well under
    re-prefilling each node's whole prefix."""
    ctx = _ctx(tests=("assert x == 3",))
    assert pgtd(ctx, budget=3) == "x=3\n"
    fresh = sum(1 + len(p) for p in ctx.rewards)  # a prefill per program, prompt included
    assert ctx.stats.positions < fresh + 1 + 3 * 5


def test_cursor_goto_matches_fresh_prefixes():
    rng = random.Random(0)
    lm = FakeLM({})
    lm.sequence = lambda: FakeModel(VOCAB.vocab_size)
    task = CodeTask(prompt="", stop=None)
    ctx = SearchContext(lm, task, [5, 6, 7])
    cur = Cursor(ctx)
    ref = FakeModel(VOCAB.vocab_size)
    checked = 0
    prefixes = [[]]
    for _ in range(60):
        base = rng.choice(prefixes)
        p = base[:rng.randint(0, len(base))] + [rng.randrange(1, 200) for _ in range(rng.randint(0, 3))]
        prefixes.append(p)
        got = cur.goto(p)
        assert torch.equal(got, ref.logits_for([5, 6, 7] + p))
        checked += 1
    assert checked == 60


def test_rows_select_and_step_match_per_row_prefixes():
    lm = FakeLM({})
    lm.sequence = lambda: FakeModel(VOCAB.vocab_size)
    ctx = SearchContext(lm, CodeTask(prompt="", stop=None), [9])
    rows = Rows(ctx, 3)
    rows.step([10, 11, 12])
    rows.select([2, 0, 0])
    rows.step([20, 21, 22])
    ref = FakeModel(VOCAB.vocab_size)
    expect = [[9, 12, 20], [9, 10, 21], [9, 10, 22]]
    for i, e in enumerate(expect):
        assert rows.tokens[i] == e[1:]
        assert torch.equal(rows.logits[i], ref.logits_for(e))


def _random_table(seed: int, depth: int = 3, alphabet: str = "abc") -> dict:
    rng = random.Random(seed)
    table = {}
    for n in range(depth):
        for word in itertools.product(alphabet, repeat=n):
            w = rng.sample(alphabet, 2)
            p = rng.uniform(0.3, 0.7)
            table["".join(word)] = {w[0]: p, w[1]: 1 - p}
    return table  # depth-letter words then EOS (unlisted -> EOS)


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_finds_the_most_likely_sequence(seed):
    table = _random_table(seed)
    best = max(("".join(w) for w in itertools.product("abc", repeat=3)),
               key=lambda w: sum(math.log(table[w[:i]].get(w[i], 1e-13)) for i in range(3)))
    ctx = _ctx(table=table, tests=(), max_new=8)
    ctx.task.public_tests = []
    out = beam_search(ctx, 4)
    assert ctx.stats.rollouts == len(ctx.rewards) or ctx.stats.rollouts >= 1
    # all programs "load" (reward 1), so the returned one is the top beam
    assert out == best


def test_diverse_beam_returns_distinct_programs():
    table = _random_table(7)
    ctx = _ctx(table=table, tests=(), max_new=8)
    beam_search(ctx, 4, groups=2, diversity=5.0)
    assert len(ctx.rewards) >= 3


def test_sample_filter_prefers_the_passing_program():
    ctx = _ctx()
    out = sample_filter(ctx, 12, seed=3, temperature=1.0, top_p=1.0)
    assert ctx.stats.rollouts == 12 and out == "x=2\n"
    assert ctx.stats.best_by_rollout[-1] == "x=2\n"


def test_adadec_reranks_by_lookahead_only_when_uncertain():
    # "a" is likelier now, but leads to a low-probability tail; "b" to a confident one
    table = {"": {"a": 0.5, "b": 0.45, "c": 0.05},
             "a": {"x": 0.34, "y": 0.33, "z": 0.33}, "ax": {"\n": 1.0}, "ay": {"\n": 1.0}, "az": {"\n": 1.0},
             "b": {"q": 0.98, "r": 0.02}, "bq": {"\n": 1.0}}
    assert greedy(_ctx(table=table, tests=())) == "ax\n"
    ctx = _ctx(table=table, tests=())
    assert adadec(ctx, tau=0.5) == "bq\n" and ctx.stats.triggers >= 1
    calm = _ctx(table=table, tests=())
    assert adadec(calm, tau=50.0) == "ax\n" and calm.stats.triggers == 0


def test_tau_fit_matches_scipy_on_synthetic_data():
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    h = rng.uniform(0, 4, 4000)
    y = (rng.uniform(size=h.size) < 1 / (1 + np.exp(-(3.0 - 2.0 * h)))).astype(int)
    a, b = fit_logistic(h, y)

    def nll(w):
        z = w[0] + w[1] * h
        return float(np.sum(np.logaddexp(0, z) - y * z))

    ref = minimize(nll, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000}).x
    assert a == pytest.approx(ref[0], abs=2e-3) and b == pytest.approx(ref[1], abs=2e-3)
    assert tau_from_fit(a, b) == pytest.approx(1.5, abs=0.1)
    with pytest.raises(ValueError):
        tau_from_fit(1.0, 0.5)


def test_search_over_a_grammar_mask():
    from guidewire.grammar import compile_regex

    pattern = r"x=[23]\n"
    table = dict(TABLE)
    g = compile_regex(pattern, VOCAB)
    ran = 0
    for method, fn in (("greedy", lambda c: greedy(c)), ("pgtd", lambda c: pgtd(c, 2)),
                       ("beam", lambda c: beam_search(c, 2)), ("adadec", lambda c: adadec(c, 0.5)),
                       ("sample", lambda c: sample_filter(c, 3, seed=1))):
        ctx = _ctx(table=table, tests=("assert x == 3",), constraint=g.matcher())
        out = fn(ctx)
        assert re.fullmatch(pattern, out), (method, out)
        assert all(re.fullmatch(pattern, p) for p in ctx.rewards), method
        ran += 1
    assert ran == 5


def test_completion_stop_rules():
    assert completion_text("    return 1\n\ndef g():\n", "code") == ("    return 1\n\n", True)
    assert completion_text("    return 1\n", "code") == ("    return 1\n", False)
    assert completion_text("Sure:\n```python\ndef f():\n    pass\n```\nmore", "fence") == (
        "Sure:\n```python\ndef f():\n    pass\n```", True)
    task = CodeTask(prompt="Q", stop="fence", prefix="import math\n")
    assert task.program("```python\ndef f():\n    return 1\n```") == "import math\n\n\ndef f():\n    return 1\n"


def test_solve_entry_point_validates():
    lm = FakeLM(TABLE)
    r = solve("", public_tests=["assert x == 2"], method="pgtd", budget=3, model=lm, style="complete", stop=None,
              max_new_tokens=12)
    assert r.code == "x=2\n" and r.public_pass == 1.0 and r.stats["rollouts"] <= 3
    with pytest.raises(ValueError):
        solve("", method="nope", model=lm)
    with pytest.raises(ValueError):
        solve("", method="greedy", budget=0, model=lm)


def test_teacher_forced_entropy_and_top1_per_position():
    from guidewire.search.adadec import teacher_forced

    lm = FakeLM({})
    lm.sequence = lambda: FakeModel(VOCAB.vocab_size)
    ref = FakeModel(VOCAB.vocab_size)
    prompt, sol = [3, 4], [5, 6, 7]
    ent, top1 = teacher_forced(lm, prompt, sol)
    assert len(ent) == len(top1) == 3
    for j, tok in enumerate(sol):
        p = torch.softmax(ref.logits_for(prompt + sol[:j]).double(), -1)
        assert ent[j] == pytest.approx(float(-(p * p.log()).sum()), rel=1e-4)
        assert top1[j] == int(int(p.argmax()) == tok)


def test_rows_branch_from_a_cursor_on_a_static_cache(smol_model, monkeypatch):
    """Rows branched from a cursor whose sequence decodes on a static cache (the CUDA graphs'
    cache, here eager on the CPU) give the logits a fresh dynamic-cache sequence gives for each
    row's whole text: AdaDec's lookahead failed on a GPU when the cursor had no dynamic cache."""
    from guidewire.runtime import HFModel

    ids = smol_model.encode_prompt("Write a Python function that adds two numbers.")
    monkeypatch.setattr(smol_model, "sequence", lambda: HFModel(smol_model.module, static=True))
    ctx = SearchContext(smol_model, CodeTask(prompt="", stop=None), ids)
    cur = Cursor(ctx)
    assert cur.model.static_decoder is not None
    prefix = [int(cur.logits.argmax())]
    cur.goto(prefix)
    rows = Rows(ctx, 3, cursor=cur)
    rows.step([100, 200, 300])
    checked = 0
    for i, t in enumerate([100, 200, 300]):
        ref = HFModel(smol_model.module, static=False).prefill(ids + prefix + [t], last_only=True)[-1]
        assert rows.tokens[i] == [t]
        assert float((rows.logits[i].float()[:ref.shape[-1]] - ref).abs().max()) <= 1e-3
        checked += 1
    assert checked == 3
