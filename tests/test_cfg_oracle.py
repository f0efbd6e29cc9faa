"""Whole-vocabulary CFG masks against an independent brute-force oracle (``tests/cfg_oracle.py``).

For random small Lark grammars, random walks are taken over the allowed tokens; at every step the
engine's whole mask is compared with the oracle's: token ``t`` is allowed iff ``text + bytes(t)`` is
a viable prefix (a character-level Earley recogniser written without the engine), EOS iff ``text``
is a sentence, every other special token never. Run with a small custom vocabulary (dense: most
tokens spell grammar characters) and with SmolLM2's 49k tokens. The counts of grammars and steps
compared are asserted, so a generator that stops producing usable grammars fails the test.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfg_oracle import PrefixOracle, RandomGrammar
from guidewire.core import Vocab, bitmask_to_bool
from guidewire.core.errors import GuidewireError
from guidewire.grammar import compile_lark

# every test here runs on both table-builder paths: compiled inner loops and the numpy reference
pytestmark = pytest.mark.usefixtures("grammar_path")

EOS = 0


def custom_vocab(alphabet: set[str], seed: int) -> Vocab:
    """EOS (0), a second special token (1), every grammar character, a few foreign bytes, and random
    2-5 character strings over the grammar's characters."""
    rng = random.Random(seed)
    chars = sorted(alphabet)
    toks = [b"", b""] + [c.encode() for c in chars] + [b"x", b"\n", b"\xc3", b"\xc3\xa9", b"a\xc3"]
    seen = set(toks)
    while len(toks) < 300:
        t = "".join(rng.choice(chars) for _ in range(rng.randint(2, 5))).encode()
        if t not in seen:
            seen.add(t)
            toks.append(t)
    return Vocab(tuple(toks), frozenset({0, 1}), frozenset({EOS}), len(toks) + 5, "cfg-oracle")


def oracle_mask(oracle: PrefixOracle, vocab: Vocab, text: bytes, candidates) -> np.ndarray:
    """Allowed tokens by the oracle; tokens spelling a byte outside the grammar's characters can
    never be viable (the oracle's Earley sets scan grammar characters only), so only
    ``candidates`` are asked."""
    want = np.zeros(vocab.vocab_size, dtype=bool)
    for tid, tb in candidates:
        want[tid] = oracle.viable(text + tb)
    want[sorted(vocab.eos_ids)] = oracle.sentence(text)  # every EOS id (SmolLM2 has two), no other special
    return want


def walk_and_compare(g: RandomGrammar, vocab: Vocab, rng: random.Random, walks: int, steps: int) -> int:
    """Random walks over allowed tokens; every step's whole mask must equal the oracle's. Returns the
    number of masks compared. Odd seeds compile with every token table built lazily, even seeds
    with compile_lark's default precomputation, so the oracle checks both."""
    compiled = compile_lark(g.lark, vocab, precompute=0 if g.seed % 2 else None)
    oracle = PrefixOracle(g)
    alphabet = {ord(c) for c in g.alphabet}
    tb = vocab.token_bytes
    candidates = [(t, tb[t]) for t in vocab.normal_ids.tolist() if set(tb[t]) <= alphabet]
    compared = 0
    for _ in range(walks):
        m = compiled.matcher()
        text = b""
        for _ in range(steps):
            got = bitmask_to_bool(m.current_mask(), vocab.vocab_size)
            want = oracle_mask(oracle, vocab, text, candidates)
            if not np.array_equal(got, want):
                extra = [tb[t] for t in np.flatnonzero(got & ~want)[:8]]
                missing = [tb[t] for t in np.flatnonzero(want & ~got)[:8]]
                raise AssertionError(f"grammar seed {g.seed}\n{g.lark}after {text!r}: engine allows extra {extra} "
                                     f"{np.flatnonzero(got & ~want)[:8].tolist()}, misses {missing} "
                                     f"(EOS: engine {bool(got[EOS])}, oracle {bool(want[EOS])})")
            compared += 1
            allowed = [t for t in np.flatnonzero(want).tolist() if t not in vocab.eos_ids]
            if not allowed or (want[EOS] and rng.random() < 0.15):
                break
            t = rng.choice(allowed)
            assert m.advance(t), (g.lark, text, tb[t])
            text += tb[t]
    return compared


def _run(vocab_for, examples: int, walks: int, steps: int, min_grammars: int, min_steps: int) -> None:
    ran = {"grammars": 0, "compared": 0, "refused": []}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**32 - 1))
    def run(seed):
        g = RandomGrammar(seed)
        vocab = vocab_for(g, seed)
        try:
            n = walk_and_compare(g, vocab, random.Random(seed), walks, steps)
        except GuidewireError as exc:
            ran["refused"].append((seed, f"{type(exc).__name__}: {exc}"))
            return
        ran["grammars"] += 1
        ran["compared"] += n

    run()
    # every generated grammar is a valid Lark grammar with a non-empty language: none may be refused
    assert not ran["refused"], ran["refused"][:3]
    assert ran["grammars"] >= min_grammars and ran["compared"] >= min_steps, ran


def test_random_grammars_custom_vocab_match_oracle():
    _run(lambda g, seed: custom_vocab(g.alphabet, seed), examples=150, walks=3, steps=14,
         min_grammars=150, min_steps=2500)


def test_random_grammars_smollm2_match_oracle(smollm2):
    _run(lambda g, seed: smollm2, examples=40, walks=2, steps=12, min_grammars=40, min_steps=400)
