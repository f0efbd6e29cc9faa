"""Monitors: dereference and call-arity masks against jedi / ``dir()`` / ``inspect.signature``,
their deadlines and abstentions, composition with grammars, and the language-server back end."""

from __future__ import annotations

import collections
import inspect
import random
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core.bitmask import bitmask_to_bool, bitmask_to_ids
from guidewire.monitors import (AnalysisTimeout, ArityMonitor, DereferenceMonitor, JediBackend,
                                create_monitor, gated, intersect)
from guidewire.monitors.analysis import DeadlineRunner, Signature, cursor
from guidewire.monitors.argscan import ArgMasks, ArgSpec, signature_of
from guidewire.monitors.dereference import dot_trigger
from guidewire.monitors.identindex import IdentIndex, ident_head

pytest.importorskip("jedi")

OD_PREFIX = "import collections\n\n\ndef f(d: collections.OrderedDict):\n    return d."
WORDS = ["append", "move_to_end", "popitem", "keys", "items", "values", "get", "setdefault", "copy",
         "appendx", "move", "pop_item", "key", "length", "sort", "extend", "fromkeys", "clear"]


@pytest.fixture(scope="module")
def jedi_backend():
    return JediBackend()


def encode(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def accepts(m, ids) -> bool:
    return m.validate(ids) == len(ids)


# -- the identifier index against a brute-force reading of the rule ---------------------------------
def brute_allowed(vocab, names: list[bytes], partial: bytes) -> np.ndarray:
    """Token ids allowed by the rule, by looking at every token (the slow reference)."""
    ok = np.zeros(vocab.vocab_size, dtype=bool)
    idx = IdentIndex.for_vocab(vocab)
    straddling = set()
    import re

    pat = re.compile(rb"\.[A-Za-z_\x80-\xff]")
    for i in vocab.normal_ids.tolist():
        b = vocab.token_bytes[i]
        if pat.search(b):
            straddling.add(i)
            continue
        n = ident_head(b)
        text = partial + b[:n]
        if n == len(b):
            ok[i] = any(s.startswith(text) for s in names)
        else:
            ok[i] = text in names
    if partial in names:
        ok[sorted(vocab.eos_ids)] = True
    assert len(straddling) == idx.straddling
    return ok


_POOL = [w.encode() for w in WORDS] + [b"__init__", b"_x", b"a", b"ab", b"abc", b"z9", b"\xc3\xa9t\xc3\xa9"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(_POOL), min_size=1, max_size=8, unique=True), cut=st.floats(0, 1),
       pick=st.integers(0, 7))
def test_ident_index_matches_brute_force(smollm2, names, cut, pick):
    base = names[pick % len(names)]
    partial = base[:int(cut * len(base))]
    got = bitmask_to_bool(IdentIndex.for_vocab(smollm2).mask(names, partial), smollm2.vocab_size)
    want = brute_allowed(smollm2, names, partial)
    assert np.array_equal(got, want), (names, partial, np.flatnonzero(got ^ want)[:10])
    assert got.any()


# -- triggers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,want", [
    ("x.", (1, b"")), ("foo().", (5, b"")), ("a[0].", (4, b"")), ("'s'.", (3, b"")),
    ("os.pa", (2, b"pa")), ("x = 1.", None), ("y = 1e5.", None), ("# see x.", None),
    ("s = 'a x.", None), ("x..", None), ("import os\n", None), ("from .", None),
])
def test_dot_trigger(text, want):
    assert dot_trigger(text.encode()) == want


# f-strings: a replacement field is code, the literal text and the format spec are not.
# (line, closing): ``x = line + "real" + closing`` is valid Python.
FSTRING_DOTS = [
    ('f"{os.', '}"'), ('rf"{os.', '}"'), ("Fr'{os.", "}'"), ('f"""{os.', '}"""'), ('f"{x}{os.', '}"'),
    ('f"{a!r} {os.', '}"'), ("f\"{d['k'].", '}"'), ('f"{g(a, b).', '}"'), ("f\"{'a' if x else b.", '}"'),
    ('f"{x:>{w.', '}}"'), ('f"{x}" + os.', ''), ('f"{x:>10}" + os.', ''), ('f"{(lambda: y)().', '}"'),
    ('f"os.', '"'), ('f"{{os.', '"'), ('f"{{}}{{os.', '"'), ('f"{x!r}os.', '"'), ('f"{x:>{w}}os.', '"'),
    ('"{os.', '"'), ("b'{os.", "'"), ("1 if'{os.", "' else 2"), ("f\"{'{os.", "'}\""), ('f"{x:%H.', '}"'),
    ('f"a\\"{os.', '}"'), ("f'''{x}\" os.", "'''"),
]


