"""One compiled grammar shared by many threads gives exactly the single-thread masks.

For each grammar kind (a JSON Schema with additionalProperties + anyOf + $ref, the built-in
Lark ``sql`` grammar, a regex; the schema and the regex have lexers too big to build up
front, so their lexer rows are built lazily as the walks go), eight threads take random
walks on one fresh shared grammar, cold, with the interpreter switching threads every
microsecond, recording every mask. Each walk is then replayed in one thread on a separately
compiled grammar: every mask and accepting flag must be byte-identical, every token taken
must be allowed there (a fail-open mask would let a walk take a token the reference refuses).
"""

from __future__ import annotations

import hashlib
import sys
import threading

import numpy as np
import pytest

from guidewire.core import allocate_token_bitmask
from guidewire.core.bitmask import bitmask_to_ids
from guidewire.grammar import builtin_grammar, compile_json_schema, compile_lark, compile_regex

THREADS = 8
MAX_STEPS = 32
# walks per thread: the Lark grammar's lexer is small and built up front, so its races are in
# Earley interning alone and show more rarely (on the code before the locks, the JSON Schema and
# regex cases failed in every run, the Lark case in about one run of six)
WALKS = {"json_schema": 6, "lark_sql": 8, "regex": 6}

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 4},
        "v": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[a-z]+$"}, {"type": "null"},
                        {"$ref": "#/$defs/point"}]},
    },
    "required": ["name"],
    # a string whose pattern needs 2**15 DFA states keeps the lexer lazy (built as walks go)
    "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "boolean"},
                                       {"type": "string", "pattern": "^[ab]*a[ab]{14}$"}]},
    "$defs": {
        "tag": {"enum": ["a", "b", "red", "green"]},
        "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                  "required": ["x"], "additionalProperties": False},
    },
}
REGEX = r"[ab]*a[ab]{20}|\(\d{3}\) \d{3}-\d{4}( ext\. [0-9]{1,5})?"   # the first branch keeps the DFA lazy

KINDS = {
    "json_schema": lambda vocab: compile_json_schema(SCHEMA, vocab),
    "lark_sql": lambda vocab: compile_lark(builtin_grammar("sql"), vocab),
    "regex": lambda vocab: compile_regex(REGEX, vocab),
}


def _digest(row) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=16).digest()


def _walk(grammar, vocab, rng, n_walks: int, walks: list, errors: list, barrier=None) -> None:
    """Random walks (uniform over the allowed non-EOS tokens), recording every step's mask digest
    and accepting flag; any exception is recorded in ``errors``. Starts at ``barrier``."""
    eos = sorted(vocab.eos_ids)
    buf = allocate_token_bitmask(1, vocab.vocab_size)
    if barrier is not None:
        barrier.wait()   # every thread starts cold at once
    try:
        for _ in range(n_walks):
            m = grammar.matcher()
            tokens, digests, accepting = [], [], []
            for _step in range(MAX_STEPS):
                m.fill_bitmask(buf, 0)
                digests.append(_digest(buf[0]))
                accepting.append(m.is_accepting())
                if m.error is not None:
                    errors.append(f"matcher error: {m.error}")
                    return
                ids = np.setdiff1d(bitmask_to_ids(buf[0], vocab.vocab_size), eos)
                if ids.size == 0:
                    break
                t = int(rng.choice(ids))
                if not m.advance(t):
                    errors.append(f"advance refused allowed token {t} after {tokens}")
                    return
                tokens.append(t)
            walks.append((tokens, digests, accepting))
    except Exception as exc:   # noqa: BLE001 -- any crash in a worker fails the test
        errors.append(f"{type(exc).__name__}: {exc}")


def _check(reference, vocab, walks) -> tuple[int, list[str]]:
    """Replay ``walks`` on ``reference`` in this thread: (masks compared, mismatches)."""
    buf = allocate_token_bitmask(1, vocab.vocab_size)
    compared, bad = 0, []
    for tokens, digests, accepting in walks:
        m = reference.matcher()
        for i, want in enumerate(digests):
            m.fill_bitmask(buf, 0)
            compared += 1
            if _digest(buf[0]) != want or m.is_accepting() != accepting[i]:
                bad.append(f"mask differs at step {i} after tokens {tokens[:i]}")
                break
            if i < len(tokens) and not m.advance(tokens[i]):
                bad.append(f"the reference refuses token {tokens[i]} after {tokens[:i]} (fail-open mask)")
                break
    return compared, bad


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_shared_grammar_masks_equal_single_thread(smollm2, kind):
    build = KINDS[kind]
    shared = build(smollm2)   # cold: every thread races to build its lazy parts
    per_thread: list[list] = [[] for _ in range(THREADS)]
    errors: list[str] = []
    barrier = threading.Barrier(THREADS)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=_walk, args=(shared, smollm2, np.random.default_rng(k),
                                                        WALKS[kind], per_thread[k], errors, barrier))
                   for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[:5]
    walks = [w for ws in per_thread for w in ws]
    assert len(walks) == THREADS * WALKS[kind]
    reference = build(smollm2)   # compiled separately, used by this thread only
    compared, bad = _check(reference, smollm2, walks)
    assert not bad, f"{len(bad)} of {len(walks)} walks differ: {bad[:3]}"
    assert compared == sum(len(d) for _t, d, _a in walks)
    assert compared >= THREADS * WALKS[kind] * 4   # the walks are not trivially short
