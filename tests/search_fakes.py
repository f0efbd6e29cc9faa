"""An enumerable setting for the search tests: the tiny byte vocabulary, a fake model whose
logits are a pure function of the prefix, and brute-force oracles written without guidewire's
grammar code (plain string prefix checks over a finite set of sentences).
"""

from __future__ import annotations

import math

import torch

from runtime_fakes import EOS, FakeModel, byte_id, tiny_vocab

SENTENCES = ("ab", "abc", "b", "ba", "cab", "cc")
PROMPT = [byte_id(b"?")]


def biased_model(vocab_size: int, boost: float = 11.0) -> FakeModel:
    """A :class:`FakeModel` whose mass sits mostly (not only) on a, b, c, "ab", "abc" and EOS."""
    vocab = tiny_vocab()
    bias = torch.zeros(vocab_size)
    for tok in (b"a", b"b", b"c", b"ab", b"abc"):
        bias[vocab.token_bytes.index(tok)] = boost
    bias[EOS] = boost - 1.0
    return FakeModel(vocab_size, bias=bias, scale=2.0)


def log_softmax(model: FakeModel, seq: list[int], temperature: float) -> list[float]:
    """The oracle's next-token log-probs (float64, straight from the fake's logits)."""
    x = model.logits_for(seq).double() / temperature
    return torch.log_softmax(x, dim=-1).tolist()


def enumerate_language(sentences=SENTENCES, temperature: float = 1.0, max_tokens: int = 64):
    """Brute force: every token sequence spelling a sentence, with its probability under the
    target (EOS included) and under GCD (locally renormalised over the viable tokens).

    Returns ``(target, gcd, count)``: per-sentence probabilities (target unnormalised, Z = sum)
    and the number of token sequences enumerated.
    """
    vocab = tiny_vocab()
    model = biased_model(vocab.vocab_size)
    toks = vocab.token_bytes
    sents = [s.encode() for s in sentences]
    target = {s: 0.0 for s in sentences}
    gcd = {s: 0.0 for s in sentences}
    count = 0

    def viable(data: bytes) -> bool:
        return any(s.startswith(data) for s in sents)

    def walk(seq: list[int], data: bytes, lp: float, lg: float) -> None:
        nonlocal count
        row = log_softmax(model, PROMPT + seq, temperature)
        nxt = []
        if data in sents:
            nxt.append((EOS, None))
        if len(seq) < max_tokens:
            for t, b in enumerate(toks):
                if t != EOS and b and viable(data + b):
                    nxt.append((t, data + b))
        local = math.log(sum(math.exp(row[t]) for t, _ in nxt)) if nxt else 0.0
        for t, d in nxt:
            if d is None:
                count += 1
                text = data.decode()
                target[text] += math.exp(lp + row[t])
                gcd[text] += math.exp(lg + row[t] - local)
            else:
                walk(seq + [t], d, lp + row[t], lg + row[t] - local)

    walk([], b"", 0.0, 0.0)
    return target, gcd, count


def chi_square_critical(dof: int, z: float = 3.719) -> float:
    """Wilson-Hilferty upper quantile of chi-square(dof); ``z = 3.719`` is alpha = 1e-4."""
    k = float(dof)
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def chi_square(counts: dict, probs: dict) -> float:
    """Pearson's statistic of observed ``counts`` against expected ``probs`` (summing to 1)."""
    n = sum(counts.values())
    extra = set(counts) - set(probs)
    assert not extra, f"samples outside the language: {extra}"
    return sum((counts.get(k, 0) - n * p) ** 2 / (n * p) for k, p in probs.items())