def _attribute_parsed(line: str, closing: str) -> tuple[str, bool]:
    import ast

    text = "x = " + line
    tree = ast.parse(text + "real" + closing)
    return text, any(isinstance(n, ast.Attribute) and n.attr == "real" for n in ast.walk(tree))


@pytest.mark.parametrize("line,closing", FSTRING_DOTS)
def test_dot_trigger_inside_f_string_fields(line, closing):
    """Oracle: ast. The trigger fires exactly where the dot, completed with a name and closed,
    parses as an attribute access (code, or an f-string's replacement field), not as text."""
    text, code = _attribute_parsed(line, closing)
    assert (dot_trigger(text.encode()) is not None) == code, line
    assert (dot_trigger((text + "re").encode()) == (len(text) - 1, b"re")) == code, line


def test_dot_trigger_cases_cover_both_outcomes():
    codes = [_attribute_parsed(line, closing)[1] for line, closing in FSTRING_DOTS]
    assert sum(codes) == 14 and len(codes) - sum(codes) == 11


# -- the dereference monitor against dir() and jedi --------------------------------------------------
def test_dereference_allows_exactly_real_attributes(smollm2, smol_tokenizer, jedi_backend):
    m = DereferenceMonitor(smollm2, OD_PREFIX, backend=jedi_backend, deadline_s=30)
    legal = set(m.legal_names)
    real = set(dir(collections.OrderedDict))
    public = {n for n in real if not n.startswith("_")}
    assert public <= legal, public - legal  # every real public attribute is listed ...
    n_ok = n_bad = 0
    for name in sorted(public) + WORDS:
        ids = encode(smol_tokenizer, name + "(")
        ok = accepts(m, ids)
        if name in real:
            assert ok, name
            n_ok += 1
        else:
            assert not ok, name  # ... and a name that is not an attribute is refused
            n_bad += 1
    assert n_ok >= 10 and n_bad >= 6
    assert m.stats.triggers == 1 and not m.stats.abstentions


def test_dereference_mask_is_a_prefix_closure_of_jedi_names(smollm2, jedi_backend):
    code = "import os\nos.path."
    names = jedi_backend.attributes(code, *cursor(code), path=None, deadline_s=30)
    m = DereferenceMonitor(smollm2, code, backend=jedi_backend, deadline_s=30)
    ids = bitmask_to_ids(m.current_mask(), smollm2.vocab_size)
    assert len(ids) > 20
    for i in ids.tolist():  # every allowed token starts some listed name
        b = smollm2.token_bytes[i]
        assert any(n.encode().startswith(b[:ident_head(b)]) for n in names), b
    assert not m.is_accepting()  # "os.path." is not complete
    b2t = smollm2.bytes_to_tokens()
    assert m.advance(b2t[b"join"]) and m.is_accepting()
    assert m.advance(b2t[b"("]) and not m.active
    assert m.text.endswith("os.path.join(")


def test_dereference_rollback_fork_and_chained_trigger(smollm2, jedi_backend):
    b2t = smollm2.bytes_to_tokens()
    m = DereferenceMonitor(smollm2, "import os\nx = os.", backend=jedi_backend, deadline_s=30)
    row0 = m.current_mask().copy()
    f = m.fork()
    assert m.advance(b2t[b"path"]) and m.advance(b2t[b"."])
    assert m.active and "join" in m.legal_names  # os.path. triggered again
    assert not m.advance(b2t[b"foo"]) if b"foo" in b2t else True
    m.rollback(2)
    assert np.array_equal(m.current_mask(), row0)
    assert np.array_equal(f.current_mask(), row0) and f.num_tokens == 0
    assert m.stats.triggers == 2


