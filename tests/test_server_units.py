"""Server building blocks against independent references: the continuously batched cache vs one
sequence decoded alone, the tool-call parser and stop strings under random chunking, and the
tool-call grammar vs a brute-force recogniser (json + jsonschema) on accepted/rejected replies."""

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.server.stops import StopStrings
from guidewire.server.tools import CALL_CLOSE, CALL_OPEN, ToolCallParser, render_call

CALLS = [("calc", '{"expr": "1+2}\\"{"}'), ("lookup", '{"id": [1, {"a": "]"}]}'), ("noargs", "{}")]
REPLY = "\n".join(CALL_OPEN + f'{{"name": "{n}", "arguments": {a}}}' + CALL_CLOSE for n, a in CALLS)


def _split(text, cuts):
    cuts = sorted({c % (len(text) + 1) for c in cuts})
    return [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]


def _parse(pieces, calls_only):
    p = ToolCallParser(calls_only=calls_only)
    events = [e for piece in pieces for e in p.feed(piece)] + list(p.finish())
    return p, events


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10_000), max_size=12), st.booleans())
def test_tool_parser_is_chunking_independent(cuts, calls_only):
    p, events = _parse(_split(REPLY, cuts), calls_only)
    assert [(c["name"], c["arguments"]) for c in p.calls] == CALLS
    assert p.content == ""
    assert [e[2] for e in events if e[0] == "call"] == [n for n, _ in CALLS]
    for i, (_n, args) in enumerate(CALLS):
        assert "".join(e[2] for e in events if e[0] == "args" and e[1] == i) == args
        json.loads(args)  # the oracle: each argument string is the JSON text the model wrote


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=30), st.lists(st.integers(0, 100), max_size=6))
def test_tool_parser_text_reply(text, cuts):
    p, events = _parse(_split(text, cuts), calls_only=False)
    if text.startswith("<tool_call>"):
        return
    assert p.content == text and not p.calls
    assert "".join(e[1] for e in events) == text


def test_render_call_round_trips():
    p, _ = _parse([render_call("f", '{"a": 1}')], calls_only=True)
    assert p.calls == [{"name": "f", "arguments": '{"a": 1}'}]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abXY\n", max_size=40), st.lists(st.sampled_from(["XY", "b\nb", "aaa"]), max_size=2),
       st.lists(st.integers(0, 100), max_size=8))
def test_stop_strings_match_whole_text_reference(text, stops, cuts):
    s = StopStrings(stops)
    out = "".join(s.feed(piece) for piece in _split(text, cuts)) + s.flush()
    hits = [text.find(x) for x in stops if text.find(x) >= 0]
    assert out == (text[:min(hits)] if hits else text)
    assert s.stopped == bool(hits)


@pytest.fixture(scope="module")
def lm():
    from guidewire.api import get_model

    return get_model("smollm2")


def test_continuous_batch_matches_sequences_decoded_alone(lm):
    """Rows join at different steps and leave early; each row's greedy tokens equal HFModel's alone."""
    import torch

    from guidewire.server.batch import ContinuousBatch

    tok = lm.tokenizer
    prompts = [tok.encode(s) for s in ["The capital of France is", "1, 2, 3, 4,", "Once upon a time, in a land far away, there was",
                                       "def f(x):"]]
    steps = [8, 3, 8, 6]

    def alone(p, n):
        m = lm.sequence()
        lg, out = m.prefill(p, last_only=True), []
        for _ in range(n):
            out.append(int(lg[-1].argmax()))
            lg = m.step([out[-1]], last_only=True)
        return out

    b = ContinuousBatch(lm.module, vocab_size=lm.vocab.vocab_size, pad_id=2)
    join = {0: [0, 1], 2: [2], 3: [3]}
    rows, outs, lg = [], {i: [] for i in range(4)}, None
    for step in range(20):
        new = join.get(step, [])
        parts = ([b.step([outs[r][-1] for r in rows])] if rows else []) + ([b.add([prompts[i] for i in new])] if new else [])
        rows += new
        if not rows:
            break
        lg = torch.cat(parts)
        for r, t in zip(rows, lg.argmax(-1).tolist()):
            outs[r].append(t)
        keep = [i for i, r in enumerate(rows) if len(outs[r]) < steps[r]]
        b.keep(keep)
        rows = [rows[i] for i in keep]
    assert b.rows == 0
    for i in range(4):
        assert outs[i] == alone(prompts[i], steps[i]), i


def test_tool_grammar_accepts_exactly_valid_calls(lm):
    from guidewire.server.tools import AutoToolConstraint, compile_tool_grammar

    tools = [{"name": "calc", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}},
             {"name": "get", "parameters": {"type": "object", "properties": {"id": {"$ref": "#/$defs/I"}}, "required": ["id"],
                                            "$defs": {"I": {"type": "integer", "minimum": 1}}}}]
    params = {t["name"]: t["parameters"] for t in tools}

    def oracle(text, allow_text):
        if not text.startswith("<tool_call>"):
            return allow_text and text != ""
        body = text.split("\n")
        try:
            calls = [json.loads(b) for b in body[1::3]]
        except json.JSONDecodeError:
            return False
        if text != "\n".join(render_call(c.get("name"), json.dumps(c.get("arguments"))) for c in calls if isinstance(c, dict)):
            return False
        return all(c["name"] in params and jsonschema.Draft202012Validator(params[c["name"]]).is_valid(c["arguments"])
                   and set(c) == {"name", "arguments"} for c in calls) and len(calls) == 1

    cases = [render_call("calc", '{"expr": "1+2"}'), render_call("get", '{"id": 3}'), render_call("get", '{"id": 0}'),
             render_call("nope", "{}"), render_call("calc", '{"id": 3}'), "hello", "<tool", "<tool_call>\nhi",
             render_call("get", '{"id": 2}') + "\n" + render_call("get", '{"id": 5}')]
    ran = 0
    for allow_text in (False, True):
        for text in cases:
            m = AutoToolConstraint(tools, lm.vocab, parallel=False) if allow_text else \
                compile_tool_grammar(tools, lm.vocab, parallel=False).matcher()
            ok = all(m.advance(t) for t in lm.tokenizer.encode(text)) and m.is_accepting()
            assert ok == oracle(text, allow_text), (allow_text, text)
            ran += 1
    assert ran == 2 * len(cases)


def test_serve_warm_up_freezes_the_started_heap(smollm2):
    """``guidewire serve`` freezes its warmed-up heap: start-up objects leave the full GC
    collections, objects made afterwards are still collected."""
    import gc
    import weakref

    from guidewire.core.collector import IdleCollector
    from guidewire.server.cli import warm_up_and_freeze

    class Node:
        pass

    try:
        n = warm_up_and_freeze(smollm2)
        assert n > 10_000 and gc.get_freeze_count() == n
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle made after the freeze
        ref = weakref.ref(a)
        del a, b
        gc.collect()
        assert ref() is None
        assert gc.get_freeze_count() == n  # nothing new was frozen by the collection
        gc.unfreeze()
        col = IdleCollector()     # as `guidewire serve` does: the collector's first collection freezes
        n = warm_up_and_freeze(smollm2, col)
        assert n > 10_000 and gc.get_freeze_count() == n and col.collections == col.full == 1
    finally:
        gc.unfreeze()
