"""A compiled grammar holds no reference cycle: dropping it frees it at once (reference counting),
so its tables never wait for CPython's full collection, which would then pay for them inside
whichever later mask allocates (one large grammar's cycle cost a 230 ms collection)."""

from __future__ import annotations

import gc
import random
import weakref

import numpy as np
import pytest

from guidewire.core import allocate_token_bitmask
from guidewire.core.bitmask import bitmask_to_ids
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, compile_regex, compile_python

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "tags": {"type": "array", "items": {"enum": ["a", "bc"]}},
                                           "n": {"type": "integer", "minimum": 0}},
          "required": ["name"], "additionalProperties": False}
KINDS = {
    "json_schema": lambda v: compile_json_schema(SCHEMA, v),
    "lark_sql": lambda v: compile_lark(builtin_grammar("sql"), v),
    "regex": lambda v: compile_regex(r"[a-z]{2,8}@[a-z]+\.(com|org)", v),
    "python": lambda v: compile_python(v),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_used_grammar_is_freed_without_the_cyclic_gc(smollm2, kind):
    KINDS[kind](smollm2)  # per-vocabulary memos built once, outside the measured part
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        g = KINDS[kind](smollm2)
        buf = allocate_token_bitmask(1, smollm2.vocab_size)
        rng = random.Random(0)
        m = g.matcher()
        steps = 0
        for _ in range(40):  # a random walk builds token tables, Earley sets and memos
            m.fill_bitmask(buf, 0)
            ids = bitmask_to_ids(buf[0], smollm2.vocab_size)
            ids = [t for t in ids.tolist() if t not in smollm2.eos_ids]
            if not ids or not m.advance(rng.choice(ids)):
                break
            steps += 1
        assert steps >= 5
        ref = weakref.ref(g)
        del g, m
        assert ref() is None, "the grammar is kept alive by a reference cycle"
    finally:
        if was:
            gc.enable()


def _garbage_after(makers, vocab) -> tuple[int, list[str]]:
    """Compile, walk and drop each grammar with the collector off; then the number of objects a
    collection finds, and the modules of the functions among them."""
    for make in makers:  # per-vocabulary memos built first
        make(vocab)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    made = 0
    try:
        for make in makers:
            g = make(vocab)
            m = g.matcher()
            buf = allocate_token_bitmask(1, vocab.vocab_size)
            rng = random.Random(1)
            for _ in range(25):
                m.fill_bitmask(buf, 0)
                ids = [t for t in bitmask_to_ids(buf[0], vocab.vocab_size).tolist() if t not in vocab.eos_ids]
                if not ids or not m.advance(rng.choice(ids)):
                    break
            made += 1
            del g, m
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        modules = sorted({f"{o.__module__}.{o.__qualname__}" for o in gc.garbage if type(o).__name__ == "function"})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert made == len(makers)
    return found, modules


def test_compiling_and_walking_leave_no_cyclic_garbage(smollm2):
    """Numeric ranges and Unicode classes (the digit / UTF-8 automata) in JSON Schema and regex:
    compiled, walked and dropped with the collector off, nothing is left for it to find."""
    schemas = [{"type": "integer", "minimum": -1234, "maximum": 98765},
               {"type": "object", "properties": {"x": {"type": "number", "minimum": 0.5, "maximum": 1e6},
                                                 "s": {"type": "string", "pattern": "^[\u00e0-\u04ff]{1,5}$"}},
                "required": ["x", "s"]},
               {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 65535}, "maxItems": 3}]
    makers = [lambda v, s=s: compile_json_schema(s, v) for s in schemas] + \
        [lambda v: compile_regex(r"[\u0100-\uffff]{2}\d{3,9}", v)]
    found, modules = _garbage_after(makers, smollm2)
    assert found == 0, modules


def test_lark_grammars_leave_no_cyclic_garbage_of_ours(smollm2):
    """Lark's grammar loader leaves a little of its own (``ast.literal_eval``'s recursive closures);
    none of it is guidewire's."""
    found, modules = _garbage_after([lambda v: compile_lark(builtin_grammar("sql"), v)], smollm2)
    assert not [m for m in modules if m.startswith("guidewire")], modules