def test_dormant_allows_everything_but_straddling_tokens(smollm2, jedi_backend):
    m = DereferenceMonitor(smollm2, "x = 1\n", backend=jedi_backend)
    allowed = bitmask_to_bool(m.current_mask(), smollm2.vocab_size)
    idx = IdentIndex.for_vocab(smollm2)
    assert allowed.sum() == len(smollm2.normal_ids) - idx.straddling + len(smollm2.eos_ids)
    assert all(allowed[sorted(smollm2.eos_ids)])
    assert m.stats.triggers == 0


def brute_dot_allowed(vocab, names: list[bytes]) -> np.ndarray:
    """Ids of the tokens ``.`` + head that begin a name of ``names`` (head a prefix of one, or one
    followed by non-identifier bytes without a second dereference), by reading every token."""
    import re

    pat = re.compile(rb"\.[A-Za-z_\x80-\xff]")
    ok = np.zeros(vocab.vocab_size, dtype=bool)
    for i in vocab.normal_ids.tolist():
        b = vocab.token_bytes[i]
        if not pat.match(b) or pat.search(b, 1):
            continue
        rest = b[1:]
        n = ident_head(rest)
        ok[i] = any(s.startswith(rest) for s in names) if n == len(rest) else rest[:n] in names
    return ok


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(_POOL), min_size=1, max_size=8, unique=True))
def test_dot_mask_matches_brute_force(smollm2, gemma3, names):
    for vocab in (smollm2, gemma3):
        got = bitmask_to_bool(IdentIndex.for_vocab(vocab).dot_mask(names), vocab.vocab_size)
        assert np.array_equal(got, brute_dot_allowed(vocab, names))


def test_dot_tokens_exist_in_both_vocabularies(smollm2, gemma3):
    # what the dot-follows state is for: both vocabularies spell "._" and ".__" as one token (the
    # only dot tokens they have: a private name after "x" is "x" "._" "name" in their training
    # text); the brute force must find those, or the test above checks nothing
    for vocab in (smollm2, gemma3):
        assert brute_dot_allowed(vocab, [b"_x", b"__init__"]).sum() >= 2


class ListedBackend:
    """Answers every attribute query with ``names``; records the code of each query."""

    name = "listed"

    def __init__(self, names):
        self.names, self.codes = list(names), []

    def attributes(self, code, line, column, *, path, deadline_s):
        self.codes.append(code)
        return self.names

    def signature(self, code, line, column, *, path, deadline_s):
        return None

    def close(self):
        pass


@pytest.mark.parametrize("names,private", [(["_x", "a"], True), (["append", "pop"], False)])
def test_dot_follows_allows_the_dot_tokens_that_begin_a_listed_name(smollm2, names, private):
    b2t = smollm2.bytes_to_tokens()
    dot, dot_u = b2t[b"."], b2t[b"._"]
    be = ListedBackend(names)
    m = DereferenceMonitor(smollm2, "y = x", backend=be, dot_follows=True)
    plain = DereferenceMonitor(smollm2, "y = x", backend=be)
    assert plain.allows(dot) and not plain.allows(dot_u) and plain.stats.triggers == 0
    assert m.allows(dot) and m.allows(dot_u) == private
    assert m.allows(b2t[b" ="]) and not m.active  # the dot is expected, not enforced
    assert be.codes == ["y = x."] and m.stats.triggers == 1
    f = m.fork()
    assert f.advance(dot) and f.active and set(f.legal_names) == set(names)
    if private:
        assert m.advance(dot_u) and m.active and m.text == "y = x._"
        assert m.allows(b2t[b"x"]) and not m.allows(b2t[b"a"])
    assert m.stats.triggers == 1 and len(be.codes) == 1  # the dot's analysis is asked once


def test_dot_follows_needs_an_expression_before_the_dot(smollm2):
    be = ListedBackend(["_x"])
    for prefix in ("x = 1", "# y", "s = 'a", "import os\n"):
        m = DereferenceMonitor(smollm2, prefix, backend=be, dot_follows=True)
        assert not m.allows(smollm2.bytes_to_tokens()[b"._"]) and m.stats.triggers == 0
    assert be.codes == []


# -- deadlines and abstentions ---------------------------------------------------------------------
class SlowBackend:
    """A back end whose answers take ``delay`` seconds (or never come back empty)."""

    name = "slow"

    def __init__(self, delay: float, names=("append",)):
        self.delay, self.names = delay, list(names)
        self.runner = DeadlineRunner()
        self.calls = 0

    def attributes(self, code, line, column, *, path, deadline_s):
        self.calls += 1
        return self.runner.run(lambda: (time.sleep(self.delay), self.names)[1], deadline_s)

    def signature(self, code, line, column, *, path, deadline_s):
        return self.runner.run(lambda: time.sleep(self.delay), deadline_s)

    def close(self):
        pass


def test_timeout_abstains_and_is_counted(smollm2):
    m = DereferenceMonitor(smollm2, "x.", backend=SlowBackend(1.0), deadline_s=0.05)
    row = m.current_mask()
    assert [a.reason for a in m.stats.abstentions] == ["timeout"]
    assert m.stats.triggers == 1 and len(m.stats.analysis_s) == 1
    assert not m.active and np.array_equal(row, IdentIndex.for_vocab(smollm2).free_row
                                           | IdentIndex.for_vocab(smollm2).eos_row)


class LateKeepingBackend(SlowBackend):
    """A slow back end that keeps answers that came after their deadline (as jedi's do)."""

    keeps_late_answers = True

    def __init__(self, delay, names=("append", "apply")):
        super().__init__(delay, names)
        self.late = {}

    def attributes(self, code, line, column, *, path, deadline_s):
        key = (code, line, column)
        if key in self.late:
            return self.late[key]
        return self.runner.run(lambda: (time.sleep(self.delay), self.names)[1], deadline_s,
                               on_late=lambda v: self.late.__setitem__(key, v))


@pytest.mark.parametrize("prefetch", [True, False])  # the answer of the analysis run ahead / the back end's
def test_a_late_answer_masks_the_rest_of_the_name(smollm2, prefetch):
    b2t = smollm2.bytes_to_tokens()
    be = LateKeepingBackend(0.3)
    m = DereferenceMonitor(smollm2, "x.", backend=be, deadline_s=0.02, prefetch=prefetch)
    assert not m.active and m.allows(b2t[b"ap"]) and m.allows(b2t[b"foo"])  # abstained: all allowed
    assert m.advance(b2t[b"ap"])
    if prefetch:  # the analysis started ahead ends (within its own, longer bound)
        assert all(pre.done.wait(5.0) for pre in list(m._shared.inflight.values()))
    else:
        for _ in range(500):  # the answer arrives once the slow query ends
            if be.late:
                break
            time.sleep(0.02)
    assert m.active and set(m.legal_names) == {"append", "apply"}
    assert m.allows(b2t[b"pend"]) and m.allows(b2t[b"ply"]) and not m.allows(b2t[b"ple"])
    assert m.stats.abstention_reasons() == {"timeout": 1} and m.stats.late_answers == 1
    # without a late answer (a back end that does not keep them) the name stays unmasked
    m2 = DereferenceMonitor(smollm2, "y.", backend=SlowBackend(0.3), deadline_s=0.02, prefetch=prefetch)
    assert m2.advance(b2t[b"ap"]) and not m2.active and m2.allows(b2t[b"ple"])


def test_empty_answer_abstains_not_an_empty_mask(smollm2):
    m = DereferenceMonitor(smollm2, "x.", backend=SlowBackend(0.0, names=[]), deadline_s=1)
    assert m.current_mask().any() and not m.active
    assert m.stats.abstention_reasons() == {"no-result": 1}


def test_deadline_runner_answers_late_queries_to_on_late():
    r = DeadlineRunner()
    late = []
    with pytest.raises(AnalysisTimeout):
        r.run(lambda: (time.sleep(0.3), 42)[1], 0.02, on_late=late.append)
    for _ in range(1000):  # the late answer arrives once the worker's sleep ends
        if late:
            break
        time.sleep(0.02)
    assert late == [42] and r.run(lambda: 7, 1.0) == 7


def test_jedi_buffer_is_analysed_not_the_file(tmp_path, smollm2):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("class Thing:\n    def on_disk(self):\n        pass\n")
    path = str(tmp_path / "pkg" / "user.py")
    be = JediBackend(str(tmp_path))
    # a buffer under mod.py's own path, with a different body: must not leak into later imports
    partial = "class Thing:\n    def only_in_buffer(self):\n        pass\nThing()."
    names = be.attributes(partial, *cursor(partial), path=str(tmp_path / "pkg" / "mod.py"), deadline_s=30)
    assert "only_in_buffer" in names
    code = "from pkg.mod import Thing\nThing()."
    names = be.attributes(code, *cursor(code), path=path, deadline_s=30)
    assert "on_disk" in names and "only_in_buffer" not in names


def test_jedi_process_backend_deadline_late_answer_and_restart(smollm2, smol_tokenizer):
    from guidewire.monitors.jediproc import JediProcessBackend

    be = JediProcessBackend()
    try:
        code = "import collections\nd = collections.OrderedDict()\nd."
        with pytest.raises(AnalysisTimeout):  # the child is still importing jedi
            be.attributes(code, *cursor(code), path=None, deadline_s=1e-3)
        names = be.attributes(code, *cursor(code), path=None, deadline_s=60)  # the late answer, read back
        assert {n for n in dir(collections.OrderedDict) if not n.startswith("_")} <= set(names)
        be._proc.kill()
        be._proc.wait(5)
        other = "import os\nos.path."
        assert "join" in be.attributes(other, *cursor(other), path=None, deadline_s=60)
        assert be.restarts == 1
        m = create_monitor("arity", vocab=smollm2, prefix="def h(a, b):\n    pass\nh(", backend=be, deadline_s=60)
        assert accepts(m, encode(smol_tokenizer, "1, 2)")) and not accepts(m, encode(smol_tokenizer, "1, 2, 3"))
    finally:
        be.close()
    assert be.closed


# -- decoding with a model that prefers a wrong attribute -------------------------------------------
class ScriptedModel:
    """A fake model whose logits strongly prefer the next token of ``script`` (after the prompt)."""

    def __init__(self, vocab_size: int, script: list[int], n_prompt: int, fallback: int | None = None):
        self.vocab_size, self.script, self.n_prompt = vocab_size, script, n_prompt
        self.fallback = fallback  # the second choice at every step
        self.tokens: list[int] = []
        self.calls = 0

    def _logits(self):
        g = torch.Generator().manual_seed(len(self.tokens))
        x = torch.randn(self.vocab_size, generator=g)
        k = len(self.tokens) - self.n_prompt
        if 0 <= k < len(self.script):
            x[self.script[k]] += 50.0
        if self.fallback is not None:
            x[self.fallback] += 20.0
        return x

    def prefill(self, tokens, last_only=False):
        self.tokens = list(tokens)
        self.calls += 1
        return self._logits()[None]

    def step(self, new, last_only=False):
        self.tokens.extend(int(t) for t in new)
        self.calls += 1
        return self._logits()[None]

    @property
    def length(self):
        return len(self.tokens)


def test_decoding_with_the_monitor_never_names_a_missing_attribute(smollm2, smol_tokenizer, jedi_backend):
    from guidewire.runtime.decode import decode
    from guidewire.runtime.sampling import SamplingParams
    from guidewire.runtime.streaming import decode_text

    prompt = encode(smol_tokenizer, OD_PREFIX)
    script = encode(smol_tokenizer, "appendx(1)\n")
    runs = {}
    for arm in ("without", "with"):
        mon = DereferenceMonitor(smollm2, OD_PREFIX, backend=jedi_backend, deadline_s=30) if arm == "with" else None
        model = ScriptedModel(smollm2.vocab_size, script, len(prompt))
        res = decode(model, prompt, mon, vocab=smollm2, max_tokens=len(script),
                     sampling=SamplingParams(temperature=0.0))
        runs[arm] = decode_text(smollm2, res.token_ids)
    name = lambda t: t[:ident_head(t.encode())]  # noqa: E731
    assert name(runs["without"]) == "appendx"  # the model alone dereferences a missing attribute
    assert name(runs["with"]) in dir(collections.OrderedDict), runs["with"]


# -- call arity against inspect.signature -----------------------------------------------------------
FUNCS = '''
def f0():
    pass
def f1(a):
    pass
def f2(a, b=1):
    pass
def f3(a, b, *, c, d=2):
    pass
def fv(a, *rest):
    pass
def fk(a, **kw):
    pass
def fpo(a, b=2, /, c=3):
    pass
'''


def test_arity_matches_inspect_bind(smollm2, smol_tokenizer, jedi_backend):
    ns: dict = {}
    exec(FUNCS, ns)  # the oracle: inspect.signature(...).bind
    rng = random.Random(3)
    checked = exact = rejected = 0
    for fname in ("f0", "f1", "f2", "f3", "fv", "fk", "fpo"):
        sig = inspect.signature(ns[fname])
        m = ArityMonitor(smollm2, FUNCS + f"\nx = {fname}(", backend=jedi_backend, deadline_s=30)
        assert m.signature is not None, fname
        for _ in range(14):
            npos = rng.randint(0, 4)
            kws = rng.sample(["a", "b", "c", "d", "e"], rng.randint(0, 2))
            args = [rng.choice(["1", "x", "g(1, 2)", "[3, 4]", "'a,b'", "lambda u, v: u"]) for _ in range(npos)]
            text = ", ".join(args + [f"{k}=0" for k in kws]) + ")"
            try:
                sig.bind(*range(npos), **{k: 0 for k in kws})
                binds = True
            except TypeError:
                binds = False
            ok = accepts(m, encode(smol_tokenizer, text))
            if binds:
                assert ok, (fname, text)  # a call that binds is never rejected
            if not kws:
                assert ok == binds, (fname, text)  # positional-only calls: exact
                exact += 1
            rejected += not ok
            checked += 1
    assert checked == 98 and exact >= 20 and rejected >= 10


def test_decoding_with_the_arity_monitor_keeps_calls_bindable(smollm2, smol_tokenizer, jedi_backend):
    import ast

    from guidewire.runtime.decode import decode
    from guidewire.runtime.sampling import SamplingParams
    from guidewire.runtime.streaming import decode_text

    prefix = "def area(w, h=1):\n    return w * h\n\n\nprint(area("
    prompt = encode(smol_tokenizer, prefix)
    script = encode(smol_tokenizer, "3, 4, 5))")
    close = smollm2.bytes_to_tokens()[b")"]
    nargs = {}
    for arm in ("without", "with"):
        mon = ArityMonitor(smollm2, prefix, backend=jedi_backend, deadline_s=30) if arm == "with" else None
        model = ScriptedModel(smollm2.vocab_size, script, len(prompt), fallback=close)
        res = decode(model, prompt, mon, vocab=smollm2, max_tokens=len(script),
                     sampling=SamplingParams(temperature=0.0))
        text = decode_text(smollm2, res.token_ids)
        call = ast.parse("area(" + text[:text.index(")") + 1]).body[0].value  # the oracle: ast
        nargs[arm] = len(call.args) + len(call.keywords)
        if mon is not None:
            assert mon.stats.triggers == 1 and not mon.stats.abstentions
    ns: dict = {}
    exec(prefix.rsplit("\n", 1)[0], ns)
    sig = inspect.signature(ns["area"])
    assert nargs["without"] == 3  # the model alone passes three arguments to a two-parameter function
    sig.bind(*range(nargs["with"]))  # with the monitor the call binds
    assert nargs["with"] == 2


def test_arity_mask_matches_sequential_scan(smollm2, smol_tokenizer):
    spec = ArgSpec.from_signature(Signature("g", ()))  # g(): nothing may start
    masks = ArgMasks.for_vocab(smollm2)
    from guidewire.monitors.argscan import START, REJECT, run

    row = bitmask_to_bool(masks.row(spec, START), smollm2.vocab_size)
    sample = random.Random(1).sample(smollm2.normal_ids.tolist(), 3000)
    for i in sample:
        want = run(spec, START, signature_of(smollm2.token_bytes[i])) is not REJECT
        assert row[i] == want, smollm2.token_bytes[i]
    b2t = smollm2.bytes_to_tokens()
    assert row[b2t[b")"]] and row[b2t[b" "]] and not row[b2t[b"x"]] and not row[b2t[b","]]


# -- composition -----------------------------------------------------------------------------------
def test_intersection_with_a_regex_grammar(smollm2, smol_tokenizer, jedi_backend):
    from guidewire.grammar import compile_regex

    g = compile_regex(r"[a-z]+\(\)", smollm2)
    m = DereferenceMonitor(smollm2, OD_PREFIX, backend=jedi_backend, deadline_s=30)
    both = intersect(m, g.matcher())
    assert np.array_equal(both.current_mask(), m.current_mask() & g.matcher().current_mask())
    assert accepts(both, encode(smol_tokenizer, "keys()"))
    assert not accepts(both, encode(smol_tokenizer, "appendx()"))   # the monitor refuses
    assert not accepts(both, encode(smol_tokenizer, "move_to_end()"))  # the grammar refuses "_"
    assert accepts(m, encode(smol_tokenizer, "move_to_end()"))
    ids = encode(smol_tokenizer, "keys()")
    f = both.fork()
    for t in ids:
        assert f.advance(t)
    assert f.is_accepting() and not both.is_accepting()
    assert not both.advance(encode(smol_tokenizer, "appendx")[0]) or both.rollback(1) is None


def test_gated_monitor_only_inside_the_region(smollm2, smol_tokenizer, jedi_backend):
    m = DereferenceMonitor(smollm2, "", backend=jedi_backend, deadline_s=30)
    g = gated(m, ("```python\n", "```"), prefix="Use this: ")
    prose = encode(smol_tokenizer, "call x.appendx and ")
    assert accepts(g, prose)  # outside the region nothing is checked
    for t in prose:
        assert g.advance(t)
    code = encode(smol_tokenizer, "```python\nimport collections\nd = collections.OrderedDict()\nd.")
    for t in code:
        assert g.advance(t)
    assert g.inside and m.text.endswith("d.")
    assert not accepts(g, encode(smol_tokenizer, "appendx()"))
    assert accepts(g, encode(smol_tokenizer, "popitem()\n```\nthen x.appendx"))
    g.rollback(len(code))
    assert not g.inside and m.text == ""


# -- factory and the language-server back end -------------------------------------------------------
def test_create_monitor_names_and_errors(smollm2):
    assert isinstance(create_monitor("dereference", vocab=smollm2, prefix="x = 1"), DereferenceMonitor)
    assert isinstance(create_monitor("arity", vocab=smollm2, prefix="x = 1"), ArityMonitor)
    with pytest.raises(ValueError, match="unknown monitor"):
        create_monitor("types", vocab=smollm2, prefix="")
    with pytest.raises(ValueError, match="unknown monitor backend"):
        create_monitor("arity", vocab=smollm2, prefix="", backend="clangd")
    with pytest.raises(ValueError, match="deadline_s"):
        create_monitor("arity", vocab=smollm2, prefix="", deadline_s=0)
    with pytest.raises(TypeError, match="prefix and suffix must be str"):
        create_monitor("dereference", vocab=smollm2, prefix=b"x.")


def test_lsp_backend_agrees_with_jedi(smollm2, smol_tokenizer, jedi_backend):
    from guidewire.monitors.analysis import AnalysisError

    try:
        from guidewire.monitors import LspBackend

        be = LspBackend()
    except AnalysisError as exc:
        pytest.skip(f"jedi-language-server could not start here: {exc}")
    try:
        code = "import collections\nd = collections.OrderedDict()\nd."
        lsp = set(be.attributes(code, *cursor(code), path=None, deadline_s=30))
        jd = set(jedi_backend.attributes(code, *cursor(code), path=None, deadline_s=30))
        assert {n for n in dir(collections.OrderedDict) if not n.startswith("_")} <= lsp
        assert lsp == jd
        m = create_monitor("dereference", vocab=smollm2, prefix=code, backend=be, deadline_s=30)
        assert accepts(m, encode(smol_tokenizer, "popitem()")) and not accepts(m, encode(smol_tokenizer, "appendx("))
        a = create_monitor("arity", vocab=smollm2, prefix="def h(a, b):\n    pass\nh(", backend=be, deadline_s=30)
        assert accepts(a, encode(smol_tokenizer, "1, 2)")) and not accepts(a, encode(smol_tokenizer, "1, 2, 3"))
        with pytest.raises(AnalysisTimeout):
            be.attributes(code + "\n" * 3 + "d.", 6, 2, path=None, deadline_s=1e-4)
    finally:
        be.close()


def test_warm_up_backend_loads_builtins_before_the_first_trigger():
    from guidewire.monitors import warm_up_backend

    be = JediBackend()  # its own name cache and inference states
    assert be.names.nbytes == 0 and be.states.created == 0
    secs = warm_up_backend(be, deadline_s=60)
    assert secs > 0 and be.names.nbytes > 0 and be.states.created >= 1  # the questions were answered
    code = "def f():\n    s = 'text'\n    return s."
    assert {"upper", "split"} <= set(be.attributes(code, *cursor(code), path=None, deadline_s=60))
    assert be.states.reused >= 1 and be.names.hits >= 1  # the first real query reused what it loaded
